"""The canonical JSON form of events: the ``export``/``import`` contract.

The canonical form (contract, version :data:`CANONICAL_VERSION`): a JSON object with
sorted keys, ``(",", ":")`` separators, UTF-8, no ASCII escaping; optional fields
that hold their default are omitted. Stored events add ``seq``, ``id`` and ``at``.
:func:`event_from_json` validates a decoded JSON object at the boundary and names the
field (and line) that is wrong.

    >>> from ctxline.record.events import UserMessage
    >>> canonical_json(event_to_json(UserMessage(text="Help me cancel my plan")))
    b'{"kind":"user.message","text":"Help me cancel my plan"}'
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import assert_never

from ctxline.errors import ValidationError
from ctxline.record.events import (
    AssistantMessage,
    Compaction,
    Event,
    Guide,
    JsonValue,
    ModelFailure,
    ModelUsage,
    Notification,
    Reduction,
    RequestHeader,
    Rule,
    Slot,
    State,
    StatusSnapshot,
    StoredEvent,
    SystemMessage,
    Todo,
    ToolResult,
    Tools,
    UnknownEvent,
    UserMessage,
)
from ctxline.record.lazy_header import LazyRequestHeader
from ctxline.record.packed import pack

__all__ = [
    "CANONICAL_VERSION",
    "canonical_json",
    "event_to_json",
    "format_at",
    "parse_at",
    "stored_to_json",
]

CANONICAL_VERSION = 1


def canonical_json(obj: JsonValue) -> bytes:
    """The canonical bytes of a JSON value: sorted keys, compact, UTF-8."""
    return json.dumps(
        obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode()


def format_at(at: datetime) -> str:
    """UTC ISO-8601 with microseconds and a ``Z`` suffix (fixed width, sorts as text)."""
    if at.tzinfo is None:
        raise ValidationError("timestamp has no time zone", field="at")
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_at(value: object, *, where: str = "at", line: int | None = None) -> datetime:
    """Parse an ISO-8601 timestamp; a value without a zone is rejected."""
    if not isinstance(value, str):
        raise ValidationError("expected an ISO-8601 string", field=where, line=line)
    text = value[:-1] + "+00:00" if value.endswith(("Z", "z")) else value
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise ValidationError(
            f"not an ISO-8601 timestamp: {value!r}", field=where, line=line
        ) from None
    if parsed.tzinfo is None:
        raise ValidationError(f"timestamp has no time zone: {value!r}", field=where, line=line)
    return parsed.astimezone(UTC)


def _body(event: Event) -> dict[str, JsonValue]:
    """The fields of ``event`` besides ``kind`` and ``meta``, defaults omitted."""
    match event:
        case SystemMessage() | UserMessage():
            return {"text": event.text}
        case AssistantMessage():
            out: dict[str, JsonValue] = {"text": event.text}
            if event.tool_calls:
                out["tool_calls"] = [
                    {"id": c.id, "name": c.name, "arguments": c.arguments} for c in event.tool_calls
                ]
            return out
        case ToolResult():
            out = {"call_id": event.call_id, "content": event.content}
            if event.name:
                out["name"] = event.name
            if event.is_error:
                out["is_error"] = True
            return out
        case State():
            if event.cleared:
                return {"source": event.source, "cleared": True}
            return {"source": event.source, "value": event.value}
        case Rule():
            out = {"rule_id": event.rule_id, "op": event.op, "scope": event.scope}
            if event.text:
                out["text"] = event.text
            if event.expires_at is not None:
                out["expires_at"] = format_at(event.expires_at)
            return out
        case Notification():
            out = {"source": event.source, "text": event.text}
            if event.ref:
                out["ref"] = event.ref
            return out
        case Todo():
            if event.op == "write":
                return {
                    "op": "write",
                    "items": [
                        {"id": i.id, "content": i.content, "status": i.status} for i in event.items
                    ],
                }
            return {"op": event.op, "id": event.item_id, "status": event.status}
        case Guide():
            return {"version": event.version, "text": event.text}
        case Tools():
            return {"tools": list(event.tools)}
        case RequestHeader():
            out = {"step": event.step, "upto_seq": event.upto_seq, "sha256": event.sha256}
            packed = event.packed_form() if isinstance(event, LazyRequestHeader) else None
            if packed is None and not event.plain:
                packed = pack(event.options, event.report, step=event.step)
            if packed is None:
                out.update(options=event.options, inputs=event.inputs, report=event.report)
            else:
                out.update(opts=packed[0], inputs=event.inputs, rep=packed[1])
            return out
        case StatusSnapshot():
            return {"text": event.text}
        case Reduction():
            out = {"action": event.action}
            if event.seqs:
                out["seqs"] = list(event.seqs)
            if event.refs:
                out["refs"] = dict(event.refs)
            if event.upto_seq:
                out["upto_seq"] = event.upto_seq
            if event.keep:
                out["keep"] = list(event.keep)
            if event.summary:
                out["summary"] = event.summary
            out["saved_tokens"] = event.saved_tokens
            return out
        case Compaction():
            out = {}
            if event.summary:
                out["summary"] = event.summary
            if event.trigger:
                out["trigger"] = event.trigger
            if event.pre_tokens is not None:
                out["pre_tokens"] = event.pre_tokens
            return out
        case ModelUsage():
            out = {"model": event.model}
            for name in ("input", "cache_read", "cache_write", "output", "latency_ms"):
                out[name] = getattr(event, name)
            if event.estimated_input is not None:
                out["estimated_input"] = event.estimated_input
            if event.request_step is not None:
                out["request_step"] = event.request_step
            return out
        case ModelFailure():
            out = {"model": event.model, "error": event.error, "error_type": event.error_type}
            out["latency_ms"] = event.latency_ms
            if event.request_step is not None:
                out["request_step"] = event.request_step
            return out
        case Slot():
            out = {"name": event.name, "op": event.op}
            if event.value is not None:
                out["value"] = event.value
            return out
        case UnknownEvent():
            return dict(event.data)
        case _:
            assert_never(event)


def event_to_json(event: Event) -> dict[str, JsonValue]:
    """The canonical JSON object of an event (defaults omitted)."""
    if isinstance(event, UnknownEvent):
        return {**event.data, "kind": event.kind}
    out: dict[str, JsonValue] = {"kind": event.kind, **_body(event)}
    if event.meta:
        out["meta"] = event.meta
    return out


def stored_to_json(stored: StoredEvent) -> dict[str, JsonValue]:
    return {
        **event_to_json(stored.event),
        "seq": stored.seq,
        "id": stored.id,
        "at": format_at(stored.at),
    }
