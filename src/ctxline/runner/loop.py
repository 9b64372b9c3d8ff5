"""The agent loop: prepare → model → append the reply → run the calls → append → repeat.

:class:`Agent` runs a task on one timeline of a store. Each step drains finished
background jobs (as notifications), prepares the request (``Context.prepare``: budget,
ladder, status bar, one atomic append), calls the model, appends the reply and its
``usage`` event in one append, and runs the reply's tool calls
(:func:`~.execute.run_calls`). The run stops on a final answer (a reply without tool
calls, once no job is running), the turn cap, the token or cost budget, a stop
condition, a model error, or a request that cannot fit (``context_overflow``,
``compaction_failed``) — always with a ``stop_reason``.

Everything the loop decides comes from the record (:class:`~.ledger.Ledger`), so a run
killed at any point resumes where it was: a call without a recorded result gets the
interrupted-call result (it may have run: it is never run again behind the model's
back), a job that was running gets a notification that its output is lost, and the
turns and budget go on counting.

    agent = Agent(make_client("local:smollm2"), [forecast], store=open_store("a.db"))
    result = agent.run("What's the weather in Paris?")
    result.final, result.stop_reason, result.usage

The step-level API is for apps that drive the loop: ``agent.start(task)``, then
``agent.step()`` until ``step.done``, then ``agent.result()`` (``astep``/``arun`` are
the async forms); ``agent.execute(calls)`` runs calls the app got from its own model call.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, TypeVar

from ctxline.context import Context, ContextConfig
from ctxline.discovery.source import Discovery
from ctxline.errors import CompactionError, ContextOverflow, ValidationError
from ctxline.models.base import ModelClient, ModelError, ModelReply
from ctxline.pricing import PriceTable, price_for
from ctxline.record.events import (
    Event,
    JsonValue,
    StoredEvent,
    SystemMessage,
    ToolCall,
    ToolResult,
    UserMessage,
)
from ctxline.record.store import MAIN, MemoryStore, Store, new_ulid
from ctxline.record.store.base import Clock
from ctxline.render.neutral import INTERRUPTED
from ctxline.runner.agents import SubAgents, repair_children
from ctxline.runner.execute import run_calls
from ctxline.runner.guards import Limits, budget_stop, fitted_options
from ctxline.runner.jobs import JobManager, JobsSource, interrupted_job
from ctxline.runner.ledger import Ledger
from ctxline.runner.model_call import BodyDecoder, call_model, client_options, failure_event
from ctxline.runner.permissions import ApprovalCallback, PermissionHook, allow_all
from ctxline.runner.registry import ToolLike, ToolRegistry, pick_builtins
from ctxline.runner.result import RunResult, StepResult
from ctxline.runner.sanitize import clean_reply
from ctxline.runner.tracing import NO_TRACER, Tracer
from ctxline.runner.usage import price_name
from ctxline.sources.base import Source
from ctxline.sources.dynamic import DynamicCallback
from ctxline.sources.guide import GuideRegistry
from ctxline.sources.status import StatusConfig
from ctxline.sources.statusbar import StatusMode
from ctxline.sources.timectx import TimeConfig
from ctxline.tokens.counters import TokenCounter
from ctxline.tools.base import Tool
from ctxline.view.compaction import Summarizer
from ctxline.view.ladder import LadderConfig, Rung
from ctxline.view.options import PrepareOptions
from ctxline.view.prepare import Preparation

if TYPE_CHECKING:
    from ctxline.environment import Environment

__all__ = ["Agent", "RunResult", "StepResult", "agent_status"]

T = TypeVar("T")
StopCondition = Callable[[StepResult], bool]


def agent_status(
    status: StatusConfig | None, caps: Mapping[str, int], time_zone: str | None
) -> StatusConfig:
    """The agent's status bar: ``status`` (None: the default one) with its tools' call
    limits (an explicit limit in ``status`` wins) and, given a zone, the time context."""
    base = status or StatusConfig()
    merged = replace(base, limits={**caps, **base.limits})
    if time_zone is not None:
        time = merged.time or TimeConfig(time_zone)
        merged = replace(merged, time=replace(time, zone=time_zone))
    return merged


@dataclass
class _Run:
    """What one invocation knows besides the record."""

    stop_reason: str = ""
    error: str = ""
    resumed: bool = False
    steps: list[StepResult] = field(default_factory=list)


class Agent:
    """An agent on one timeline (see the module docstring). Not thread-safe."""

    def __init__(
        self,
        model: ModelClient,
        tools: Sequence[ToolLike] | ToolRegistry = (),
        *,
        store: Store | None = None,
        session: str | None = None,
        timeline: str = MAIN,
        system: str | None = None,
        config: ContextConfig | None = None,
        options: PrepareOptions | None = None,
        limits: Limits | None = None,
        permission: PermissionHook = allow_all,
        approve: ApprovalCallback | None = None,
        subagents: SubAgents | None = None,
        tracer: Tracer = NO_TRACER,
        prices: PriceTable | None = None,
        stop_when: StopCondition | None = None,
        sources: Sequence[Source] | None = None,
        context: Context | Mapping[str, Any] | None = None,
        builtin_tools: Sequence[Tool | str] | None = None,
        name: str = "agent",
        discovery: Discovery | None = None,
        skills: Source | None = None,
        memory: Source | None = None,
        environment: Environment | None = None,
        status: StatusConfig | None = None,
        status_mode: StatusMode | None = None,
        time_zone: str | None = None,
        dynamic: DynamicCallback | None = None,
        summarizer: Summarizer | None = None,
        tool_choice: str | None = None,
        clock: Clock | None = None,
        guide: GuideRegistry | None = None,
        counter: TokenCounter | None = None,
        rungs: Sequence[Rung] | None = None,
        ladder: LadderConfig | None = None,
        call_context: Mapping[str, Any] | None = None,
    ) -> None:
        """The Context's settings come as one :class:`~ctxline.context.ContextConfig`
        (``config=``, or ``context=`` a Context whose store, session, timeline and
        configuration the agent takes), and each may also be given as a keyword, which
        overrides the configuration's field. ``time_zone`` is the status bar's time
        context (``StatusConfig(time=TimeConfig(zone))``); ``builtin_tools`` may name
        ctxline's built-in tools to keep (``()``: none). ``call_context`` (or a mapping
        as ``context=``) is what tools taking a ``CallContext`` get as ``extra``."""
        self.model = model
        self.registry = tools if isinstance(tools, ToolRegistry) else ToolRegistry(tools)
        self.limits = limits or Limits()
        if self.limits.max_cost is not None and price_for(price_name(model.name), prices) is None:
            raise ValidationError(
                f"{model.name} has no price in the pricing table, so a cost budget cannot be"
                " enforced: give prices= or use max_tokens",
                field="max_cost",
            )
        base = config or ContextConfig()
        if isinstance(context, Context):
            base = config or context.config
            store = store if store is not None else context.store
            session = session or context.session
            timeline = context.timeline if timeline == MAIN else timeline
            context = None
        cfg = base.merged(
            options=options,
            sources=sources,
            builtin_tools=None if builtin_tools is None else pick_builtins(builtin_tools),
            status=status,
            status_mode=status_mode,
            dynamic=dynamic,
            summarizer=summarizer,
            tool_choice=tool_choice,
            clock=clock,
            guide=guide,
            counter=counter,
            rungs=rungs,
            ladder=ladder,
        )
        self.store = store if store is not None else MemoryStore()
        self.system = system
        self.permission = permission
        self.approve = approve
        self.subagents = subagents
        self.tracer = tracer
        self.prices = prices
        self.stop_when = stop_when
        self.extra: Mapping[str, Any] = dict(call_context or context or {})
        self.name = name
        self.discovery = discovery
        if discovery is not None:
            clash = [n for n in discovery.catalog.names if n in self.registry]
            if clash:
                raise ValidationError(
                    f"tools {clash} are both core and discoverable; give each to one of them",
                    field="discovery",
                )
        self.environment = environment
        """Its slots in every view, its actions as ctxline's own tools (docs/environment.md)."""
        extra = [s for s in (discovery, skills, memory) if s is not None]
        if environment is not None:
            extra.append(environment.source)
        caps = dict(self.registry.limits())
        if discovery is not None:
            caps |= {
                n: t.meta.max_calls for n, t in discovery.tools_by_name.items() if t.meta.max_calls
            }
        self.config = replace(
            cfg,
            options=client_options(model, cfg.options),
            status=agent_status(cfg.status, caps, time_zone),
            sources=(JobsSource(announce=self._has_background()), *cfg.sources, *extra),
        )
        """The configuration of the agent's Context (its client's model, its tools' limits)."""
        self.ctx = Context(
            self.store, session or f"run-{new_ulid().lower()}", timeline, config=self.config
        )
        self.builtin_names = frozenset(t.name for t in self.ctx.tools)
        specs = [*self.registry.specs()]
        if subagents is not None:
            specs.append(subagents.spec())
        self._core_specs = tuple(specs)
        self.ctx.set_tools(specs)
        self.ledger = Ledger(table=prices)
        self.ledger.catch_up(self.ctx.events)
        self.jobs = JobManager()
        self._bodies = BodyDecoder()
        """Each request's body for the client, decoding only what is new (O(new) a step)."""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._run = _Run()
        self._repaired = False

    # --- the record -------------------------------------------------------------------

    @property
    def session(self) -> str:
        return self.ctx.session

    def append(self, *events: Event) -> list[StoredEvent]:
        """Append atomically and feed the ledger (the only way the runner writes)."""
        stored = self.ctx.append(*events)
        self.ledger.catch_up(self.ctx.events)
        return stored

    @property
    def unfinished(self) -> bool:
        """A task is recorded and has no final answer yet (``resume`` goes on with it)."""
        return self.ledger.task_seq > 0 and self.ledger.final() is None

    def _repair(self) -> None:
        """Answer calls left without a result and jobs left without a completion by a
        runner that stopped (once per Agent, before its first step)."""
        if self._repaired:
            return
        self._repaired = True
        self.ctx.refresh()
        self.ledger.catch_up(self.ctx.events)
        repair_children(self.store, self.session, self.ctx.timeline, self.ledger.open_calls())
        events: list[Event] = [
            ToolResult(c.id, INTERRUPTED, c.name, True, {"runner": {"interrupted": True}})
            for c in self.ledger.open_calls()
        ]
        events.extend(interrupted_job(info) for info in self.ledger.jobs.values())
        if events:
            self.append(*events)
            self._run.resumed = True

    def start(
        self, task: str | None = None, *, meta: Mapping[str, JsonValue] | None = None
    ) -> None:
        """Begin ``task`` (None: go on with the recorded one). A new session gets ``system``
        first; ``meta`` is kept on the task's user message (``ctxline run`` logs its options
        there, so the session id alone resumes the run)."""
        self._run = _Run()
        self._repair()
        if task is None:
            if self.ledger.task_seq == 0:
                raise ValidationError(
                    f"session {self.session!r} has no task to resume", field="task"
                )
            self._run.resumed = True
            return
        events: list[Event] = []
        if self.system and not any(isinstance(e.event, SystemMessage) for e in self.ctx.events):
            events.append(SystemMessage(self.system))
        events.append(UserMessage(task, dict(meta or {})))
        self.append(*events)

    # --- one step ---------------------------------------------------------------------

    def _finish(self, reason: str, error: str = "", step: StepResult | None = None) -> StepResult:
        self._run.stop_reason, self._run.error = reason, error
        step = replace(
            step or StepResult(self.ledger.turns), done=True, stop_reason=reason, error=error
        )
        self._run.steps.append(step)
        return step

    async def _drain(self) -> list[Event]:
        notes = self.jobs.drain(self.ctx.blobs)
        if notes:
            self.append(*notes)
        return notes

    async def astep(self) -> StepResult:
        """One step: drained jobs, a model call, its tool calls (see the module docstring)."""
        self._repair()
        notes = await self._drain()
        if self.ledger.final() is not None:
            if not self.jobs.running:
                return self._finish("final")
            await self.jobs.wait()  # the answer came with work still running: wait for it
            notes = [*notes, *await self._drain()]
        reason = budget_stop(self.ledger, self.limits, 0)
        if reason is not None:
            return self._finish(reason)
        self._offer_tools()
        try:
            prep = self.ctx.prepare(options=fitted_options(self.ledger, self.ctx.options))
        except ContextOverflow as exc:
            return self._finish("context_overflow", str(exc))
        except CompactionError as exc:
            return self._finish("compaction_failed", str(exc))
        reason = budget_stop(self.ledger, self.limits, prep.report.tokens.total)
        if reason is not None:
            return self._finish(reason)
        started = time.monotonic()
        try:
            reply = await self._call_model(prep)
        except ModelError as exc:  # recorded: show and the inspector say why the run ended
            self.append(failure_event(self.model, prep, exc, time.monotonic() - started))
            return self._finish("model_error", str(exc))
        results = await run_calls(self, reply.tool_calls) if reply.tool_calls else []
        step = StepResult(self.ledger.turns, reply, tuple(results), tuple(notes))
        if self.stop_when is not None and self.stop_when(step):
            return self._finish("stop_condition", step=step)
        if not reply.tool_calls and not self.jobs.running and self.ledger.final() is not None:
            return self._finish("final", step=step)  # a first empty reply is asked again
        self._run.steps.append(step)
        return step

    def _offer_tools(self) -> None:
        """The next request's tools: the core ones and, in native discovery, the revealed
        schemas (those rung 3 may drop listed as optional, least needed first)."""
        if self.discovery is not None:
            self.discovery.offer(self.ctx, self._core_specs)

    async def _call_model(self, prep: Preparation) -> ModelReply:
        reply, events = await call_model(
            self.model,
            prep,
            self.tracer,
            self.session,
            self.ledger.turns + 1,
            body=self._bodies.body(prep),
        )
        reply, events = clean_reply(reply, events, turn=self.ledger.turns + 1)  # issue 24
        self.append(*events)
        return reply

    async def aexecute(self, calls: Sequence[ToolCall]) -> list[ToolResult]:
        """Run calls the app got from its own model call (append the reply first)."""
        self._repair()
        return await run_calls(self, calls)

    # --- whole runs -------------------------------------------------------------------

    async def arun(self, task: str | None = None) -> RunResult:
        """Run ``task`` to its end (None: resume the recorded task)."""
        self.start(task)
        with self.tracer.span(
            f"invoke_agent {self.name}",
            {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": self.name,
                "gen_ai.conversation.id": self.session,
            },
        ):
            while not (await self.astep()).done:
                pass
            await self._settle_jobs()
        return self.result()

    async def _settle_jobs(self) -> None:
        """A run never ends with a job running: the rest are cancelled and notified."""
        if self.jobs.running:
            await self.jobs.cancel_all()
        await self._drain()

    def result(self) -> RunResult:
        """The run's figures, from the record (turns, calls and usage of the whole task)."""
        totals = self.ledger.totals
        cost = totals.cost_usd()
        return RunResult(
            session=self.session,
            final=self.ledger.final() or "",
            stop_reason=self._run.stop_reason
            or ("final" if self.ledger.final() is not None else "running"),
            turns=self.ledger.turns,
            tool_calls=self.ledger.tool_calls,
            usage=totals.usage(),
            cost_usd=cost,
            unpriced=tuple(totals.all_unpriced()),
            agents=dict(totals.children),
            calibration=totals.calibration(),
            error=self._run.error,
            resumed=self._run.resumed,
            own=totals.to_json(
                session=self.session,
                turns=self.ledger.turns,
                tool_calls=self.ledger.tool_calls,
                stop_reason=self._run.stop_reason,
            ),
        )

    # --- sync forms -------------------------------------------------------------------

    def _sync(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the agent's private loop (kept while jobs may still run)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            coro.close()
            raise RuntimeError("an event loop is running: use await agent.arun() / astep()")
        if self._loop is None or self._loop.is_closed():
            self._loop = asyncio.new_event_loop()
        return self._loop.run_until_complete(coro)

    def _has_background(self) -> bool:
        return any(t.meta.background for t in self.registry)

    def run(self, task: str | None = None) -> RunResult:
        """:meth:`arun` for code without an event loop."""
        try:
            return self._sync(self.arun(task))
        finally:
            self.close()

    def resume(self) -> RunResult:
        """Go on with the recorded task (after a crash, a stop, or from another process)."""
        return self.run(None)

    def step(self) -> StepResult:
        """:meth:`astep` without an event loop; the last step (``done``) settles the jobs."""
        step = self._sync(self.astep())
        if step.done:
            self.close()
        return step

    def execute(self, calls: Sequence[ToolCall]) -> list[ToolResult]:
        return self._sync(self.aexecute(calls))

    def close(self) -> None:
        """Cancel running jobs (each gets its notification) and close the private loop."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            try:
                loop.run_until_complete(self._settle_jobs())
                loop.run_until_complete(loop.shutdown_default_executor())
            finally:
                loop.close()
        self.jobs = JobManager()

    def __enter__(self) -> Agent:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
