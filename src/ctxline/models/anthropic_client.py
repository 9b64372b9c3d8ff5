"""An Anthropic Messages client (official ``anthropic`` SDK; the ``anthropic`` extra).

It sends the Messages body ctxline prepared (``provider="anthropic"``, cache
breakpoints included) with the client's model name. The key comes from
``$ANTHROPIC_API_KEY``. The installed SDK's ``messages.create`` no longer takes sampling
parameters (current models fix them), so none is sent unless ``temperature`` is given;
then it goes in ``extra_body`` for endpoints that still accept it. Usage maps the three input figures Anthropic reports onto
:class:`~ctxline.models.base.Usage`: ``input`` is their sum (``input_tokens`` counts
only the uncached part), ``cache_read`` and ``cache_write`` are the cache figures.

    client = AnthropicClient("claude-sonnet-4-5")
    reply = client.complete(prep.body, provider="anthropic")
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from ctxline.models.base import MissingExtra, ModelError, ModelReply, Provider, Usage
from ctxline.record.events import ToolCall

__all__ = ["AnthropicClient"]


class AnthropicClient:
    """Messages API through the ``anthropic`` SDK."""

    provider: Provider = "anthropic"

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        api_key_env: str = "ANTHROPIC_API_KEY",
        temperature: float | None = None,
        timeout: float = 120.0,
        max_retries: int = 2,
        http_client: Any = None,
    ) -> None:
        try:
            import anthropic
        except ImportError as exc:
            raise MissingExtra("anthropic", "anthropic") from exc
        key = api_key or os.environ.get(api_key_env)
        if not key:
            raise ModelError(f"no API key: set ${api_key_env}")
        self.model = model
        self.temperature = temperature
        self._errors: tuple[type[BaseException], ...] = (anthropic.AnthropicError,)
        self._client = anthropic.Anthropic(
            api_key=key,
            base_url=base_url,
            timeout=timeout,
            max_retries=max_retries,
            http_client=http_client,
        )

    @property
    def name(self) -> str:
        return f"anthropic:{self.model}"

    def params(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """The keyword arguments sent for ``body``: the client's model (and temperature)."""
        params = dict(body)
        params["model"] = self.model
        params.setdefault("max_tokens", 1024)
        if self.temperature is not None and "temperature" not in params:
            params["extra_body"] = {"temperature": self.temperature}
        params.pop("stream", None)
        return params

    def complete(self, body: Mapping[str, Any], *, provider: Provider = "anthropic") -> ModelReply:
        if provider != "anthropic":
            raise ModelError(f"the Anthropic client sends Messages bodies, not {provider!r} ones")
        try:
            message = self._client.messages.create(**self.params(body))
        except self._errors as exc:
            raise ModelError(f"{self.name}: {type(exc).__name__}: {exc}") from exc
        texts: list[str] = []
        calls: list[ToolCall] = []
        for block in message.content:
            kind = getattr(block, "type", "")
            if kind == "text":
                texts.append(block.text)
            elif kind == "tool_use":
                calls.append(ToolCall(block.id, block.name, block.input))
        return ModelReply(
            text="".join(texts),
            tool_calls=tuple(calls),
            usage=_usage(message.usage),
            model=str(message.model or self.model),
            finish_reason=str(message.stop_reason or ""),
        )


def _usage(usage: Any) -> Usage:
    if usage is None:
        return {"input": 0, "cache_read": 0, "cache_write": 0, "output": 0}
    uncached = int(getattr(usage, "input_tokens", 0) or 0)
    read = int(getattr(usage, "cache_read_input_tokens", 0) or 0)
    write = int(getattr(usage, "cache_creation_input_tokens", 0) or 0)
    return {
        "input": uncached + read + write,
        "cache_read": read,
        "cache_write": write,
        "output": int(getattr(usage, "output_tokens", 0) or 0),
    }
