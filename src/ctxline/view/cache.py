"""The folds a step reads, kept from step to step: the record fold and the rendered history.

Events are fed once, in order, into two layers:

- the **record fold** (:class:`RecordFold`): persona, the adopted guide and tools, the
  request count, the reductions in force, the auto guide's kinds, and every source's
  fold. It only moves forward; it starts over only when the record is not the
  continuation of what it was fed (another timeline, a fork);
- the **history** (:class:`ViewCache`): the paired messages with reductions, offload
  previews and side-channel stamps applied, frozen messages rendered and counted once.
  A ``reduction`` event rewrites earlier parts of the view, so history renders again
  from the record (token counts, by text, are kept).

Feeding never changes what a step returns: a cold cache gives the same bytes and the
same report (see :func:`ctxline.view.step.plan_step`). Token counts looked up or made
while feeding are collected in :attr:`ViewCache.learned`, for the writer to store.

    cache = ViewCache()
    cache.catch_up(events, setup)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, assert_never, overload

from ctxline.record.blobs import text_ref
from ctxline.record.codec import canonical_json
from ctxline.record.events import (
    AssistantMessage,
    Compaction,
    Event,
    Guide,
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
from ctxline.render.anthropic import AnthropicAssembler
from ctxline.render.neutral import HistoryBuilder, NeutralMessage, ToolSpec
from ctxline.render.openai import OpenAIAssembler
from ctxline.sources.base import Source
from ctxline.sources.branch import BranchMark, render_branch
from ctxline.sources.guide import GuideRegistry, MessageKind, guide_version
from ctxline.sources.status import snapshot_text
from ctxline.sources.timectx import side_channel_stamp
from ctxline.tokens.counters import CountLookup, TextCounts, TokenCounter
from ctxline.view.compaction import COMPACTION_KINDS, SpanFold, compaction_block
from ctxline.view.edits import ViewEdits, fold_reference, preview
from ctxline.view.options import PrepareOptions

__all__ = [
    "Chain",
    "PreviousRequest",
    "RecordFold",
    "ViewCache",
    "ViewSetup",
    "history_renderer",
    "tool_specs",
]


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

    def feed(self, stored: StoredEvent, setup: ViewSetup) -> bool:
        """Take one event; True when it is a reduction (the history must render again)."""
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
            case Reduction():
                self.actions.append(event)
                self.edits.apply(event)
                self.compacted = self.compacted or event.action == "compact"
                return True
            case (
                UserMessage()
                | AssistantMessage()
                | ToolResult()
                | State()
                | Rule()
                | Notification()
                | Todo()
                | Compaction()
                | StatusSnapshot()
                | ModelUsage()
                | Slot()
                | UnknownEvent()
            ):
                pass  # the sources' folds and the history take these
            case _:
                assert_never(event)
        return False


@dataclass
class PreviousRequest:
    step: int
    frozen: list[NeutralMessage]
    frozen_count: int
    generation: int
    fingerprint: tuple[str, str]
    live: list[NeutralMessage]
    tail: tuple[str, ...]


def history_renderer(sources: Sequence[Source]) -> Callable[[Event], NeutralMessage | None]:
    """How history shows the events that are not messages: ctxline's own status snapshots,
    then the first source that renders the event (None: not shown)."""

    def render(event: Event) -> NeutralMessage | None:
        if isinstance(event, StatusSnapshot):  # ctxline's own kind: its text is ctxline's
            return NeutralMessage("user", snapshot_text(event))
        for source in sources:
            block = source.history(event)
            if block is not None:
                return NeutralMessage("user", block.render())
        return None

    return render


@dataclass
class ViewCache:
    """Per-timeline memo of the record fold and the rendered history (see module docstring)."""

    record: RecordFold = field(default_factory=RecordFold)
    started: bool = False
    builder: HistoryBuilder = field(default_factory=HistoryBuilder)
    fed_seq: int = 0
    fed_id: str = ""
    dirty: bool = False
    marks_fed: int = 0
    generation: int = 0
    frozen_tokens: list[int] = field(default_factory=list)
    frozen_prefix_sum: list[int] = field(default_factory=lambda: [0])
    openai: OpenAIAssembler = field(default_factory=OpenAIAssembler)
    anthropic: AnthropicAssembler = field(default_factory=AnthropicAssembler)
    previous: PreviousRequest | None = None
    candidate: PreviousRequest | None = None
    """The latest rendering of the step being planned (it becomes ``previous`` when kept)."""
    counter_name: str = ""
    view_key: tuple[object, ...] = ()
    """The options the history was rendered with (offload limit, time stamps)."""
    compact_shown: bool = False
    handles: dict[int, str] = field(default_factory=dict)
    span: SpanFold = field(default_factory=SpanFold)
    span_folds: dict[str, Any] = field(default_factory=dict)
    """The sources' folds fed up to the compaction's cut (what it re-affirms)."""
    span_seq: int = 0
    span_id: str = ""
    text_tokens: dict[str, int] = field(default_factory=dict)
    """Token counts by text, kept when the view is rendered again (same counter)."""
    learned: dict[str, int] = field(default_factory=dict)
    """Counts of long texts made since the writer last stored them (key → tokens)."""
    new_blobs: dict[str, str] = field(default_factory=dict)
    """Outputs newly shown as previews (handle → text), for the writer to save."""
    _sources: tuple[Source, ...] = ()

    def reset_view(self) -> None:
        """Forget the rendered history (it renders again on the next feed); keeps the
        record fold, the previous request and the token counts."""
        self.generation += 1
        self.builder = HistoryBuilder()
        self.fed_seq, self.fed_id, self.dirty, self.marks_fed = 0, "", False, 0
        self.frozen_tokens, self.frozen_prefix_sum = [], [0]
        self.openai, self.anthropic = OpenAIAssembler(), AnthropicAssembler()
        self.compact_shown = False
        self.handles = {}

    def reset(self) -> None:
        """Forget everything derived from the record (it is not the one fed so far)."""
        self.reset_view()
        self.record = RecordFold()
        self.started = False
        self.previous = None
        self.span = SpanFold()
        self.span_folds, self.span_seq, self.span_id = {}, 0, ""

    def catch_up(self, events: Sequence[StoredEvent], setup: ViewSetup) -> None:
        """Bring both layers up to the end of ``events`` (the timeline's record in seq order)."""
        if self.counter_name and self.counter_name != setup.counter.name:
            self.reset()
            self.text_tokens = {}
        self.counter_name = setup.counter.name
        rec = self.record
        if rec.seq and (
            rec.seq > len(events)
            or events[rec.seq - 1].id != rec.last_id
            or events[rec.seq - 1].seq != rec.seq
        ):
            self.reset()
            rec = self.record
        if not self.started:
            rec.start(setup)
            self.started = True
        for stored in events[rec.seq :]:
            if rec.feed(stored, setup):
                self.dirty = True
        key = (setup.options.offload_limit, setup.options.timestamps)
        if self.dirty or key != self.view_key:
            self.reset_view()
            self.view_key = key
        self._feed_history(events, setup)

    def _feed_history(self, events: Sequence[StoredEvent], setup: ViewSetup) -> None:
        if self.fed_seq and (
            self.fed_seq > len(events) or events[self.fed_seq - 1].id != self.fed_id
        ):
            self.reset_view()
        if self.builder.render_other is None:
            self.builder.render_other = history_renderer(setup.sources)
        self._sources = setup.sources
        marks = setup.branches
        compact = self.record.edits.compact
        edits = self.record.edits
        for stored in events[self.fed_seq :]:
            while self.marks_fed < len(marks) and marks[self.marks_fed].fork_seq < stored.seq:
                self._add_mark(marks[self.marks_fed])
            if compact is not None and stored.seq > compact.upto_seq:
                self._show_compaction(events, compact)
            self.fed_seq, self.fed_id = stored.seq, stored.id
            event = stored.event
            if edits.hidden(stored.seq) or isinstance(event, SystemMessage):
                continue
            if isinstance(event, ToolResult):
                stored = self._result_view(stored, event, setup)
            if setup.options.timestamps is not None:
                stored = _stamped(stored, setup.options.timestamps)
            self.builder.feed(stored)
        if compact is not None and self.fed_seq >= compact.upto_seq:
            self._show_compaction(events, compact)
        while self.marks_fed < len(marks) and marks[self.marks_fed].fork_seq <= self.fed_seq:
            self._add_mark(marks[self.marks_fed])

    def _add_mark(self, mark: BranchMark) -> None:
        self.builder.add(NeutralMessage("user", render_branch(mark)))
        self.marks_fed += 1

    def _source_reaffirm(
        self, events: Sequence[StoredEvent], upto: int, sources: Sequence[Source]
    ) -> list[str]:
        """What the sources restate at a cut at ``upto`` (their folds fed that far, once)."""
        restart = upto < self.span_seq or (
            self.span_seq and events[self.span_seq - 1].id != self.span_id
        )
        if restart or not self.span_folds:
            self.span_folds = {s.name: s.fold() for s in sources}
            self.span_seq, self.span_id = 0, ""
        for stored in events[self.span_seq : upto]:
            for source in sources:
                self.span_folds[source.name].feed(stored)
        if upto > self.span_seq:
            self.span_seq, self.span_id = upto, events[upto - 1].id
        return [b.render() for s in sources for b in s.reaffirm(self.span_folds[s.name])]

    def _show_compaction(self, events: Sequence[StoredEvent], compact: Reduction) -> None:
        if not self.compact_shown:
            extra = self._source_reaffirm(events, compact.upto_seq, self._sources)
            text = compaction_block(compact, events, self.handles, self.span, extra)
            self.builder.add(NeutralMessage("user", text))
            self.compact_shown = True

    def count_texts(self, texts: Sequence[str], setup: ViewSetup) -> list[int]:
        """Tokens of each text, memoized by text; long ones looked up in the store first."""
        memo = self.text_tokens
        missing = [t for t in dict.fromkeys(texts) if t not in memo]
        if missing:
            counts = TextCounts(setup.counter, setup.counts, self.learned)
            memo.update(zip(missing, counts.counts(missing), strict=True))
        return [memo[t] for t in texts]

    def _result_view(self, stored: StoredEvent, event: ToolResult, setup: ViewSetup) -> StoredEvent:
        """The result as the view shows it: folded, trimmed, offloaded or whole."""
        seq = stored.seq
        edits = self.record.edits
        later = edits.folded.get(seq)
        if later is not None:
            content = fold_reference(event.name or "the tool", later)
            return replace(stored, event=replace(event, content=content))
        trimmed = seq in edits.trimmed
        limit = setup.options.offload_limit
        offload = limit > 0 and len(event.content) > limit
        if not (trimmed or offload):
            return stored
        (tokens,) = self.count_texts([event.content], setup)
        if not trimmed and tokens <= limit:
            return stored
        handle = self.handles.get(seq)
        if handle is None:
            handle = self.handles[seq] = text_ref(event.content)
            self.new_blobs[handle] = event.content
        return replace(
            stored, event=replace(event, content=preview(event.content, handle, tokens=tokens))
        )


def _stamped(stored: StoredEvent, zone: str) -> StoredEvent:
    """Seed 001's side-channel time stamp on user messages and tool results.

    It comes from the append time, which never changes, so it never breaks the cache.
    """
    ev = stored.event
    stamp = side_channel_stamp(stored.at, zone)
    if isinstance(ev, UserMessage):
        return replace(stored, event=replace(ev, text=f"{stamp} {ev.text}"))
    if isinstance(ev, ToolResult):
        return replace(stored, event=replace(ev, content=f"{stamp} {ev.content}"))
    return stored
