"""kill -9 during a run, then resume: no call whose result was recorded runs again.

The run happens in a subprocess (a real SQLite file, the scripted model, a tool that
appends its call id to a file — the side-effect counter — and then sleeps). The test
kills it with SIGKILL while a batch is half done, resumes from the record in this
process, and checks the counter and the pairing of every call.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ctxline import MemoryStore, open_store
from ctxline.models.scripted import ScriptedModel
from ctxline.record.events import AssistantMessage, Notification, ToolCall, ToolResult, UserMessage
from ctxline.record.jsonvalue import JsonObject
from ctxline.render.neutral import INTERRUPTED, history_to_messages
from ctxline.runner import Agent, CallContext, Limits, tool
from json_reads_a import dig

SCRIPT: list[JsonObject] = [
    {"tool_calls": [{"id": "c1", "name": "work", "arguments": {"ms": 0}}]},
    {"tool_calls": [{"id": "c2", "name": "work", "arguments": {"ms": 0}}]},
    {  # a batch: c3 ends at once, c4 is still running when the process is killed
        "tool_calls": [
            {"id": "c3", "name": "work", "arguments": {"ms": 0}},
            {"id": "c4", "name": "work", "arguments": {"ms": 60000}},
        ]
    },
    {"tool_calls": [{"id": "c5", "name": "work", "arguments": {"ms": 0}}]},
    {"text": "all done"},
]

WORKER = """
import sys, time
from pathlib import Path
from ctxline import open_store
from ctxline.models.scripted import ScriptedModel
from ctxline.runner import Agent, CallContext, tool

db, script, counter = sys.argv[1:4]

@tool
def work(ms: int, ctx: CallContext) -> str:
    '''Do some work (appends the call id to the counter file).'''
    with open(counter, "a") as f:
        f.write(ctx.call.id + "\\n")
    time.sleep(ms / 1000)
    return "worked " + ctx.call.id

agent = Agent(ScriptedModel.from_file(script), [work], store=open_store(db), session="job")
agent.run("do the work")
"""


def _counter_tool(counter: Path) -> Any:
    @tool
    def work(ms: int, ctx: CallContext) -> str:
        """Do some work (appends the call id to the counter file)."""
        with counter.open("a") as f:
            f.write(ctx.call.id + "\n")
        time.sleep(ms / 1000 if ms < 1000 else 0)
        return "worked " + ctx.call.id

    return work


def _pairs(events: list[Any]) -> dict[str, list[ToolResult]]:
    answers: dict[str, list[ToolResult]] = {}
    for e in events:
        if isinstance(e, AssistantMessage):
            for c in e.tool_calls:
                answers.setdefault(c.id, [])
        elif isinstance(e, ToolResult):
            answers[e.call_id].append(e)
    return answers


def test_kill_9_mid_batch_then_resume(tmp_path: Path) -> None:
    db, script, counter = tmp_path / "run.db", tmp_path / "s.jsonl", tmp_path / "counter"
    script.write_text("\n".join(json.dumps(line) for line in SCRIPT) + "\n")
    worker = tmp_path / "worker.py"
    worker.write_text(WORKER)
    proc = subprocess.Popen([sys.executable, str(worker), str(db), str(script), str(counter)])
    try:
        deadline = time.monotonic() + 60
        # wait until c4 is running and c3's result is in the record
        while True:
            assert proc.poll() is None, "the worker ended before it was killed"
            assert time.monotonic() < deadline, "the worker never reached c4"
            lines = counter.read_text().split() if counter.exists() else []
            if "c4" in lines:
                store = open_store(str(db))
                recorded = {
                    e.event.call_id for e in store.read("job") if isinstance(e.event, ToolResult)
                }
                store.close()
                if "c3" in recorded:
                    break
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL
    before = counter.read_text().split()
    assert before == ["c1", "c2", "c3", "c4"] or before == ["c1", "c2", "c4", "c3"]

    store = open_store(str(db))
    agent = Agent(
        ScriptedModel.from_file(script), [_counter_tool(counter)], store=store, session="job"
    )
    assert agent.unfinished
    result = agent.resume()
    assert result.stop_reason == "final"
    assert result.final == "all done"
    assert result.resumed
    # every call ran exactly once: c1-c3 had results and were not run again; c4 was
    # interrupted (it may have run) and is not run behind the model's back; c5 is new
    assert sorted(counter.read_text().split()) == ["c1", "c2", "c3", "c4", "c5"]
    events = [e.event for e in store.read("job")]
    answers = _pairs(events)
    assert {k: len(v) for k, v in answers.items()} == dict.fromkeys(
        ["c1", "c2", "c3", "c4", "c5"], 1
    )
    (c4,) = answers["c4"]
    assert c4.is_error
    assert c4.content == INTERRUPTED
    assert dig(c4.meta, "runner", "interrupted")
    assert [r.content for r in answers["c3"]] == ["worked c3"]
    # the view pairs every call without any repair
    _, report = history_to_messages(events)
    assert report.clean
    assert result.turns == 5
    assert result.tool_calls == 5
    store.close()


def test_a_run_stopped_by_the_turn_cap_resumes_with_a_higher_cap(tmp_path: Path) -> None:
    counter = tmp_path / "counter"
    store = MemoryStore()
    work = _counter_tool(counter)
    first = Agent(
        ScriptedModel(SCRIPT), [work], store=store, session="cap", limits=Limits(max_turns=2)
    )
    assert first.run("work").stop_reason == "max_turns"
    again = Agent(
        ScriptedModel(SCRIPT), [work], store=store, session="cap", limits=Limits(max_turns=2)
    )
    assert again.resume().stop_reason == "max_turns"  # the task's turns are counted from the record
    more = Agent(
        ScriptedModel(SCRIPT), [work], store=store, session="cap", limits=Limits(max_turns=10)
    )
    result = more.resume()
    assert result.stop_reason == "final"
    assert result.turns == 5
    ran = counter.read_text().split()  # c3 and c4 are one batch, run side by side
    assert (ran[:2], sorted(ran[2:4]), ran[4:]) == (["c1", "c2"], ["c3", "c4"], ["c5"])
    assert sum(isinstance(e.event, UserMessage) for e in store.read("cap")) == 1


def test_a_job_running_when_the_runner_died_is_notified_once_on_resume() -> None:
    store = MemoryStore()
    store.create_session("j")
    from ctxline.context import Context

    ctx = Context(store, "j")
    ctx.append(
        UserMessage("build it"),
        AssistantMessage("", (ToolCall("b1", "build", {}),)),
    )
    ctx.append(
        ToolResult(
            "b1", "started job-1 in the background", "build", meta={"runner": {"job": "job-1"}}
        )
    )

    @tool(background=True)
    def build() -> str:
        """Build."""
        return "built"

    agent = Agent(ScriptedModel([{"text": "x"}, {"text": "ok"}]), [build], store=store, session="j")
    agent.resume()
    notes = [e.event for e in store.read("j") if isinstance(e.event, Notification)]
    assert len(notes) == 1
    assert notes[0].source == "job/job-1"
    assert "output is lost" in notes[0].text
    assert dig(notes[0].meta, "runner", "interrupted") is True
    Agent(
        ScriptedModel([{"text": "x"}, {"text": "ok"}]), [build], store=store, session="j"
    ).resume()
    assert sum(isinstance(e.event, Notification) for e in store.read("j")) == 1
