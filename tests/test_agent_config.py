"""An Agent takes everything a Context takes (issue 21 §1), each through ``Agent.run``.

Every test runs the real loop on a :class:`ScriptedModel` and reads what was sent from
the record (``ctx.rebuild``: the byte-exact request of a logged step).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from conftest import FakeClock
from ctxline import MemoryStore
from ctxline.context import Context, ContextConfig
from ctxline.cost import cache_pricing
from ctxline.errors import ValidationError
from ctxline.models.scripted import ScriptedModel
from ctxline.models.summarizer import LLMSummarizer
from ctxline.record.events import Reduction, RequestHeader, StatusSnapshot
from ctxline.record.jsonvalue import JsonValue, as_object
from ctxline.runner import Agent, Limits, tool
from ctxline.sources.base import BaseSource, DynamicItem, SourceStep, StepContext, TailItem
from ctxline.sources.status import StatusConfig, SystemState
from ctxline.sources.timectx import TimeConfig
from ctxline.view.ladder import compact
from ctxline.view.options import PrepareOptions
from json_reads_b import at, at_array, at_number, at_str

ENV = SystemState(cwd="/work/repo", os="Linux 6.8", shell="/bin/bash", python="3.12.4")


@tool
def fetch(n: int) -> str:
    """Fetch page n."""
    return f"page {n}: " + "lorem ipsum dolor sit amet " * 12


@tool
def fetch_long(n: int) -> str:
    """Fetch a long page n."""
    return f"page {n}: " + " ".join(f"word{i}" for i in range(300))


def calls(n: int, name: str = "fetch") -> list[dict[str, JsonValue]]:
    """n replies calling ``name``, then a final answer."""
    script: list[dict[str, JsonValue]] = [
        {"tool_calls": [{"id": f"c{i}", "name": name, "arguments": {"n": i}}]} for i in range(n)
    ]
    return [*script, {"text": "done"}]


def bodies(agent: Agent) -> list[dict[str, JsonValue]]:
    """Every request the agent sent, rebuilt from the record."""
    steps = [h.step for h in agent.ctx.requests()]
    return [json.loads(agent.ctx.rebuild(s)) for s in steps]


def last_user(body: dict[str, JsonValue]) -> str:
    content = at(body, "messages", -1, "content")
    assert isinstance(content, str)
    return content


def test_system_state_and_time_with_zone_in_the_status_bar() -> None:
    agent = Agent(
        ScriptedModel(calls(2)),
        [fetch],
        status=StatusConfig(environment=ENV),
        time_zone="Europe/Berlin",
        clock=FakeClock(datetime(2026, 11, 2, 22, 0, 0, tzinfo=UTC)),
    )
    result = agent.run("read two pages")
    assert result.stop_reason == "final"
    tail = last_user(bodies(agent)[-1])
    assert tail.startswith("<ctx-status>")
    for line in ("- cwd: /work/repo", "- os: Linux 6.8", "- shell: /bin/bash", "- python: 3.12.4"):
        assert line in tail
    assert "now: 2026-11-02T23:00:0" in tail
    assert "+01:00 (Europe/Berlin)" in tail
    assert "fetch invoked 2 times" in tail


def test_the_status_bar_can_be_turned_off() -> None:
    agent = Agent(
        ScriptedModel(calls(2)), [fetch], status_mode="off", status=StatusConfig(environment=ENV)
    )
    assert agent.run("read two pages").stop_reason == "final"
    sent = [json.dumps(b) for b in bodies(agent)]
    assert len(sent) == 3
    assert all("/work/repo" not in b and "invoked" not in b for b in sent)
    assert all(
        as_object(h.inputs.get("meta", {})).get("status") is None for h in agent.ctx.requests()
    )


def test_an_empty_status_bar_is_not_sent() -> None:
    agent = Agent(ScriptedModel(calls(1)), [fetch])
    agent.run("read a page")
    first, second = bodies(agent)[:2]
    assert last_user(first) == "read a page"  # nothing to report yet: no status at all
    assert "nothing to report yet" not in json.dumps(first)
    assert "fetch invoked 1 time" in last_user(second)


def test_append_mode_keeps_only_the_newest_clock_reading() -> None:
    clock = FakeClock(datetime(2026, 11, 2, 22, 0, 0, tzinfo=UTC))
    agent = Agent(
        ScriptedModel(calls(4)),
        [fetch],
        status=StatusConfig(time=TimeConfig("Asia/Tokyo", refresh_s=0)),
        status_mode="append",
        clock=clock,
    )
    assert agent.run("read four pages").stop_reason == "final"
    snapshots = [e.event for e in agent.ctx.events if isinstance(e.event, StatusSnapshot)]
    assert len(snapshots) >= 3  # the status was appended, step after step
    assert all("now:" not in s.text for s in snapshots)  # no clock accumulates in history
    for body in bodies(agent):
        text = json.dumps(body, ensure_ascii=False)
        assert text.count("(Asia/Tokyo)") == 1  # one reading: the newest, in the tail
    assert "<ctx-time" in last_user(bodies(agent)[-1])


def test_dynamic_context_is_called_per_step() -> None:
    seen: list[int] = []

    def cart() -> list[DynamicItem]:
        seen.append(len(seen) + 1)
        return [DynamicItem("cart", f"{len(seen)} items")]

    agent = Agent(ScriptedModel(calls(2)), [fetch], dynamic=cart)
    agent.run("shop")
    assert seen == [1, 2, 3]
    tails = [last_user(b) for b in bodies(agent)]
    for i, tail in enumerate(tails, start=1):
        assert f'<ctx-dynamic id="cart">{i} items</ctx-dynamic>' in tail


def test_an_llm_summarizer_compacts_inside_a_run() -> None:
    summary = "The user asked for pages; pages 0 to 3 were fetched and read, nothing is open."
    summarizer_model = ScriptedModel([{"text": summary}] * 20, label="summarizer")
    agent = Agent(
        ScriptedModel(calls(12, "fetch_long")),
        [fetch_long],
        options=PrepareOptions(context_window=2_400, max_output=200, defer=False, edit_gain=None),
        summarizer=LLMSummarizer(summarizer_model),
        rungs=(compact,),
        limits=Limits(max_turns=8, repeat_limit=0),
    )
    agent.run("read every page")
    reductions = [e.event for e in agent.ctx.events if isinstance(e.event, Reduction)]
    compactions = [r for r in reductions if r.action == "compact"]
    assert compactions, "the run never compacted"
    assert summarizer_model.calls >= 1
    assert summary in compactions[0].summary
    assert summary in json.dumps(bodies(agent)[-1])


def test_status_alpha_comes_from_the_model_price_and_cache_read() -> None:
    def alphas(**kwargs: Any) -> list[float]:
        agent = Agent(ScriptedModel(calls(3), name="openai:gpt-4.1"), [fetch], **kwargs)
        agent.run("read pages")
        out = []
        for header in agent.ctx.requests():
            meta = as_object(header.inputs.get("meta", {}))
            decision = as_object(meta.get("status", {})).get("decision")
            if decision:
                out.append(at_number(decision, "inputs", "alpha"))
        return out

    priced = cache_pricing("openai", "gpt-4.1").alpha
    assert priced != 0.1
    assert set(alphas()) == {priced}
    assert set(alphas(options=PrepareOptions(cache_read=0.1))) == {0.1}


def test_the_model_sent_is_the_model_logged() -> None:
    agent = Agent(
        ScriptedModel(calls(0), name="openai:gpt-4.1-mini"),
        options=PrepareOptions(context_window=32_000, max_output=1_000),
    )
    agent.run("hi")
    header = agent.ctx.requests()[0]
    assert header.options["model"] == "gpt-4.1-mini"
    assert header.options["context_window"] == 32_000
    assert bodies(agent)[0]["model"] == "gpt-4.1-mini"


@pytest.mark.parametrize(
    ("choice", "sent"),
    [
        ("required", "required"),
        ("fetch", {"type": "function", "function": {"name": "fetch"}}),
    ],
)
def test_tool_choice(choice: str, sent: object) -> None:
    agent = Agent(ScriptedModel(calls(1)), [fetch], tool_choice=choice)
    agent.run("read")
    assert all(b["tool_choice"] == sent for b in bodies(agent))


class Weather(BaseSource):
    name = "weather"

    def step(self, fold: object, ctx: StepContext) -> SourceStep:
        return SourceStep(tail=(TailItem("weather", "<ctx-weather>rain</ctx-weather>"),))


def test_any_source() -> None:
    agent = Agent(ScriptedModel(calls(1)), [fetch], sources=[Weather()])
    agent.run("read")
    assert all("<ctx-weather>rain</ctx-weather>" in last_user(b) for b in bodies(agent))


def test_builtin_tools_each_can_be_turned_off() -> None:
    def offered(**kwargs: Any) -> list[str]:
        agent = Agent(ScriptedModel(calls(0)), [fetch], **kwargs)
        agent.run("hi")
        return [at_str(t, "function", "name") for t in at_array(bodies(agent)[0], "tools")]

    assert offered() == ["fetch", "read_result", "search_history", "todo_write", "todo_update"]
    assert offered(builtin_tools=()) == ["fetch"]
    assert offered(builtin_tools=("read_result", "todo_update")) == [
        "fetch",
        "read_result",
        "todo_update",
    ]
    with pytest.raises(ValidationError, match="no built-in tool is named 'shell'"):
        Agent(ScriptedModel(calls(0)), builtin_tools=("shell",))


def test_one_config_for_context_and_agent() -> None:
    config = ContextConfig(
        status=StatusConfig(environment=ENV), dynamic=lambda: [DynamicItem("mode", "dry run")]
    )
    store = MemoryStore()
    agent = Agent(ScriptedModel(calls(1)), [fetch], store=store, session="a", config=config)
    agent.run("read")
    ctx = Context(store, "b", config=config)
    assert ctx.config == config
    assert agent.config.dynamic is config.dynamic
    tail = last_user(bodies(agent)[-1])
    assert "- cwd: /work/repo" in tail
    assert '<ctx-dynamic id="mode">dry run</ctx-dynamic>' in tail
    # a keyword given beside the configuration overrides its field
    quiet = Agent(ScriptedModel(calls(1)), [fetch], config=config, status_mode="off")
    quiet.run("read")
    assert "/work/repo" not in json.dumps(bodies(quiet))


def test_an_agent_on_a_hand_built_context() -> None:
    store = MemoryStore()
    ctx = Context(store, "hand", status=StatusConfig(environment=ENV), tool_choice="auto")
    agent = Agent(ScriptedModel(calls(1)), [fetch], context=ctx)
    assert agent.session == "hand"
    assert agent.store is store
    agent.run("read")
    body = bodies(agent)[-1]
    assert body["tool_choice"] == "auto"
    assert "- shell: /bin/bash" in last_user(body)
    ctx.refresh()  # the hand-built Context sees what the agent recorded
    assert sum(isinstance(e.event, RequestHeader) for e in ctx.events) == len(agent.ctx.requests())
