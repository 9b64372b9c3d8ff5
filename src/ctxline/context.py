"""``Context``: one agent timeline — append what happens, prepare each request, rebuild any step.

The facade around the pure step planner: before a request it reads the events appended
since the last look (by anyone), plans the step (:func:`ctxline.view.step.plan_step`:
guide and tools adoption, expired rules, the status bar, reductions, the request header)
and hands the plan to the timeline writer as ONE atomic append. If another writer moved
the head meanwhile, it reads again and plans again. Sources are plugins
(:class:`~ctxline.sources.base.Source`); ctxline's built-in tools are (spec, handler)
pairs it answers itself.

    ctx = Context(open_store("ctxline.db"), "demo")
    ctx.append(SystemMessage("You are a support agent."), UserMessage("Cancel my plan"))
    prep = ctx.prepare(now=datetime.now(UTC))
    client.chat.completions.create(**prep.body)
    assert ctx.rebuild(prep.header.step) == prep.body_bytes
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from datetime import datetime
from typing import cast

from ctxline.errors import Conflict, CtxlineError, ValidationError
from ctxline.record.blobs import BlobStore
from ctxline.record.codec import canonical_json
from ctxline.record.events import (
    Event,
    JsonValue,
    Pending,
    Reduction,
    RequestHeader,
    StoredEvent,
    ToolCall,
    ToolResult,
)
from ctxline.record.gc_pause import gc_paused
from ctxline.record.store import MAIN, Store, new_ulid, utc_now
from ctxline.record.store.base import Clock, SearchHit
from ctxline.record.timeline import TimelineWriter, save_blobs
from ctxline.render.neutral import ToolSpec
from ctxline.sources.base import DynamicItem, Prefetching, Source
from ctxline.sources.branch import BranchMark, ancestry_marks
from ctxline.sources.defaults import default_sources
from ctxline.sources.dynamic import DynamicCallback
from ctxline.sources.guide import GuideRegistry
from ctxline.sources.status import StatusConfig
from ctxline.sources.statusbar import StatusMode
from ctxline.tokens.counters import TokenCounter, get_counter
from ctxline.tools.base import Tool, ToolOutcome, find_tool, run_tool
from ctxline.tools.builtin import BUILTIN_TOOLS
from ctxline.view.cache import BULK_EVENTS, ViewCache, ViewSetup
from ctxline.view.compaction import Summarizer, extractive_summary, plan_compaction
from ctxline.view.ladder import DEFAULT_RUNGS, LadderConfig, Rung
from ctxline.view.measure import ViewMessage
from ctxline.view.options import PrepareOptions, StepInputs
from ctxline.view.prepare import Preparation, render_step, view_messages
from ctxline.view.rebuild import rebuild_all, rebuild_request, redactions_in
from ctxline.view.step import StepRequest, StepSetup, count_keys, plan_step, tool_json

__all__ = [
    "BUILTIN_TOOLS",
    "Context",
    "ContextConfig",
    "branch_marks",
    "rebuild_all",
    "rebuild_request",
]

_PLAN_ATTEMPTS = 5
"""How often a step is planned again when another writer moved the head meanwhile."""


def branch_marks(store: Store, session: str, timeline: str) -> list[BranchMark]:
    """The fork points of ``timeline``'s ancestry, oldest first."""

    def info_of(name: str) -> tuple[str | None, int | None]:
        info = store.timeline(session, name)  # UnknownTimeline when it is not there
        return info.parent, info.fork_seq

    return ancestry_marks(timeline, info_of)


def _prefetch(sources: Sequence[Source]) -> dict[str, object]:
    """What each :class:`~ctxline.sources.base.Prefetching` source reads before a step
    (found by attribute: ``isinstance`` on the Protocol costs ~20 µs a source a step)."""
    out: dict[str, object] = {}
    for source in sources:
        if callable(getattr(source, "prefetch", None)):
            out[source.name] = cast(Prefetching, source).prefetch()
    return out


def _spec(tool: ToolSpec | Tool | Mapping[str, JsonValue]) -> ToolSpec:
    if isinstance(tool, Tool):
        return tool.spec
    if isinstance(tool, ToolSpec):
        return tool
    name = tool.get("name")
    if not isinstance(name, str) or not name:
        raise ValidationError("a tool needs a name", field="tools")
    params = tool.get("parameters") or {}
    return ToolSpec(
        name, str(tool.get("description") or ""), params if isinstance(params, dict) else {}
    )


@dataclass(frozen=True)
class ContextConfig:
    """Everything that shapes a timeline's requests besides the record: what a
    :class:`Context` takes, and what an :class:`~ctxline.runner.Agent` takes for its
    Context (one configuration, the same meaning in both).

        config = ContextConfig(status=StatusConfig(environment=detect_environment()),
                               dynamic=lambda: [DynamicItem("cart", "2 items")])
        Context(store, "s", config=config)
        Agent(client, tools, config=config)
    """

    options: PrepareOptions | None = None
    """Budget, provider, window (None: the defaults; an Agent takes its client's)."""
    guide: GuideRegistry | None = None
    """A fixed guide registry (None: the guide holds only the kinds the timeline uses)."""
    counter: TokenCounter | None = None
    clock: Clock = utc_now
    status: StatusConfig | None = None
    """The status bar: environment (cwd, OS, shell, Python), time, thresholds (None: no
    status bar on a Context; an Agent always has one unless ``status_mode="off"``)."""
    status_mode: StatusMode = "auto"
    """Where the status bar goes: ``replace`` (the tail), ``append``, ``auto``, ``off``."""
    dynamic: DynamicCallback | None = None
    """The app's state for each request (seed 003), called once per step."""
    builtin_tools: Sequence[Tool] = BUILTIN_TOOLS
    summarizer: Summarizer = extractive_summary
    """The compaction summarizer (``models.summarizer.LLMSummarizer`` asks a model)."""
    sources: Sequence[Source] = ()
    rungs: Sequence[Rung] = DEFAULT_RUNGS
    ladder: LadderConfig | None = None
    tool_choice: str | None = None
    """The default ``tool_choice`` of each request (``auto``, ``none``, ``required``, a
    tool's name); ``prepare(tool_choice=…)`` overrides it for one request."""

    def merged(self, **overrides: object) -> ContextConfig:
        """This configuration with the keyword arguments that are not None applied
        (``status_mode``/``builtin_tools``/… are applied when given at all)."""
        names = {f.name for f in fields(self)}
        unknown = sorted(set(overrides) - names)
        if unknown:
            raise ValidationError(f"unknown context setting {unknown[0]!r}", field=unknown[0])
        given = {k: v for k, v in overrides.items() if v is not None}
        return replace(self, **given) if given else self  # type: ignore[arg-type]


class Context:
    """An agent timeline with its request log. Not thread-safe: one per worker."""

    def __init__(
        self,
        store: Store,
        session: str,
        timeline: str = MAIN,
        *,
        config: ContextConfig | None = None,
        guide: GuideRegistry | None = None,
        options: PrepareOptions | None = None,
        counter: TokenCounter | None = None,
        clock: Clock | None = None,
        create: bool = True,
        status: StatusConfig | None = None,
        status_mode: StatusMode | None = None,
        dynamic: DynamicCallback | None = None,
        builtin_tools: Sequence[Tool] | None = None,
        summarizer: Summarizer | None = None,
        sources: Sequence[Source] | None = None,
        rungs: Sequence[Rung] | None = None,
        ladder: LadderConfig | None = None,
        tool_choice: str | None = None,
    ) -> None:
        """``config`` holds every setting; a keyword argument given overrides its field."""
        cfg = (config or ContextConfig()).merged(
            guide=guide,
            options=options,
            counter=counter,
            clock=clock,
            status=status,
            status_mode=status_mode,
            dynamic=dynamic,
            builtin_tools=builtin_tools,
            summarizer=summarizer,
            sources=sources,
            rungs=rungs,
            ladder=ladder,
            tool_choice=tool_choice,
        )
        self.config = cfg
        """The configuration this Context was made with (an Agent builds on it)."""
        self.store = store
        self.session = session
        self.timeline = timeline
        self.guide = cfg.guide
        """A fixed guide registry (None: the guide holds only the kinds the timeline uses)."""
        self.options = cfg.options or PrepareOptions()
        self.counter = cfg.counter or get_counter(self.options.tokenizer)
        self.clock = cfg.clock
        if create:
            store.create_session(session, exist_ok=True)
        self.writer = TimelineWriter(store, session, timeline)
        self._events: list[StoredEvent] = []
        self._cache = ViewCache()
        self._marks = branch_marks(store, session, timeline)
        self.dynamic = cfg.dynamic
        self.builtin_tools = tuple(cfg.builtin_tools)
        self.summarizer = cfg.summarizer
        self.rungs = tuple(cfg.rungs)
        self.ladder = cfg.ladder or LadderConfig()
        self.tool_choice = cfg.tool_choice
        self.sources = default_sources(
            self._marks,
            status=cfg.status,
            status_mode=cfg.status_mode,
            dynamic=cfg.dynamic is not None,
            extra=cfg.sources,
        )
        self._app_tools: tuple[ToolSpec, ...] = ()
        self._optional: tuple[str, ...] = ()
        self._offered: tuple[tuple[ToolSpec, ...], bytes] | None = None
        self._last: Preparation | None = None
        self.refresh()

    # --- the record -------------------------------------------------------------------

    @property
    def events(self) -> list[StoredEvent]:
        return self._events

    def refresh(self) -> list[StoredEvent]:
        """Read the events appended since the last look (by anyone); returns them."""
        after = self._events[-1].seq if self._events else 0
        new = self.store.read(self.session, self.timeline, after_seq=after)
        self._events.extend(new)
        return new

    def reload(self) -> None:
        """Read the whole timeline again and drop what was rendered from it: after a
        redaction (``forget``) the next request is built from the tombstones, not from
        the events this Context had read before."""
        self._events = self.store.read(self.session, self.timeline)
        self._cache = ViewCache()

    def append(
        self, *events: Event | Pending, expected_seq: int | None = None
    ) -> list[StoredEvent]:
        """Append atomically to this timeline (after catching up with other writers).

        Long tool results are saved as blobs first, so ``read_result`` can page through
        any result the view shows as a preview. ctxline's own kinds are refused.
        """
        self.refresh()
        stored = self.writer.append(list(events), expected_seq=expected_seq)
        self._events.extend(stored)
        self._count_ahead(stored)
        return stored

    def _count_ahead(self, stored: Sequence[StoredEvent]) -> None:
        """Count new long messages now (and the stubs of new results), so the next
        ``prepare`` finds them: O(new) either way; here it is off the model call's path."""
        self._cache.ahead(stored, self._setup(None).view)

    # --- tools ------------------------------------------------------------------------

    @property
    def tools(self) -> tuple[Tool, ...]:
        """The tools ctxline answers itself: the built-ins and the sources' tools."""
        return (*self.builtin_tools, *(t for s in self.sources for t in s.tools()))

    def offered(self) -> tuple[ToolSpec, ...]:
        """Every tool schema the next request offers, in order."""
        return (*self._app_tools, *(t.spec for t in self.tools))

    def set_tools(
        self,
        tools: Sequence[ToolSpec | Tool | Mapping[str, JsonValue]],
        *,
        optional: Sequence[str] = (),
    ) -> bool:
        """Offer these tool schemas (and ctxline's own) from the next request on.

        Returns whether the offered set changed; the ``tools`` event is recorded with the
        next request. An app tool may not take the name of one of ctxline's tools.
        ``optional`` names the tools the ladder may drop under pressure (rung 3), least
        needed first; a cut stays until the offered set changes.
        """
        wanted = tuple(_spec(t) for t in tools)
        reserved = {t.name for t in self.tools}
        clash = [t.name for t in wanted if t.name in reserved]
        if clash:
            raise ValidationError(f"tool names {clash} are ctxline's built-in tools", field="tools")
        changed = wanted != self._app_tools
        self._app_tools = wanted
        self._optional = tuple(optional)
        return changed

    def call_tool(self, call: ToolCall) -> ToolOutcome | None:
        """Answer a call to one of ctxline's tools (None when the call is the app's to run).

        Nothing is appended: append ``outcome.result(call)`` and ``outcome.events``
        (:meth:`record_outcome` does both, atomically).
        """
        tool = find_tool(self.tools, call.name)
        if tool is None:
            return None
        return run_tool(tool, call, self)

    def record_outcome(self, call: ToolCall, outcome: ToolOutcome) -> list[StoredEvent]:
        """Append a tool's result and the events it produced, in one append."""
        return self.append(outcome.result(call), *outcome.events)

    def run_builtin(self, call: ToolCall) -> ToolResult | None:
        """The result of a call to a built-in tool, or None when ``call`` is the app's to run.

        Events the tool produced (a todo change) are appended now; append the result.
        ``read_result`` returns saved bytes and never runs anything again.
        """
        outcome = self.call_tool(call)
        if outcome is None:
            return None
        if outcome.events:
            self.append(*outcome.events)
        return outcome.result(call)

    # --- ToolEnv ----------------------------------------------------------------------

    @property
    def blobs(self) -> BlobStore:
        return self.store.blobs

    def search(self, query: str, limit: int) -> Sequence[SearchHit]:
        return self.store.search(self.session, query, timeline=self.timeline, limit=limit)

    def fold(self, source: str) -> object | None:
        self.refresh()
        self._cache.catch_up(self._events, self._setup(None).view)
        return self._cache.record.folds.get(source)

    # --- requests ---------------------------------------------------------------------

    def _setup(self, options: PrepareOptions | None) -> StepSetup:
        opts = options or self.options
        view = ViewSetup(
            self.sources, opts, self.counter, tuple(self._marks), self.guide, self.store
        )
        offered = self.offered()
        if self._offered is None or self._offered[0] != offered:
            self._offered = (offered, canonical_json([tool_json(t) for t in offered]))
        return StepSetup(
            view,
            offered,
            self._offered[1],
            self.summarizer,
            self.rungs,
            self.ladder,
            new_ulid,
            self._optional,
        )

    def prepare(
        self,
        *,
        now: datetime | None = None,
        tail: Sequence[str] = (),
        options: PrepareOptions | None = None,
        log: bool = True,
        tool_choice: str | None = None,
    ) -> Preparation:
        """The request for the next model call; its step is one atomic append unless ``log=False``.

        Over the pressure line the reduction ladder runs first (its edits are part of the
        step's append); :class:`~ctxline.errors.ContextOverflow` if protected content alone
        exceeds the input limit, and then nothing is written. ``log=False`` appends nothing
        (the next request is planned from the record as it is).
        """
        now = now or self.clock()
        setup = self._setup(options)
        dynamic: tuple[DynamicItem, ...] = tuple(self.dynamic()) if self.dynamic else ()
        choice = tool_choice if tool_choice is not None else self.tool_choice
        for _ in range(_PLAN_ATTEMPTS):
            self.refresh()
            # what the step would read from the store, read now: the step itself is pure
            bulk = len(self._events) - self._cache.record.seq >= BULK_EVENTS
            with gc_paused() if bulk else contextlib.nullcontext():  # see ViewCache.catch_up
                keys = count_keys(self._events, setup.view, self._cache)
                counts = self.store.get_token_counts(keys, self.counter.name) if keys else {}
                prefetched = _prefetch(setup.view.sources)
                request = StepRequest(now, tuple(tail), dynamic, choice, prefetched, counts)
                try:
                    plan = plan_step(self._events, setup, request, self._cache)
                except CtxlineError:
                    self._cache.reset()  # it holds planned events that were never appended
                    raise
            if not log:
                self._cache.reset()
                save_blobs(self.store.blobs, (), plan.blobs)  # its handles must read back
                self._last = plan.preparation
                return plan.preparation
            try:
                stored = self.writer.append(
                    plan.events,
                    expected_seq=plan.head,
                    authority="ctxline",
                    blobs=plan.blobs,
                    token_counts=plan.token_counts,
                )
            except Conflict:
                self._cache.reset()
                continue
            self._events.extend(stored)
            header = stored[-1].event
            assert isinstance(header, RequestHeader)
            self._last = replace(plan.preparation, header=header)
            return self._last
        raise Conflict(self.session, self.timeline, self._events[-1].seq if self._events else 0, -1)

    def compact(
        self,
        summarizer: Summarizer | None = None,
        *,
        now: datetime | None = None,
        target: int | None = None,
    ) -> Reduction | None:
        """Compact the current view now (outside a step) and append the ``reduction``.

        ``target`` is the token total the view should come under (default: the options'
        target line). Returns None when there is no span to cut; a summarizer failure
        appends nothing (the last valid summary stays in place) and raises.
        """
        self.refresh()
        setup = self._setup(None)
        cache = ViewCache()
        cache.catch_up(self._events, setup.view)
        prep = render_step(cache, setup.view, StepInputs(now=now or self.clock()))
        view = view_messages(cache, setup.view)
        history = sum(vm.tokens for vm in view)
        previous = cache.record.edits.compact
        opts = self.options
        reduction = plan_compaction(
            view,
            self._events,
            fixed_tokens=prep.report.tokens.total - history,
            target=target if target is not None else opts.target_line,
            counter=self.counter,
            summary_tokens=opts.summary_tokens,
            previous_upto=previous.upto_seq if previous is not None else 0,
            summarizer=summarizer or self.summarizer,
        )
        if reduction is None:
            return None
        head = self._events[-1].seq if self._events else 0
        stored = self.writer.append([reduction], expected_seq=head, authority="ctxline")
        self._events.extend(stored)
        return reduction

    def view(self) -> list[ViewMessage]:
        """The history of the last prepared request, message by message with its tokens."""
        return list(self._last.messages) if self._last is not None else []

    def requests(self) -> list[RequestHeader]:
        self.refresh()
        return [ev.event for ev in self._events if isinstance(ev.event, RequestHeader)]

    def rebuild_all(self) -> Iterator[tuple[RequestHeader, Preparation]]:
        """Every logged request of this timeline, rebuilt and checked, in step order
        (the record's hash chain first: a silently changed event is an IntegrityError)."""
        self.refresh()
        self.store.verify_chain(self.session, self.timeline).raise_if_broken()
        return rebuild_all(self._events, self._marks, self.counter, self.sources)

    def redactions(self, step: int) -> tuple[str, ...]:
        """Why logged step ``step``'s record was redacted since (empty: it was not)."""
        self.refresh()
        header = next(
            (e.event for e in self._events if isinstance(e.event, RequestHeader) and e.event.step == step),
            None,
        )
        return () if header is None else redactions_in(self._events, header)

    def rebuild(self, step: int) -> bytes:
        """The body of logged step ``step``, rebuilt from the record; checked against its
        sha256 (and the record against its hash chain)."""
        self.refresh()
        self.store.verify_chain(self.session, self.timeline).raise_if_broken()
        return rebuild_request(self._events, step, self._marks, self.counter, self.sources)[
            1
        ].body_bytes
