"""Sub-agents: ``spawn_agent(task, tools?, budget?)`` runs a child in its own session.

Why: a side investigation should not fill the parent's window with its tool output
(seed 003's context isolation; users of other frameworks report sub-agent output leaking
into the parent, mastra #15823). The child is an :class:`~.loop.Agent` on its own
session of the same store, linked both ways — the child session's ``meta.parent``
names the parent session, timeline and call; the parent's tool result
``meta.runner.agent`` names the child session and its figures. It sees only the task
the parent wrote, gets the parent's tools (or the subset named in ``tools``), its own
turn cap and token budget, and the parent's permission hook. Only its final answer
returns, capped at ``result_tokens`` (the whole answer saved as a blob, its handle in
the result); its tool outputs stay in its own record. Its tokens and cost are summed
into the parent's run result, per agent.

    Agent(client, tools, subagents=SubAgents(max_turns=10, result_tokens=800))
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ctxline.errors import ValidationError
from ctxline.models.base import ModelClient
from ctxline.record.events import Event, JsonValue, ToolCall, ToolResult
from ctxline.record.store.base import MAIN, Store
from ctxline.record.timeline import TimelineWriter
from ctxline.render.neutral import INTERRUPTED, ToolSpec
from ctxline.runner.guards import Limits
from ctxline.runner.jobs import interrupted_job
from ctxline.runner.ledger import Ledger
from ctxline.runner.tools import ArgumentsInvalid, ToolMeta, function_tool
from ctxline.runner.tree import Share, release, take_share
from ctxline.tokens.counters import TokenCounter
from ctxline.tools.base import ToolOutcome

if TYPE_CHECKING:
    from ctxline.runner.loop import Agent

__all__ = ["SPAWN_AGENT", "SubAgents", "clip_tokens", "repair_children"]

SPAWN_AGENT = "spawn_agent"
CHILD_SYSTEM = (
    "You are a sub-agent. Another agent gave you one task; it sees only your final answer, "
    "not your tool calls. Do the task with your tools, then answer with what it needs: "
    "the result, briefly, with the facts it asked for."
)


def spawn_agent(task: str, tools: list[str] | None = None, budget: int | None = None) -> None:
    """Delegate a self-contained task to a sub-agent with a fresh context of its own.

    It sees only the task you write (not this conversation) and only its final answer
    comes back to you, so use it for work whose details you do not need to see.

    Args:
        task: Everything the sub-agent needs to know to do the task, and what to answer.
        tools: Names of your tools it may use (default: all of them).
        budget: The most tokens (input + output) it may spend.
    """


_SPAWN_TOOL = function_tool(spawn_agent)


def clip_tokens(text: str, limit: int, counter: TokenCounter) -> tuple[str, int]:
    """The longest prefix of ``text`` within ``limit`` tokens, and the tokens of ``text``."""
    total = counter.count(text)
    if total <= limit:
        return text, total
    lo, hi = 0, len(text)
    while lo < hi:  # the longest prefix that fits (token counts grow with the prefix)
        mid = (lo + hi + 1) // 2
        if counter.count(text[:mid]) <= limit:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo], total


@dataclass(frozen=True, slots=True)
class SubAgents:
    """How ``spawn_agent`` runs children."""

    model: ModelClient | None = None
    """The children's model (None: the parent's)."""
    max_turns: int = 15
    max_tokens: int | None = 200_000
    """The most a child may spend; a ``budget`` the model asks for is capped at it."""
    result_tokens: int = 1_000
    """The most of a child's answer the parent's record holds (the rest: a handle)."""
    system: str = CHILD_SYSTEM
    depth: int = 1
    """Levels of sub-agents below this agent (1: children cannot spawn their own)."""
    meta: ToolMeta = field(default_factory=lambda: ToolMeta(group="ctxline", tags=("agents",)))

    def __post_init__(self) -> None:
        if self.result_tokens < 50:
            raise ValidationError(
                f"expected at least 50 tokens, got {self.result_tokens}", field="result_tokens"
            )
        if self.depth < 1 or self.max_turns < 1:
            raise ValidationError("depth and max_turns must be >= 1", field="subagents")

    def spec(self) -> ToolSpec:
        return _SPAWN_TOOL.spec

    def validate(self, arguments: JsonValue) -> dict[str, Any]:
        values = _SPAWN_TOOL.validate(arguments)
        if not str(values["task"]).strip():
            raise ArgumentsInvalid(SPAWN_AGENT, ["task: the task is empty"])
        budget = values.get("budget")
        if budget is not None and budget < 1:
            raise ArgumentsInvalid(SPAWN_AGENT, ["budget: expected tokens >= 1"])
        return values

    def _session(self, parent: Agent) -> str:
        n = parent.ledger.agents_started + 1
        existing = {s.id for s in parent.store.sessions()}
        while f"{parent.session}/agent-{n}" in existing:
            n += 1
        return f"{parent.session}/agent-{n}"

    async def spawn(
        self,
        parent: Agent,
        call: ToolCall,
        values: dict[str, Any],
        *,
        batch: Mapping[str, int] | None = None,
    ) -> tuple[ToolOutcome, dict[str, JsonValue]]:
        names = values.get("tools")
        unknown = [n for n in names or () if n not in parent.registry]
        if unknown:
            return ToolOutcome(
                f"Error: spawn_agent got unknown tools {unknown}; your tools are "
                f"{list(parent.registry.names)}. Nothing was started.",
                True,
            ), {}
        registry = parent.registry.select(names) if names is not None else parent.registry
        budget = values.get("budget")
        if self.max_tokens is not None:
            budget = min(budget or self.max_tokens, self.max_tokens)
        model = self.model or parent.model
        share = take_share(parent, registry, budget, batch or {}, model)
        if share.refused:
            return ToolOutcome(
                f"Error: spawn_agent was refused and no sub-agent started: {share.refused}"
                " (limits and budgets hold for the whole task, sub-agents included).",
                True,
            ), {}
        try:
            return await self._run_child(parent, call, values, share, model)
        finally:
            release(parent, share)

    async def _run_child(
        self,
        parent: Agent,
        call: ToolCall,
        values: dict[str, Any],
        share: Share,
        model: ModelClient,
    ) -> tuple[ToolOutcome, dict[str, JsonValue]]:
        from ctxline.runner.loop import Agent

        session = self._session(parent)
        link: dict[str, JsonValue] = {
            "session": parent.session,
            "timeline": parent.ctx.timeline,
            "call_id": call.id,
            "tool": SPAWN_AGENT,
        }
        parent.store.create_session(session, meta={"parent": link})
        child = Agent(
            model,
            share.registry,
            store=parent.store,
            session=session,
            system=self.system,
            options=parent.ctx.options,
            limits=Limits(
                max_turns=self.max_turns,
                max_tokens=share.max_tokens,
                max_cost=share.max_cost,
                tool_timeout=parent.limits.tool_timeout,
                repeat_limit=parent.limits.repeat_limit,
                fail_hint_after=parent.limits.fail_hint_after,
                max_parallel=parent.limits.max_parallel,
            ),
            permission=parent.permission,
            approve=parent.approve,
            subagents=replace(self, depth=self.depth - 1) if self.depth > 1 else None,
            tracer=parent.tracer,
            prices=parent.prices,
            context=parent.extra,
            name=f"{parent.name}/agent",
        )
        result = await child.arun(str(values["task"]))
        answer = result.final
        shown, total = clip_tokens(answer, self.result_tokens, parent.ctx.counter)
        head = (
            f"Sub-agent {session} stopped ({result.stop_reason}) after {result.turns} turns and "
            f"{result.tool_calls} tool calls."
        )
        if not answer:
            detail = f" {result.error}" if result.error else ""
            return ToolOutcome(f"{head} It gave no answer.{detail}", True), {
                "agent": {**result.own, "ran": dict(child.ledger.ran)}
            }
        body = f"{head} Its answer:\n\n{shown}"
        if len(shown) < len(answer):
            ref = parent.ctx.blobs.put(answer.encode())
            body += (
                f"\n\n[the answer is {total:,} tokens; the first {self.result_tokens:,} are shown. "
                f'The whole answer is saved: read_result(handle="{ref}")]'
            )
        return ToolOutcome(body), {"agent": {**result.own, "ran": dict(child.ledger.ran)}}


def repair_children(
    store: Store, session: str, timeline: str, calls: Sequence[ToolCall], *, depth: int = 8
) -> list[str]:
    """Repair the sub-agents of ``calls`` (a parent's ``spawn_agent`` calls left without a
    result by a runner that stopped): each child's own calls without a result get the
    interrupted-call result and its jobs the lost-output notice, down to its own children.
    The child sessions repaired, in order (issue 24: a child killed mid-call was never
    repaired, its call had no result forever)."""
    wanted = {c.id for c in calls if c.name == SPAWN_AGENT}
    if not wanted or depth < 1:
        return []
    repaired: list[str] = []
    prefix = f"{session}/agent-"
    for info in store.sessions():
        link = info.meta.get("parent")
        if not (info.id.startswith(prefix) and isinstance(link, dict)):
            continue
        if link.get("session") != session or link.get("timeline") != timeline:
            continue
        if link.get("call_id") not in wanted:
            continue
        stored = store.read(info.id, MAIN)
        ledger = Ledger().catch_up(stored)
        open_calls = ledger.open_calls()
        events: list[Event] = [
            ToolResult(c.id, INTERRUPTED, c.name, True, {"runner": {"interrupted": True}})
            for c in open_calls
        ]
        events.extend(interrupted_job(job) for job in ledger.jobs.values())
        if events:
            head = stored[-1].seq if stored else 0
            TimelineWriter(store, info.id, MAIN).append(events, expected_seq=head)
            repaired.append(info.id)
        repaired += repair_children(store, info.id, MAIN, open_calls, depth=depth - 1)
    return repaired
