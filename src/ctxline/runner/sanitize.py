"""What a model or a tool hands the runner, made recordable before anything else sees it.

Why: the record is canonical JSON in UTF-8, so a reply holding ``NaN``, a lone surrogate,
a 10,000-character call id or arguments nested 100,000 deep could not be appended, and
``Agent.run`` crashed with no stop reason (issue 24). Here every such value becomes one
that is recorded, and the problem becomes something the model reads:

- text and names: lone surrogates become U+FFFD;
- a call id that is empty, over :data:`MAX_ID_CHARS` or holds characters outside
  ``[A-Za-z0-9_.:-]`` is replaced by ``call_<turn>_<n>`` (the old ids listed in
  ``meta.runner.renamed_ids``, clipped);
- arguments that are not plain JSON (``NaN``/``Infinity``, nesting past
  :data:`MAX_DEPTH`, non-string keys, other types) become their clipped text, so the tool's
  validation answers with an error result instead of the loop crashing;
- a usage figure that is not a non-negative integer counts 0;
- :func:`error_text`: a tool exception whose message cannot be printed still gives an
  error result.

    reply, events = clean_reply(reply, events, turn=3)
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from ctxline.models.base import ModelReply, Usage
from ctxline.record.events import AssistantMessage, Event, JsonValue, ModelUsage, ToolCall
from ctxline.record.jsonvalue import get_array

__all__ = [
    "MAX_DEPTH",
    "MAX_ID_CHARS",
    "clean_arguments",
    "clean_reply",
    "clean_text",
    "error_text",
]

MAX_ID_CHARS = 128
MAX_DEPTH = 64
MAX_ARGUMENT_CHARS = 200_000
_SURROGATE = re.compile(r"[\ud800-\udfff]")
_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")


def clean_text(text: object, limit: int | None = None) -> str:
    """``text`` as a recordable string (lone surrogates replaced, optionally clipped)."""
    out = text if isinstance(text, str) else str(text)
    if not out.isascii():  # isascii is O(1) on a str: a 200 MB ASCII output is not scanned
        out = _SURROGATE.sub("\ufffd", out)
    return out if limit is None or len(out) <= limit else out[:limit]


class _NotPlain(ValueError):
    pass


def _plain(value: object, depth: int) -> JsonValue:
    if depth > MAX_DEPTH:
        raise _NotPlain("nested too deep")
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _NotPlain("not a finite number")
        return value
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, list | tuple):
        return [_plain(v, depth + 1) for v in value]
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise _NotPlain("a key that is not a string")
        return {clean_text(k): _plain(v, depth + 1) for k, v in value.items()}
    raise _NotPlain(f"a {type(value).__name__}")


def _as_text(value: object) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False, default=repr, allow_nan=True)
    except (ValueError, TypeError, RecursionError):
        text = repr(value) if not isinstance(value, dict | list) else f"<{type(value).__name__}>"
    except Exception:
        text = f"<{type(value).__name__}>"
    return clean_text(text, MAX_ARGUMENT_CHARS)


def clean_arguments(arguments: object) -> JsonValue:
    """Plain JSON arguments unchanged (surrogates replaced); anything else as clipped text."""
    if isinstance(arguments, str):
        return clean_text(arguments, MAX_ARGUMENT_CHARS)
    try:
        return _plain(arguments, 0)
    except (_NotPlain, RecursionError):
        return _as_text(arguments)


def _clean_calls(calls: Sequence[ToolCall], turn: int) -> tuple[tuple[ToolCall, ...], list[str]]:
    out: list[ToolCall] = []
    renamed: list[str] = []
    seen: set[str] = set()
    for n, call in enumerate(calls, start=1):
        ident = call.id if isinstance(call.id, str) else ""
        if not _ID.match(ident) or ident in seen:
            renamed.append(clean_text(ident, 80))
            ident = f"call_{turn}_{n}"
            while ident in seen:
                ident += "_"
        seen.add(ident)
        name = clean_text(call.name, 200)
        out.append(ToolCall(ident, name, clean_arguments(call.arguments)))
    return tuple(out), renamed


def _count(value: object) -> int:
    ok = isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**53
    return value if ok else 0  # type: ignore[return-value]


def clean_reply(
    reply: ModelReply, events: Sequence[Event], *, turn: int = 0
) -> tuple[ModelReply, list[Event]]:
    """The reply and its events with every value recordable (see the module docstring)."""
    calls, renamed = _clean_calls(reply.tool_calls, turn)
    text = clean_text(reply.text)
    u = reply.usage
    usage: Usage = {
        "input": _count(u.get("input")),
        "cache_read": _count(u.get("cache_read")),
        "cache_write": _count(u.get("cache_write")),
        "output": _count(u.get("output")),
    }
    out: list[Event] = []
    for event in events:
        if isinstance(event, AssistantMessage):
            meta = dict(event.meta)
            if renamed:
                runner = meta.get("runner")
                runner = dict(runner) if isinstance(runner, dict) else {}
                runner["renamed_ids"] = [*get_array(runner, "renamed_ids"), *renamed]
                meta["runner"] = runner
            event = AssistantMessage(text, calls, meta)
        elif isinstance(event, ModelUsage):
            event = replace(
                event,
                model=clean_text(event.model, 200),
                input=_count(event.input),
                cache_read=_count(event.cache_read),
                cache_write=_count(event.cache_write),
                output=_count(event.output),
                latency_ms=_count(event.latency_ms),
                meta={k: clean_arguments(v) for k, v in event.meta.items()},
            )
        out.append(event)
    cleaned = ModelReply(
        text, calls, usage, clean_text(reply.model, 200), clean_text(reply.finish_reason, 200)
    )
    return cleaned, out


def error_text(exc: BaseException, render: Any, *args: Any, **kwargs: Any) -> str:
    """``render(exc, *args, **kwargs)`` (a detailed error), or a plain line when the
    exception's message or arguments cannot be printed."""
    try:
        return clean_text(render(exc, *args, **kwargs))
    except Exception:
        name = clean_text(type(exc).__name__, 200)
        return (
            f"Error: the tool failed with {name}, whose message could not be printed.\n\n"
            "Hint: check the tool's inputs, or report the tool's bug."
        )
