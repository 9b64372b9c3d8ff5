"""Sub-agents: a child session; only its capped result reaches the parent's record."""

from __future__ import annotations

import json
from typing import Any

from ctxline import MemoryStore
from ctxline.models.scripted import ScriptedModel
from ctxline.record.codec import event_to_json
from ctxline.record.events import ToolCall, ToolResult
from ctxline.runner import Agent, SubAgents, tool
from ctxline.tokens.counters import get_counter
from json_reads_b import at, at_int

COUNTER = get_counter("o200k_base")
DUMP = " ".join(f"LEAKED-{i:05d} telemetry reading {i * 7 % 1000}" for i in range(9_000))
ANSWER = "Findings: " + " ".join(f"point {i} is fine." for i in range(1_500))


@tool
def dump_logs() -> str:
    """Return the whole telemetry dump."""
    return DUMP


@tool
def note(text: str) -> str:
    """Keep a note."""
    return "noted"


def _parent(**sub: Any) -> tuple[Agent, ScriptedModel]:
    child_model = ScriptedModel(
        [
            {"tool_calls": [{"id": "k1", "name": "dump_logs", "arguments": {}}]},
            {"text": ANSWER},
        ],
        label="child",
        name="openai:gpt-4.1-mini",
    )
    parent_model = ScriptedModel(
        [
            {
                "tool_calls": [
                    {
                        "id": "s1",
                        "name": "spawn_agent",
                        "arguments": {
                            "task": "Read the telemetry and report problems.",
                            "tools": ["dump_logs"],
                        },
                    }
                ]
            },
            {"text": "No problems were found."},
        ],
        label="parent",
        name="openai:gpt-4.1",
    )
    agent = Agent(
        parent_model,
        [dump_logs, note],
        store=MemoryStore(),
        session="boss",
        subagents=SubAgents(model=child_model, **sub),
    )
    return agent, child_model


def test_a_sub_agents_tool_output_never_enters_the_parents_record() -> None:
    assert COUNTER.count(DUMP) > 50_000
    agent, _ = _parent(result_tokens=300)
    result = agent.run("Check the telemetry.")
    assert result.stop_reason == "final"
    assert result.final == "No problems were found."
    parent_json = json.dumps([event_to_json(e.event) for e in agent.ctx.events])
    assert "LEAKED-" not in parent_json
    # the child did read it, in its own session, linked to the parent
    child_id = "boss/agent-1"
    child_events = agent.store.read(child_id)
    child_json = json.dumps([event_to_json(e.event) for e in child_events])
    assert "LEAKED-00042" in child_json
    assert agent.store.session(child_id).meta["parent"] == {
        "session": "boss",
        "timeline": "main",
        "call_id": "s1",
        "tool": "spawn_agent",
    }
    spawn = next(e.event for e in agent.ctx.events if isinstance(e.event, ToolResult))
    assert at(spawn.meta, "runner", "agent", "session") == child_id
    assert at(spawn.meta, "runner", "agent", "stop_reason") == "final"
    # the parent's view holds at most the cap of the child's answer, and a handle to the rest
    messages = agent.ctx.prepare(log=False).body["messages"]
    (shown,) = [m["content"] for m in messages if m.get("role") == "tool"]
    assert COUNTER.count(shown) <= 300 + 120  # the cap plus the runner's two framing lines
    assert "the first 300 are shown" in shown
    handle = shown.rsplit('read_result(handle="', 1)[1].split('"')[0]
    assert agent.store.blobs.get(handle).decode() == ANSWER
    page = agent.ctx.call_tool(ToolCall("r", "read_result", {"handle": handle}))
    assert page is not None
    assert "point 1 is fine." in page.content


def test_tokens_and_cost_are_counted_per_agent_and_summed() -> None:
    agent, _ = _parent()
    result = agent.run("Check the telemetry.")
    child = result.agents["boss/agent-1"]
    own = result.own["own_usage"]
    child_usage = child["own_usage"]
    assert isinstance(own, dict)
    assert isinstance(child_usage, dict)
    for key in ("input", "cache_read", "cache_write", "output"):
        assert result.usage[key] == at_int(own, key) + at_int(child_usage, key)
    assert child["model_calls"] == 2
    assert result.own["model_calls"] == 2
    assert at_int(child_usage, "input") > 0
    assert at_int(own, "input") > 0
    assert child["turns"] == 2
    assert child["tool_calls"] == 1
    assert result.cost_usd is not None
    parent_cost = result.own["own_cost_usd"]
    assert isinstance(parent_cost, str)
    assert isinstance(child["own_cost_usd"], str)
    from decimal import Decimal

    assert result.cost_usd == Decimal(parent_cost) + Decimal(child["own_cost_usd"])
    # the figures come from the record: a fresh Agent on the same session sees them too
    again = Agent(ScriptedModel([]), store=agent.store, session="boss", subagents=SubAgents())
    assert again.result().usage == result.usage


def test_spawn_agent_checks_its_arguments_and_tool_names() -> None:
    model = ScriptedModel(
        [
            {
                "tool_calls": [
                    {
                        "id": "a",
                        "name": "spawn_agent",
                        "arguments": {"task": "x", "tools": ["rm_rf"]},
                    },
                    {"id": "b", "name": "spawn_agent", "arguments": {"task": "   "}},
                    {"id": "c", "name": "spawn_agent", "arguments": {}},
                ]
            },
            {"text": "ok"},
        ]
    )
    agent = Agent(model, [note], store=MemoryStore(), session="p", subagents=SubAgents())
    agent.run("go")
    got = {e.event.call_id: e.event for e in agent.ctx.events if isinstance(e.event, ToolResult)}
    assert "unknown tools ['rm_rf']" in got["a"].content
    assert "Nothing was started" in got["a"].content
    assert "the task is empty" in got["b"].content
    assert "task: Field required" in got["c"].content
    assert [s.id for s in agent.store.sessions()] == ["p"]  # no child was created
