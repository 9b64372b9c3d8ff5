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
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Literal, TypeVar, assert_never

from ctxline.errors import ValidationError
from ctxline.record.events import (
    REDUCTION_ACTIONS,
    RULE_OPS,
    TODO_STATUSES,
    AssistantMessage,
    Compaction,
    Event,
    Guide,
    JsonValue,
    Notification,
    Pending,
    Reduction,
    RequestHeader,
    Rule,
    State,
    StatusSnapshot,
    StoredEvent,
    SystemMessage,
    Todo,
    TodoItem,
    ToolCall,
    ToolResult,
    Tools,
    UnknownEvent,
    UserMessage,
)
from ctxline.text import clean_json, clean_text

__all__ = [
    "CANONICAL_VERSION",
    "KNOWN_KINDS",
    "canonical_json",
    "event_from_json",
    "event_to_json",
    "format_at",
    "parse_at",
    "pending_from_json",
    "stored_from_json",
    "stored_to_json",
]

CANONICAL_VERSION = 1

_S = TypeVar("_S", bound=str)
_TODO_OPS: tuple[Literal["write", "update"], ...] = ("write", "update")


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
            return {
                "step": event.step,
                "upto_seq": event.upto_seq,
                "sha256": event.sha256,
                "options": event.options,
                "inputs": event.inputs,
                "report": event.report,
            }
        case StatusSnapshot():
            return {"text": event.text}
        case Reduction():
            out = {"action": event.action}
            if event.seqs:
                out["seqs"] = list(event.seqs)
            if event.refs:
                out["refs"] = event.refs
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


class _Reader:
    """Typed field access on one JSON object, with errors that name field and line."""

    def __init__(self, obj: Mapping[str, JsonValue], line: int | None, prefix: str = "") -> None:
        self.obj = obj
        self.line = line
        self.prefix = prefix

    def fail(self, name: str, message: str) -> ValidationError:
        return ValidationError(message, field=self.prefix + name, line=self.line)

    def text(self, name: str, *, required: bool = True, default: str = "") -> str:
        value = self.obj.get(name)
        if value is None:
            if required:
                raise self.fail(name, "required string is missing")
            return default
        if not isinstance(value, str):
            raise self.fail(name, f"expected a string, got {type(value).__name__}")
        return clean_text(value)

    def flag(self, name: str) -> bool:
        value = self.obj.get(name, False)
        if not isinstance(value, bool):
            raise self.fail(name, f"expected true or false, got {value!r}")
        return value

    def choice(self, name: str, options: tuple[_S, ...]) -> _S:
        value = self.text(name)
        for option in options:
            if value == option:
                return option
        raise self.fail(name, f"must be one of {', '.join(options)}; got {value!r}")

    def meta(self) -> dict[str, JsonValue]:
        value = self.obj.get("meta")
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self.fail("meta", "expected an object")
        cleaned: dict[str, JsonValue] = clean_json(value)
        return cleaned

    def items(self, name: str) -> list[Mapping[str, JsonValue]]:
        value = self.obj.get(name, [])
        if not isinstance(value, list):
            raise self.fail(name, "expected a list")
        for i, item in enumerate(value):
            if not isinstance(item, dict):
                raise self.fail(f"{name}[{i}]", "expected an object")
        return value

    def sub(self, name: str, index: int, item: Mapping[str, JsonValue]) -> _Reader:
        return _Reader(item, self.line, f"{self.prefix}{name}[{index}].")


def _tool_calls(r: _Reader) -> tuple[ToolCall, ...]:
    calls = []
    for i, item in enumerate(r.items("tool_calls")):
        c = r.sub("tool_calls", i, item)
        calls.append(ToolCall(c.text("id"), c.text("name"), clean_json(item.get("arguments", {}))))
    return tuple(calls)


def _todo(r: _Reader) -> Todo:
    op = r.choice("op", _TODO_OPS)
    if op == "write":
        items = []
        for i, item in enumerate(r.items("items")):
            t = r.sub("items", i, item)
            items.append(
                TodoItem(t.text("id"), t.text("content"), t.choice("status", TODO_STATUSES))
            )
        return Todo(op=op, items=tuple(items), meta=r.meta())
    return Todo(
        op=op, item_id=r.text("id"), status=r.choice("status", TODO_STATUSES), meta=r.meta()
    )


def _rule(r: _Reader) -> Rule:
    expires = r.obj.get("expires_at")
    return Rule(
        rule_id=r.text("rule_id"),
        op=r.choice("op", RULE_OPS),
        scope=r.text("scope", required=False, default="session") or "session",
        text=r.text("text", required=False),
        expires_at=None if expires is None else parse_at(expires, where="expires_at", line=r.line),
        meta=r.meta(),
    )


def _state(r: _Reader) -> State:
    cleared = r.flag("cleared")
    if not cleared and "value" not in r.obj:
        raise r.fail("value", "a state event needs a value, or cleared: true")
    return State(
        r.text("source"), None if cleared else clean_json(r.obj["value"]), cleared, r.meta()
    )


def _compaction(r: _Reader) -> Compaction:
    pre = r.obj.get("pre_tokens")
    if pre is not None and (not isinstance(pre, int) or isinstance(pre, bool)):
        raise r.fail("pre_tokens", "expected an integer")
    return Compaction(
        r.text("summary", required=False), r.text("trigger", required=False), pre, r.meta()
    )


def _int(r: _Reader, name: str) -> int:
    value = r.obj.get(name)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise r.fail(name, "expected a non-negative integer")
    return value


def _obj(r: _Reader, name: str) -> dict[str, JsonValue]:
    value = r.obj.get(name, {})
    if not isinstance(value, dict):
        raise r.fail(name, "expected an object")
    cleaned: dict[str, JsonValue] = clean_json(value)
    return cleaned


def _tools(r: _Reader) -> Tools:
    tools = []
    for i, item in enumerate(r.items("tools")):
        r.sub("tools", i, item).text("name")
        tools.append(clean_json(item))
    return Tools(tuple(tools), r.meta())


def _request(r: _Reader) -> RequestHeader:
    return RequestHeader(
        _int(r, "step"),
        _int(r, "upto_seq"),
        r.text("sha256"),
        _obj(r, "options"),
        _obj(r, "inputs"),
        _obj(r, "report"),
        r.meta(),
    )


def _ints(r: _Reader, name: str) -> tuple[int, ...]:
    value = r.obj.get(name, [])
    if not isinstance(value, list) or not all(
        isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value
    ):
        raise r.fail(name, "expected a list of positive integers")
    return tuple(value)


def _reduction(r: _Reader) -> Reduction:
    refs = _obj(r, "refs")
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in refs.values()):
        raise r.fail("refs", "expected an object of seq numbers")
    return Reduction(
        action=r.choice("action", REDUCTION_ACTIONS),
        seqs=_ints(r, "seqs"),
        refs=refs,
        upto_seq=_int(r, "upto_seq") if "upto_seq" in r.obj else 0,
        keep=_ints(r, "keep"),
        summary=r.text("summary", required=False),
        saved_tokens=_int(r, "saved_tokens") if "saved_tokens" in r.obj else 0,
        meta=r.meta(),
    )


_PARSERS: dict[str, Callable[[_Reader], Event]] = {
    "system.message": lambda r: SystemMessage(r.text("text"), r.meta()),
    "user.message": lambda r: UserMessage(r.text("text"), r.meta()),
    "assistant.message": lambda r: AssistantMessage(
        r.text("text", required=False), _tool_calls(r), r.meta()
    ),
    "tool.result": lambda r: ToolResult(
        r.text("call_id"),
        r.text("content"),
        r.text("name", required=False),
        r.flag("is_error"),
        r.meta(),
    ),
    "state": _state,
    "rule": _rule,
    "notification": lambda r: Notification(
        r.text("source"), r.text("text"), r.text("ref", required=False), r.meta()
    ),
    "todo": _todo,
    "compaction": _compaction,
    "guide": lambda r: Guide(r.text("version"), r.text("text"), r.meta()),
    "tools": _tools,
    "request": _request,
    "reduction": _reduction,
    "status": lambda r: StatusSnapshot(r.text("text"), r.meta()),
}

KNOWN_KINDS = tuple(_PARSERS)
_STORED_KEYS = ("seq", "id", "at")


def event_from_json(obj: object, *, line: int | None = None) -> Event:
    """Validate a decoded JSON object as an event. Stored fields (seq, id, at) are ignored."""
    if not isinstance(obj, dict):
        raise ValidationError(f"expected a JSON object, got {type(obj).__name__}", line=line)
    kind = obj.get("kind")
    if not isinstance(kind, str) or not kind:
        raise ValidationError("required string is missing", field="kind", line=line)
    parser = _PARSERS.get(kind)
    if parser is None:
        data = {k: v for k, v in obj.items() if k != "kind" and k not in _STORED_KEYS}
        return UnknownEvent(clean_text(kind), clean_json(data))
    return parser(_Reader(obj, line))


def stored_to_json(stored: StoredEvent) -> dict[str, JsonValue]:
    return {
        **event_to_json(stored.event),
        "seq": stored.seq,
        "id": stored.id,
        "at": format_at(stored.at),
    }


def stored_from_json(obj: object, *, line: int | None = None) -> StoredEvent:
    event = event_from_json(obj, line=line)
    assert isinstance(obj, dict)
    seq, ident = obj.get("seq"), obj.get("id")
    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 1:
        raise ValidationError("expected a positive integer", field="seq", line=line)
    if not isinstance(ident, str) or not ident:
        raise ValidationError("required string is missing", field="id", line=line)
    return StoredEvent(seq, ident, parse_at(obj.get("at"), line=line), event)


def pending_from_json(obj: object, *, line: int | None = None) -> Pending:
    """An event to append from canonical JSON; ``id`` and ``at`` are kept when present."""
    event = event_from_json(obj, line=line)
    assert isinstance(obj, dict)
    ident = obj.get("id")
    if ident is not None and (not isinstance(ident, str) or not ident):
        raise ValidationError("expected a non-empty string", field="id", line=line)
    at = obj.get("at")
    return Pending(event, ident, None if at is None else parse_at(at, line=line))
