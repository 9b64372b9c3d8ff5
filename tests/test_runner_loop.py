"""The loop: parallel calls with timeouts, stop reasons, the step-level API, usage, invariants."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxline import MemoryStore
from ctxline.models.scripted import ScriptedModel
from ctxline.record.events import (
    AssistantMessage,
    ModelFailure,
    ModelUsage,
    RequestHeader,
    ToolResult,
)
from ctxline.record.jsonvalue import JsonValue, as_object
from ctxline.render.neutral import history_to_messages
from ctxline.runner import Agent, Limits, tool
from ctxline.view.options import PrepareOptions
from json_reads_b import at


def calls(*items: tuple[str, str, JsonValue]) -> dict[str, JsonValue]:
    return {"tool_calls": [{"id": i, "name": n, "arguments": a} for i, n, a in items]}


def results(agent: Agent) -> dict[str, ToolResult]:
    return {e.event.call_id: e.event for e in agent.ctx.events if isinstance(e.event, ToolResult)}


def test_a_batch_runs_in_parallel_and_each_call_has_its_timeout() -> None:
    barrier = threading.Barrier(2, timeout=10)

    @tool
    def meet(name: str) -> str:
        """Wait for the other call of the batch (only possible if both run at once)."""
        barrier.wait()
        return f"{name} met"

    @tool(timeout=0.2)
    async def hang() -> str:
        """Never answers in time."""
        await asyncio.sleep(30)
        return "late"

    script = ScriptedModel(
        [
            calls(("a", "meet", {"name": "a"}), ("b", "meet", {"name": "b"}), ("h", "hang", {})),
            {"text": "ok"},
        ]
    )
    agent = Agent(script, [meet, hang], store=MemoryStore(), session="par")
    step = None
    agent.start("meet")
    step = agent.step()
    assert [r.call_id for r in step.results] == ["a", "b", "h"]  # in call order
    got = results(agent)
    assert (got["a"].content, got["b"].content) == ("a met", "b met")
    assert got["h"].is_error
    assert "TimeoutError: the call took longer than 0.2 s and was abandoned" in got["h"].content
    assert "Hint: The operation timed out." in got["h"].content
    final = agent.step()
    assert final.done
    assert final.stop_reason == "final"
    assert final.reply is not None
    assert final.reply.text == "ok"
    assert agent.result().final == "ok"


def test_usage_events_and_the_estimate_beside_the_reported_input() -> None:
    script = ScriptedModel(
        [
            {
                **calls(("a", "todo_write", {"items": [{"id": "1", "content": "x"}]})),
                "usage": {"input": 900, "cache_read": 512, "cache_write": 0, "output": 12},
            },
            {
                "text": "done",
                "usage": {"input": 1000, "cache_read": 900, "cache_write": 0, "output": 3},
            },
        ],
        name="openai:gpt-4.1",
    )
    agent = Agent(script, store=MemoryStore(), session="u")
    result = agent.run("plan")
    usages = [e.event for e in agent.ctx.events if isinstance(e.event, ModelUsage)]
    headers = [e.event for e in agent.ctx.events if isinstance(e.event, RequestHeader)]
    assert [u.request_step for u in usages] == [h.step for h in headers] == [1, 2]
    assert [u.estimated_input for u in usages] == [at(h.report, "tokens", "total") for h in headers]
    assert all(u.model == "openai:gpt-4.1" for u in usages)
    assert result.usage == {"input": 1900, "cache_read": 1412, "cache_write": 0, "output": 15}
    # gpt-4.1: $2 input, $0.50 cached, $8 output per million
    expected = (488 * 2 + 1412 * 0.5 + 15 * 8) / 1_000_000
    assert result.cost_usd is not None
    assert abs(float(result.cost_usd) - expected) < 1e-12
    assert result.calibration["n"] == 2
    assert result.calibration["reported"] == 1900
    # every reply and its usage were one append: the usage follows its reply directly
    kinds = [e.kind for e in agent.ctx.events]
    assert all(kinds[i + 1] == "usage" for i, k in enumerate(kinds) if k == "assistant.message")


def test_stop_reasons_model_error_overflow_and_stop_condition() -> None:
    exhausted = Agent(
        ScriptedModel([calls(("a", "read_result", {"handle": "x"}))]), store=MemoryStore()
    )
    result = exhausted.run("go")
    assert result.stop_reason == "model_error"
    assert "the script has 1 replies" in result.error

    tiny = PrepareOptions(model="m", context_window=300, max_output=100)
    overflow = Agent(
        ScriptedModel([{"text": "x"}]), store=MemoryStore(), options=tiny, system="word " * 400
    )
    result = overflow.run("go")
    assert result.stop_reason == "context_overflow"
    assert "the input limit is 200" in result.error

    stopper = Agent(
        ScriptedModel([calls(("s", "search_history", {"query": "go"})), {"text": "never"}]),
        store=MemoryStore(),
        stop_when=lambda step: any(r.name == "search_history" for r in step.results),
    )
    result = stopper.run("go")
    assert result.stop_reason == "stop_condition"
    assert result.turns == 1


def test_missing_and_repeated_call_ids_get_fresh_ones() -> None:
    @tool
    def echo(text: str) -> str:
        """Echo."""
        return text

    script = ScriptedModel(
        [
            calls(
                ("", "echo", {"text": "a"}),
                ("", "echo", {"text": "b"}),
                ("x", "echo", {"text": "c"}),
                ("x", "echo", {"text": "d"}),
            ),
            {"text": "ok"},
        ]
    )
    agent = Agent(script, [echo], store=MemoryStore(), session="ids")
    agent.run("echo")
    reply = next(e.event for e in agent.ctx.events if isinstance(e.event, AssistantMessage))
    assert [c.id for c in reply.tool_calls] == ["call_1_1", "call_1_2", "x", "call_1_4"]
    assert at(reply.meta, "runner", "renamed_ids") == ["", "", "x"]
    assert [results(agent)[c.id].content for c in reply.tool_calls] == ["a", "b", "c", "d"]


NAMES = ["limited", "free", "ghost"]


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.lists(st.tuples(st.sampled_from(NAMES), st.integers(0, 2)), min_size=1, max_size=4),
        min_size=1,
        max_size=6,
    ),
    st.integers(1, 3),
)
def test_every_call_is_answered_once_and_max_calls_holds(
    batches: list[list[tuple[str, int]]], limit: int
) -> None:
    ran: list[str] = []

    @tool(max_calls=limit)
    def limited(n: int) -> str:
        """Limited."""
        ran.append("limited")
        return str(n)

    @tool
    def free(n: int) -> str:
        """Free."""
        ran.append("free")
        return str(n)

    replies: list[dict[str, JsonValue]] = []
    for t, batch in enumerate(batches):
        made: list[tuple[str, str, JsonValue]] = [
            (f"c{t}_{i}", name, {"n": n}) for i, (name, n) in enumerate(batch)
        ]
        replies.append(calls(*made))
    replies.append({"text": "end"})
    agent = Agent(
        ScriptedModel(replies), [limited, free], store=MemoryStore(), limits=Limits(max_turns=20)
    )
    result = agent.run("go")
    assert result.stop_reason == "final"
    assert ran.count("limited") <= limit
    events = [e.event for e in agent.ctx.events]
    call_ids = [c.id for e in events if isinstance(e, AssistantMessage) for c in e.tool_calls]
    answered = [e.call_id for e in events if isinstance(e, ToolResult)]
    assert sorted(call_ids) == sorted(answered)
    assert len(set(answered)) == len(answered)
    assert history_to_messages(events)[1].clean
    refused = [
        e for e in events if isinstance(e, ToolResult) and as_object(e.meta.get("runner", {})).get("refused")
    ]
    assert len(ran) + len(refused) == len(call_ids)
    assert all(
        e.name == "ghost" or at(e.meta, "runner", "refused") in ("max_calls", "repeat") for e in refused
    )


def test_a_model_error_ends_the_run_with_a_recorded_event() -> None:
    script = ScriptedModel([calls(("a", "todo_write", {"items": []}))])
    agent = Agent(script, store=MemoryStore(), session="err")
    result = agent.run("plan")
    assert result.stop_reason == "model_error"
    assert result.final == ""
    last = agent.ctx.events[-1].event
    assert isinstance(last, ModelFailure)
    assert (last.model, last.error_type) == ("script:script", "ModelError")
    assert last.error == result.error
    assert "the script has 1 replies and this request is turn 2" in last.error
    assert last.request_step == agent.ctx.requests()[-1].step
    resumed = Agent(script, store=agent.store, session="err").run(None)  # still failing
    assert resumed.stop_reason == "model_error"
    failures = [e for e in agent.store.read("err") if isinstance(e.event, ModelFailure)]
    assert len(failures) == 2


class Recording(ScriptedModel):
    """The scripted model, keeping every body it was handed."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.bodies: list[dict[str, Any]] = []

    def complete(self, body: Any, *, provider: Any = "openai") -> Any:
        self.bodies.append(json.loads(json.dumps(body)))  # a copy, as the client saw it
        return super().complete(body, provider=provider)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_the_body_sent_is_the_logged_request_through_edits(provider: str) -> None:
    @tool
    def page(n: int) -> str:
        """A long page."""
        return f"page {n}: " + " ".join(f"w{i}" for i in range(250))

    replies = [calls((f"c{i}", "page", {"n": i})) for i in range(14)]
    model = Recording([*replies, {"text": "done"}], provider=provider)
    agent = Agent(
        model,
        [page],
        options=PrepareOptions(context_window=2_600, max_output=200, defer=False),
        limits=Limits(max_turns=12, repeat_limit=0),
        status_mode="replace",
    )
    agent.run("read the pages")
    steps = [h.step for h in agent.ctx.requests()]
    assert len(steps) == len(model.bodies) >= 10
    assert any(e.kind == "reduction" for e in agent.ctx.events)  # frozen history was edited
    for step, sent in zip(steps, model.bodies, strict=True):
        assert sent == json.loads(agent.ctx.rebuild(step))


def _tail(body: dict[str, Any]) -> str:
    last = body["messages"][-1]
    return str(last["content"]) if last["role"] == "user" else ""


def test_a_first_empty_reply_is_asked_again_with_a_note_and_a_second_ends_the_run() -> None:
    @tool
    def read(path: str) -> str:
        """Read a file."""
        return f"text of {path}"

    model = Recording([calls(("c1", "read", {"path": "a"})), {"text": " "}, {"text": "Done."}])
    agent = Agent(model, [read], store=MemoryStore(), session="empty", status_mode="replace")
    result = agent.run("read a")
    assert (result.final, result.stop_reason, result.turns) == ("Done.", "final", 3)
    assert "your last reply was empty" not in _tail(model.bodies[1])
    assert "your last reply was empty" in _tail(model.bodies[2])  # computed from the record

    twice = Recording([calls(("c1", "read", {"path": "a"})), {"text": ""}, {"text": ""}])
    again = Agent(twice, [read], store=MemoryStore(), session="twice")
    result = again.run("read a")
    assert (result.final, result.stop_reason, result.turns) == ("", "final", 3)


def test_a_run_stopped_after_one_empty_reply_resumes_and_asks_again() -> None:
    store = MemoryStore()
    first = Agent(ScriptedModel([{"text": ""}]), store=store, session="resume-empty")
    first.limits = Limits(max_turns=1)
    assert first.run("say hi").stop_reason == "max_turns"
    assert first.unfinished  # one empty reply is no answer, in the record as in the run
    script = ScriptedModel([{"text": ""}, {"text": "hi"}])  # replies by turn: the 2nd is new
    second = Agent(script, store=store, session="resume-empty")
    assert second.run(None).final == "hi"
