"""An OpenAI-compatible chat client (official ``openai`` SDK; the ``openai`` extra).

It sends the Chat Completions body ctxline prepared (``provider="openai"``) as it is,
with the client's model name and sampling settings. ``base_url`` points it at any
OpenAI-compatible server — vLLM, Ollama, llama.cpp's ``llama_cpp.server``, or OpenAI
itself; the key comes from ``$OPENAI_API_KEY`` (a local server without one gets a
placeholder). Such servers take ``max_tokens`` rather than ``max_completion_tokens``,
so with a ``base_url`` the field is renamed unless told otherwise; and some (llama.cpp's
server) refuse an assistant message with tool calls whose ``content`` is null, so with
a ``base_url`` such a content is sent as "".

    client = OpenAIClient("gpt-4.1-mini")
    reply = client.complete(prep.body, provider="openai")
    reply.text, reply.usage    # {'input': 1834, 'cache_read': 1536, 'cache_write': 0, 'output': 12}
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any, Literal

from ctxline.models.base import MissingExtra, ModelError, ModelReply, Provider, Usage
from ctxline.record.events import ToolCall

__all__ = ["OpenAIClient"]

MaxField = Literal["max_completion_tokens", "max_tokens"]


def _arguments(text: str | None) -> Any:
    if not text:
        return {}
    try:
        return json.loads(text)
    except ValueError:
        return text


class OpenAIClient:
    """Chat Completions through the ``openai`` SDK, against OpenAI or a compatible server."""

    provider: Provider = "openai"

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        temperature: float | None = 0.0,
        seed: int | None = 0,
        max_tokens_field: MaxField | None = None,
        timeout: float = 120.0,
        max_retries: int = 2,
        http_client: Any = None,
    ) -> None:
        try:
            import openai
        except ImportError as exc:
            raise MissingExtra("openai", "openai") from exc
        key = api_key or os.environ.get(api_key_env)
        if not key:
            if base_url is None:
                raise ModelError(f"no API key: set ${api_key_env} (or pass --base-url)")
            key = "no-key"  # local servers ignore it, the SDK wants one
        self.model = model
        self.base_url = base_url
        self.temperature = temperature
        self.seed = seed
        self.max_tokens_field: MaxField = max_tokens_field or (
            "max_completion_tokens" if base_url is None else "max_tokens"
        )
        self._errors: tuple[type[BaseException], ...] = (openai.OpenAIError,)
        self._client = openai.OpenAI(
            api_key=key,
            base_url=base_url,
            timeout=timeout,
            max_retries=max_retries,
            http_client=http_client,
        )

    @property
    def name(self) -> str:
        return f"openai:{self.model}"

    def params(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """The keyword arguments sent for ``body``: model, sampling and the max-tokens field."""
        params = dict(body)
        params["model"] = self.model
        limit = params.pop("max_completion_tokens", None) or params.pop("max_tokens", None)
        if limit is not None:
            params[self.max_tokens_field] = limit
        if self.temperature is not None:
            params.setdefault("temperature", self.temperature)
        if self.seed is not None:
            params.setdefault("seed", self.seed)
        params.pop("stream", None)
        if self.base_url is not None and isinstance(params.get("messages"), list):
            params["messages"] = [
                {**m, "content": ""}
                if isinstance(m, dict) and m.get("role") == "assistant" and m.get("content") is None
                else m
                for m in params["messages"]
            ]
        return params

    def complete(self, body: Mapping[str, Any], *, provider: Provider = "openai") -> ModelReply:
        if provider != "openai":
            raise ModelError(
                f"the OpenAI-compatible client sends Chat Completions bodies, not {provider!r} ones"
            )
        try:
            response = self._client.chat.completions.create(**self.params(body))
        except self._errors as exc:
            raise ModelError(f"{self.name}: {type(exc).__name__}: {exc}") from exc
        if not response.choices:
            raise ModelError(f"{self.name}: the reply has no choices")
        choice = response.choices[0]
        message = choice.message
        calls = tuple(
            ToolCall(call.id, call.function.name, _arguments(call.function.arguments))
            for call in (message.tool_calls or [])
            if getattr(call, "function", None) is not None
        )
        return ModelReply(
            text=message.content or "",
            tool_calls=calls,
            usage=_usage(response.usage),
            model=str(response.model or self.model),
            finish_reason=str(choice.finish_reason or ""),
        )


def _usage(usage: Any) -> Usage:
    if usage is None:
        return {"input": 0, "cache_read": 0, "cache_write": 0, "output": 0}
    details = getattr(usage, "prompt_tokens_details", None)
    cached = getattr(details, "cached_tokens", None) if details is not None else None
    return {
        "input": int(usage.prompt_tokens or 0),
        "cache_read": int(cached or 0),
        "cache_write": 0,  # OpenAI caches automatically and reports no writes
        "output": int(usage.completion_tokens or 0),
    }
