"""Planning a step: a pure function from (record, registrations, step inputs) to what to append.

:func:`plan_step` does everything a model call needs and writes nothing: it adopts the
guide and the tools when they changed, asks every source for its part (expired rules,
the status bar, the time, dynamic items), renders and measures the whole request, runs
the reduction ladder over the pressure line, and returns a :class:`StepPlan` — the
:class:`~ctxline.view.prepare.Preparation`, the events to append in ONE atomic append
(ending with the ``request`` header), the blobs the view refers to and the token counts
it learned. The caller (:class:`ctxline.Context`) hands the plan to the timeline writer.

Same record and inputs, same bytes and same report: the cache only saves work. When it
is cold and the record has a logged request, that request is rendered first so the
prefix report compares against it exactly as a warm cache would.

The step reads no store: what it would look up is read before it and comes in the
:class:`StepRequest` — the persisted token counts of the long texts it will count
(:func:`count_keys` names them; a text not among them is counted, same number) and what
each :class:`~ctxline.sources.base.Prefetching` source read ahead (the memory overview).

    keys = count_keys(events, setup.view, cache)
    counts = store.get_token_counts(keys, setup.view.counter.name)
    plan = plan_step(events, setup, StepRequest(now, counts=counts), cache)
    writer.append(plan.events, expected_seq=plan.head, blobs=plan.blobs)
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import lru_cache

from ctxline.cost import CachePricing, cache_pricing
from ctxline.record.codec import canonical_json
from ctxline.record.events import (
    AssistantMessage,
    Event,
    Guide,
    JsonValue,
    Pending,
    Reduction,
    RequestHeader,
    StoredEvent,
    Tools,
)
from ctxline.render.neutral import ToolSpec
from ctxline.sources.base import DynamicItem, StepContext, TailItem
from ctxline.tokens.counters import PERSISTED_MIN_CHARS, TokenCounter, _sha1, get_counter
from ctxline.view.budget import BudgetInputs
from ctxline.view.cache import Chain, ViewCache, ViewSetup
from ctxline.view.candidates import Candidate
from ctxline.view.compaction import Summarizer, SummaryLines, extractive_summary
from ctxline.view.edits import ViewEdits
from ctxline.view.ladder import DEFAULT_RUNGS, Goal, LadderConfig, Rung, run_ladder
from ctxline.view.measure import LazyView, calls_text_bound
from ctxline.view.options import PrepareOptions, StepInputs
from ctxline.view.prepare import Preparation, render_step
from ctxline.view.report import Action, Considered, CostReport, TokenSections

__all__ = [
    "KnownCounts",
    "StepPlan",
    "StepRequest",
    "StepSetup",
    "count_keys",
    "plan_step",
    "tool_json",
]


def tool_json(spec: ToolSpec) -> dict[str, JsonValue]:
    return {"name": spec.name, "description": spec.description, "parameters": spec.parameters}


@dataclass(frozen=True, slots=True)
class StepSetup:
    """The registrations a step is planned with (what the app configured)."""

    view: ViewSetup
    tools: tuple[ToolSpec, ...] = ()
    """Every tool offered, in order (the app's, the sources', ctxline's built-ins)."""
    tools_json: bytes | None = None
    """The canonical JSON of ``tools`` as a ``tools`` event holds it (computed when None)."""
    summarizer: Summarizer = extractive_summary
    rungs: tuple[Rung, ...] = DEFAULT_RUNGS
    ladder: LadderConfig = field(default_factory=LadderConfig)
    new_id: Callable[[], str] | None = None
    """Ids of the planned events (None: the store assigns them; the cache is then
    re-fed from the stored events)."""
    optional_tools: tuple[str, ...] = ()
    """Names of ``tools`` that rung 3 may drop under pressure, least needed first
    (discovered schemas not used recently); the others are required."""


@dataclass(frozen=True, slots=True)
class StepRequest:
    """The inputs of one step."""

    now: datetime
    tail: tuple[str, ...] = ()
    """Blocks the app adds to the tail, rendered by the app."""
    dynamic: tuple[DynamicItem, ...] = ()
    tool_choice: str | None = None
    prefetched: Mapping[str, object] = field(default_factory=dict)
    """What each prefetching source read before the step, by source name (its
    ``prefetch()``; the source gets it as ``StepContext.prefetched``)."""
    counts: Mapping[str, int] | None = None
    """Persisted token counts read before the step (``text:<sha1>`` key → tokens, for the
    setup's counter; :func:`count_keys`): the step looks up only these. None: it looks
    them up in ``setup.view.counts`` itself (a caller that does not read ahead)."""


@dataclass(frozen=True, slots=True)
class KnownCounts:
    """Token counts read ahead of a step: a ``CountLookup`` over a mapping (no store)."""

    counts: Mapping[str, int]
    tokenizer: str

    def get_token_counts(self, event_ids: Sequence[str], tokenizer: str) -> dict[str, int]:
        if tokenizer != self.tokenizer:
            return {}
        known = self.counts
        return {key: known[key] for key in event_ids if key in known}


def count_keys(record: Sequence[StoredEvent], setup: ViewSetup, cache: ViewCache) -> list[str]:
    """The keys of the persisted counts a step on ``record`` looks up: the long texts of the
    events ``cache`` has not fed yet that it does not already hold (O(new events) on a
    warm cache; every event on a cold one). Read them before :func:`plan_step`."""
    rec = cache.record
    fed = rec.seq if cache.started else 0
    if cache.counter_name and cache.counter_name != setup.counter.name:
        fed = 0
    if fed and (fed > len(record) or record[fed - 1].id != rec.last_id):
        fed = 0  # the cache will start again
    memo = cache.text_tokens if cache.counter_name == setup.counter.name else {}
    keys: dict[str, None] = {}
    long = PERSISTED_MIN_CHARS
    for stored in record[fed:]:
        event = stored.event
        if (
            isinstance(event, AssistantMessage)
            and event.tool_calls
            and calls_text_bound(event.text, event.tool_calls, long) < long
        ):
            continue  # its text is shorter than any persisted count's
        text = cache._text_of(stored)
        if len(text) >= long and text not in memo:
            keys["text:" + _sha1(text)] = None
    return list(keys)


@dataclass(frozen=True, slots=True)
class StepPlan:
    """What one step appends (atomically, at ``head``), and the request it prepared."""

    preparation: Preparation
    events: tuple[Pending, ...]
    head: int
    blobs: tuple[str, ...] = ()
    """Texts the view shows as previews: saved as blobs with the step."""
    token_counts: Mapping[str, Mapping[str, int]] = field(default_factory=dict)


class _Step:
    """One step under construction: the planned events and the latest rendering."""

    def __init__(
        self,
        record: Sequence[StoredEvent],
        setup: StepSetup,
        request: StepRequest,
        cache: ViewCache,
    ) -> None:
        self.setup, self.request, self.cache = setup, request, cache
        self.head = record[-1].seq if record else 0
        self.planned: list[StoredEvent] = []
        self.chain = Chain(record, self.planned)
        self.tail_items: list[TailItem] = []
        self.dropped: list[str] = []
        self.tools_dropped: tuple[str, ...] = ()
        self.offered_json = b""
        self.notes: list[Action] = []
        self.deferred: list[Reduction] = []
        self.failures: list[tuple[bool, str]] = []
        self.system = ""
        self.meta: dict[str, JsonValue] = {}
        self.allowed: tuple[str, ...] | None = None
        self.prep: Preparation | None = None
        self.cost: CostReport | None = None
        self.considered: list[Considered] = []
        self._budget: BudgetInputs | None = None
        self._ids = 0

    # --- planning ---------------------------------------------------------------------

    def add(self, *events: Event) -> None:
        for event in events:
            self._ids += 1
            ident = self.setup.new_id() if self.setup.new_id else f"planned-{self._ids}"
            seq = self.head + len(self.planned) + 1
            self.planned.append(StoredEvent(seq, ident, self.request.now, event))
        self.cache.catch_up(self.chain, self.setup.view)

    def sync_guide(self) -> None:
        """Adopt the registry's guide for rendering (its event is appended at the end)."""
        rec = self.cache.record
        registry = rec.registry(self.setup.view)
        text = registry.compose()
        version = registry.version()
        # the guide rendered is always the registry's text: a recorded guide with the same
        # version but another text (written from outside) is never what the model reads
        current = (rec.guide.version, rec.guide.text) if rec.guide else None
        if current != (version, text) and (text or rec.guide):
            rec.guide = Guide(version, text)

    def inputs(self) -> StepInputs:
        tail = (*self.request.tail, *(i.text for i in self.tail_items if i.id not in self.dropped))
        meta = dict(self.meta)
        return StepInputs(
            self.request.now, tail, self.system, meta, self.request.tool_choice, self._allowed()
        )

    def _allowed(self) -> tuple[str, ...] | None:
        """The sources' allowed tools among those offered, in the tools array's order (None
        when they leave every offered tool allowed, or none of them)."""
        if self.allowed is None:
            return None
        wanted = set(self.allowed)
        offered = [t.name for t in self.cache.record.tools]
        allowed = tuple(n for n in offered if n in wanted)
        return allowed if allowed and len(allowed) < len(offered) else None

    def render(self) -> Preparation:
        self.sync_guide()
        extra: list[Action] = []  # in the ladder's order: rung 2, then rung 3
        if self.dropped:
            extra.append(Action("drop_dynamic", items=tuple(self.dropped)))
        if self.tools_dropped:
            extra.append(Action("drop_tools", items=self.tools_dropped))
        extra.extend(self.notes)
        self.prep = render_step(
            self.cache,
            self.setup.view,
            self.inputs(),
            extra_actions=extra,
            remember=False,
            cost=self.cost,
        )
        return self.prep

    # --- the Reducer protocol of the ladder --------------------------------------------

    @property
    def tokens(self) -> TokenSections:
        assert self.prep is not None
        return self.prep.report.tokens

    @property
    def total(self) -> int:
        return self.tokens.total

    @property
    def options(self) -> PrepareOptions:
        return self.setup.view.options

    @property
    def counter(self) -> TokenCounter:
        return self.setup.view.counter

    @property
    def events(self) -> Sequence[StoredEvent]:
        return self.chain

    @property
    def edits(self) -> ViewEdits:
        return self.cache.record.edits

    @property
    def summarizer(self) -> Summarizer:
        return self.setup.summarizer

    @property
    def config(self) -> LadderConfig:
        return self.setup.ladder

    def view(self) -> LazyView:
        assert self.prep is not None
        history = self.prep.history
        return LazyView(history.frozen, history.frozen_tokens, history.open, history.open_tokens)

    @property
    def budget(self) -> BudgetInputs:
        if self._budget is None:
            self._budget = self._budget_inputs()
        return self._budget

    def _budget_inputs(self) -> BudgetInputs:
        opts, budget = self.options, self.cache.record.budget
        return BudgetInputs(
            _pricing(opts.provider, opts.model, opts.cache_read, opts.cache_write),
            self.cache.record.steps,
            budget.growth_per_step,
            budget.last_history,
            budget.excess,
            budget.waited,
        )

    def candidates(self, goal: Goal, *, fresh: bool = False) -> list[Candidate]:
        cache, opts = self.cache, self.options
        frozen = len(cache.frozen_tokens)
        assert self.prep is not None
        open_assistants = sum(1 for m in self.prep.history.open if m.role == "assistant")
        index = cache.index
        newest = index.keep_from(1, open_assistants, frozen)
        keep_from = min(index.keep_from(goal.keep_groups, open_assistants, frozen), newest)
        fresh_from = frozen if fresh else newest
        return index.candidates(
            cache.builder.frozen,
            cache.frozen_tokens,
            self.chain,
            cache.record.edits,
            self._count,
            keep_from=keep_from,
            fresh_from=fresh_from,
            offload=opts.offload_limit if not fresh else min(opts.offload_limit, 1) or 1,
            min_saving=self.config.trim_min_saving,
            previews=cache.previews,
        )

    def _count(self, text: str) -> int:
        if len(text) < PERSISTED_MIN_CHARS:  # a stub or a reference: counting is cheaper
            return self.setup.view.counter.count(text)
        return self.cache.count_texts([text], self.setup.view)[0]

    def prefix(self, index: int) -> int:
        sums = self.cache.frozen_prefix_sum
        return sums[min(index, len(sums) - 1)]

    def hints(self) -> tuple[Sequence[int] | None, SummaryLines | None, Sequence[int] | None]:
        lines = self.cache.lines if self.setup.summarizer is extractive_summary else None
        return self.cache.index.users, lines, self.cache.frozen_prefix_sum

    def decide(self, report: CostReport) -> None:
        """Keep the decision for the report (put in once, when the step is done)."""
        self.cost = report

    def consider(self, considered: Considered) -> None:
        """Keep what a rung weighed for the report (put in when the step is done)."""
        self.considered.append(considered)

    def finish(self) -> Preparation:
        """The last rendering, with the cost decision and what the rungs weighed in its
        report and header (nothing in the body depends on them: no new rendering)."""
        prep = self.prep
        assert prep is not None
        considered = tuple(self.considered)
        if (self.cost is not None and prep.report.cost is not self.cost) or considered:
            new = replace(prep.report, cost=self.cost or prep.report.cost, considered=considered)
            prep = replace(prep, report=new, header=replace(prep.header, report=new.to_json()))
            self.prep = prep
        return prep

    def optional_tail(self) -> list[tuple[str, int]]:
        return [
            (i.id, i.priority)
            for i in self.tail_items
            if not i.required and i.id not in self.dropped
        ]

    def optional_tools(self) -> list[tuple[str, int]]:
        """(name, tokens of its schema) of the optional tools still offered; a tool the
        step forces (``tool_choice``) is never optional."""
        shown = {t.name: t for t in self.cache.record.tools}
        forced = self.request.tool_choice
        return [
            (name, self.counter.count(canonical_json(tool_json(shown[name])).decode()))
            for name in self.setup.optional_tools
            if name in shown and name != forced
        ]

    def drop_tools(self, names: Sequence[str]) -> None:
        """Offer the tools without ``names`` from this request on: one ``tools`` event
        (``meta.dropped``: every offered tool it leaves out; ``meta.offered``: the hash of
        the set it was cut from, so the cut stays while the app offers that set)."""
        gone = set(names)
        keep = tuple(tool_json(t) for t in self.cache.record.tools if t.name not in gone)
        left_out = [t.name for t in self.setup.tools if t.name not in {k["name"] for k in keep}]
        meta: dict[str, JsonValue] = {"dropped": list(left_out), "offered": _sha(self.offered_json)}
        self.tools_dropped = (*self.tools_dropped, *names)
        self.add(Tools(keep, meta))
        self.render()

    def reduce(self, *reductions: Reduction) -> None:
        self.add(*reductions)
        self.render()

    def drop_tail(self, ids: Sequence[str]) -> None:
        self.dropped = list(ids)
        self.render()

    def note(self, action: Action) -> None:
        self.notes.append(action)
        self.render()


def _bring_back_forced(step: _Step, choice: str | None) -> None:
    """A ``tool_choice`` that names an offered tool an earlier cut of rung 3 left out:
    the cut gets it back (same ``meta.offered``, so the cut, with it, stays)."""
    rec = step.cache.record
    if choice is None or choice in ("auto", "none", "required") or rec.tools_event is None:
        return
    if any(t.name == choice for t in rec.tools):
        return
    if not any(t.name == choice for t in step.setup.tools):
        return  # not offered by the app at all: the provider names the mistake
    shown = {t.name for t in rec.tools} | {choice}
    keep = tuple(tool_json(t) for t in step.setup.tools if t.name in shown)
    meta: dict[str, JsonValue] = dict(rec.tools_event.meta)
    meta["dropped"] = [t.name for t in step.setup.tools if t.name not in shown]
    step.add(Tools(keep, meta))


def _sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _cut_from(event: Tools | None, offered: bytes) -> bool:
    """Whether ``event`` is rung 3's cut of exactly the set offered now (it stays)."""
    return event is not None and event.meta.get("offered") == _sha(offered)


@lru_cache(maxsize=64)
def _pricing(provider: str, model: str, read: float | None, write: float | None) -> CachePricing:
    return cache_pricing(provider, model, read=read, write=write)


def _previous(record: Sequence[StoredEvent], setup: ViewSetup, cache: ViewCache) -> None:
    """A cold cache first renders the last logged request, as a warm one would have."""
    if cache.started or cache.previous is not None:
        return
    index = next(
        (i for i in range(len(record) - 1, -1, -1) if isinstance(record[i].event, RequestHeader)),
        None,
    )
    if index is None:
        return
    header = record[index].event
    assert isinstance(header, RequestHeader)
    options = PrepareOptions.from_json(header.options)
    counter = setup.counter
    name = str(header.report.get("tokenizer") or options.tokenizer)
    if name != counter.name:
        try:
            counter = get_counter(name)
        except Exception:  # an app's own counter: compare with the one given
            counter = setup.counter
    then = replace(setup, options=options, counter=counter)
    cache.catch_up(record[: header.upto_seq], then)
    render_step(cache, then, StepInputs.from_json(header.inputs))


def plan_step(
    record: Sequence[StoredEvent], setup: StepSetup, request: StepRequest, cache: ViewCache
) -> StepPlan:
    """Plan the next request on a timeline whose record is ``record`` (see the module doc).

    Raises :class:`~ctxline.errors.ContextOverflow` when protected content alone exceeds
    the input limit, :class:`~ctxline.errors.CompactionError` when the last-resort
    compaction failed; the cache then holds planned events that were never appended:
    reset it.
    """
    if request.counts is not None:  # the counts read ahead: the step opens no store
        known = KnownCounts(request.counts, setup.view.counter.name)
        setup = replace(setup, view=replace(setup.view, counts=known))
    _previous(record, setup.view, cache)
    cache.catch_up(record, setup.view)
    step = _Step(record, setup, request, cache)
    rec = cache.record
    wanted_json = setup.tools_json
    if wanted_json is None:
        wanted_json = canonical_json([tool_json(t) for t in setup.tools])
    step.offered_json = wanted_json
    if wanted_json is not rec.tools_bytes and wanted_json == rec.tools_bytes:
        rec.tools_bytes = wanted_json  # equal bytes: the next steps compare by identity
    if (
        (rec.tools_event is not None or setup.tools)
        and wanted_json != rec.tools_bytes
        and not _cut_from(rec.tools_event, wanted_json)
    ):
        step.add(Tools(tuple(tool_json(t) for t in setup.tools)))
    _bring_back_forced(step, request.tool_choice)
    ctx = StepContext(
        request.now,
        step.chain,
        setup.view.options,
        setup.view.counter,
        request.dynamic,
        request.prefetched,
    )
    for source in setup.view.sources:
        part = source.step(rec.folds[source.name], ctx)
        if part.events:
            step.add(*part.events)
        step.tail_items.extend(part.tail)
        step.system += part.system
        if part.allowed_tools is not None:  # several sources: what all of them allow
            previous = step.allowed
            step.allowed = tuple(n for n in part.allowed_tools if previous is None or n in previous)
        if part.meta:
            step.meta[source.name] = dict(part.meta)
    step.render()
    run_ladder(step, setup.rungs, setup.ladder)
    if step.total * 2 >= setup.view.options.pressure_line and record:
        cache.lines.advance(record, len(record), setup.view.counter)  # ahead of a compaction
        cache.span.advance(record, len(record))
    guide, adopted_guide = rec.guide, rec.adopted_guide
    adopted = (adopted_guide.version, adopted_guide.text) if adopted_guide is not None else None
    if guide is not None and adopted != (guide.version, guide.text):
        step.add(Guide(guide.version, guide.text))
    prep = step.finish()
    header = replace(prep.header, upto_seq=step.head + len(step.planned))
    step.add(header)
    cache.previous = cache.candidate  # the next step compares with what this one sends
    blobs = tuple(cache.new_blobs.values())
    cache.new_blobs = {}
    counts = {setup.view.counter.name: dict(cache.learned)} if cache.learned else {}
    cache.learned = {}
    pending = tuple(Pending(e.event, e.id, e.at) for e in step.planned)
    return StepPlan(replace(prep, header=header), pending, step.head, blobs, counts)
