"""The folds a step reads, kept from step to step: the record fold and the rendered history.

Events are fed once, in order, into two layers:

- the **record fold** (:class:`~ctxline.view.fold.RecordFold`): persona, the adopted
  guide and tools, the request count, the reductions in force, the auto guide's kinds,
  every source's fold and the budget's. It only moves forward; it starts over only when
  the record is not the continuation of what it was fed (another timeline, a fork);
- the **history** (:class:`ViewCache`): the paired messages with reductions, offload
  previews and side-channel stamps applied, frozen messages rendered and counted once,
  and the index of edits the budget may still make (:mod:`ctxline.view.candidates`).

A ``reduction`` event changes earlier parts of the view without re-rendering the rest:
folds and trims replace the messages they touch (new lists, so earlier preparations keep
theirs) and the renderers re-serialize only those; a compaction renders again from its
cut, which is the recent tail. Token counts, by text, are kept.

Feeding never changes what a step returns: a cold cache gives the same bytes and the
same report (see :func:`ctxline.view.step.plan_step`). Token counts looked up or made
while feeding are collected in :attr:`ViewCache.learned`, for the writer to store.

    cache = ViewCache()
    cache.catch_up(events, setup)
"""

from __future__ import annotations

import contextlib
import copy
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from itertools import accumulate
from typing import Any

from ctxline.record.blobs import text_ref
from ctxline.record.events import (
    AssistantMessage,
    Reduction,
    Rule,
    StoredEvent,
    SystemMessage,
    ToolResult,
    UserMessage,
)
from ctxline.record.gc_pause import gc_paused
from ctxline.render.anthropic import AnthropicAssembler
from ctxline.render.neutral import HistoryBuilder, NeutralMessage, ToolSpec, escape_json
from ctxline.render.openai import OpenAIAssembler
from ctxline.sources.base import Source
from ctxline.sources.branch import BranchMark, render_branch
from ctxline.sources.rules import ended_rule_block
from ctxline.tags import escape
from ctxline.tokens.counters import PERSISTED_MIN_CHARS, TextCounts
from ctxline.view.candidates import EditIndex, kept_whole
from ctxline.view.compaction import SpanFold, SummaryLines, compaction_block
from ctxline.view.edits import (
    HUGE_CHARS,
    READER,
    elide_arguments,
    fold_reference,
    line_count,
    preview,
    reader_of,
    trimmed,
)
from ctxline.view.fold import BudgetFold, Chain, RecordFold, ViewSetup, tool_specs
from ctxline.view.measure import FRAMING_TOKENS, message_text
from ctxline.view.showing import PreviousRequest, history_renderer, stamped

__all__ = [
    "BULK_EVENTS",
    "BudgetFold",
    "Chain",
    "PreviousRequest",
    "RecordFold",
    "ViewCache",
    "ViewSetup",
    "history_renderer",
    "tool_specs",
]


_PLAIN = re.compile(r"[A-Za-z0-9_.:-]{1,64}")
"""A tool name a per-call label shows bare (others as a JSON string: one line, quoted)."""



BULK_EVENTS = 1_000
"""A catch-up feeding at least this many events pauses the cycle collector (see
:meth:`ViewCache.catch_up`); a step's few new events never do."""

_MADE_CHARS = 1_000_000
"""Results longer than this keep the handle and preview :meth:`ViewCache.ahead` made."""

@dataclass
class ViewCache:
    """Per-timeline memo of the record fold and the rendered history (see module docstring)."""

    record: RecordFold = field(default_factory=RecordFold)
    started: bool = False
    builder: HistoryBuilder = field(default_factory=HistoryBuilder)
    escaped: dict[str, str] = field(default_factory=dict)
    """``tags.escape`` by text: a view rendered again (after a compaction) escapes nothing twice."""
    fed_seq: int = 0
    fed_id: str = ""
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
    """The options the history was rendered with (fresh limit, time stamps, reader)."""
    reader: str | None = READER
    """The read-back tool the offered tools hold (None: no stand-in points at a tool)."""
    compact_shown: bool = False
    handles: dict[int, str] = field(default_factory=dict)
    span: SpanFold = field(default_factory=SpanFold)
    span_folds: dict[str, Any] = field(default_factory=dict)
    """The sources' folds fed up to the compaction's cut (what it re-affirms)."""
    span_seq: int = 0
    span_id: str = ""
    lines: SummaryLines = field(default_factory=SummaryLines)
    """The default summary's lines, made ahead of need (see :class:`SummaryLines`)."""
    index: EditIndex = field(default_factory=EditIndex)
    previews: set[int] = field(default_factory=set)
    """Seqs of results shown as previews from the start (over the fresh limit)."""
    events: Sequence[StoredEvent] = ()
    """The events last caught up with (the record, and a step's planned events)."""
    pending: list[Reduction] = field(default_factory=list)
    text_tokens: dict[str, int] = field(default_factory=dict)
    """Token counts by text, kept when the view is rendered again (same counter)."""
    learned: dict[str, int] = field(default_factory=dict)
    """Counts of long texts made since the writer last stored them (key → tokens)."""
    new_blobs: dict[str, str] = field(default_factory=dict)
    """Texts newly shown only through a handle (handle → text), for the writer to save."""
    made: dict[tuple[object, ...], str] = field(default_factory=dict)
    """Handles (``(seq,)`` → handle) and previews (``(seq, handle, tokens, reader)`` →
    text) of the latest results :meth:`ahead` worked on, for the step that shows them:
    each is a full pass over a result (a 200 MB one: hashed, its lines counted, issue 25).
    Only the latest batch's are kept."""
    reader_tools: tuple[ToolSpec, ...] | None = None
    """The offered tools :attr:`reader` was found among."""
    tools_json: tuple[tuple[ToolSpec, ...], str] = ((), "")
    """The offered tools and their canonical JSON (what the report counts), made once
    per ``tools`` event: a step with 2,000 tools serializes no schema."""
    _sources: tuple[Source, ...] = ()

    def fork(self) -> ViewCache:
        """An independent copy, to feed on from here while this one stays as it is (a
        checkpoint: the inspector rebuilds a late step from the nearest one, not from seq 1).

        A deep copy, except for what is never changed in place: the events fed (the
        record), the memos whose values are immutable, the seqs of the reductions in
        force and the span fold's snapshots (copied one level: at 60,000 events a fork
        takes a few milliseconds). The renderers' running sha256 states are copied with
        ``hashlib``'s own ``copy``.
        """
        memo: dict[int, Any] = {id(self.events): self.events}
        for assembler in (self.openai, self.anthropic):
            stream = assembler._stream  # the one place a hash state is kept
            memo[id(stream.digest)] = stream.digest.copy()
            for _, digest in stream.marks:
                memo[id(digest)] = digest.copy()
        for by_key in (
            self.record.call_numbers,  # one entry per call: the largest part by far
            self.text_tokens,
            self.escaped,
            self.learned,
            self.new_blobs,
            self.handles,
        ):
            memo[id(by_key)] = dict(by_key)
        edits = self.record.edits  # the reductions in force: seqs, changed in place
        for seqs in (edits.trimmed, edits.short, edits.texts):
            memo[id(seqs)] = set(seqs)
        memo[id(edits.folded)] = dict(edits.folded)
        # the span fold's snapshots are copies, only ever appended or cut, never changed
        memo[id(self.span.snapshots)] = list(self.span.snapshots)
        return copy.deepcopy(self, memo)

    def reset_view(self) -> None:
        """Forget the rendered history (it renders again on the next feed); keeps the
        record fold, the previous request and the token counts."""
        self.generation += 1
        self.builder = HistoryBuilder(escape=self._escape)
        self.fed_seq, self.fed_id, self.marks_fed = 0, "", 0
        self.frozen_tokens, self.frozen_prefix_sum = [], [0]
        self.openai, self.anthropic = OpenAIAssembler(), AnthropicAssembler()
        self.compact_shown = False
        self.handles = {}
        # the edited forms' sizes do not change (the memo's keys name the reader)
        self.index = EditIndex(memo=self.index.memo, reader=self.reader)
        self.previews = set()

    def _escape(self, text: str) -> str:
        found = self.escaped.get(text)
        if found is None:
            found = self.escaped[text] = escape(text)
        return found

    def reset(self) -> None:
        """Forget everything derived from the record (it is not the one fed so far)."""
        self.reset_view()
        self.index = EditIndex(reader=self.reader)
        self.escaped = {}
        self.record = RecordFold()
        self.started = False
        self.previous = None
        self.span = SpanFold()
        self.span_folds, self.span_seq, self.span_id = {}, 0, ""
        self.lines = SummaryLines()
        self.pending = []

    def catch_up(self, events: Sequence[StoredEvent], setup: ViewSetup) -> None:
        """Bring both layers up to the end of ``events`` (the timeline's record in seq order).

        A bulk feed (a Context opened on a long session, a cold rebuild) runs with the
        cycle collector paused: feeding 60,000 events builds a dict entry or a message per
        event, none in a cycle, and the collector's full passes over the growing heap were
        a quarter of opening a 20,000-step session and preparing (issue 25)."""
        bulk = len(events) - self.record.seq >= BULK_EVENTS
        with gc_paused() if bulk else contextlib.nullcontext():
            self._catch_up(events, setup)

    def _catch_up(self, events: Sequence[StoredEvent], setup: ViewSetup) -> None:
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
        self.events = events
        cut = self._span_hint(events) if rec.seq == 0 and not self.span_seq else -1
        for stored in events[rec.seq :]:
            reduction = rec.feed(stored, setup)
            if reduction is not None and self.fed_seq:
                self.pending.append(reduction)
            if stored.seq == cut:  # the sources' folds as the compaction re-affirms them
                self._keep_span(rec.folds, stored)
        # no tools event: nothing is offered (builtin tools off, an integration's own tools)
        if rec.tools_event is None:
            self.reader = None
        elif rec.tools is not self.reader_tools:  # once per tools event, not per step
            self.reader = reader_of(t.name for t in rec.tools)
            self.reader_tools = rec.tools
        opts = setup.options
        key = (
            opts.fresh_limit,
            opts.timestamps,
            self.reader,
            opts.call_labels,
            opts.hide_ended_rules,
        )
        if key != self.view_key:
            self.reset_view()
            self.view_key = key
        if rec.ended_new:
            # a rule ended whose block is rendered already: it shows without its text now
            if opts.hide_ended_rules and self.fed_seq and min(rec.ended_new) <= self.fed_seq:
                self.reset_view()
            rec.ended_new.clear()
        if self.pending:
            if not self._patch(self.pending, events, setup):
                self.reset_view()
            self.pending = []
        self._feed_history(events, setup)
        self.sync_frozen(setup)

    # --- feeding --------------------------------------------------------------------

    def _feed_history(self, events: Sequence[StoredEvent], setup: ViewSetup) -> None:
        if self.fed_seq and (
            self.fed_seq > len(events) or events[self.fed_seq - 1].id != self.fed_id
        ):
            self.reset_view()
        if self.builder.render_other is None:
            self.builder.render_other = history_renderer(setup.sources)
            self.builder.escape = self._escape
        self._sources = setup.sources
        marks = setup.branches
        compact = self.record.edits.compact
        edits = self.record.edits
        hide_ended, ended = setup.options.hide_ended_rules, self.record.ended_rules
        for index in self._to_feed(len(events)):
            stored = events[index]
            while self.marks_fed < len(marks) and marks[self.marks_fed].fork_seq < stored.seq:
                self._add_mark(marks[self.marks_fed])
            if compact is not None and stored.seq > compact.upto_seq:
                self._show_compaction(events, compact)
            self.fed_seq, self.fed_id = stored.seq, stored.id
            event = stored.event
            if edits.hidden(stored.seq) or isinstance(event, SystemMessage):
                continue
            if hide_ended and isinstance(event, Rule) and stored.seq in ended:
                self._add_ended_rule(stored, event)
                continue
            self.builder.feed(self._view_event(stored, setup))
        if compact is not None and self.fed_seq >= compact.upto_seq:
            self._show_compaction(events, compact)
        while self.marks_fed < len(marks) and marks[self.marks_fed].fork_seq <= self.fed_seq:
            self._add_mark(marks[self.marks_fed])

    def _to_feed(self, end: int) -> Iterable[int]:
        """Indexes of the events still to feed; a compacted span is skipped but for the
        user messages it keeps (its other events show nothing)."""
        compact = self.record.edits.compact
        start = self.fed_seq
        if compact is None or start >= compact.upto_seq:
            return range(start, end)
        kept = [seq - 1 for seq in compact.keep if start < seq <= compact.upto_seq]
        return [*kept, *range(compact.upto_seq, end)]

    def _view_event(self, stored: StoredEvent, setup: ViewSetup) -> StoredEvent:
        """The event as the view shows it (edits, previews, stamps applied)."""
        event = stored.event
        if isinstance(event, ToolResult):
            stored = self._result_view(stored, event, setup)
        elif isinstance(event, AssistantMessage):
            edits = self.record.edits
            if stored.seq in edits.short:
                calls = []
                for call in event.tool_calls:
                    args, texts = elide_arguments(call.arguments, reader=self.reader)
                    self.new_blobs.update(texts)
                    calls.append(replace(call, arguments=args))
                event = replace(event, tool_calls=tuple(calls))
            if stored.seq in edits.texts:
                (tokens,) = self.count_texts([event.text], setup)
                handle = text_ref(event.text)
                self.new_blobs[handle] = event.text
                text = preview(event.text, handle, tokens=tokens, noun="message", reader=self.reader)
                event = replace(event, text=text)
            stored = replace(stored, event=event)
        if setup.options.timestamps is not None:
            stored = stamped(stored, setup.options.timestamps)
        return stored

    def _add_ended_rule(self, stored: StoredEvent, event: Rule) -> None:
        """A set/replace a later op ended: shown where the sources show it, as its
        attributes with ``ended="yes"`` and no text (none when no source shows rules)."""
        render = self.builder.render_other
        if render is None or render(event) is None:
            return
        self.builder.add(NeutralMessage("user", ended_rule_block(event).render(), seq=stored.seq))

    def _add_mark(self, mark: BranchMark) -> None:
        self.builder.add(NeutralMessage("user", render_branch(mark)))
        self.marks_fed += 1

    @staticmethod
    def _span_hint(events: Sequence[StoredEvent]) -> int:
        """The cut of the record's latest compaction (-1: none), found from the end: a cold
        fold keeps a copy of the sources' folds there, so :meth:`_source_reaffirm` does not
        feed them the whole record again (a fold fed up to a cut at or before the one in
        force is what it feeds on from; a later one makes it start over)."""
        for stored in reversed(events):
            event = stored.event
            if isinstance(event, Reduction) and event.action == "compact":
                return event.upto_seq
        return -1

    def _keep_span(self, folds: dict[str, Any], at: StoredEvent) -> None:
        """Copies of ``folds`` as the span folds fed up to ``at``; none when a fold cannot
        be copied (an app's fold holding a lock or a connection): then they are fed."""
        try:
            copies = {name: copy.deepcopy(fold) for name, fold in folds.items()}
        except Exception:  # any fold an app wrote: copying is only a shortcut
            return
        self.span_folds, self.span_seq, self.span_id = copies, at.seq, at.id

    def _source_reaffirm(self, events: Sequence[StoredEvent], upto: int) -> list[str]:
        """What the sources restate at a cut at ``upto`` (their folds fed that far, once)."""
        sources = self._sources
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
            extra = self._source_reaffirm(events, compact.upto_seq)
            text = compaction_block(compact, events, self.handles, self.span, extra, reader=self.reader)
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

    def ahead(self, stored: Sequence[StoredEvent], setup: ViewSetup) -> None:
        """Work the next step would do for these new events, done now (off the path of the
        model call): long results counted, and the sizes of their stub and preview forms
        (what the budget weighs their edits by). The result is the same either way."""
        if setup.options.timestamps is not None:
            return
        long = [t for t in map(self._text_of, stored) if len(t) >= PERSISTED_MIN_CHARS]
        self.count_texts(long, setup)
        results = [(e.seq, e.event) for e in stored if isinstance(e.event, ToolResult)]
        self.made.clear()
        for seq, event in results:
            if len(event.content) < 200:  # under any stub: never trimmed
                continue
            (tokens,) = self.count_texts([event.content], setup)
            handle = text_ref(event.content)
            if len(event.content) > _MADE_CHARS:
                self.made[(seq,)] = handle
            if kept_whole(event):
                continue
            reader = self.reader
            lines = line_count(event.content) if len(event.content) > HUGE_CHARS else None
            stub = trimmed(event.content, handle, tokens=tokens, reader=reader, lines=lines)
            forms = {"trim": stub}
            if tokens > setup.options.offload_limit:
                forms["offload"] = preview(
                    event.content, handle, tokens=tokens, reader=reader, lines=lines
                )
                if len(event.content) > _MADE_CHARS:
                    self.made[(seq, handle, tokens, reader)] = forms["offload"]
            # in the memo by text too: an edit that shows one of them finds its count
            for kind, n in zip(forms, self.count_texts(list(forms.values()), setup), strict=True):
                self.index.memo[self.index.memo_key(seq, kind)] = n + FRAMING_TOKENS

    def _text_of(self, stored: StoredEvent) -> str:
        """The text a new message will be counted by (as the builder will render it)."""
        event = stored.event
        if isinstance(event, ToolResult):
            return event.content
        if isinstance(event, UserMessage):
            return self._escape(event.text)
        if isinstance(event, AssistantMessage) and event.tool_calls:
            calls = tuple(replace(c, arguments=escape_json(c.arguments, self._escape)) for c in event.tool_calls)
            return message_text(NeutralMessage("assistant", self._escape(event.text), calls))
        if isinstance(event, AssistantMessage):
            return self._escape(event.text)
        return ""

    def sync_frozen(self, setup: ViewSetup) -> None:
        """Count and index the messages that froze since the last call."""
        frozen = self.builder.frozen
        done = len(self.frozen_tokens)
        if done >= len(frozen):
            return
        new = frozen[done:]
        counts = [n + FRAMING_TOKENS for n in self.count_texts([message_text(m) for m in new], setup)]
        self.frozen_tokens.extend(counts)
        self.frozen_prefix_sum.extend(accumulate(counts, initial=self.frozen_prefix_sum[-1]))
        del self.frozen_prefix_sum[done + 1]  # accumulate repeats its initial value
        events, edits = self.events, self.record.edits
        for offset, message in enumerate(new):
            seq = message.seq
            event = events[seq - 1].event if 0 < seq <= len(events) else None
            self.index.add(done + offset, message, event, edits)

    def _result_view(self, stored: StoredEvent, event: ToolResult, setup: ViewSetup) -> StoredEvent:
        """The result as the view shows it (:meth:`_result_form`), with its per-call label
        first when the options ask for it."""
        shown = self._result_form(stored, event, setup)
        labels = setup.options.call_labels
        number = self.record.call_number(event.call_id, stored.seq) if labels else None
        if number is None:
            return shown
        assert isinstance(shown.event, ToolResult)
        name = number[1]  # the builder escapes the whole text: no escaping here
        shown_name = name if _PLAIN.fullmatch(name) else json.dumps(name, ensure_ascii=False)
        label = f"[call #{number[0]} of {shown_name}]\n"
        return replace(shown, event=replace(shown.event, content=label + shown.event.content))

    def _result_form(self, stored: StoredEvent, event: ToolResult, setup: ViewSetup) -> StoredEvent:
        """The result as the view shows it: folded, trimmed, as a preview or whole."""
        seq = stored.seq
        edits = self.record.edits
        later = edits.folded.get(seq)
        if later is not None:
            content = fold_reference(event.name or "the tool", later)
            return replace(stored, event=replace(event, content=content))
        if seq in edits.trimmed:
            (tokens,) = self.count_texts([event.content], setup)
            handle = self._handle(seq, event.content)
            form = trimmed if seq in edits.short else preview
            content = form(event.content, handle, tokens=tokens, reader=self.reader)
            return replace(stored, event=replace(event, content=content))
        limit = setup.options.fresh_limit
        if not (limit > 0 and len(event.content) > limit) or event.meta.get("trimmable") is False:
            return stored
        (tokens,) = self.count_texts([event.content], setup)
        if tokens <= limit:
            return stored
        self.previews.add(seq)
        handle = self._handle(seq, event.content)
        content = self.made.pop((seq, handle, tokens, self.reader), "") or preview(
            event.content, handle, tokens=tokens, reader=self.reader
        )
        return replace(stored, event=replace(event, content=content))

    def _handle(self, seq: int, content: str) -> str:
        handle = self.handles.get(seq)
        if handle is None:
            made = self.made.pop((seq,), "")
            handle = self.handles[seq] = made or text_ref(content)
            self.new_blobs[handle] = content
        return handle

    # --- edits in place -------------------------------------------------------------

    def _patch(
        self, reductions: Sequence[Reduction], events: Sequence[StoredEvent], setup: ViewSetup
    ) -> bool:
        """Apply folds and trims to the frozen messages they touch; False when the view
        must render again instead (a compaction, or an edit of a message not frozen)."""
        seqs: list[int] = []
        for reduction in reductions:
            if reduction.action == "compact":
                return False
            seqs.extend(reduction.seqs if reduction.action == "trim" else map(int, reduction.refs))
        where = self.index.seq_index
        if any(seq not in where or where[seq] >= len(self.frozen_tokens) for seq in seqs):
            return False
        frozen = list(self.builder.frozen)
        changed: dict[int, NeutralMessage] = {}
        escape = self.builder.escape
        for seq in seqs:
            i = where[seq]
            old = frozen[i]
            if old.seq != seq:
                return False
            shown = self._view_event(events[seq - 1], setup).event
            if isinstance(shown, ToolResult) and old.role == "tool":
                new = replace(old, text=escape(shown.content))
            elif isinstance(shown, AssistantMessage) and old.role == "assistant":
                calls = tuple(
                    replace(c, arguments=escape_json(s.arguments, escape))
                    for c, s in zip(old.tool_calls, shown.tool_calls, strict=True)
                )
                new = replace(old, text=escape(shown.text), tool_calls=calls)
            else:
                return False
            frozen[i] = changed[i] = new
        self.builder.frozen = frozen
        counts = self.count_texts([message_text(m) for m in changed.values()], setup)
        tokens = list(self.frozen_tokens)
        for i, n in zip(changed, counts, strict=True):
            tokens[i] = n + FRAMING_TOKENS
        first = min(changed)
        self.frozen_tokens = tokens
        self.frozen_prefix_sum = [
            *self.frozen_prefix_sum[:first],
            *accumulate(tokens[first:], initial=self.frozen_prefix_sum[first]),
        ]
        self.openai.patch(frozen, sorted(changed))
        self.anthropic.patch(frozen, sorted(changed))
        self.index.edited(seqs, self.record.edits)
        self.generation += 1
        return True
