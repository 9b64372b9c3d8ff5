"""Limits and budgets per task tree: what a sub-agent may still spend of its parent's.

Why: a ``max_calls=1`` tool ran 4 times through 4 children, and a run with
``max_tokens=6000`` spent 94,196 tokens through them (issue 24) — each child started
with limits of its own. Here a child gets its *share* of what is left in the tree,
enforced by the child's own guards where its calls run (and shown in its status bar
as ``N/max`` of that share):

- ``max_calls``: per tool, what the parent's limit leaves after the calls of the whole
  tree so far (the parent's ledger counts a child's calls from ``meta.runner.agent.ran``
  of its result), the calls of the same reply already allowed, and the shares of
  children still running; a tool with nothing left is not given to the child;
- ``max_tokens`` / ``max_cost``: what the parent's budget leaves after the tree's spend
  and the running children's shares, split among the children one reply starts (the
  child's ``budget`` and the sub-agent cap still apply); with nothing left the spawn is
  refused.

A share is held while its child runs and released after: two children started by one
reply never both get the same remainder.

    share = take_share(parent, registry, budget, batch)
    try: ...run the child with share.registry, share.limits(...)...
    finally: release(parent, share)
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import TYPE_CHECKING
from weakref import WeakKeyDictionary

from ctxline.pricing import price_for
from ctxline.runner.registry import ToolRegistry
from ctxline.runner.usage import price_name

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ctxline.models.base import ModelClient
    from ctxline.runner.loop import Agent

__all__ = ["Share", "release", "take_share"]


@dataclass
class _Held:
    calls: dict[str, int] = field(default_factory=dict)
    tokens: int = 0
    cost: Decimal = Decimal(0)


_HELD: WeakKeyDictionary[Agent, _Held] = WeakKeyDictionary()


@dataclass(frozen=True)
class Share:
    """What one child may spend (``refused``: why it may not start at all)."""

    registry: ToolRegistry
    max_tokens: int | None = None
    max_cost: Decimal | None = None
    calls: Mapping[str, int] = field(default_factory=dict)
    refused: str = ""


def take_share(
    parent: Agent,
    registry: ToolRegistry,
    budget: int | None,
    batch: Mapping[str, int],
    model: ModelClient,
) -> Share:
    """The child's share of what the tree has left (held until :func:`release`)."""
    held = _HELD.setdefault(parent, _Held())
    limits, ledger = parent.limits, parent.ledger
    fanout = max(1, batch.get("spawn_agent", 1))  # children of one reply split what is left
    max_tokens = budget
    if limits.max_tokens is not None:
        left = limits.max_tokens - ledger.totals.tokens_spent() - held.tokens
        if left <= 0:
            return Share(registry, refused="the task's token budget is spent")
        left = max(1, left // fanout)
        max_tokens = left if budget is None else min(budget, left)
    max_cost: Decimal | None = None
    if limits.max_cost is not None:
        spent = ledger.totals.cost_usd() or Decimal(0)
        left_cost = Decimal(str(limits.max_cost)) - spent - held.cost
        if left_cost <= 0:
            return Share(registry, refused="the task's cost budget is spent")
        if price_for(price_name(model.name), parent.prices) is None:
            return Share(
                registry,
                refused=f"{model.name} has no price, so the task's cost budget cannot hold",
            )
        max_cost = left_cost / fanout
    tools = []
    calls: dict[str, int] = {}
    for tool in registry:
        cap = tool.meta.max_calls
        if cap is None:
            tools.append(tool)
            continue
        used = ledger.ran.get(tool.name, 0) + batch.get(tool.name, 0) + held.calls.get(tool.name, 0)
        left_calls = cap - used
        if left_calls > 0:
            calls[tool.name] = left_calls
            tools.append(replace(tool, meta=replace(tool.meta, max_calls=left_calls)))
    for name, n in calls.items():
        held.calls[name] = held.calls.get(name, 0) + n
    held.tokens += max_tokens if limits.max_tokens is not None and max_tokens is not None else 0
    held.cost += max_cost or Decimal(0)
    return Share(ToolRegistry(tools), max_tokens, max_cost, calls)


def release(parent: Agent, share: Share) -> None:
    """Give a finished child's share back (its real spend is in the parent's ledger now)."""
    held = _HELD.get(parent)
    if held is None or share.refused:
        return
    for name, n in share.calls.items():
        held.calls[name] = held.calls.get(name, 0) - n
    if parent.limits.max_tokens is not None and share.max_tokens is not None:
        held.tokens -= share.max_tokens
    held.cost -= share.max_cost or Decimal(0)
