"""Event value types: what the record holds.

The record is a list of these values. They carry no identity: ``seq``, ``id`` and
``at`` are assigned by the store and live on :class:`StoredEvent`. Every kind has a
``kind`` discriminator (a ``Literal``), and :data:`Event` is the closed union of them,
so a ``match`` over an event ends in ``assert_never`` and the type checker finds a kind
that was forgotten. Kinds written by a newer ctxline are kept as :class:`UnknownEvent`,
never dropped. The JSON form is in :mod:`ctxline.record.codec`.

ctxline's own kinds (:data:`OWN_KINDS`: guide, tools, request, reduction, status) carry
authority only when ctxline wrote them; an app or an importer never appends them.

    >>> UserMessage("Help me cancel my plan").kind
    'user.message'
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import ClassVar, Literal, TypeAlias, TypeGuard

from ctxline.record.jsonvalue import JsonValue

__all__ = [
    "OWN_KINDS",
    "REDUCTION_ACTIONS",
    "RULE_OPS",
    "SLOT_OPS",
    "TODO_STATUSES",
    "AssistantMessage",
    "Compaction",
    "Event",
    "EventKind",
    "Guide",
    "JsonValue",
    "ModelFailure",
    "ModelUsage",
    "Notification",
    "Pending",
    "Reduction",
    "ReductionAction",
    "RequestHeader",
    "Rule",
    "RuleOp",
    "Slot",
    "SlotOp",
    "State",
    "StatusSnapshot",
    "StoredEvent",
    "SystemMessage",
    "Todo",
    "TodoItem",
    "TodoStatus",
    "ToolCall",
    "ToolResult",
    "Tools",
    "UnknownEvent",
    "UserMessage",
    "is_rule_op",
    "is_todo_status",
]

RuleOp = Literal["set", "replace", "revoke", "expired"]
TodoStatus = Literal["pending", "in_progress", "completed", "cancelled"]
ReductionAction = Literal["fold", "trim", "compact"]
SlotOp = Literal["set", "append", "clear", "expire", "snapshot"]
RULE_OPS: tuple[RuleOp, ...] = ("set", "replace", "revoke", "expired")
TODO_STATUSES: tuple[TodoStatus, ...] = ("pending", "in_progress", "completed", "cancelled")
REDUCTION_ACTIONS: tuple[ReductionAction, ...] = ("fold", "trim", "compact")
SLOT_OPS: tuple[SlotOp, ...] = ("set", "append", "clear", "expire", "snapshot")

EventKind = Literal[
    "system.message",
    "user.message",
    "assistant.message",
    "tool.result",
    "state",
    "rule",
    "notification",
    "todo",
    "compaction",
    "guide",
    "tools",
    "request",
    "reduction",
    "status",
    "usage",
    "model.error",
    "slot",
]


def is_todo_status(value: object) -> TypeGuard[TodoStatus]:
    """Whether ``value`` is one of :data:`TODO_STATUSES`."""
    return value in TODO_STATUSES


def is_rule_op(value: object) -> TypeGuard[RuleOp]:
    """Whether ``value`` is one of :data:`RULE_OPS`."""
    return value in RULE_OPS


OWN_KINDS: frozenset[str] = frozenset({"guide", "tools", "request", "reduction", "status"})
"""The kinds only ctxline writes (DESIGN §5): refused from ``append`` and ``import``."""


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One call in an assistant message."""

    id: str
    name: str
    arguments: JsonValue = field(default_factory=dict)
    """Parsed JSON arguments; a ``str`` when the model's arguments were not valid JSON."""


@dataclass(frozen=True, slots=True)
class SystemMessage:
    """The app's persona or instructions; rendered first, in the system prompt."""

    kind: ClassVar[Literal["system.message"]] = "system.message"
    text: str
    meta: dict[str, JsonValue] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class UserMessage:
    """What the user said."""

    kind: ClassVar[Literal["user.message"]] = "user.message"
    text: str
    meta: dict[str, JsonValue] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class AssistantMessage:
    """A model reply: text and the tool calls it made."""

    kind: ClassVar[Literal["assistant.message"]] = "assistant.message"
    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    meta: dict[str, JsonValue] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ToolResult:
    """The output of one tool call (``call_id`` names the call it answers)."""

    kind: ClassVar[Literal["tool.result"]] = "tool.result"
    call_id: str
    content: str
    name: str = ""
    is_error: bool = False
    meta: dict[str, JsonValue] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class State:
    """A value reported by a named source; a later value from the same source is current."""

    kind: ClassVar[Literal["state"]] = "state"
    source: str
    value: JsonValue = None
    cleared: bool = False
    meta: dict[str, JsonValue] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Rule:
    """A scoped rule: ``set``/``replace`` put it in force, ``revoke``/``expired`` end it."""

    kind: ClassVar[Literal["rule"]] = "rule"
    rule_id: str
    op: RuleOp
    scope: str = "session"
    text: str = ""
    expires_at: datetime | None = None
    meta: dict[str, JsonValue] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Notification:
    """The completion of background work: not a request from the user."""

    kind: ClassVar[Literal["notification"]] = "notification"
    source: str
    text: str
    ref: str = ""
    meta: dict[str, JsonValue] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TodoItem:
    """One item of the TODO list."""

    id: str
    content: str
    status: TodoStatus = "pending"


@dataclass(frozen=True, slots=True)
class Todo:
    """A change to the TODO list (seed 001)."""

    kind: ClassVar[Literal["todo"]] = "todo"
    op: Literal["write", "update"]
    """``write`` replaces the list with ``items``; ``update`` sets ``status`` of ``item_id``."""
    items: tuple[TodoItem, ...] = ()
    item_id: str = ""
    status: TodoStatus | Literal[""] = ""
    meta: dict[str, JsonValue] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Compaction:
    """A compaction recorded in the source log (e.g. Claude Code's compact boundary).

    ``summary`` holds the summary text when the log has it; ``trigger`` and
    ``pre_tokens`` are what the recording agent reported.
    """

    kind: ClassVar[Literal["compaction"]] = "compaction"
    summary: str = ""
    trigger: str = ""
    pre_tokens: int | None = None
    meta: dict[str, JsonValue] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Guide:
    """The guide text adopted from this point on (seed 000: earlier requests keep theirs)."""

    kind: ClassVar[Literal["guide"]] = "guide"
    version: str
    text: str
    meta: dict[str, JsonValue] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Tools:
    """The tool schemas offered to the model from this point on (``name``, ``description``,
    ``parameters`` per tool)."""

    kind: ClassVar[Literal["tools"]] = "tools"
    tools: tuple[dict[str, JsonValue], ...] = ()
    meta: dict[str, JsonValue] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RequestHeader:
    """What is needed to rebuild one prepared request byte for byte.

    The record up to ``upto_seq`` plus these fields determine the body; ``sha256``
    is the body's hash and ``report`` the preparation report of that step.
    """

    kind: ClassVar[Literal["request"]] = "request"
    step: int
    upto_seq: int
    sha256: str
    options: dict[str, JsonValue] = field(default_factory=dict)
    inputs: dict[str, JsonValue] = field(default_factory=dict)
    report: dict[str, JsonValue] = field(default_factory=dict)
    meta: dict[str, JsonValue] = field(default_factory=dict)
    plain: bool = field(default=False, compare=False, repr=False)
    """Read in the plain form (written before headers were packed): written plainly again,
    so its stored bytes never change (``record/packed.py``). Not part of its value."""

    def report_field(self, name: str) -> JsonValue:
        """``report.get(name)``. A header read back packed answers a field it stores as is
        without unpacking the rest of its report (:mod:`ctxline.record.lazy_header`)."""
        return self.report.get(name)


@dataclass(frozen=True, slots=True)
class StatusSnapshot:
    """A status bar persisted into history (the ``append`` strategy of seed 001).

    ``text`` is the rendered ``<ctx-status>`` block, computed by ctxline from the record.
    """

    kind: ClassVar[Literal["status"]] = "status"
    text: str
    meta: dict[str, JsonValue] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Reduction:
    """A change to the *view* (never to the record), decided by the budget ladder.

    ``fold``: the results at ``seqs`` show a reference to the later identical result in
    ``refs`` (seq → seq). ``trim``: the results at ``seqs`` show a preview and a handle
    (``meta["form"] == "short"``: a one-line stub, and an assistant message's long
    argument strings elided; ``"text"``: an assistant message's text as a preview).
    ``compact``: events up to ``upto_seq`` are replaced by ``summary`` (and the digest and
    re-affirmation rendered from the record), except the user messages in ``keep``.
    """

    kind: ClassVar[Literal["reduction"]] = "reduction"
    action: ReductionAction
    seqs: tuple[int, ...] = ()
    refs: dict[str, int] = field(default_factory=dict)
    upto_seq: int = 0
    keep: tuple[int, ...] = ()
    summary: str = ""
    saved_tokens: int = 0
    meta: dict[str, JsonValue] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ModelUsage:
    """What one model call used, as the provider reported it, beside ctxline's own count.

    ``input`` counts every input token the provider processed (cached ones included);
    ``estimated_input`` is ctxline's count of the request it prepared (the report's
    ``tokens.total``), kept so the estimator can be calibrated. No view shows it.
    """

    kind: ClassVar[Literal["usage"]] = "usage"
    model: str
    input: int = 0
    cache_read: int = 0
    cache_write: int = 0
    output: int = 0
    latency_ms: int = 0
    estimated_input: int | None = None
    request_step: int | None = None
    """The logged request step the call was sent from (None when it was not logged)."""
    meta: dict[str, JsonValue] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ModelFailure:
    """A model call that failed (transport, provider error, an unusable reply), recorded
    where its reply would be: a run that stops with ``model_error`` ends with it, so
    ``ctxline show`` and the inspector say why. No view shows it to the model."""

    kind: ClassVar[Literal["model.error"]] = "model.error"
    model: str
    error: str
    error_type: str = "ModelError"
    latency_ms: int = 0
    request_step: int | None = None
    """The logged request step the call was sent from."""
    meta: dict[str, JsonValue] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Slot:
    """A change to a named environment slot (seed 002; :mod:`ctxline.environment`).

    ``set``: ``value`` is the slot's whole new value; ``append``: ``value`` is the list
    of items added; ``clear``: the slot has no value; ``expire``: its TTL ran out (the
    last value is kept for ``read_slot``); ``snapshot``: ``value`` is the environment
    block ctxline rendered into history (its ``append`` placement), ``name`` the
    environment's. ``meta`` says who changed it (``by``), in which transaction, and on
    a shared blackboard the version the writer had seen (``base``).
    """

    kind: ClassVar[Literal["slot"]] = "slot"
    name: str
    op: SlotOp
    value: JsonValue = None
    meta: dict[str, JsonValue] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class UnknownEvent:
    """A kind this version does not know: kept whole, rendered as opaque."""

    kind: str
    data: dict[str, JsonValue]


Event: TypeAlias = (
    SystemMessage
    | UserMessage
    | AssistantMessage
    | ToolResult
    | State
    | Rule
    | Notification
    | Todo
    | Compaction
    | Guide
    | Tools
    | RequestHeader
    | Reduction
    | StatusSnapshot
    | ModelUsage
    | ModelFailure
    | Slot
    | UnknownEvent
)


@dataclass(frozen=True, slots=True)
class Pending:
    """An event to append, with an optional client id (retries are idempotent) and time."""

    event: Event
    id: str | None = None
    at: datetime | None = None


@dataclass(frozen=True, slots=True)
class StoredEvent:
    """An event as the store holds it: its timeline position, id and append time."""

    seq: int
    id: str
    at: datetime
    event: Event

    @property
    def kind(self) -> str:
        return self.event.kind
