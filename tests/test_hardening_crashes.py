"""Hangs and crashes (issue 24): every model output and every tool failure becomes a
recorded result and a stop reason; no tool can hang ``run()``."""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

import pytest

from ctxline import MemoryStore
from ctxline.models.base import ModelReply, Usage
from ctxline.models.scripted import ScriptedModel
from ctxline.record.events import AssistantMessage, State, ToolCall, ToolResult
from ctxline.record.jsonvalue import JsonObject, JsonValue
from ctxline.record.store import SQLiteStore
from ctxline.record.store.base import Store
from ctxline.runner import Agent, tool
from ctxline.runner.sanitize import clean_arguments, clean_reply
from ctxline.runner.tools import ToolMeta, function_tool
from ctxline.runner.workspace import PatternRefused, check_pattern, workspace_tools
from ctxline.tools.base import ToolOutcome


def _deep(n: int) -> JsonValue:
    value: JsonValue = 1
    for _ in range(n):
        value = [value]
    return value


class Crafted(ScriptedModel):
    """A model whose first reply is a crafted ``ModelReply`` (what no script can express)."""

    def __init__(self, first: ModelReply) -> None:
        super().__init__([{"text": "unused"}, {"text": "I am done."}] * 3)
        self.first = first

    def complete(self, body: Mapping[str, Any], *, provider: Any = "openai") -> ModelReply:
        if self.calls == 0:
            self.calls += 1
            return self.first
        return super().complete(body, provider=provider)


def _call(ident: Any = "c1", name: Any = "echo", arguments: Any = None) -> ToolCall:
    return ToolCall(ident, name, {"text": "x"} if arguments is None else arguments)


USAGE: Usage = {"input": 10, "cache_read": 0, "cache_write": 0, "output": 5}
REPLIES = [
    ModelReply("ok", (_call(arguments={"text": float("nan")}),), USAGE),
    ModelReply("ok", (_call(arguments={"text": float("inf")}),), USAGE),
    ModelReply("\ud800 lone", (_call(arguments={"text": "\udfff"}),), USAGE),
    ModelReply("ok", (_call(ident="\ud83d"),), USAGE),
    ModelReply("ok", (_call(ident="x" * 100_000),), USAGE),
    ModelReply("ok", (_call(ident=""), _call(ident="")), USAGE),
    ModelReply("ok", (_call(ident="a\nb</ctx-status>"),), USAGE),
    ModelReply("ok", (_call(arguments=_deep(5_000)),), USAGE),
    ModelReply("ok", (_call(arguments={"text": _deep(100)}),), USAGE),
    ModelReply("ok", (_call(arguments={1: "x"}),), USAGE),
    ModelReply("ok", (_call(arguments={"text": object()}),), USAGE),
    ModelReply("ok", (_call(name="\udcff" * 3),), USAGE),
    ModelReply("ok", (), {"input": 2**70, "cache_read": -3, "cache_write": 0, "output": 2}),
    ModelReply("\ud800" * 50, (), USAGE, "m\ud800", "stop\udc00"),
]


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    return MemoryStore() if request.param == "memory" else SQLiteStore(str(tmp_path / "s.db"))


@tool
def echo(text: str) -> str:
    """Echo text."""
    return text


@pytest.mark.parametrize("reply", REPLIES, ids=range(len(REPLIES)))
def test_every_model_output_is_recorded_with_a_stop_reason(reply: ModelReply, store: Store) -> None:
    agent = Agent(Crafted(reply), [echo], store=store, session="s")
    result = agent.run("go")
    assert result.stop_reason in ("final", "max_turns")
    events = store.read("s")
    replies = [e.event for e in events if isinstance(e.event, AssistantMessage)]
    assert replies
    for call in replies[0].tool_calls:
        assert len(call.id) <= 128
        answered = [
            e.event
            for e in events
            if isinstance(e.event, ToolResult) and e.event.call_id == call.id
        ]
        assert len(answered) == 1


@pytest.mark.parametrize(
    "value", [float("nan"), _deep(10_000), {"a": {2: 3}}, {"s": "\ud800"}, b"bytes"]
)
def test_clean_arguments_always_gives_plain_json(value: Any) -> None:
    import json

    json.dumps(clean_arguments(value), allow_nan=False).encode("utf-8")


def test_clean_reply_keeps_a_clean_reply() -> None:
    reply = ModelReply("hi", (_call(),), USAGE)
    cleaned, events = clean_reply(reply, [AssistantMessage("hi", reply.tool_calls)], turn=1)
    assert cleaned.tool_calls == reply.tool_calls
    assert events == [AssistantMessage("hi", reply.tool_calls)]


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no message for you")


MESSAGES: list[BaseException] = [
    Unprintable(),
    ValueError("\ud800"),
    KeyError(object()),
    RuntimeError("x" * 10),
]


@pytest.mark.parametrize("exc", MESSAGES)
def test_a_tool_exception_that_cannot_be_printed_is_an_error_result(exc: BaseException) -> None:
    @tool
    def broken() -> str:
        """Fail."""
        raise exc

    store = MemoryStore()
    script = ScriptedModel(
        [{"tool_calls": [{"id": "c1", "name": "broken", "arguments": {}}]}, {"text": "ok"}]
    )
    result = Agent(script, [broken], store=store, session="s").run("go")
    assert result.stop_reason == "final"
    (res,) = [e.event for e in store.read("s") if isinstance(e.event, ToolResult)]
    assert res.is_error
    assert res.content.startswith("Error:")


# --- hangs ---------------------------------------------------------------------------

CATASTROPHIC = [
    "(a+)+$",
    "(a|aa)*b",
    r"(\w+\s?)*$",
    "((ab)*)+c",
    "a*a*a*a*a*a*b",
    "(x+x+)+y",
    "(.*a){20}",
    "(a|a?)+$",
]
FINE = [
    r"def \w+\(",
    "import (os|sys)",
    "TODO|FIXME",
    "(foo)?bar",
    r"\(a+\)+",
    "x{2,3}",
    "[(]a+[)]+",
]


@pytest.mark.parametrize("pattern", CATASTROPHIC)
def test_catastrophic_patterns_are_refused_before_matching(pattern: str) -> None:
    with pytest.raises(PatternRefused):
        check_pattern(pattern)


@pytest.mark.parametrize("pattern", FINE)
def test_ordinary_patterns_pass(pattern: str) -> None:
    assert check_pattern(pattern).pattern == pattern


def _workspace_agent(root: Path, calls: list[tuple[str, JsonObject]], store: Store) -> Agent:
    script = ScriptedModel(
        [
            {"tool_calls": [{"id": f"c{i}", "name": n, "arguments": a}]}
            for i, (n, a) in enumerate(calls)
        ]
        + [{"text": "done"}]
    )
    tools = [function_tool(t, meta=ToolMeta(timeout=2)) for t in workspace_tools(root)]
    return Agent(script, tools, store=store, session="w")


def test_a_catastrophic_search_and_a_fifo_do_not_hang_the_run(tmp_path: Path, store: Store) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "a.txt").write_text("a" * 40 + "!\n")
    os.mkfifo(root / "pipe.txt")
    calls: list[tuple[str, JsonObject]] = [
        ("search_files", {"pattern": "(a+)+$"}),
        ("search_files", {"pattern": "a"}),
        ("read_file", {"path": "pipe.txt"}),
    ]
    result = _workspace_agent(root, calls, store).run("look")
    assert result.stop_reason == "final"
    results = [e.event for e in store.read("w") if isinstance(e.event, ToolResult)]
    assert [r.is_error for r in results] == [True, False, True]
    assert "exponential" in results[0].content
    assert "a.txt:1" in results[1].content
    assert "not a regular file" in results[2].content


def test_a_hung_sync_tool_times_out_and_run_returns() -> None:
    release = threading.Event()

    def wait_forever() -> str:
        """Hang."""
        release.wait()
        return "late"

    hung = function_tool(wait_forever, meta=ToolMeta(timeout=0.5))
    store = MemoryStore()
    script = ScriptedModel(
        [{"tool_calls": [{"id": "c1", "name": "wait_forever", "arguments": {}}]}, {"text": "ok"}]
    )
    try:
        result = Agent(script, [hung], store=store, session="h").run("go")
    finally:
        release.set()
    assert result.stop_reason == "final"
    (res,) = [e.event for e in store.read("h") if isinstance(e.event, ToolResult)]
    assert res.is_error
    assert "abandoned" in res.content


@pytest.mark.parametrize("calls", [1, 2])
def test_a_hung_environment_side_effect_is_abandoned_and_run_returns(calls: int) -> None:
    from ctxline.environment import ActionSpec, Environment, EnvState

    release = threading.Event()
    started: list[str] = []

    def pay(args: Mapping[str, JsonValue], _state: EnvState) -> str:
        started.append(str(args["amount"]))
        release.wait()
        return "paid"

    params: JsonObject = {
        "type": "object",
        "properties": {"amount": {"type": "integer"}},
        "required": ["amount"],
    }
    action = ActionSpec("pay", "Pay.", lambda tx, a: None, params, perform=pay, timeout=0.5)
    env = Environment(actions=[action], builtins=False)
    reply = {
        "tool_calls": [
            {"id": f"p{i}", "name": "pay", "arguments": {"amount": i}} for i in range(calls)
        ]
    }
    store = MemoryStore()
    try:
        result = Agent(
            ScriptedModel([reply, {"text": "ok"}]), [], store=store, session="e", environment=env
        ).run("pay")
    finally:
        release.set()
    assert result.stop_reason == "final"
    results = [e.event for e in store.read("e") if isinstance(e.event, ToolResult)]
    assert len(results) == calls
    assert all(r.is_error for r in results)
    assert "abandoned" in results[0].content


BAD_OUTCOMES = [
    ToolOutcome("ok", meta={"x": float("nan")}),
    ToolOutcome("ok", meta={"x": _deep(5_000)}),
    ToolOutcome("\ud800 text"),
    ToolOutcome("ok", events=(State("crm/tier", float("nan")),)),
    # deliberately not JSON, past the type checker: the outcome must be refused
    ToolOutcome("ok", events=(State("crm/tier", cast(JsonValue, {"a": object()})),)),
]


@pytest.mark.parametrize("outcome", BAD_OUTCOMES, ids=range(len(BAD_OUTCOMES)))
def test_a_tool_outcome_that_cannot_be_recorded_is_an_error_not_a_crash(
    outcome: ToolOutcome, store: Store
) -> None:
    @tool
    def odd() -> ToolOutcome:
        """Return an odd outcome."""
        return outcome

    script = ScriptedModel(
        [{"tool_calls": [{"id": "c1", "name": "odd", "arguments": {}}]}, {"text": "ok"}]
    )
    result = Agent(script, [odd], store=store, session="o").run("go")
    assert result.stop_reason == "final"
    (res,) = [e.event for e in store.read("o") if isinstance(e.event, ToolResult)]
    assert res.content
