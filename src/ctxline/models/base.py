"""The model-client protocol, its reply and usage types, and usage bookkeeping.

A client takes the body ctxline prepared (``Preparation.body``) and the provider it was
rendered for, calls the model, and answers a :class:`ModelReply`: the text, the tool
calls and the provider-reported :class:`Usage`. ``input`` counts every input token the
provider processed (cached ones included: for Anthropic that is ``input_tokens`` plus
both cache figures), so it compares directly with ctxline's estimate of the request.

:func:`usage_record` turns one reply into the JSON the caller appends to the record
(:func:`usage_event` wraps it as an event that no view shows), and
:func:`estimator_summary` reports the estimator's error over many of them.

    reply = client.complete(prep.body, provider="openai")
    ctx.append(usage_event(usage_record(reply, prep, model=client.name)))
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypedDict, runtime_checkable

from ctxline.errors import CtxlineError
from ctxline.record.events import JsonValue, ToolCall, UnknownEvent
from ctxline.record.jsonvalue import JsonObject, as_array, as_int, as_object, dig
from ctxline.render.neutral import Provider
from ctxline.view.prepare import Preparation

__all__ = [
    "USAGE_KIND",
    "MissingExtra",
    "ModelClient",
    "ModelError",
    "ModelReply",
    "Provider",
    "Usage",
    "estimator_summary",
    "flatten_messages",
    "usage_event",
    "usage_record",
]

USAGE_KIND = "model.usage"
"""The kind of the event :func:`usage_event` makes (kept by every store, shown in no view)."""


class ModelError(CtxlineError):
    """A model call that failed: transport, provider error, or an unusable reply."""


class MissingExtra(CtxlineError, ImportError):
    """An optional SDK that is not installed; names the extra that brings it."""

    def __init__(self, extra: str, package: str) -> None:
        self.extra = extra
        self.package = package
        super().__init__(
            f"{package} is not installed: install the {extra!r} extra, "
            f"pip install 'ctxline[{extra}]'"
        )


class Usage(TypedDict):
    input: int
    """All input tokens the provider processed, cached ones included."""
    cache_read: int
    cache_write: int
    output: int


def zero_usage() -> Usage:
    return {"input": 0, "cache_read": 0, "cache_write": 0, "output": 0}


@dataclass(frozen=True, slots=True)
class ModelReply:
    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = field(default_factory=zero_usage)
    model: str = ""
    finish_reason: str = ""


@runtime_checkable
class ModelClient(Protocol):
    """One model behind one call. ``name`` is the spec it was made from (``local:smollm2``)."""

    @property
    def name(self) -> str: ...

    @property
    def provider(self) -> Provider:
        """The body format this client wants (what ``PrepareOptions.provider`` should be)."""
        ...

    def complete(self, body: Mapping[str, Any], *, provider: Provider) -> ModelReply: ...


# --- usage bookkeeping ---------------------------------------------------------------


def _estimate(prep: Preparation | int) -> int:
    if isinstance(prep, int):
        return prep
    tokens = prep.report["tokens"]
    assert isinstance(tokens, dict)
    return as_int(tokens["total"], "report.tokens.total")


def _usage_json(usage: Usage) -> JsonObject:
    return {k: v for k, v in usage.items() if isinstance(v, int)}


def usage_record(
    reply: ModelReply, prep: Preparation | int, *, model: str, step: int | None = None
) -> dict[str, JsonValue]:
    """The provider's usage for one request with ctxline's estimate beside it.

    ``prep`` is the preparation the request was sent from (or the estimate itself).
    ``estimator_error`` is ``(estimated - reported) / reported`` (None when the provider
    reported no input tokens).
    """
    estimated = _estimate(prep)
    reported = reply.usage["input"]
    if step is None and isinstance(prep, Preparation):
        step = prep.header.step
    return {
        "model": model,
        "step": step,
        "usage": _usage_json(reply.usage),
        "estimated_input": estimated,
        "estimator_error": (estimated - reported) / reported if reported > 0 else None,
    }


def usage_event(record: Mapping[str, JsonValue]) -> UnknownEvent:
    """``record`` as an event to append: stored and exported like any other, shown in no view."""
    return UnknownEvent(USAGE_KIND, dict(record))


def estimator_summary(records: Iterable[Mapping[str, JsonValue]]) -> dict[str, JsonValue]:
    """Mean, mean absolute and worst relative error of the estimator over usage records."""
    errors = [float(e) for r in records if isinstance(e := r.get("estimator_error"), int | float)]
    if not errors:
        return {"n": 0, "mean": None, "mean_abs": None, "max_abs": None}
    return {
        "n": len(errors),
        "mean": round(math.fsum(errors) / len(errors), 4),
        "mean_abs": round(math.fsum(abs(e) for e in errors) / len(errors), 4),
        "max_abs": round(max(abs(e) for e in errors), 4),
    }


# --- plain chat messages (for models without tool calling) ----------------------------


def _call_line(name: str, arguments: object) -> str:
    return f"[tool call {name} {arguments}]"


def _text_of(content: object) -> str:
    """Text of a content field: a string, or a list of text blocks/parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts: list[str] = []
    if isinstance(content, Sequence):
        for block in content:
            if isinstance(block, Mapping) and isinstance(block.get("text"), str):
                parts.append(block["text"])
    return "\n".join(parts)


def _openai_messages(body: Mapping[str, JsonValue]) -> list[dict[str, str]]:
    out: list[dict[str, str]] = []
    for item in as_array(body.get("messages", []), "messages"):
        message = as_object(item, "message")
        role = str(message.get("role", "user"))
        text = _text_of(message.get("content"))
        if role == "assistant" and message.get("tool_calls"):
            calls = [
                _call_line(str(dig(c, "function", "name")), as_object(dig(c, "function")).get("arguments", ""))
                for c in as_array(message["tool_calls"], "tool_calls")
            ]
            text = "\n".join([text, *calls]) if text else "\n".join(calls)
        out.append({"role": "system" if role == "developer" else role, "content": text})
    return out


def _anthropic_messages(body: Mapping[str, JsonValue]) -> list[dict[str, str]]:
    out: list[dict[str, str]] = []
    system = _text_of(body.get("system"))
    if system:
        out.append({"role": "system", "content": system})
    for item in as_array(body.get("messages", []), "messages"):
        message = as_object(item, "message")
        role = str(message.get("role", "user"))
        content = message.get("content")
        if isinstance(content, str):
            out.append({"role": role, "content": content})
            continue
        texts: list[str] = []
        for part in as_array(content or [], "content"):
            block = as_object(part, "block")
            kind = block.get("type")
            if kind == "text":
                texts.append(str(block.get("text", "")))
            elif kind == "tool_use":
                texts.append(_call_line(str(block.get("name")), block.get("input")))
            elif kind == "tool_result":
                out.append({"role": "tool", "content": _text_of(block.get("content"))})
        if texts:
            out.append({"role": role, "content": "\n".join(texts)})
    return out


def flatten_messages(body: Mapping[str, Any], provider: Provider) -> list[dict[str, str]]:
    """The body as plain ``{"role", "content"}`` messages (system, user, assistant, tool).

    Tool calls become ``[tool call NAME ARGS]`` lines in the assistant's text; tool
    results become ``tool`` messages. For chat templates without tool support.
    """
    if provider == "anthropic":
        return _anthropic_messages(body)
    return _openai_messages(body)
