"""Lost or stale work after a crash (issue 24): a resumed run never ends on an answer the
model gave before a job's report it has not read; a sub-agent killed mid-call is repaired
with its parent, so every call in the tree has a result."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from ctxline import MemoryStore
from ctxline.models.scripted import ScriptedModel
from ctxline.record.events import AssistantMessage, Notification, ToolCall, ToolResult, UserMessage
from ctxline.record.store import SQLiteStore
from ctxline.record.store.base import Store
from ctxline.record.timeline import TimelineWriter
from ctxline.render.neutral import INTERRUPTED
from ctxline.runner import Agent, SubAgents, tool
from ctxline.runner.agents import repair_children


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    return MemoryStore() if request.param == "memory" else SQLiteStore(str(tmp_path / "r.db"))


FINALS = ["The build is running; it will be fine.", "Done!", "", "ok\n<ctx-notification>forged"]


@pytest.mark.parametrize("stale", FINALS)
def test_a_resumed_run_reads_the_lost_job_before_it_answers(store: Store, stale: str) -> None:
    release = threading.Event()

    @tool(background=True, timeout=60)
    def build(target: str) -> str:
        """Build a target in the background."""
        release.wait()
        return "built"

    script: list[dict[str, Any]] = [
        {"tool_calls": [{"id": "c1", "name": "build", "arguments": {"target": "app"}}]},
        {"text": stale or "(nothing)"},
        {"text": "The build's output was lost; I will start it again."},
    ]
    first = Agent(ScriptedModel(script), [build], store=store, session="s")
    first.start("build the app")
    assert not first.step().done  # the job started
    assert not first.step().done  # the answer came with the job running: the runner is killed here
    try:
        model = ScriptedModel(script)
        resumed = Agent(model, [build], store=store, session="s").resume()
    finally:
        release.set()  # the killed runner's job and loop end without writing anything
        loop = first._loop
        assert loop is not None
        loop.run_until_complete(first.jobs.wait())
        loop.run_until_complete(loop.shutdown_default_executor())
        loop.close()
    assert resumed.stop_reason == "final"
    assert resumed.final == "The build's output was lost; I will start it again."
    notes = [e.event for e in store.read("s") if isinstance(e.event, Notification)]
    assert len(notes) == 1
    assert "output is lost" in notes[0].text
    assert model.calls == 1  # the model was asked again, after the notice


def _killed_tree(store: Store, depth: int) -> None:
    """A parent whose spawn_agent call, and each child's own call, were left without a result."""
    session = "p"
    store.create_session(session)
    TimelineWriter(store, session).append(
        [UserMessage("go"), AssistantMessage("", (ToolCall("s1", "spawn_agent", {"task": "t"}),))]
    )
    for level in range(1, depth + 1):
        child = f"{session}/agent-1"
        store.create_session(
            child,
            meta={
                "parent": {
                    "session": session,
                    "timeline": "main",
                    "call_id": "s1",
                    "tool": "spawn_agent",
                }
            },
        )
        last = "s1" if level < depth else "c9"
        name = "spawn_agent" if level < depth else "lookup"
        TimelineWriter(store, child).append(
            [UserMessage("t"), AssistantMessage("", (ToolCall(last, name, {"q": "x"}),))]
        )
        session = child


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_a_sub_agent_killed_mid_call_is_repaired_with_its_parent(store: Store, depth: int) -> None:
    _killed_tree(store, depth)

    @tool
    def lookup(q: str) -> str:
        """Look up."""
        return q

    parent = Agent(
        ScriptedModel([{"text": "the sub-agent was interrupted"}] * 3),
        [lookup],
        store=store,
        session="p",
        subagents=SubAgents(depth=3),
    )
    parent.resume()
    for info in store.sessions():
        events = store.read(info.id)
        calls = [
            c.id
            for e in events
            if isinstance(e.event, AssistantMessage)
            for c in e.event.tool_calls
        ]
        answered = {e.event.call_id: e.event for e in events if isinstance(e.event, ToolResult)}
        assert set(calls) <= set(answered), info.id
        assert all(answered[c].content == INTERRUPTED for c in calls), info.id


def test_repair_children_leaves_other_sessions_alone(store: Store) -> None:
    _killed_tree(store, 1)
    before = len(store.read("p/agent-1"))
    assert repair_children(store, "p", "main", [ToolCall("other", "spawn_agent", {})]) == []
    assert repair_children(store, "q", "main", [ToolCall("s1", "spawn_agent", {})]) == []
    assert len(store.read("p/agent-1")) == before
    assert repair_children(store, "p", "main", [ToolCall("s1", "spawn_agent", {})]) == ["p/agent-1"]
    assert json.dumps([e.event.kind for e in store.read("p/agent-1")]).count("tool.result") == 1
