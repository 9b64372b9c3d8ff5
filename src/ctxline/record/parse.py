"""Events from decoded JSON, validated at the boundary: every error names its field and line.

:func:`event_from_json` checks one JSON object against its kind's fields (types, allowed
values) and cleans every string of lone surrogates; a kind from a newer version is kept
whole as :class:`~ctxline.record.events.UnknownEvent`.

    >>> event_from_json({"kind": "user.message", "text": "hi"})
    UserMessage(text='hi', meta={})
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Literal, TypeVar, cast

from ctxline.errors import ValidationError
from ctxline.record.codec import parse_at
from ctxline.record.events import (
    REDUCTION_ACTIONS,
    RULE_OPS,
    SLOT_OPS,
    TODO_STATUSES,
    AssistantMessage,
    Compaction,
    Event,
    Guide,
    JsonValue,
    ModelFailure,
    ModelUsage,
    Notification,
    Pending,
    Reduction,
    RequestHeader,
    Rule,
    Slot,
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
from ctxline.record.jsonvalue import as_int
from ctxline.record.lazy_header import LazyRequestHeader
from ctxline.record.packed import unpack
from ctxline.text import clean_json, clean_text

__all__ = ["KNOWN_KINDS", "event_from_json", "pending_from_json", "stored_from_json"]

_S = TypeVar("_S", bound=str)
_TODO_OPS: tuple[Literal["write", "update"], ...] = ("write", "update")


class _Reader:
    """Typed field access on one JSON object, with errors that name field and line."""

    def __init__(
        self, obj: Mapping[str, JsonValue], line: int | None, prefix: str = "", stored: bool = False
    ) -> None:
        self.obj = obj
        self.line = line
        self.prefix = prefix
        self.stored = stored

    def json(self, value: object) -> JsonValue:
        """A JSON value as an event holds it: cleaned (:func:`~ctxline.text.clean_json`), or
        as decoded when it is a stored body whose digest was checked (ctxline wrote it: it
        holds no lone surrogate and no NaN, which an append refuses)."""
        return cast("JsonValue", value) if self.stored else clean_json(value)

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
        return value if self.stored else clean_text(value)  # a checked body: cleaned at append

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
        return cast("dict[str, JsonValue]", self.json(value))

    def items(self, name: str) -> list[dict[str, JsonValue]]:
        value = self.obj.get(name, [])
        if not isinstance(value, list):
            raise self.fail(name, "expected a list")
        for i, item in enumerate(value):
            if not isinstance(item, dict):
                raise self.fail(f"{name}[{i}]", "expected an object")
        return [item for item in value if isinstance(item, dict)]

    def sub(self, name: str, index: int, item: Mapping[str, JsonValue]) -> _Reader:
        return _Reader(item, self.line, f"{self.prefix}{name}[{index}].", self.stored)


def _tool_calls(r: _Reader) -> tuple[ToolCall, ...]:
    calls = []
    for i, item in enumerate(r.items("tool_calls")):
        c = r.sub("tool_calls", i, item)
        calls.append(ToolCall(c.text("id"), c.text("name"), c.json(item.get("arguments", {}))))
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
    return State(r.text("source"), None if cleared else r.json(r.obj["value"]), cleared, r.meta())


def _slot(r: _Reader) -> Slot:
    op = r.choice("op", SLOT_OPS)
    value = r.json(r.obj.get("value"))
    if op in ("set", "append", "snapshot") and value is None:
        raise r.fail("value", f"a slot {op} needs a value")
    if op == "append" and not isinstance(value, list):
        raise r.fail("value", "a slot append needs the list of items added")
    if op == "snapshot" and not isinstance(value, str):
        raise r.fail("value", "a slot snapshot holds the rendered block as a string")
    return Slot(r.text("name"), op, value, r.meta())


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
    return cast("dict[str, JsonValue]", r.json(value))


def _tools(r: _Reader) -> Tools:
    tools = []
    for i, item in enumerate(r.items("tools")):
        r.sub("tools", i, item).text("name")
        tools.append(cast("dict[str, JsonValue]", r.json(item)))
    return Tools(tuple(tools), r.meta())


def _request(r: _Reader) -> RequestHeader:
    step = _int(r, "step")
    if "opts" not in r.obj and "rep" not in r.obj:  # the plain form (see record/packed.py)
        options, report, plain = _obj(r, "options"), _obj(r, "report"), True
    else:
        if "options" in r.obj or "report" in r.obj:
            raise r.fail("opts", "a request header holds options or opts, report or rep, not both")
        opts, rep = _obj(r, "opts"), _obj(r, "rep")
        if r.stored:  # ctxline wrote it, and pack() checked it unpacks: unpack it when used
            return LazyRequestHeader.packed(
                step, _int(r, "upto_seq"), r.text("sha256"), opts, rep, _obj(r, "inputs"), r.meta()
            )
        try:
            options, report = unpack(opts, rep, step=step)
        except ValueError:  # a packed name list that is not one (written outside ctxline)
            raise r.fail("rep", "a packed report ctxline cannot read") from None
        plain = False
    return RequestHeader(
        step,
        _int(r, "upto_seq"),
        r.text("sha256"),
        options,
        _obj(r, "inputs"),
        report,
        r.meta(),
        plain,
    )


def _ints(r: _Reader, name: str) -> tuple[int, ...]:
    value = r.obj.get(name, [])
    if not isinstance(value, list) or not all(
        isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value
    ):
        raise r.fail(name, "expected a list of positive integers")
    return tuple(as_int(v) for v in value)


def _reduction(r: _Reader) -> Reduction:
    refs = _obj(r, "refs")
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in refs.values()):
        raise r.fail("refs", "expected an object of seq numbers")
    return Reduction(
        action=r.choice("action", REDUCTION_ACTIONS),
        seqs=_ints(r, "seqs"),
        refs={k: as_int(v) for k, v in refs.items()},
        upto_seq=_int(r, "upto_seq") if "upto_seq" in r.obj else 0,
        keep=_ints(r, "keep"),
        summary=r.text("summary", required=False),
        saved_tokens=_int(r, "saved_tokens") if "saved_tokens" in r.obj else 0,
        meta=r.meta(),
    )


def _usage(r: _Reader) -> ModelUsage:
    def maybe(name: str) -> int | None:
        return _int(r, name) if r.obj.get(name) is not None else None

    counts = {
        name: _int(r, name) if name in r.obj else 0
        for name in ("input", "cache_read", "cache_write", "output", "latency_ms")
    }
    return ModelUsage(
        r.text("model"),
        **counts,
        estimated_input=maybe("estimated_input"),
        request_step=maybe("request_step"),
        meta=r.meta(),
    )


def _model_error(r: _Reader) -> ModelFailure:
    step = _int(r, "request_step") if r.obj.get("request_step") is not None else None
    return ModelFailure(
        r.text("model"),
        r.text("error"),
        r.text("error_type", required=False) or "ModelError",
        _int(r, "latency_ms") if "latency_ms" in r.obj else 0,
        step,
        r.meta(),
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
    "usage": _usage,
    "model.error": _model_error,
    "slot": _slot,
}

KNOWN_KINDS = tuple(_PARSERS)
_STORED_KEYS = ("seq", "id", "at")


def event_from_json(obj: object, *, line: int | None = None, stored: bool = False) -> Event:
    """Validate a decoded JSON object as an event. Stored fields (seq, id, at) are ignored.
    ``stored``: a body read back whose digest the store checked (its values are kept as
    decoded, not cleaned again)."""
    if not isinstance(obj, dict):
        raise ValidationError(f"expected a JSON object, got {type(obj).__name__}", line=line)
    kind = obj.get("kind")
    if not isinstance(kind, str) or not kind:
        raise ValidationError("required string is missing", field="kind", line=line)
    parser = _PARSERS.get(kind)
    if parser is None:
        data = {k: v for k, v in obj.items() if k != "kind" and k not in _STORED_KEYS}
        return UnknownEvent(clean_text(kind), clean_json(data))
    return parser(_Reader(obj, line, stored=stored))


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
