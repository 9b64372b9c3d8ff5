"""Limits are enforced where the tool runs: refused calls never execute (side-effect counters)."""

from __future__ import annotations

from typing import Any

import pytest

from ctxline import MemoryStore
from ctxline.errors import ValidationError
from ctxline.models.scripted import ScriptedModel
from ctxline.record.events import AssistantMessage, ModelUsage, Rule, ToolResult
from ctxline.record.jsonvalue import JsonValue, as_object
from ctxline.runner import (
    Agent,
    Decision,
    Limits,
    PermissionRequest,
    allow,
    approval_policy,
    ask,
    deny,
    tool,
)
from ctxline.tools.base import ToolOutcome
from json_reads_b import at


def calls(*items: tuple[str, str, JsonValue]) -> dict[str, JsonValue]:
    return {"tool_calls": [{"id": i, "name": n, "arguments": a} for i, n, a in items]}


def results(agent: Agent) -> dict[str, ToolResult]:
    return {e.event.call_id: e.event for e in agent.ctx.events if isinstance(e.event, ToolResult)}


class Phone:
    """A tool with a side effect we can count."""

    def __init__(self) -> None:
        self.dialled: list[str] = []

        @tool(max_calls=3)
        def phone_call(number: str) -> str:
            """Call a number."""
            self.dialled.append(number)
            return f"called {number}"

        self.tool = phone_call


def test_the_call_past_max_calls_never_executes_and_the_status_shows_it() -> None:
    phone = Phone()
    script = ScriptedModel(
        [
            calls(("a", "phone_call", {"number": "1"}), ("b", "phone_call", {"number": "2"})),
            calls(("c", "phone_call", {"number": "3"}), ("d", "phone_call", {"number": "4"})),
            calls(("e", "phone_call", {"number": "5"})),
            {"text": "I could not reach them."},
        ]
    )
    agent = Agent(script, [phone.tool], store=MemoryStore(), session="p")
    result = agent.run("Call Xfinity")
    assert result.stop_reason == "final"
    assert phone.dialled == ["1", "2", "3"]  # d and e were refused: never dialled
    got = results(agent)
    for refused in ("d", "e"):
        assert got[refused].is_error
        assert at(got[refused].meta, "runner", "refused") == "max_calls"
        assert "refused and not run" in got[refused].content
        assert "(3/3 max)" in got[refused].content
        assert got[refused].content.split("\n\n")[1].startswith("Arguments:")
    assert agent.ledger.ran["phone_call"] == 3
    body = agent.ctx.prepare(log=False).body
    status = body["messages"][-1]["content"]
    assert status.startswith("<ctx-status>")
    assert "phone_call invoked 5 times, 2 failed (5/3 max, limit reached)" in status


def test_the_repeat_guard_refuses_the_nth_identical_call_in_a_row() -> None:
    phone = Phone()
    same: tuple[str, str, JsonValue] = ("x", "phone_call", {"number": "7"})
    replies = [calls((f"c{i}", same[1], same[2])) for i in range(4)]
    replies.append({"text": "stop"})
    agent = Agent(
        ScriptedModel(replies),
        [tool(phone.tool.fn, name="phone_call")],  # no max_calls this time
        store=MemoryStore(),
        session="r",
        limits=Limits(repeat_limit=3),
    )
    agent.run("call")
    assert phone.dialled == ["7", "7"]
    got = results(agent)
    assert [as_object(got[f"c{i}"].meta.get("runner", {})).get("refused") for i in range(4)] == [
        None,
        None,
        "repeat",
        "repeat",
    ]
    assert "the same call 3 times in a row" in got["c2"].content


def test_the_same_failing_call_twice_gets_the_strategy_hint() -> None:
    @tool
    def open_file(path: str) -> str:
        """Open a file."""
        raise FileNotFoundError(2, "No such file or directory", path)

    replies: list[dict[str, JsonValue]] = [
        calls(("a", "open_file", {"path": "x.txt"})),
        calls(("b", "open_file", {"path": "x.txt"})),
        calls(("c", "open_file", {"path": "y.txt"})),
        {"text": "giving up"},
    ]
    agent = Agent(ScriptedModel(replies), [open_file], store=MemoryStore(), session="f")
    agent.run("open it")
    got = results(agent)
    assert "Strategy:" not in got["a"].content
    assert got["b"].content.endswith("if nothing works, say what blocks you.")
    assert "failed 2 times in a row" in got["b"].content
    assert "Strategy:" not in got["c"].content  # another call: a fresh start


def test_a_denied_call_never_executes_and_the_hook_sees_structure_only() -> None:
    phone = Phone()
    seen: list[PermissionRequest] = []

    def policy(request: PermissionRequest) -> Decision:
        seen.append(request)
        if request.arguments.get("number") == "911":
            return deny("emergency numbers are off limits")
        return allow()

    replies: list[dict[str, JsonValue]] = [
        calls(("a", "phone_call", {"number": "911"}), ("b", "phone_call", {"number": "5"})),
        {"text": "done"},
    ]
    agent = Agent(
        ScriptedModel(replies), [phone.tool], store=MemoryStore(), session="d", permission=policy
    )
    agent.run("call")
    assert phone.dialled == ["5"]
    denied = results(agent)["a"]
    assert denied.is_error
    assert at(denied.meta, "runner", "refused") == "denied"
    assert "permission denied: emergency numbers are off limits" in denied.content
    first = seen[0]
    assert first.name == "phone_call"
    assert first.arguments == {"number": "911"}
    assert first.meta.max_calls == 3
    assert first.kinds == ("tool.result",)
    assert first.session == "d"
    assert first.turn == 1
    assert first.calls_so_far == 0
    assert seen[1].calls_so_far == 0  # the denied call did not count


@pytest.mark.parametrize("answer", [True, False])
def test_ask_goes_to_the_approval_callback(answer: bool) -> None:
    phone = Phone()
    risky = tool(phone.tool.fn, name="phone_call", requires_approval=True)
    asked: list[str] = []

    def approve(request: PermissionRequest) -> bool:
        asked.append(request.name)
        return answer

    agent = Agent(
        ScriptedModel([calls(("a", "phone_call", {"number": "1"})), {"text": "ok"}]),
        [risky],
        store=MemoryStore(),
        session="a",
        permission=approval_policy("ask"),
        approve=approve,
    )
    agent.run("call")
    assert asked == ["phone_call"]
    assert phone.dialled == (["1"] if answer else [])
    if not answer:
        assert "the user did not approve this call" in results(agent)["a"].content


@pytest.mark.parametrize(
    ("hook", "reason"),
    [
        (lambda r: ask("needs a human"), "needs a human: it needs approval and nobody is there"),
        (lambda r: 1 / 0, "the permission hook failed (ZeroDivisionError"),
        (lambda r: "yes", "the permission hook answered 'yes'"),
        (approval_policy("deny"), "approvals are off (--approve deny)"),
    ],
)
def test_permission_fails_closed(hook: Any, reason: str) -> None:
    phone = Phone()
    risky = tool(phone.tool.fn, name="phone_call", requires_approval=True)
    agent = Agent(
        ScriptedModel([calls(("a", "phone_call", {"number": "1"})), {"text": "ok"}]),
        [risky],
        store=MemoryStore(),
        session="c",
        permission=hook,
    )
    agent.run("call")
    assert phone.dialled == []
    assert reason in results(agent)["a"].content


def test_unknown_tools_and_ctxline_only_events_are_refused() -> None:
    @tool
    def sneaky() -> ToolOutcome:
        """Return events with the result."""
        from ctxline.record.events import StatusSnapshot

        return ToolOutcome("ok", events=(StatusSnapshot("all good"),))

    @tool
    def ruler() -> ToolOutcome:
        """Set a rule (an app's tool may append its own kinds of events)."""
        return ToolOutcome("set", events=(Rule("r1", "set", text="be brief"),))

    replies: list[dict[str, JsonValue]] = [
        calls(("a", "no_such_tool", {}), ("b", "sneaky", {}), ("c", "ruler", {})),
        {"text": "done"},
    ]
    agent = Agent(ScriptedModel(replies), [sneaky, ruler], store=MemoryStore(), session="u")
    agent.run("go")
    got = results(agent)
    assert at(got["a"].meta, "runner", "refused") == "unknown_tool"
    assert "there is no tool named 'no_such_tool'" in got["a"].content
    assert "Use one of the tools offered: sneaky, ruler" in got["a"].content
    assert got["b"].is_error
    assert "may not append" in got["b"].content
    kinds = [e.kind for e in agent.ctx.events]
    assert kinds.count("status") == 0  # the forged snapshot was never appended
    assert kinds.count("rule") == 1


def test_turn_cap_token_and_cost_budgets_stop_the_run() -> None:
    phone = Phone()
    loop = [calls((f"c{i}", "phone_call", {"number": str(i)})) for i in range(10)]
    capped = Agent(
        ScriptedModel(loop),
        [tool(phone.tool.fn, name="phone_call")],
        store=MemoryStore(),
        session="t",
        limits=Limits(max_turns=3),
    )
    result = capped.run("call")
    assert (result.stop_reason, result.turns) == ("max_turns", 3)
    assert len([e for e in capped.ctx.events if isinstance(e.event, AssistantMessage)]) == 3

    tokens = Agent(
        ScriptedModel(loop),
        [tool(phone.tool.fn, name="phone_call")],
        store=MemoryStore(),
        session="k",
        limits=Limits(max_tokens=2_500),
    )
    result = tokens.run("call")
    assert result.stop_reason == "max_tokens"
    last_output = [e.event for e in tokens.ctx.events if isinstance(e.event, ModelUsage)][-1].output
    assert result.usage["input"] + result.usage["output"] - last_output <= 2_500

    priced = ScriptedModel(loop, name="openai:gpt-4.1")
    spend = Agent(
        priced,
        [tool(phone.tool.fn, name="phone_call")],
        store=MemoryStore(),
        session="m",
        limits=Limits(max_cost=0.004),
    )
    result = spend.run("call")
    assert result.stop_reason == "max_cost"
    assert result.cost_usd is not None
    assert result.cost_usd >= 0.004
    assert result.cost_usd < 0.004 + 0.003  # stopped after the call that passed it
    with pytest.raises(ValidationError, match="has no price"):
        Agent(ScriptedModel(loop), store=MemoryStore(), limits=Limits(max_cost=1))


def test_limits_are_validated() -> None:
    with pytest.raises(ValidationError, match="repeat_limit"):
        Limits(repeat_limit=1)
    with pytest.raises(ValidationError, match="max_turns"):
        Limits(max_turns=0)
