"""The provider-neutral request, and record history turned into paired messages.

Providers reject a request whose tool calls and results do not pair up (a result
without its call, a call without its result, a reused call id). Trimming,
compaction, imports and crashed runs all produce such histories, so pairing is
repaired here, once, before any provider rendering, and every repair is reported:

- a result whose call id has no earlier call is left out (``orphans``);
- a second result for an answered call is left out (``duplicates``);
- a call with no recorded result gets the error result :data:`INTERRUPTED`
  (``repaired``);
- a call id already used earlier in the view gets a fresh view id ``<id>_<n>``
  (an empty id gets ``call_<n>``) and is reported in ``renamed``; a result is
  matched to the most recent call with its recorded id.

The results of one assistant message follow it directly, in call order. A result
recorded later (after a user message, or even after a later assistant message) is
moved up next to its call, and whatever was recorded in between comes after the
results, in append order — until a later reply is complete: then the turn is sealed
(see :class:`HistoryBuilder`) and a result recorded after that is left out as ``late``.
System messages are collected apart (:func:`system_text`); other event kinds are
rendered by the projection layer through ``render_other``, or skipped.

    >>> msgs, report = history_to_messages([
    ...     UserMessage("list files"),
    ...     AssistantMessage(tool_calls=(ToolCall("c1", "ls"),)),
    ... ])
    >>> [m.role for m in msgs], report.repaired
    (['user', 'assistant', 'tool'], ('c1',))
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal, assert_never, overload

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
    ToolCall,
    ToolResult,
    Tools,
    UnknownEvent,
    UserMessage,
)
from ctxline.record.jsonvalue import JsonObject
from ctxline.tags import escape

__all__ = [
    "INTERRUPTED", "HistoryBuilder", "NeutralMessage", "NeutralRequest", "PairingReport",
    "Provider", "Role", "ToolSpec", "check_pairing", "escape_json", "history_to_messages",
    "system_text",
]  # fmt: skip

INTERRUPTED = "no result recorded: the call was interrupted"
"""Content of the error result given to a call that has no recorded result."""

Role = Literal["user", "assistant", "tool"]
Provider = Literal["openai", "anthropic"]


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool as the model sees it; ``parameters`` is a JSON schema object."""

    name: str
    description: str = ""
    parameters: dict[str, JsonValue] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class NeutralMessage:
    """One message: user or assistant text (with calls), or one tool result."""

    role: Role
    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    call_id: str = ""
    name: str = ""
    is_error: bool = False
    seq: int = 0
    """The record seq of the event this message shows (0 when ctxline made it up)."""

    def __post_init__(self) -> None:
        if self.role not in ("user", "assistant", "tool"):
            raise ValidationError(f"unknown role {self.role!r}", field="role")
        if self.tool_calls and self.role != "assistant":
            raise ValidationError("only an assistant message has tool calls", field="tool_calls")
        if self.role == "tool" and not self.call_id:
            raise ValidationError("a tool message needs the call id it answers", field="call_id")


@dataclass(frozen=True, slots=True)
class NeutralRequest:
    """A provider-neutral request: the system text, the tools offered and the messages."""

    system: str = ""
    tools: tuple[ToolSpec, ...] = ()
    messages: tuple[NeutralMessage, ...] = ()


@dataclass(frozen=True, slots=True)
class PairingReport:
    """What :func:`history_to_messages` changed to make calls and results pair up."""

    repaired: tuple[str, ...] = ()
    """View ids of calls given the :data:`INTERRUPTED` error result."""
    orphans: tuple[str, ...] = ()
    """Call ids of results left out because no earlier call has that id."""
    duplicates: tuple[str, ...] = ()
    """Call ids of results left out because their call already had a result."""
    renamed: tuple[tuple[str, str], ...] = ()
    """``(recorded id, view id)`` for calls whose id was already used in the view."""
    late: tuple[str, ...] = ()
    """Call ids of results left out because a later reply had already been completed."""

    @property
    def clean(self) -> bool:
        return not (self.repaired or self.orphans or self.duplicates or self.renamed or self.late)


@dataclass(slots=True)
class _Turn:
    """An assistant message with calls, and the result slot of each call."""

    message: NeutralMessage
    results: list[NeutralMessage | None]
    sealed: bool = False

    @property
    def complete(self) -> bool:
        return all(r is not None for r in self.results)


def _unwrap(event: Event | StoredEvent) -> Event:
    return event.event if isinstance(event, StoredEvent) else event


def system_text(events: Iterable[Event | StoredEvent]) -> str:
    """The text of every system message, in append order, joined by a blank line."""
    texts = [ev.text for ev in map(_unwrap, events) if isinstance(ev, SystemMessage)]
    return "\n\n".join(t for t in texts if t)


@overload
def escape_json(value: JsonObject, escape: Callable[[str], str]) -> JsonObject: ...
@overload
def escape_json(value: JsonValue, escape: Callable[[str], str]) -> JsonValue: ...
def escape_json(value: JsonValue, escape: Callable[[str], str]) -> JsonValue:
    """``value`` with ``escape`` applied to every string in it (keys included)."""
    if isinstance(value, str):
        return escape(value)
    if isinstance(value, dict):
        return {escape(k): escape_json(v, escape) for k, v in value.items()}
    if isinstance(value, list):
        return [escape_json(v, escape) for v in value]
    return value


def _fresh_id(call_id: str, used: set[str]) -> str:
    base, n = (call_id, 2) if call_id else ("call", 1)
    while f"{base}_{n}" in used:
        n += 1
    return f"{base}_{n}"


OtherRenderer = Callable[[Event], "NeutralMessage | None"]


class HistoryBuilder:
    """Turns events, fed one at a time, into paired messages, incrementally.

    Messages before the first turn that may still receive a result are *frozen*:
    they never change again, so callers cache whatever they derive from them
    (provider fragments, token counts) by position. A turn stops waiting for results
    (is *sealed*) once a later assistant message is complete — a later reply with no
    calls, or one whose calls are all answered: its missing results are then
    :data:`INTERRUPTED` for good, and a result recorded after that is left out and
    reported as ``late``. So one interrupted call never keeps the rest of the history
    open. ``render_other`` turns the other event kinds (state, rules, …) into
    user-role messages, or ``None`` to leave them out.
    """

    def __init__(
        self, render_other: OtherRenderer | None = None, escape: Callable[[str], str] = escape
    ) -> None:
        self.render_other = render_other
        self.escape = escape
        self.frozen: list[NeutralMessage] = []
        self._open: list[_Turn | NeutralMessage] = []
        self._latest: dict[str, list[tuple[_Turn, int]]] = {}
        self._used: set[str] = set()
        self._repaired: list[str] = []
        self._orphans: list[str] = []
        self._duplicates: list[str] = []
        self._late: list[str] = []
        self._renamed: list[tuple[str, str]] = []

    def feed(self, event: Event | StoredEvent) -> None:
        seq = event.seq if isinstance(event, StoredEvent) else 0
        event = _unwrap(event)
        match event:
            case UserMessage():
                self.add(NeutralMessage("user", self.escape(event.text), seq=seq))
            case AssistantMessage():
                self._assistant(event, seq)
            case ToolResult():
                self._result(event, seq)
            case SystemMessage():
                pass  # the persona goes to the system prompt (system_text)
            case (
                State()
                | Rule()
                | Notification()
                | Todo()
                | Compaction()
                | Guide()
                | Tools()
                | RequestHeader()
                | Reduction()
                | StatusSnapshot()
                | Slot()
                | UnknownEvent()
            ):
                message = self.render_other(event) if self.render_other is not None else None
                if message is not None:
                    self.add(replace(message, seq=seq) if seq else message)
            case ModelUsage() | ModelFailure():
                pass  # a log record: never shown to the model
            case _:
                assert_never(event)

    def add(self, message: NeutralMessage) -> None:
        """Append a ready user or assistant message (a branch marker, say)."""
        self._open.append(message)
        self._freeze()

    def _assistant(self, event: AssistantMessage, seq: int) -> None:
        if not event.tool_calls:
            self._seal_earlier(None)
            self._open.append(NeutralMessage("assistant", self.escape(event.text), seq=seq))
            self._freeze()
            return
        calls = []
        for call in event.tool_calls:
            args = escape_json(call.arguments, self.escape)  # names and arguments come from outside
            call = replace(call, name=self.escape(call.name), arguments=args)
            view_id = call.id
            if not view_id or view_id in self._used:
                view_id = _fresh_id(call.id, self._used)
                self._renamed.append((call.id, view_id))
                call = replace(call, id=view_id)
            self._used.add(view_id)
            calls.append(call)
        turn = _Turn(
            NeutralMessage("assistant", self.escape(event.text), tuple(calls), seq=seq),
            [None] * len(calls),
        )
        slots: dict[str, list[tuple[_Turn, int]]] = {}
        for i, call in enumerate(event.tool_calls):
            slots.setdefault(call.id, []).append((turn, i))
        self._latest.update(slots)
        self._open.append(turn)

    def _result(self, event: ToolResult, seq: int) -> None:
        candidates = self._latest.get(event.call_id)
        if candidates is None:
            self._orphans.append(event.call_id)
            return
        free = [(turn, i) for turn, i in candidates if turn.results[i] is None]
        if not free:
            self._duplicates.append(event.call_id)
            return
        turn, i = free[0]
        if turn.sealed:
            self._late.append(event.call_id)
            return
        call = turn.message.tool_calls[i]
        turn.results[i] = NeutralMessage(
            "tool",
            self.escape(event.content),
            call_id=call.id,
            name=event.name or call.name,
            is_error=event.is_error,
            seq=seq,
        )
        if turn.complete:
            self._seal_earlier(turn)
        self._freeze()

    def _seal_earlier(self, done: _Turn | None) -> None:
        """A later reply is complete: every turn before it stops waiting for results."""
        for item in self._open:
            if item is done:
                break
            if isinstance(item, _Turn):
                item.sealed = True

    def _freeze(self) -> None:
        while self._open:
            item = self._open[0]
            if isinstance(item, _Turn) and not (item.sealed or item.complete):
                return
            self._open.pop(0)
            self.frozen.extend(self._messages_of(item, self._repaired))

    @staticmethod
    def _messages_of(item: _Turn | NeutralMessage, repaired: list[str]) -> list[NeutralMessage]:
        if isinstance(item, NeutralMessage):
            return [item]
        out = [item.message]
        for call, result in zip(item.message.tool_calls, item.results, strict=True):
            if result is None:
                repaired.append(call.id)
                result = NeutralMessage(
                    "tool", INTERRUPTED, call_id=call.id, name=call.name, is_error=True
                )
            out.append(result)
        return out

    def open_messages(self, repaired: list[str] | None = None) -> list[NeutralMessage]:
        """The messages after the frozen ones, as they stand now (missing results repaired).

        The view ids of calls given :data:`INTERRUPTED` are added to ``repaired``.
        """
        out: list[NeutralMessage] = []
        scratch = [] if repaired is None else repaired
        for item in self._open:
            out.extend(self._messages_of(item, scratch))
        return out

    def messages(self) -> list[NeutralMessage]:
        return [*self.frozen, *self.open_messages()]

    def report(self) -> PairingReport:
        pending: list[str] = []
        self.open_messages(pending)
        return PairingReport(
            (*self._repaired, *pending),
            tuple(self._orphans),
            tuple(self._duplicates),
            tuple(self._renamed),
            tuple(self._late),
        )


def history_to_messages(
    events: Iterable[Event | StoredEvent],
    render_other: OtherRenderer | None = None,
) -> tuple[list[NeutralMessage], PairingReport]:
    """User, assistant and tool messages of ``events`` with call/result pairing repaired."""
    builder = HistoryBuilder(render_other)
    for event in events:
        builder.feed(event)
    return builder.messages(), builder.report()


def check_pairing(messages: Sequence[NeutralMessage]) -> None:
    """Raise :class:`ValidationError` unless every call is answered right after its message.

    The rule both providers enforce: the tool messages directly after an assistant
    message answer exactly its calls, once each; a tool message appears nowhere
    else; a call id is used once in the whole request.
    """
    seen: set[str] = set()
    pending: list[str] = []  # calls of the last assistant message not yet answered
    answerable: set[str] = set()
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        if message.role == "tool":
            if message.call_id not in answerable:
                raise ValidationError(
                    f"tool result {message.call_id!r} does not answer a call of the assistant message before it",
                    field=where,
                )
            answerable.discard(message.call_id)
            pending.remove(message.call_id)
            continue
        if pending:
            raise ValidationError(
                f"calls without a result before this message: {pending}", field=where
            )
        answerable = set()
        if message.role == "assistant":
            for call in message.tool_calls:
                if call.id in seen:
                    raise ValidationError(f"call id {call.id!r} is used twice", field=where)
                seen.add(call.id)
            pending = [call.id for call in message.tool_calls]
            answerable = set(pending)
    if pending:
        raise ValidationError(f"calls without a result at the end: {pending}", field="messages")
