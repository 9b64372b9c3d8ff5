"""Limits and budgets hold per task tree (issue 24): a sub-agent spends only its share of
what its parent has left — ``max_calls``, ``max_tokens`` and ``max_cost`` — enforced where
its calls run, on both backends."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from ctxline import MemoryStore
from ctxline.models.scripted import ScriptedModel
from ctxline.record.events import RequestHeader, ToolResult
from ctxline.record.jsonvalue import JsonValue
from ctxline.record.store import SQLiteStore
from ctxline.record.store.base import Store
from ctxline.runner import Agent, Limits, SubAgents, tool


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    return MemoryStore() if request.param == "memory" else SQLiteStore(str(tmp_path / "t.db"))


def _spawns(n: int, prefix: str) -> dict[str, JsonValue]:
    return {
        "tool_calls": [
            {"id": f"{prefix}{i}", "name": "spawn_agent", "arguments": {"task": f"refund {i}"}}
            for i in range(n)
        ]
    }


SHAPES = [
    [1, 1, 1, 1],  # one child per reply, 4 replies
    [4],  # 4 children from one reply, in parallel
    [2, 2],
    [3, 1],
]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("cap", [1, 2])
def test_max_calls_holds_across_children(store: Store, shape: list[int], cap: int) -> None:
    paid: list[str] = []

    @tool(max_calls=cap)
    def refund(booking: str) -> str:
        """Pay a refund."""
        paid.append(booking)
        return "paid"

    child = ScriptedModel(
        [
            {"tool_calls": [{"id": "r1", "name": "refund", "arguments": {"booking": "B"}}]},
            {"tool_calls": [{"id": "r2", "name": "refund", "arguments": {"booking": "C"}}]},
            {"text": "done"},
        ]
    )
    script: list[dict[str, JsonValue]] = [_spawns(n, f"s{i}-") for i, n in enumerate(shape)]
    script.append({"tool_calls": [{"id": "d1", "name": "refund", "arguments": {"booking": "D"}}]})
    script.append({"text": "all done"})
    agent = Agent(
        ScriptedModel(script),
        [refund],
        store=store,
        session="p",
        subagents=SubAgents(model=child, max_turns=5),
    )
    agent.run("refund everyone")
    assert len(paid) == cap
    direct = [
        e.event
        for e in store.read("p")
        if isinstance(e.event, ToolResult) and e.event.call_id == "d1"
    ]
    assert direct[0].is_error
    assert "refused" in direct[0].content
    # the parent's status bar counts the children's runs: the limit reads per task tree
    headers = [e.event for e in store.read("p") if isinstance(e.event, RequestHeader)]
    tail = headers[-1].inputs.get("tail") or []
    assert isinstance(tail, list)
    status = next(t for t in tail if isinstance(t, str) and t.startswith("<ctx-status>"))
    assert "limit reached" in status.split("refund", 1)[1].splitlines()[0]


@pytest.mark.parametrize("children", [2, 5])
@pytest.mark.parametrize("max_tokens", [1_500, 3_000])
def test_max_tokens_holds_across_children(store: Store, children: int, max_tokens: int) -> None:
    child = ScriptedModel([{"text": "x " * 100}, {"text": "done"}] * 2)
    script: list[dict[str, JsonValue]] = [_spawns(1, f"s{i}-") for i in range(children)]
    script.append({"text": "all done"})
    agent = Agent(
        ScriptedModel(script),
        [],
        store=store,
        session="p",
        limits=Limits(max_tokens=max_tokens),
        subagents=SubAgents(model=child, max_turns=3),
    )
    result = agent.run("work")
    spent = result.usage["input"] + result.usage["output"]
    assert spent <= max_tokens + 400  # at most one reply's output past it
    refused = [
        e.event
        for e in store.read("p")
        if isinstance(e.event, ToolResult) and "budget is spent" in e.event.content
    ]
    assert refused or result.stop_reason == "max_tokens" or len(result.agents) < children


def test_a_child_gets_the_parents_cost_budget() -> None:
    from ctxline.runner.tree import take_share

    parent = Agent(
        ScriptedModel([{"text": "hi"}], name="openai:gpt-4.1"),
        [],
        limits=Limits(max_cost=Decimal("0.5")),
    )
    share = take_share(parent, parent.registry, None, {}, parent.model)
    assert share.max_cost == Decimal("0.5")
    second = take_share(parent, parent.registry, None, {}, parent.model)
    assert second.refused == "the task's cost budget is spent"


def test_children_of_one_reply_split_the_budget_left() -> None:
    from ctxline.runner.tree import release, take_share

    parent = Agent(ScriptedModel([{"text": "hi"}]), [], limits=Limits(max_tokens=9_000))
    shares = [
        take_share(parent, parent.registry, None, {"spawn_agent": 3}, parent.model)
        for _ in range(3)
    ]
    assert [s.max_tokens for s in shares] == [3_000, 2_000, 1_333]
    assert sum(s.max_tokens or 0 for s in shares) <= 9_000
    for share in shares:
        release(parent, share)
    again = take_share(parent, parent.registry, None, {}, parent.model)
    assert again.max_tokens == 9_000
