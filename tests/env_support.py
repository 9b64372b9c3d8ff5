"""Helpers of the environment tests: a settable clock, a Context with an environment, a model call."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from ctxline import Context, MemoryStore
from ctxline.environment import Environment
from ctxline.record.events import AssistantMessage, ToolCall, UserMessage

__all__ = ["T0", "Clock", "make", "run", "tail"]

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now

    def tick(self, **delta: float) -> None:
        self.now += timedelta(**delta)


def make(env: Environment, clock: Clock | None = None, **kw: Any) -> Context:
    clock = clock or Clock()
    store = MemoryStore(clock=clock)
    ctx = Context(store, "s", sources=[env.source], clock=clock, **kw)
    ctx.append(UserMessage("Plan the trip."))
    return ctx


def run(ctx: Context, env: Environment, name: str, ident: str = "", **args: Any) -> Any:
    """The model calls ``name``: its call, then the result and events in one append."""
    call = ToolCall(ident or f"c{len(ctx.events)}", name, args)
    ctx.append(AssistantMessage("", (call,)))
    outcome = env.call(ctx, call)
    ctx.record_outcome(call, outcome)
    return outcome


def tail(ctx: Context) -> str:
    prep = ctx.prepare()
    return str(prep.body["messages"][-1]["content"])
