"""An OpenAI-compatible chat client (official ``openai`` SDK; the ``openai`` extra).

It sends the Chat Completions body ctxline prepared (``provider="openai"``) with the
client's model name and sampling settings, to OpenAI or to any OpenAI-compatible
server — vLLM, Ollama, llama.cpp's ``llama-server`` or llama-cpp-python's
``llama_cpp.server`` — named by ``base_url`` or, the same, ``$OPENAI_BASE_URL``. The
key comes from ``$OPENAI_API_KEY`` (a local server without one gets a placeholder).

What local servers need is done here, never by the caller:

- ``tool_choice: "auto"`` whenever tools are offered (llama-cpp-python's server leaves
  the tools out of the prompt without it);
- ``max_tokens`` rather than ``max_completion_tokens`` for any base URL that is not
  OpenAI's (the servers ignore the new name and generate without a bound);
- never a null ``content`` (llama-cpp-python answers 500 to one): "" instead (OpenAI
  itself gets the body as prepared);
- llama-cpp-python's server with a ChatML model (``--chat_format chatml-function-calling``,
  the usual way to run Qwen) gets the prompt rendered by ctxline
  (:func:`~ctxline.models.chatml.chatml_prompt`) on ``/v1/completions``: its chat
  handler HTML-escapes every message (``<ctx-…>`` arrives as ``&lt;ctx-…&gt;``),
  drops ``tool`` results from the prompt, and with ``tool_choice: "auto"`` constrains
  a text answer to nothing. Tool calls are read back from ``<tool_call>`` blocks.
- a local server's reply with no ``tool_calls`` whose text is a call — a ``<tool_call>``
  block, or only a call's JSON, fenced or bare, as small models answer — is read as
  that call (:func:`~ctxline.models.chatml.parse_tool_calls`), even to a tool name it
  invented, so the runner answers it with the names of the tools there are instead of
  ending the run on a JSON "answer"; from OpenAI itself only ``<tool_call>`` blocks to
  offered tools are.
- :attr:`OpenAIClient.context_window` is what the server reports (:mod:`~ctxline.models.server`),
  or None, with a warning, when it reports nothing.

A failed call raises :class:`~ctxline.models.base.ModelError` naming the URL, the HTTP
status and the server's own message.

    client = OpenAIClient("qwen", base_url="http://127.0.0.1:8080/v1")
    reply = client.complete(prep.body, provider="openai")
    reply.text, reply.tool_calls, reply.usage
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Mapping
from typing import Any, Literal

from ctxline.models.base import MissingExtra, ModelError, ModelReply, Provider, Usage
from ctxline.models.chatml import CHATML_STOP, chatml_prompt, parse_tool_calls
from ctxline.models.server import ServerInfo, is_openai, probe
from ctxline.record.events import ToolCall

__all__ = ["OpenAIClient", "WindowWarning"]

MaxField = Literal["max_completion_tokens", "max_tokens"]
LOCAL_TIMEOUT = 900.0
"""Seconds a local server gets per call (OpenAI's API gets 120)."""


class WindowWarning(UserWarning):
    """A local server that does not say how large its context window is."""


def _arguments(text: str | None) -> Any:
    if not text:
        return {}
    try:
        return json.loads(text)
    except ValueError:
        return text


def _server_message(body: object) -> str:
    """The server's own words from an error body (OpenAI, FastAPI and llama.cpp shapes)."""
    if isinstance(body, Mapping):
        for key in ("error", "detail", "message"):
            value = body.get(key)
            if isinstance(value, Mapping):
                value = value.get("message", value)
            if value:
                return str(value) if not isinstance(value, list) else json.dumps(value)[:300]
    return str(body)[:300] if body else ""


def _tool_names(body: Mapping[str, Any]) -> set[str]:
    return {
        str(t["function"]["name"])
        for t in body.get("tools") or []
        if isinstance(t, Mapping) and isinstance(t.get("function"), Mapping)
    }


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
        timeout: float | None = None,
        max_retries: int = 2,
        http_client: Any = None,
        server: ServerInfo | None = None,
    ) -> None:
        try:
            import openai
        except ImportError as exc:
            raise MissingExtra("openai", "openai") from exc
        base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        self.local = not is_openai(base_url)
        key = api_key or os.environ.get(api_key_env)
        if not key:
            if not self.local:
                raise ModelError(f"no API key: set ${api_key_env} (or pass --base-url)")
            key = "no-key"  # local servers ignore it, the SDK wants one
        self.model = model
        self.base_url = base_url
        self.temperature = temperature
        self.seed = seed
        # a CPU server may take minutes over a long prompt: a retry would only queue it again
        self.timeout = timeout if timeout is not None else LOCAL_TIMEOUT if self.local else 120.0
        self.max_tokens_field: MaxField = max_tokens_field or (
            "max_tokens" if self.local else "max_completion_tokens"
        )
        self._key = key
        self._server = (
            server if server is not None else None if self.local else ServerInfo("openai")
        )
        self._errors: tuple[type[BaseException], ...] = (openai.OpenAIError,)
        self._openai = openai
        self._client = openai.OpenAI(
            api_key=key,
            base_url=base_url,
            timeout=self.timeout,
            max_retries=max_retries,
            http_client=http_client,
        )

    @property
    def name(self) -> str:
        return f"openai:{self.model}"

    @property
    def url(self) -> str:
        return self.base_url or "https://api.openai.com/v1"

    @property
    def server(self) -> ServerInfo:
        """What the server says about itself (asked once, on first use)."""
        if self._server is None:
            assert self.base_url is not None
            self._server = probe(self.base_url, api_key=self._key)
        return self._server

    @property
    def context_window(self) -> int | None:
        """The server's context window where it reports one; None (and a warning) if not."""
        if not self.local:
            return None  # OpenAI's models: the caller's table or flag decides
        info = self.server
        if info.context_window is None:
            warnings.warn(
                f"{self.name}: the server at {self.url} ({info.kind}) does not report its "
                "context window; pass it (--context-window N, the server's --n_ctx) "
                "or the budget is not the server's",
                WindowWarning,
                stacklevel=2,
            )
        return info.context_window

    def params(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """The keyword arguments sent for ``body``: model, sampling, the max-tokens field,
        ``tool_choice`` with tools, and no null content."""
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
        if params.get("tools"):
            params.setdefault("tool_choice", "auto")
        if self.local and isinstance(params.get("messages"), list):
            params["messages"] = [
                {**m, "content": ""} if isinstance(m, dict) and m.get("content") is None else m
                for m in params["messages"]
            ]
        return params

    def _fail(self, exc: BaseException) -> ModelError:
        openai = self._openai
        where = f"{self.name} at {self.url}"
        if isinstance(exc, openai.APIStatusError):
            said = _server_message(getattr(exc, "body", None)) or exc.message
            return ModelError(f"{where}: HTTP {exc.status_code}: {said}")
        if isinstance(exc, openai.APITimeoutError):
            return ModelError(f"{where}: no reply within {self.timeout:g} s")
        if isinstance(exc, openai.APIConnectionError):
            cause = exc.__cause__ or exc
            return ModelError(f"{where}: cannot connect: {type(cause).__name__}: {cause}")
        return ModelError(f"{where}: {type(exc).__name__}: {exc}")

    def complete(self, body: Mapping[str, Any], *, provider: Provider = "openai") -> ModelReply:
        if provider != "openai":
            raise ModelError(
                f"the OpenAI-compatible client sends Chat Completions bodies, not {provider!r} ones"
            )
        server = self.server if self.local else ServerInfo("openai")
        if server.raw_prompt:
            return self._complete_prompt(body)
        params = self.params(body)
        reply = self._chat(params)
        if (
            server.kind == "llama-cpp-python"
            and params.get("tool_choice") == "auto"
            and not reply.text
            and not reply.tool_calls
        ):  # its "auto" chose to answer and could not: ask again without tools
            reply = self._chat({**params, "tool_choice": "none"})
        return reply

    def _chat(self, params: dict[str, Any]) -> ModelReply:
        try:
            response = self._client.chat.completions.create(**params)
        except self._errors as exc:
            raise self._fail(exc) from exc
        if not response.choices:
            raise ModelError(f"{self.name} at {self.url}: the reply has no choices")
        choice = response.choices[0]
        message = choice.message
        calls = tuple(
            ToolCall(call.id, call.function.name, _arguments(call.function.arguments))
            for call in (message.tool_calls or [])
            if getattr(call, "function", None) is not None
        )
        text = message.content or ""
        if not calls and params.get("tools") and (self.local or "<tool_call>" in text):
            # a local model's call the server left in the text: a <tool_call> block, or
            # a reply that is only a call's JSON (fenced or bare), as small models write
            text, calls = parse_tool_calls(text, _tool_names(params), any_name=self.local)
        return ModelReply(
            text=text,
            tool_calls=calls,
            usage=_usage(response.usage),
            model=str(response.model or self.model),
            finish_reason=str(choice.finish_reason or ""),
        )

    def prompt(self, body: Mapping[str, Any]) -> str:
        """The ChatML prompt sent on ``/v1/completions`` for ``body`` (llama-cpp-python route)."""
        return chatml_prompt(body.get("messages") or [], body.get("tools") or None)

    def _complete_prompt(self, body: Mapping[str, Any]) -> ModelReply:
        params = self.params(body)
        extra = {
            k: params[k] for k in ("temperature", "seed", "max_tokens", "top_p") if k in params
        }
        try:
            response = self._client.completions.create(
                model=self.model, prompt=self.prompt(body), stop=list(CHATML_STOP), **extra
            )
        except self._errors as exc:
            raise self._fail(exc) from exc
        if not response.choices:
            raise ModelError(f"{self.name} at {self.url}: the reply has no choices")
        choice = response.choices[0]
        text, calls = parse_tool_calls(choice.text or "", _tool_names(body), any_name=True)
        return ModelReply(
            text=text.strip() if calls else (choice.text or ""),
            tool_calls=calls,
            usage=_usage(response.usage),
            model=str(response.model or self.model),
            finish_reason="tool_calls" if calls else str(choice.finish_reason or ""),
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
