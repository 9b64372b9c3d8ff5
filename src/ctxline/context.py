"""``Context``: one agent timeline — append what happens, prepare each request, rebuild any step.

This is the layer with I/O around the pure :func:`~ctxline.view.prepare.prepare`. Before a
request it brings the record up to date (new events are read once, not the whole
timeline), adopts the guide if the registered kinds changed (a ``guide`` event),
records the ``expired`` op of rules whose ``expires_at`` has passed, prepares, and logs
a ``request`` header carrying what is needed to rebuild the body byte for byte.

    ctx = Context(open_store("ctxline.db"), "demo")
    ctx.append(SystemMessage("You are a support agent."), UserMessage("Cancel my plan"))
    prep = ctx.prepare(now=datetime.now(UTC))
    client.chat.completions.create(**prep.body)
    assert ctx.rebuild(prep.header.step) == prep.body_bytes
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from datetime import datetime

from ctxline.errors import (
    CompactionError,
    ContextOverflow,
    IntegrityError,
    ValidationError,
)
from ctxline.record.blobs import blob_ref
from ctxline.record.events import (
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
    ToolCall,
    ToolResult,
    Tools,
    UserMessage,
    canonical_json,
)
from ctxline.record.store import MAIN, Store, utc_now
from ctxline.record.store.base import Clock
from ctxline.render.neutral import ToolSpec
from ctxline.sources.blocks import BranchMark
from ctxline.sources.guide import CORE_KINDS, GuideRegistry
from ctxline.sources.status import STATUS_KIND, StatusConfig
from ctxline.sources.tail import (
    DYNAMIC_KIND,
    DynamicItem,
    DynamicSource,
    StatusDriver,
    render_dynamic,
)
from ctxline.sources.timectx import TIME_KIND
from ctxline.tokens.counters import TokenCounter, get_counter
from ctxline.tools.read_result import READ_RESULT, call_read_result
from ctxline.tools.search_history import SEARCH_HISTORY, call_search_history
from ctxline.view.compaction import (
    COMPACTION_KINDS,
    Summarizer,
    extractive_summary,
    plan_compaction,
)
from ctxline.view.ladder import ViewMessage, plan_reductions
from ctxline.view.prepare import (
    Preparation,
    PrepareOptions,
    StepInputs,
    ViewCache,
    prepare,
    view_messages,
)

__all__ = ["Context", "branch_marks", "rebuild_all", "rebuild_request"]


_CORE = {kind.tag: kind for kind in CORE_KINDS}
_KIND_TAGS: dict[type, str] = {
    State: "ctx-state",
    Rule: "ctx-rule",
    Notification: "ctx-notification",
}

BUILTIN_TOOLS: tuple[ToolSpec, ...] = (READ_RESULT, SEARCH_HISTORY)
"""Tools every Context offers unless told otherwise (ctxline runs them: :meth:`Context.run_builtin`)."""

BLOB_MIN_CHARS = 1_024
"""Tool results longer than this are also saved as blobs when appended."""


def _total(prep: Preparation) -> int:
    tokens = prep.report["tokens"]
    assert isinstance(tokens, dict)
    return int(tokens["total"])


def branch_marks(store: Store, session: str, timeline: str) -> list[BranchMark]:
    """The fork points of ``timeline``'s ancestry, oldest first."""
    marks: list[BranchMark] = []
    info = store.timeline(session, timeline)
    while info.parent is not None and info.fork_seq is not None:
        marks.append(BranchMark(info.name, info.parent, info.fork_seq))
        info = store.timeline(session, info.parent)
    return sorted(marks, key=lambda m: m.fork_seq)


def _tool_json(tool: ToolSpec | Mapping[str, JsonValue]) -> dict[str, JsonValue]:
    if isinstance(tool, ToolSpec):
        return {"name": tool.name, "description": tool.description, "parameters": tool.parameters}
    if not isinstance(tool.get("name"), str) or not tool.get("name"):
        raise ValidationError("a tool needs a name", field="tools")
    return dict(tool)


def _counter_for(header: RequestHeader, given: TokenCounter | None) -> TokenCounter:
    """The counter a request was prepared with (offload previews depend on its counts)."""
    name = str(header.report.get("tokenizer") or header.options.get("tokenizer") or "")
    if given is not None and given.name == name:
        return given
    return get_counter(name)


def _rebuild(
    events: Sequence[StoredEvent],
    header: RequestHeader,
    branches: Sequence[BranchMark],
    cache: ViewCache | None,
    counter: TokenCounter | None = None,
) -> Preparation:
    options = PrepareOptions.from_json(header.options)
    upto = events[: header.upto_seq]  # a timeline is gap-free from seq 1
    prep = prepare(
        upto,
        options,
        StepInputs.from_json(header.inputs),
        branches=branches,
        counter=_counter_for(header, counter),
        cache=cache,
    )
    if prep.sha256 != header.sha256:
        raise IntegrityError(
            f"step {header.step} rebuilt to {prep.sha256}, but {header.sha256} was logged: the record"
            " or ctxline's rendering changed since it was prepared"
        )
    return prep


def rebuild_request(
    events: Sequence[StoredEvent],
    step: int,
    branches: Sequence[BranchMark] = (),
    counter: TokenCounter | None = None,
) -> tuple[RequestHeader, Preparation]:
    """Rebuild logged step ``step`` of a timeline from its events; raises if the hash differs.

    The counter is the one named in the step's report; pass ``counter`` when it was a
    custom one (a name :func:`~ctxline.tokens.counters.get_counter` does not know).
    """
    header = next(
        (
            ev.event
            for ev in events
            if isinstance(ev.event, RequestHeader) and ev.event.step == step
        ),
        None,
    )
    if header is None:
        raise ValidationError(f"no request step {step} in this timeline", field="step")
    return header, _rebuild(events, header, branches, None, counter)


def rebuild_all(
    events: Sequence[StoredEvent],
    branches: Sequence[BranchMark] = (),
    counter: TokenCounter | None = None,
) -> Iterator[tuple[RequestHeader, Preparation]]:
    """Rebuild every logged request of a timeline in order, in O(total) with one view cache."""
    cache = ViewCache()
    for ev in events:
        if isinstance(ev.event, RequestHeader):
            yield ev.event, _rebuild(events, ev.event, branches, cache, counter)


class Context:
    """An agent timeline with its request log. Not thread-safe: one per worker."""

    def __init__(
        self,
        store: Store,
        session: str,
        timeline: str = MAIN,
        *,
        guide: GuideRegistry | None = None,
        options: PrepareOptions | None = None,
        counter: TokenCounter | None = None,
        clock: Clock = utc_now,
        create: bool = True,
        status: StatusConfig | None = None,
        status_mode: str = "auto",
        dynamic: DynamicSource | None = None,
        builtin_tools: Sequence[ToolSpec] = BUILTIN_TOOLS,
        summarizer: Summarizer = extractive_summary,
    ) -> None:
        self.store = store
        self.session = session
        self.timeline = timeline
        # no registry given: the guide holds only the kinds this timeline uses, added when
        # the first event of a kind appears (seed 000: the component that emits a kind
        # registers its reading rule; DESIGN §4: keep the guide short)
        self._auto_guide = guide is None
        self.guide = guide if guide is not None else GuideRegistry([])
        self.options = options or PrepareOptions()
        self.counter = counter or get_counter(self.options.tokenizer)
        self.clock = clock
        if create:
            store.create_session(session, exist_ok=True)
        self._events: list[StoredEvent] = []
        self._cache = ViewCache()
        self._guide_version: str | None = None
        self._tools: list[dict[str, JsonValue]] | None = None
        self._timed_rules: dict[tuple[str, str], Rule] = {}
        self._dynamic_items: list[DynamicItem] = []
        self._marks = branch_marks(store, session, timeline)
        if self._marks and self._auto_guide:
            self.guide.register(_CORE["ctx-branch"])
        self.dynamic = dynamic
        self.builtin_tools = tuple(builtin_tools)
        self.summarizer = summarizer
        if dynamic is not None:
            self.guide.register(DYNAMIC_KIND)
        self._status: StatusDriver | None = None
        if status is not None and status_mode != "off":
            self._status = StatusDriver(status, status_mode, provider=self.options.provider)
            self.guide.register(STATUS_KIND)
            if status.time is not None and status.time.placement == "system":
                self.guide.register(TIME_KIND)
        self.refresh()

    @property
    def events(self) -> list[StoredEvent]:
        return self._events

    def refresh(self) -> list[StoredEvent]:
        """Read the events appended since the last look (by anyone); returns them."""
        after = self._events[-1].seq if self._events else 0
        new = self.store.read(self.session, self.timeline, after_seq=after)
        self._take(new)
        return new

    def _take(self, new: Sequence[StoredEvent]) -> None:
        for ev in new:
            e = ev.event
            if self._auto_guide:
                tag = _KIND_TAGS.get(type(e))
                if tag is not None:
                    self.guide.register(_CORE[tag])
                elif isinstance(e, Reduction) and e.action == "compact":
                    for kind in COMPACTION_KINDS:
                        self.guide.register(kind)
            if isinstance(e, Guide):
                self._guide_version = e.version
            elif isinstance(e, Tools):
                self._tools = list(e.tools)
            elif isinstance(e, Rule):
                key = (e.scope, e.rule_id)
                if e.op in ("set", "replace") and e.expires_at is not None:
                    self._timed_rules[key] = e
                else:
                    self._timed_rules.pop(key, None)
        self._events.extend(new)

    def append(
        self, *events: Event | Pending, expected_seq: int | None = None
    ) -> list[StoredEvent]:
        """Append atomically to this timeline (after catching up with other writers).

        Long tool results are saved as blobs first, so ``read_result`` can page through
        any result the view shows as a preview.
        """
        self.refresh()
        for item in events:
            e = item.event if isinstance(item, Pending) else item
            if isinstance(e, ToolResult) and len(e.content) > BLOB_MIN_CHARS:
                self.store.blobs.put(e.content.encode())
        stored = self.store.append(
            self.session, list(events), expected_seq=expected_seq, timeline=self.timeline
        )
        self._take(stored)
        return stored

    def set_tools(self, tools: Sequence[ToolSpec | Mapping[str, JsonValue]]) -> bool:
        """Offer these tool schemas (and the built-in ones) from now on.

        Records a ``tools`` event only if they changed. The built-in tools (``read_result``)
        come last; an app tool may not take a built-in's name.
        """
        self.refresh()
        wanted = [_tool_json(t) for t in tools]
        reserved = {b.name for b in self.builtin_tools}
        clash = [str(t["name"]) for t in wanted if t["name"] in reserved]
        if clash:
            raise ValidationError(f"tool names {clash} are ctxline's built-in tools", field="tools")
        wanted += [_tool_json(b) for b in self.builtin_tools]
        if self._tools is not None and canonical_json(wanted) == canonical_json(self._tools):
            return False
        self.append(Tools(tuple(wanted)))
        return True

    def run_builtin(self, call: ToolCall) -> ToolResult | None:
        """The result of a call to a built-in tool, or None when ``call`` is the app's to run.

        ``read_result`` returns saved bytes and never runs anything again;
        ``search_history`` searches this timeline's record.
        """
        if not any(b.name == call.name for b in self.builtin_tools):
            return None
        args = call.arguments if isinstance(call.arguments, dict) else {}
        if call.name == READ_RESULT.name:
            text, is_error = call_read_result(self.store.blobs, args)
        elif call.name == SEARCH_HISTORY.name:
            text, is_error = call_search_history(self.store, self.session, args, timeline=self.timeline)
        else:
            return None
        return ToolResult(call.id, text, call.name, is_error)

    def _adopt(self, now: datetime) -> None:
        if self._tools is None and self.builtin_tools:
            self.append(Tools(tuple(_tool_json(b) for b in self.builtin_tools)))
        text = self.guide.compose()
        version = self.guide.version()
        if version != self._guide_version and (text or self._guide_version is not None):
            self.append(Guide(version, text))
        expired = [
            r
            for r in self._timed_rules.values()
            if r.expires_at is not None and r.expires_at <= now
        ]
        if expired:
            self.append(*(Rule(r.rule_id, "expired", scope=r.scope) for r in expired))

    def _inputs(self, now: datetime, tail: Sequence[str]) -> StepInputs:
        """The step inputs: status bar (appended to history or in the tail), time, dynamic."""
        blocks = list(tail)
        meta: dict[str, JsonValue] = {}
        system_suffix = ""
        if self._status is not None:
            status = self._status.step(self._events, now, self.counter)
            meta["status"] = status.meta()
            system_suffix = status.system_time
            if status.strategy == "append":
                self.append(StatusSnapshot(status.block))
            else:
                blocks.append(status.block)
        if self.dynamic is not None:
            items = list(self.dynamic())
            meta["dynamic"] = [item.id for item in items]
            self._dynamic_items = items
            blocks.append(render_dynamic(items))
        return StepInputs(now=now, tail=tuple(blocks), system_suffix=system_suffix, meta=meta)

    def _drop_dynamic(
        self, inputs: StepInputs, opts: PrepareOptions, pressure: int
    ) -> tuple[StepInputs, Preparation]:
        """Rung 2 of the ladder: optional dynamic items go, lowest priority first."""
        items = list(self._dynamic_items)
        dynamic_block = render_dynamic(items)
        others = [b for b in inputs.tail if b != dynamic_block]
        dropped: list[str] = []
        prep = self._prepare(inputs, opts)
        for item in sorted((i for i in items if not i.required), key=lambda i: i.priority):
            items.remove(item)
            dropped.append(item.id)
            meta = {
                **inputs.meta,
                "dynamic": [i.id for i in items],
                "dropped_dynamic": list(dropped),
            }
            inputs = StepInputs(
                inputs.now, (*others, render_dynamic(items)), inputs.system_suffix, meta
            )
            prep = self._prepare(inputs, opts)
            if _total(prep) <= pressure:
                break
        return inputs, prep

    def _prepare(self, inputs: StepInputs, opts: PrepareOptions) -> Preparation:
        return prepare(
            self._events,
            opts,
            inputs,
            branches=self._marks,
            counter=self.counter,
            cache=self._cache,
            count_store=self.store,
        )

    def prepare(
        self,
        *,
        now: datetime | None = None,
        tail: Sequence[str] = (),
        options: PrepareOptions | None = None,
        log: bool = True,
    ) -> Preparation:
        """The request for the next model call; logged as a ``request`` event unless ``log=False``.

        Over the pressure line the reduction ladder runs first (its edits are appended to
        the record); :class:`~ctxline.errors.ContextOverflow` if protected content alone
        exceeds the input limit.
        """
        now = now or self.clock()
        self.refresh()
        self._adopt(now)
        opts = options or self.options
        inputs = self._inputs(now, tail)
        prep = self._prepare(inputs, opts)
        pressure = int(opts.input_limit * opts.pressure)
        if _total(prep) > pressure and self.dynamic is not None:
            inputs, prep = self._drop_dynamic(inputs, opts, pressure)
        if _total(prep) > pressure:
            prep = self._reduce(prep, inputs, opts)
        if self._status is not None:
            self._status.observe(int(prep.report["tokens"]["history"]))
        if log:
            (stored,) = self.append(prep.header)
            prep = (
                replace(prep, header=stored.event)
                if isinstance(stored.event, RequestHeader)
                else prep
            )
        return prep

    def _reduce(self, prep: Preparation, inputs: StepInputs, opts: PrepareOptions) -> Preparation:
        limit = opts.input_limit
        target = int(limit * opts.target)
        failure: str | None = None
        last_resort_failed = False
        for attempt in range(2):
            view = view_messages(self._cache, self.counter)
            total = _total(prep)
            history = sum(vm.tokens for vm in view)
            handles = {
                vm.message.seq: blob_ref(ev.content.encode())
                for vm in view
                if vm.message.role == "tool"
                and vm.message.seq
                and isinstance(ev := self._events[vm.message.seq - 1].event, ToolResult)
            }
            reductions, estimate = plan_reductions(
                view,
                total=total,
                target=target if attempt == 0 else int(limit * 0.95),
                counter=self.counter,
                events=self._events,
                edits=self._cache.edits,
                keep_groups=opts.keep_groups if attempt == 0 else 0,
                handle_of=handles,
            )
            if estimate > (target if attempt == 0 else limit):
                compaction = None
                try:
                    compaction = self._compaction(view, total - history, opts, attempt)
                    if (
                        attempt == 0
                        and compaction is not None
                        and compaction.saved_tokens < opts.min_compaction_saving * total
                    ):
                        raise CompactionError(
                            f"a compaction up to seq {compaction.upto_seq} would save only"
                            f" {compaction.saved_tokens:,} of {total:,} tokens (the minimum is"
                            f" {opts.min_compaction_saving:.0%}); the record and the last summary"
                            " are unchanged"
                        )
                except CompactionError as exc:
                    compaction = None
                    failure = str(exc)
                    last_resort_failed = attempt == 1
                if compaction is not None:
                    reductions = [r for r in reductions if r.action == "fold"] + [compaction]
                    self._register_compaction()
            if not reductions:
                continue  # the next attempt tries harder
            for r in reductions:
                for seq in r.seqs:
                    content = self._events[seq - 1].event
                    if isinstance(content, ToolResult):
                        self.store.blobs.put(content.content.encode())
            self.append(*reductions)
            prep = self._prepare(inputs, opts)
            if _total(prep) <= limit:
                return prep
        if _total(prep) > limit:  # never send a request over the limit
            if last_resort_failed and failure is not None:
                raise CompactionError(failure)
            tokens = prep.report["tokens"]
            task = self._task_tokens()
            raise ContextOverflow(
                limit,
                {
                    "tools": int(tokens["tools"]),
                    "system": int(tokens["system"]),
                    "original task": task,
                    "rest of history": int(tokens["history"]) - task,
                    "tail": int(tokens["tail"]),
                },
            )
        if failure is not None:  # under the limit all the same: send it, say why not compacted
            meta = {**inputs.meta, "compaction_failed": failure}
            return self._prepare(replace(inputs, meta=meta), opts)
        return prep

    def _task_tokens(self) -> int:
        task = next((e for e in self._events if isinstance(e.event, UserMessage)), None)
        if task is None:
            return 0
        for vm in view_messages(self._cache, self.counter):
            if vm.message.seq == task.seq:
                return vm.tokens
        return 0

    def _compaction(
        self, view: Sequence[ViewMessage], fixed: int, opts: PrepareOptions, attempt: int
    ) -> Reduction | None:
        """The compaction of this step. Attempt 0 compacts to the compaction target and keeps
        the later user messages that fit; attempt 1 (still over the limit) keeps only the
        original task verbatim. A summarizer failure becomes :class:`CompactionError`."""
        limit = opts.input_limit
        compact = self._cache.edits.compact
        try:
            return plan_compaction(
                view,
                self._events,
                fixed_tokens=fixed,
                target=int(limit * (opts.compact_target if attempt == 0 else 0.9)),
                counter=self.counter,
                summary_tokens=opts.summary_tokens if attempt == 0 else opts.summary_tokens // 4,
                previous_upto=compact.upto_seq if compact is not None else 0,
                summarizer=self.summarizer,
                keep_users=attempt == 0,
                ceiling=int(limit * (opts.target if attempt == 0 else 0.9)),
            )
        except CompactionError:
            raise
        except Exception as exc:  # any summarizer failure: nothing is written
            raise CompactionError(f"the summarizer failed: {type(exc).__name__}: {exc}") from exc

    def _register_compaction(self) -> None:
        for kind in COMPACTION_KINDS:
            self.guide.register(kind)
        version = self.guide.version()
        if version != self._guide_version:
            self.append(Guide(version, self.guide.compose()))

    def view(self) -> list[ViewMessage]:
        """The history of the last prepared request, message by message with its tokens."""
        return view_messages(self._cache, self.counter)

    def requests(self) -> list[RequestHeader]:
        self.refresh()
        return [ev.event for ev in self._events if isinstance(ev.event, RequestHeader)]

    def rebuild_all(self) -> Iterator[tuple[RequestHeader, Preparation]]:
        """Every logged request of this timeline, rebuilt and checked, in step order."""
        self.refresh()
        return rebuild_all(self._events, self._marks, self.counter)

    def rebuild(self, step: int) -> bytes:
        """The body of logged step ``step``, rebuilt from the record; checked against its sha256."""
        self.refresh()
        return rebuild_request(self._events, step, self._marks, self.counter)[1].body_bytes
