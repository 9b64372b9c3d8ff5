"""The record fold: what a step reads of the record besides the rendered history.

:class:`RecordFold` is fed every event once, in order, and only moves forward: the
persona, the adopted guide and tools, the request count, the reductions in force, the
auto guide's kinds, every source's fold, and what the budget's cost model needs from
earlier requests (:class:`BudgetFold`: the history growth per step, how long the view
has been over the pressure line). Everything in it comes from the record, so a cold
cache decides exactly what a warm one does.

    fold = RecordFold()
    fold.start(setup)
    for stored in events:
        fold.feed(stored, setup)
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, assert_never, overload

from ctxline.record.codec import canonical_json
from ctxline.record.events import (
    AssistantMessage,
    Compaction,
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
from ctxline.render.neutral import ToolSpec
from ctxline.sources.base import Source
from ctxline.sources.branch import BranchMark
from ctxline.sources.guide import GuideRegistry, MessageKind, guide_version
from ctxline.tokens.counters import CountLookup, TokenCounter
from ctxline.view.compaction import COMPACTION_KINDS
from ctxline.view.edits import ViewEdits
from ctxline.view.options import PrepareOptions

__all__ = ["GROWTH_WINDOW", "BudgetFold", "Chain", "RecordFold", "ViewSetup", "tool_specs"]

GROWTH_WINDOW = 20
"""How many recent steps the history growth per step is averaged over."""


@dataclass
class BudgetFold:
    """What the cost model reads from earlier request headers (their logged reports)."""

    growth: deque[int] = field(default_factory=lambda: deque(maxlen=GROWTH_WINDOW))
    """History tokens added per step (before that step's reductions), newest last."""
    last_history: int | None = None
    """History tokens of the last logged request (what its cache holds)."""
    excess: int = 0
    """Σ (total − target line) over the consecutive latest requests sent over the
    pressure line without a reduction: the cache reads that waiting has cost (÷ alpha)."""
    waited: int = 0
    """How many such requests."""

    def logged(self, header: RequestHeader) -> None:
        field = header.report_field  # a header read back packed: no whole unpacking
        tokens, budget, actions = field("tokens"), field("budget"), field("actions")
        if not isinstance(tokens, dict) or not isinstance(budget, dict):
            return
        history, total = tokens.get("history"), tokens.get("total")
        if not isinstance(history, int) or not isinstance(total, int):
            return
        saved = 0
        if isinstance(actions, list):
            for action in actions:
                if isinstance(action, dict) and action.get("action") in ("fold", "trim", "compact"):
                    value = action.get("saved_tokens")
                    saved += value if isinstance(value, int) else 0
        if self.last_history is not None:
            self.growth.append(max(0, history + saved - self.last_history))
        self.last_history = history
        target = budget.get("target")
        if budget.get("over_pressure") is True and not saved and isinstance(target, int):
            self.excess += max(0, total - target)
            self.waited += 1
        else:
            self.excess, self.waited = 0, 0

    @property
    def growth_per_step(self) -> float:
        return sum(self.growth) / len(self.growth) if self.growth else 0.0

    def to_json(self) -> dict[str, JsonValue]:
        return {"growth_per_step": round(self.growth_per_step, 1), "waited_steps": self.waited}


@dataclass(frozen=True, slots=True)
class ViewSetup:
    """What shapes the history besides the record: sources, fork points, options, counter."""

    sources: tuple[Source, ...]
    options: PrepareOptions
    counter: TokenCounter
    branches: tuple[BranchMark, ...] = ()
    guide: GuideRegistry | None = None
    """A fixed guide registry (None: the guide lists the kinds the timeline uses)."""
    counts: CountLookup | None = None
    """Persisted token counts (the store's table), looked up before counting."""


class Chain(Sequence[StoredEvent]):
    """The record followed by a step's planned events, without copying the record."""

    def __init__(self, head: Sequence[StoredEvent], tail: Sequence[StoredEvent]) -> None:
        self.head = head
        self.tail = tail

    def __len__(self) -> int:
        return len(self.head) + len(self.tail)

    @overload
    def __getitem__(self, index: int) -> StoredEvent: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[StoredEvent]: ...
    def __getitem__(self, index: int | slice) -> StoredEvent | Sequence[StoredEvent]:
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step != 1:
                return [self[i] for i in range(start, stop, step)]
            n = len(self.head)
            if stop <= n:
                return self.head[start:stop]
            if start >= n:
                return self.tail[start - n : stop - n]
            return [*self.head[start:], *self.tail[: stop - n]]
        if index < 0:
            index += len(self)
        n = len(self.head)
        return self.head[index] if index < n else self.tail[index - n]

    def __iter__(self) -> Iterator[StoredEvent]:
        yield from self.head
        yield from self.tail


def tool_specs(event: Tools) -> tuple[ToolSpec, ...]:
    specs = []
    for tool in event.tools:
        params = tool.get("parameters") or {}
        specs.append(
            ToolSpec(
                str(tool.get("name", "")),
                str(tool.get("description", "") or ""),
                params if isinstance(params, dict) else {},
            )
        )
    return tuple(specs)


@dataclass
class RecordFold:
    """What a step reads of the record besides the rendered history. Only moves forward."""

    seq: int = 0
    last_id: str = ""
    system_texts: list[str] = field(default_factory=list)
    guide: Guide | None = None
    """The guide the next rendering uses (the adopted one, or one a step is adopting)."""
    adopted_guide: Guide | None = None
    """The latest ``guide`` event of the record."""
    tools: tuple[ToolSpec, ...] = ()
    tools_event: Tools | None = None
    tools_bytes: bytes = b""
    """The canonical JSON of the adopted tool list (compared with what a step offers)."""
    steps: int = 0
    """Requests logged so far (the next step is ``steps + 1``)."""
    last_header: RequestHeader | None = None
    actions: list[Reduction] = field(default_factory=list)
    """Reductions since the last logged request (this step's, once planned)."""
    edits: ViewEdits = field(default_factory=ViewEdits.empty)
    folds: dict[str, Any] = field(default_factory=dict)
    used_kinds: dict[str, MessageKind] = field(default_factory=dict)
    """The guide kinds the record brought, in the order they first appeared."""
    compacted: bool = False
    budget: BudgetFold = field(default_factory=BudgetFold)
    call_numbers: dict[str, tuple[tuple[int, int, str], ...]] = field(default_factory=dict)
    """call id → (seq of its call, its number among the calls of its tool, the tool), one
    per call with that id (ids can be reused): the per-call label. Tuples, so a copy of
    the fold (a checkpoint, :meth:`ViewCache.fork`) shares them."""
    calls_by_tool: dict[str, int] = field(default_factory=dict)
    rule_versions: dict[tuple[str, str], int] = field(default_factory=dict)
    """(scope, id) → seq of the latest set/replace of each rule not ended since."""
    ended_rules: set[int] = field(default_factory=set)
    """Seqs of the set/replace ops a later op of the same rule ended (revoke, expired,
    or a newer set/replace): the view shows them without their text."""
    ended_new: list[int] = field(default_factory=list)
    """Seqs added to :attr:`ended_rules` since the view last looked (it renders again when
    one of them is a block it has rendered already)."""

    def call_number(self, call_id: str, seq: int) -> tuple[int, str] | None:
        """(number, tool) of the latest call ``call_id`` made before record seq ``seq``."""
        for at, n, name in reversed(self.call_numbers.get(call_id, ())):
            if at < seq:
                return n, name
        return None

    def _rule(self, event: Rule, seq: int) -> None:
        key = (event.scope, event.rule_id)
        earlier = self.rule_versions.pop(key, None)
        if earlier is not None:
            self.ended_rules.add(earlier)
            self.ended_new.append(earlier)
        if event.op in ("set", "replace"):
            self.rule_versions[key] = seq

    def start(self, setup: ViewSetup) -> None:
        for source in setup.sources:
            self.folds[source.name] = source.fold()

    def registry(self, setup: ViewSetup) -> GuideRegistry:
        """The guide's kinds now: the app's fixed ones (or, without them, the kinds the
        timeline uses), the sources' own, and the compaction's once there is one."""
        fixed = setup.guide
        registry = GuideRegistry(fixed.kinds if fixed is not None else [])
        for source in setup.sources:
            for kind in source.kinds():
                registry.register(kind)
        if fixed is None:
            for kind in self.used_kinds.values():
                registry.register(kind)
        if self.compacted:
            for kind in COMPACTION_KINDS:
                registry.register(kind)
        return registry

    def feed(self, stored: StoredEvent, setup: ViewSetup) -> Reduction | None:
        """Take one event; the reduction when it is one (the history must change)."""
        event = stored.event
        for source in setup.sources:
            for kind in self.folds[source.name].feed(stored):
                self.used_kinds.setdefault(kind.tag, kind)
        self.seq, self.last_id = stored.seq, stored.id
        match event:
            case SystemMessage():
                self.system_texts.append(event.text)
            case Guide():
                if event.version == guide_version(event.text):  # else not ctxline's: ignored
                    self.guide = self.adopted_guide = event
            case Tools():
                self.tools, self.tools_event = tool_specs(event), event
                self.tools_bytes = canonical_json(list(event.tools))
            case RequestHeader():
                self.steps += 1
                self.last_header = event
                self.actions = []
                self.budget.logged(event)
            case Reduction():
                self.actions.append(event)
                self.edits.apply(event)
                self.compacted = self.compacted or event.action == "compact"
                return event
            case Rule():
                self._rule(event, stored.seq)
            case AssistantMessage():
                for call in event.tool_calls:
                    n = self.calls_by_tool[call.name] = self.calls_by_tool.get(call.name, 0) + 1
                    at = self.call_numbers.get(call.id, ())
                    self.call_numbers[call.id] = (*at, (stored.seq, n, call.name))
            case (
                UserMessage()
                | ToolResult()
                | State()
                | Notification()
                | Todo()
                | Compaction()
                | StatusSnapshot()
                | ModelUsage()
                | ModelFailure()
                | Slot()
                | UnknownEvent()
            ):
                pass  # the sources' folds and the history take these
            case _:
                assert_never(event)
        return None
