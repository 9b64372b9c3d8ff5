"""Running the tool calls of one reply: guards, permission, execution, one append per result.

The calls are decided in call order — unknown tool, the guards (repeat, ``max_calls``),
argument validation, the permission hook — and the refused ones get their error result
at once (one append). The allowed ones then run concurrently (up to
``Limits.max_parallel``), each with its timeout; each result is appended the moment
its call ends, with the events it produced, in ONE append, so a crash loses at most
the calls still running (they get the interrupted-call result on resume). Nothing here
parses text: every decision reads the structured call and the tool's metadata.

    results = await run_calls(agent, reply.tool_calls)
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from ctxline.discovery.fold import DiscoveryFold
from ctxline.record.authority import outside_problem, without_authority
from ctxline.record.codec import canonical_json, event_to_json
from ctxline.record.events import OWN_KINDS, Event, JsonValue, ToolCall, ToolResult
from ctxline.record.jsonvalue import JsonObject
from ctxline.runner.guards import Refusal, check_call, refusal_text, strategy_hint
from ctxline.runner.permissions import PermissionRequest, resolve
from ctxline.runner.sanitize import clean_arguments, clean_text, error_text
from ctxline.runner.tools import ArgumentsInvalid, CallContext, FunctionTool, ToolMeta, render_value
from ctxline.runner.tracing import AttrValue
from ctxline.tools.base import ToolOutcome
from ctxline.tools.errors import detailed_tool_error

if TYPE_CHECKING:
    from ctxline.runner.loop import Agent

__all__ = ["Planned", "run_calls"]

Kind = Literal["app", "ctxline", "spawn", "unknown"]
BUILTIN_META = ToolMeta(group="ctxline")


@dataclass
class Planned:
    """One call of the reply, decided."""

    call: ToolCall
    kind: Kind
    meta: ToolMeta
    tool: FunctionTool | None = None
    values: dict[str, Any] = field(default_factory=dict)
    refusal: Refusal | None = None
    invalid: str = ""
    inner: ToolCall | None = None
    """``call_tool``'s call of the revealed tool it runs (same id)."""
    batch: dict[str, int] = field(default_factory=dict)
    """The calls of the same reply allowed to run, per tool (a sub-agent's share excludes them)."""


def _discovered(agent: Agent, call: ToolCall) -> Planned | ToolCall | None:
    """A discovery refusal, the discoverable tool's call to run, or None (not discovery's)."""
    discovery = agent.discovery
    if discovery is None:
        return None
    others = [*agent.registry.names, *agent.builtin_names]
    fold = agent.ctx.fold(discovery.name)
    assert isinstance(fold, DiscoveryFold)
    resolution = discovery.resolve(call, fold, others)
    if resolution is None:
        return None
    if resolution.call is not None:
        if resolution.call.name in discovery.tools_by_name:
            return resolution.call
        resolution = replace(
            resolution,
            call=None,
            refused="unknown_tool",
            reason=f"{resolution.call.name!r} has no code to run in this agent",
            hint="Nothing was run. Use another tool, or tell the user it is not available here.",
        )
    planned = Planned(call, "unknown", BUILTIN_META)
    if resolution.refused == "invalid_arguments":
        planned.invalid = resolution.text(call)
    else:
        planned.refusal = Refusal("unknown_tool", resolution.reason, resolution.hint)
    return planned


def _plan(agent: Agent, call: ToolCall, allowed: dict[str, int]) -> Planned:
    found = _discovered(agent, call)
    if isinstance(found, Planned):
        return found
    tool = agent.registry.get(call.name)
    if found is not None:
        assert agent.discovery is not None
        tool = agent.discovery.tools_by_name[found.name]
        planned = Planned(
            call, "app", tool.meta, tool, inner=found if found.name != call.name else None
        )
    elif tool is not None:
        planned = Planned(call, "app", tool.meta, tool)
    elif call.name in agent.builtin_names:
        planned = Planned(call, "ctxline", BUILTIN_META)
    elif agent.subagents is not None and call.name == "spawn_agent":
        planned = Planned(call, "spawn", agent.subagents.meta)
    else:
        known = [*agent.registry.names, *sorted(agent.builtin_names)]
        names = ", ".join(known)
        reason = f"there is no tool named {call.name!r}: it is not available"
        hint = f"Use one of the tools offered: {names}." if names else "No tools are offered."
        if agent.discovery is not None:
            near = agent.discovery.nearest(call.name, known)
            hint = f"The nearest tools: {', '.join(near)}. " + (
                "search_tools finds others." if near else "Call search_tools to find one."
            )
        return Planned(call, "unknown", BUILTIN_META, refusal=Refusal("unknown_tool", reason, hint))
    target = planned.inner or call
    refusal = check_call(
        agent.ledger,
        call,
        planned.meta,
        agent.limits,
        allowed_in_batch=allowed.get(target.name, 0),
        name=target.name,
    )
    if refusal is not None:
        planned.refusal = refusal
        return planned
    try:
        if planned.tool is not None:
            planned.values = planned.tool.validate(target.arguments)
        elif planned.kind == "spawn":
            assert agent.subagents is not None
            planned.values = agent.subagents.validate(call.arguments)
    except ArgumentsInvalid as exc:
        if planned.tool is not None:
            planned.invalid = planned.tool.invalid_text(exc, target.arguments)
        else:
            planned.invalid = detailed_tool_error(
                exc, call.name, call.arguments, include_traceback=False
            )
        return planned
    request = PermissionRequest(
        target,
        planned.meta,
        planned.meta.kinds,
        agent.ctx.session,
        agent.ledger.turns,
        agent.ledger.ran.get(target.name, 0) + allowed.get(target.name, 0),
        builtin=planned.kind != "app",
        extra=agent.extra,
    )
    decision = resolve(agent.permission, request, agent.approve)
    if decision.action != "allow":
        reason = decision.reason or "the permission policy denied it"
        planned.refusal = Refusal(
            "denied",
            f"permission denied: {reason}",
            "Do not retry this call unchanged; choose another way or ask the user.",
        )
        return planned
    allowed[target.name] = allowed.get(target.name, 0) + 1
    return planned


def _meta(planned: Planned, **runner: JsonValue) -> dict[str, JsonValue]:
    meta: dict[str, JsonValue] = {}
    info: JsonObject = {k: v for k, v in runner.items() if v is not None}
    if info:
        meta["runner"] = info
    if not planned.meta.trimmable:
        meta["trimmable"] = False
    if planned.inner is not None:
        meta["discovery"] = {"tool": planned.inner.name}
    return meta


def _refused(planned: Planned) -> ToolResult:
    call = planned.call
    if planned.invalid:
        return ToolResult(
            call.id, planned.invalid, call.name, True, _meta(planned, refused="invalid_arguments")
        )
    assert planned.refusal is not None
    text = refusal_text(call, planned.refusal)
    return ToolResult(call.id, text, call.name, True, _meta(planned, refused=planned.refusal.kind))


def _check_events(call: ToolCall, outcome: ToolOutcome) -> ToolOutcome:
    """A tool may append events with its result, never ctxline's own kinds nor events that
    grant authority to a fold (a slot, a runner or discovery mark: :mod:`~ctxline.record.authority`)."""
    own = [
        e.kind
        for e in outcome.events
        if e.kind in OWN_KINDS or isinstance(e, ToolResult) or outside_problem(e) is not None
    ]
    if not own:
        try:
            for event in outcome.events:
                canonical_json(event_to_json(event))
        except Exception as exc:
            return ToolOutcome(
                f"Error: tool {call.name!r} returned an event that cannot be recorded"
                f" ({clean_text(type(exc).__name__)}); its result was discarded.",
                True,
            )
        return outcome
    return ToolOutcome(
        f"Error: tool {call.name!r} returned events of kinds {own} that a tool may not append "
        "(ctxline writes those itself); its result was discarded.",
        True,
    )


async def _execute(agent: Agent, planned: Planned) -> tuple[ToolOutcome, dict[str, JsonValue]]:
    call = planned.call
    if planned.kind == "ctxline":
        outcome = agent.ctx.call_tool(call)
        assert outcome is not None
        return outcome, {}
    if planned.kind == "spawn":
        assert agent.subagents is not None
        return await agent.subagents.spawn(agent, call, planned.values, batch=planned.batch)
    tool = planned.tool
    assert tool is not None
    context = CallContext(
        planned.inner or call, agent.ctx.session, agent.ctx.blobs, agent.ledger.turns, agent.extra
    )
    timeout = tool.meta.timeout or agent.limits.tool_timeout
    if tool.meta.background:
        job = agent.jobs.new_id(agent.ledger.jobs_started)
        agent.jobs.start(job, tool.name, call.id, tool.invoke(planned.values, context), timeout)
        text = (
            f"started {job} in the background; you will get a notification when it ends"
            " (do not wait for it by calling tools)."
        )
        return ToolOutcome(text), {"job": job}
    try:
        if tool.meta.isolate:  # timed in its process, from the function's start
            value = await tool.invoke(planned.values, context, timeout)
        else:
            value = await asyncio.wait_for(tool.invoke(planned.values, context), timeout)
    except TimeoutError:
        error = TimeoutError(
            f"the call took longer than {timeout:g} s and was abandoned"
            + (
                " (its process was stopped)"
                if tool.meta.isolate
                else "" if tool.is_async else " (it may still be running in its thread)"
            )
        )
        return ToolOutcome(
            detailed_tool_error(error, call.name, call.arguments, include_traceback=False), True
        ), {}
    except Exception as exc:  # the model's information, not a crash of the loop
        text = error_text(exc, detailed_tool_error, call.name, call.arguments)
        return ToolOutcome(text, True), {}
    try:
        outcome = render_value(value)
    except Exception as exc:  # a value that cannot be rendered is the tool's error
        return ToolOutcome(
            error_text(exc, detailed_tool_error, call.name, call.arguments), True
        ), {}
    return _check_events(call, replace(outcome, content=clean_text(outcome.content))), {}


async def _run_one(agent: Agent, planned: Planned, gate: asyncio.Semaphore) -> ToolResult:
    call = planned.call
    attrs: dict[str, AttrValue] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": call.name,
        "gen_ai.tool.call.id": call.id,
        "gen_ai.tool.type": "function" if planned.kind == "app" else "extension",
    }
    async with gate:
        with agent.tracer.span(f"execute_tool {call.name}", attrs) as span:
            started = time.monotonic()
            outcome, extra = await _execute(agent, planned)
            ms = round((time.monotonic() - started) * 1000)
            content = outcome.content
            if outcome.is_error:
                span.fail("tool_error", content.splitlines()[0] if content else "")
                hint = strategy_hint(agent.ledger, call, agent.limits)
                if hint:
                    content = f"{content}\n\n{hint}"
    # an app tool's own meta is data: the keys a fold takes authority from are ctxline's
    own = {k: clean_arguments(v) for k, v in outcome.meta.items() if k != "trimmable"}
    own = without_authority(own, () if planned.kind == "app" else ("discovery", "skills", "memory"))
    result = ToolResult(
        call.id, content, call.name, outcome.is_error, {**own, **_meta(planned, ms=ms, **extra)}
    )
    agent.append(result, *outcome.events)
    return result


def _turn_group(agent: Agent, runnable: list[Planned]) -> list[Planned]:
    """The environment's calls of this reply, when it applies a turn's calls as one transaction."""
    env = agent.environment
    if env is None or not env.turn_transactions:
        return []
    group = [p for p in runnable if p.kind == "ctxline" and env.owns(p.call.name)]
    return group if len(group) > 1 else []


def _run_turn(agent: Agent, group: list[Planned]) -> list[ToolResult]:
    """The turn's environment calls as ONE transaction: every result and every event in one append."""
    assert agent.environment is not None
    outcomes = agent.environment.turn(agent.ctx, [p.call for p in group])
    results: list[ToolResult] = []
    events: list[Event] = []
    for planned, outcome in zip(group, outcomes, strict=True):
        content = outcome.content
        hint = strategy_hint(agent.ledger, planned.call, agent.limits) if outcome.is_error else None
        if hint:
            content = f"{content}\n\n{hint}"
        meta = _meta(planned, transaction="turn")
        results.append(
            ToolResult(planned.call.id, content, planned.call.name, outcome.is_error, meta)
        )
        events.extend(outcome.events)
    agent.append(*results, *events)
    return results


async def run_calls(agent: Agent, calls: Sequence[ToolCall]) -> list[ToolResult]:
    """Decide, run and record every call of one reply; the results in call order."""
    allowed: dict[str, int] = {}
    plans = [_plan(agent, call, allowed) for call in calls]
    for planned in plans:
        planned.batch = allowed
    refused = [_refused(p) for p in plans if p.refusal is not None or p.invalid]
    if refused:
        agent.append(*refused)
    gate = asyncio.Semaphore(agent.limits.max_parallel)
    runnable = [p for p in plans if p.refusal is None and not p.invalid]
    turn = _turn_group(agent, runnable)
    together = _run_turn(agent, turn) if turn else []
    runnable = [p for p in runnable if p not in turn]
    ran = await asyncio.gather(*(_run_one(agent, p, gate) for p in runnable))
    by_id: dict[str, ToolResult] = {r.call_id: r for r in [*refused, *together, *ran]}
    return [by_id[c.id] for c in calls if c.id in by_id]
