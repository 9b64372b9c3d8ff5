"""Background jobs: a handle at once, one notification when the job ends, drained before the next step."""

from __future__ import annotations

import asyncio
import json
import threading

from ctxline import MemoryStore
from ctxline.models.scripted import ScriptedModel
from ctxline.record.events import Notification, RequestHeader, ToolCall, ToolResult
from ctxline.record.jsonvalue import JsonValue
from ctxline.runner import Agent, Limits, tool
from json_reads_b import at


def calls(*items: tuple[str, str, dict[str, JsonValue]]) -> dict[str, JsonValue]:
    return {"tool_calls": [{"id": i, "name": n, "arguments": a} for i, n, a in items]}


LOG = "BUILD LOG\n" + "".join(f"compiling module {i}\n" for i in range(3_000)) + "exit 0\n"


def test_a_job_finishing_during_the_run_is_one_notification_before_the_next_step() -> None:
    gate = threading.Event()

    @tool(background=True, timeout=30)
    def build(target: str) -> str:
        """Build a target in the background."""
        assert gate.wait(20)
        return LOG

    holder: list[Agent] = []

    @tool
    async def release() -> str:
        """Let the build finish, and wait until it has."""
        gate.set()
        while holder[0].jobs.running:
            await asyncio.sleep(0.01)
        return "released"

    script = ScriptedModel(
        [
            calls(("b", "build", {"target": "all"})),
            calls(("r", "release", {})),
            {"text": "The build finished."},
        ]
    )
    agent = Agent(script, [build, release], store=MemoryStore(), session="jobs")
    holder.append(agent)
    result = agent.run("build everything")
    assert result.stop_reason == "final"
    assert result.turns == 3
    events = agent.ctx.events
    started = next(
        e.event for e in events if isinstance(e.event, ToolResult) and e.event.call_id == "b"
    )
    assert started.content.startswith("started job-1 in the background")
    assert at(started.meta, "runner", "job") == "job-1"
    notes = [e for e in events if isinstance(e.event, Notification)]
    assert len(notes) == 1
    note = notes[0].event
    assert isinstance(note, Notification)
    assert note.source == "job/job-1"
    assert at(note.meta, "runner", "ok") is True
    assert note.ref.startswith("sha256:")
    assert note.ref in note.text
    assert "\n" not in note.text  # the output's lines cannot imitate lines of the block
    # it was appended before the request of the step after the job ended (step 3)
    headers = [e for e in events if isinstance(e.event, RequestHeader)]
    assert headers[1].seq < notes[0].seq < headers[2].seq
    # the model saw it exactly once, with its handle, and ctx-jobs while the job ran
    step2 = json.loads(agent.ctx.rebuild(2))["messages"]
    step3 = json.loads(agent.ctx.rebuild(3))["messages"]
    assert "<ctx-jobs>\n- job-1: build\n</ctx-jobs>" in step2[-1]["content"]
    assert "<ctx-jobs>" not in step3[-1]["content"]
    shown = [m["content"] for m in step3 if str(m["content"]).startswith("<ctx-notification")]
    assert len(shown) == 1
    assert shown[0].startswith('<ctx-notification source="job/job-1" ref="sha256:')
    # the handle reads back the whole output, page by page, without running anything
    outcome = agent.ctx.call_tool(ToolCall("rr", "read_result", {"handle": note.ref}))
    assert outcome is not None
    assert not outcome.is_error
    assert "BUILD LOG" in outcome.content
    assert "compiling module 1" in outcome.content
    assert agent.store.blobs.get(note.ref).decode() == LOG


def test_a_final_answer_with_a_job_running_waits_for_it() -> None:
    @tool(background=True)
    async def crawl(url: str) -> str:
        """Fetch a page in the background."""
        await asyncio.sleep(0.05)
        return f"<html>{url}</html>"

    script = ScriptedModel(
        [
            calls(("c", "crawl", {"url": "a"})),
            {"text": "Waiting for the crawl."},
            {"text": "The page is <html>a</html>."},
        ]
    )
    agent = Agent(script, [crawl], store=MemoryStore(), session="w")
    result = agent.run("crawl a")
    assert result.stop_reason == "final"
    assert result.final == "The page is <html>a</html>."
    assert result.turns == 3
    assert sum(isinstance(e.event, Notification) for e in agent.ctx.events) == 1


def test_jobs_still_running_when_a_run_stops_are_cancelled_and_notified_once() -> None:
    @tool(background=True)
    async def forever() -> str:
        """Never ends by itself."""
        await asyncio.sleep(3600)
        return "never"

    script = ScriptedModel([calls(("f", "forever", {})), calls(("g", "forever", {}))])
    agent = Agent(script, [forever], store=MemoryStore(), session="c", limits=Limits(max_turns=2))
    result = agent.run("start")
    assert result.stop_reason == "max_turns"
    notes = [e.event for e in agent.ctx.events if isinstance(e.event, Notification)]
    assert sorted(n.source for n in notes) == ["job/job-1", "job/job-2"]
    assert all(at(n.meta, "runner", "ok") is False and "cancelled" in n.text for n in notes)
    assert agent.ledger.jobs == {}


def test_an_agent_with_background_tools_explains_jobs_from_its_first_request() -> None:
    @tool(background=True, timeout=30)
    def build(target: str) -> str:
        """Build a target in the background."""
        return "built " + target

    @tool
    def status() -> str:
        """The build status."""
        return "idle"

    def systems(agent: Agent) -> list[str]:
        bodies = [json.loads(agent.ctx.rebuild(h.step)) for h in agent.ctx.requests()]
        return [str(b["messages"][0]["content"]) for b in bodies]

    script = ScriptedModel([calls(("b", "build", {"target": "all"})), {"text": "Started."}])
    agent = Agent(script, [build, status], store=MemoryStore(), session="announced")
    agent.run("build everything")
    first, *later = systems(agent)
    assert "<ctx-jobs>" in first
    assert "<ctx-notification>" in first
    assert later
    assert all(s == first for s in later)  # the guide, in the cached prefix, never moves
    plain = Agent(ScriptedModel([{"text": "idle"}]), [status], store=MemoryStore(), session="p")
    plain.run("status?")
    assert "<ctx-jobs>" not in systems(plain)[0]
    assert "<ctx-notification>" not in systems(plain)[0]
