"""An airline desk driven by the scripted model through wrong and right actions (seed 002).

Bookings are a slot the app loads from its backend, the refund policy is the app's
constraints and validators, and ``refund`` is a business action: locked until the
identity is verified, pre-checked, validated, and paid only when everything holds. The
backend counts the refunds it actually paid.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from airline_desk import NOW, Backend, load_bookings, make_env
from ctxline import Context, open_store
from ctxline.cli.main import main
from ctxline.environment import Rejected, environment_meta
from ctxline.models.scripted import ScriptedModel
from ctxline.record.events import RequestHeader, Slot, ToolCall, ToolResult, UserMessage
from ctxline.record.jsonvalue import JsonObject, JsonValue, as_object, dig
from ctxline.runner import Agent, Limits


def call(ident: str, name: str, **args: JsonValue) -> JsonObject:
    return {"tool_calls": [{"id": ident, "name": name, "arguments": args}]}


def export(db: Path, session: str) -> bytes:
    result = CliRunner().invoke(main, ["export", "--db", str(db), "--session", session])
    assert result.exit_code == 0, result.output
    return result.stdout_bytes


def results(agent: Agent) -> dict[str, ToolResult]:
    return {e.event.call_id: e.event for e in agent.ctx.events if isinstance(e.event, ToolResult)}


SCRIPT: list[JsonObject] = [
    call("r1", "refund", booking_id="NEW222", reason="plans changed"),  # locked: not verified
    call("v1", "verify_identity", user_id="mia_li_3668", date_of_birth="1991-01-01"),  # wrong
    call("v2", "verify_identity", user_id="mia_li_3668", date_of_birth="1990-04-05"),
    call("r2", "refund", booking_id="ZZZ999"),  # no such booking: pre-check
    call("r3", "refund", booking_id="OLD111"),  # outside the window: validator
    call("r4", "refund", booking_id="NEW222"),  # right
    call("r5", "refund", booking_id="NEW222"),  # again: pre-check
    {"text": "Booking NEW222 is refunded. OLD111 is outside the refund window."},
]


def _agent(tmp_path: Path, backend: Backend, script: list[JsonObject], **kw: Any) -> Agent:
    store = open_store(str(tmp_path / "desk.db"))
    env = make_env(backend, **kw.pop("env", {}))
    agent = Agent(ScriptedModel(script), store=store, session="desk", environment=env, **kw)
    agent.start("I want a refund for my bookings NEW222 and OLD111. I'm mia_li_3668.")
    env.set(agent.ctx, "bookings", load_bookings(backend, "mia_li_3668"))
    return agent


def test_wrong_and_right_actions_on_the_desk(tmp_path: Path) -> None:
    backend = Backend()
    agent = _agent(tmp_path, backend, SCRIPT)
    while not agent.step().done:
        pass
    got = results(agent)
    assert got["r1"].is_error
    assert "Not available yet: refund is available after the user's identity" in got["r1"].content
    assert got["v1"].is_error
    assert "date of birth does not match" in got["v1"].content
    assert not got["v2"].is_error
    assert got["r2"].is_error
    assert "Not executed" in got["r2"].content
    assert "no booking 'ZZZ999'" in got["r2"].content
    assert "NEW222, OLD111" in got["r2"].content  # the feedback lists what exists
    assert got["r3"].is_error
    assert "Rule violated: refund-policy: booking OLD111 was made 14 days" in got["r3"].content
    assert "To satisfy it: refund only within 24 hours" in got["r3"].content
    assert not got["r4"].is_error
    assert "refund of $240 for NEW222 sent" in got["r4"].content
    assert got["r5"].is_error
    assert "was refunded already" in got["r5"].content
    # constraint linking: the policy naming bookings is restated whenever a call touches one
    for ident in ("r2", "r3", "r4", "r5"):
        assert "Constraints that apply to booking:" in got[ident].content
        assert "[refund-window] A booking may be refunded within 24 hours" in got[ident].content
    assert "Constraints that apply to user:mia_li_3668" in got["v2"].content
    # the side effect happened exactly once: never for a locked, pre-checked or rolled-back call
    assert backend.paid == [("NEW222", 240)]
    state = agent.environment.state(agent.ctx) if agent.environment else None
    assert state is not None
    assert dig(state["bookings"], "NEW222", "status") == "refunded"
    assert dig(state["bookings"], "OLD111", "status") == "confirmed"
    assert state["refunds"] == [{"booking": "NEW222", "amount": 240}]
    slot_events = [
        e.event for e in agent.ctx.events if isinstance(e.event, Slot) and e.event.op != "snapshot"
    ]
    assert [(e.name, e.meta.get("call")) for e in slot_events] == [
        ("bookings", None),  # the app's load
        ("session_user", "v2"),
        ("bookings", "r4"),
        ("refunds", "r4"),
    ]
    # the successful refund is one append: its result and its slot events share it
    seqs = {e.seq: e for e in agent.ctx.events}
    r4 = next(
        e for e in agent.ctx.events if isinstance(e.event, ToolResult) and e.event.call_id == "r4"
    )
    assert [seqs[r4.seq + 1].event, seqs[r4.seq + 2].event] == slot_events[2:]
    assert agent.result().stop_reason == "final"


def test_the_model_sees_every_feedback_in_its_next_request(tmp_path: Path) -> None:
    backend = Backend()
    agent = _agent(tmp_path, backend, SCRIPT, env={"placement": "tail"})
    while not agent.step().done:
        pass
    ctx = agent.ctx
    headers = [e.event for e in ctx.events if isinstance(e.event, RequestHeader)]
    assert len(headers) == len(SCRIPT)
    # the request after r3's rollback carries the rollback's words; the tail shows the state
    body = ctx.rebuild(6).decode()  # r3 is the reply to request 5
    assert "Rule violated: refund-policy" in body
    last = ctx.rebuild(len(headers))
    assert re.search(
        rb"session_user \(updated 20\d\d-\d\d-\d\dT[\d:]{8}Z by agent\): mia_li_3668", last
    )
    assert b'\\"status\\":\\"refunded\\"' in last
    assert b"locked actions" not in last  # refund unlocked once verified
    first = ctx.rebuild(1)
    assert b"locked actions: refund (available after the user's identity is verified" in first
    # the tools never changed: the phase did not break the cache
    tools_events = [e for e in ctx.events if e.event.kind == "tools"]
    assert len(tools_events) == 1
    for header in headers[1:]:
        diff = dig(header.report, "prefix", "first_difference")
        assert diff is None or as_object(diff)["section"] == "tail", diff
        assert environment_meta(header)["placement"] == "tail"


def test_a_failing_validator_leaves_the_record_byte_identical(tmp_path: Path) -> None:
    backend = Backend()
    store = open_store(str(tmp_path / "desk.db"))
    env = make_env(backend)
    ctx = Context(store, "desk", sources=[env.source], clock=lambda: NOW)
    ctx.append(UserMessage("Refund OLD111 please, I'm mia_li_3668 born 1990-04-05."))
    env.set(ctx, "bookings", load_bookings(backend, "mia_li_3668"))
    env.apply(ctx, "verify_identity", {"user_id": "mia_li_3668", "date_of_birth": "1990-04-05"})
    ctx.prepare()
    before = export(tmp_path / "desk.db", "desk")
    outcome = env.call(ctx, ToolCall("x1", "refund", {"booking_id": "OLD111"}))
    assert outcome.is_error
    assert outcome.events == ()
    assert "Rolled back: nothing was changed." in outcome.content
    assert "Rule violated: refund-policy" in outcome.content
    assert export(tmp_path / "desk.db", "desk") == before  # the record did not move
    assert backend.paid == []
    # a schema violation by the app is refused the same way: nothing written
    with pytest.raises(Rejected, match="the schema of slot bookings"):
        env.set(ctx, "bookings", {"NEW222": {"user": "mia_li_3668"}})
    assert export(tmp_path / "desk.db", "desk") == before


def test_runner_guards_apply_to_actions(tmp_path: Path) -> None:
    backend = Backend()
    same = call("", "refund", booking_id="ZZZ999")
    script: list[JsonObject] = [
        call("v", "verify_identity", user_id="mia_li_3668", date_of_birth="1990-04-05"),
        same, same, same, same,
        {"text": "I could not find that booking."},
    ]  # fmt: skip
    agent = _agent(tmp_path, backend, script, limits=Limits(repeat_limit=4, fail_hint_after=2))
    while not agent.step().done:
        pass
    failed = [
        e.event
        for e in agent.ctx.events
        if isinstance(e.event, ToolResult) and e.event.name == "refund"
    ]
    assert len(failed) == 4
    assert "Strategy:" not in failed[0].content
    assert "Strategy: this exact call has now failed 2 times in a row" in failed[1].content
    assert "refused and not run: this is the same call 4 times in a row" in failed[3].content
    assert dig(failed[3].meta, "runner", "refused") == "repeat"
    assert backend.paid == []
    # the turn cap stops a model that keeps acting
    loop = [call(f"c{i}", "read_slot", slot="bookings") for i in range(10)]
    (tmp_path / "cap").mkdir()
    capped = _agent(tmp_path / "cap", Backend(), loop, limits=Limits(max_turns=3))
    while not capped.step().done:
        pass
    assert capped.result().stop_reason == "max_turns"


def test_a_turn_transaction_applies_all_calls_or_none(tmp_path: Path) -> None:
    backend = Backend()
    both: JsonObject = {
        "tool_calls": [
            {"id": "g", "name": "update_goal", "arguments": {"goal": "Refund NEW222"}},
            {"id": "bad", "name": "refund", "arguments": {"booking_id": "NEW222"}},  # locked
        ]
    }
    fixed: JsonObject = {
        "tool_calls": [
            {
                "id": "v",
                "name": "verify_identity",
                "arguments": {"user_id": "mia_li_3668", "date_of_birth": "1990-04-05"},
            },
            {"id": "g2", "name": "update_goal", "arguments": {"goal": "Refund NEW222"}},
            {"id": "ok", "name": "refund", "arguments": {"booking_id": "NEW222"}},
        ]
    }
    agent = _agent(
        tmp_path, backend, [both, fixed, {"text": "done"}], env={"turn_transactions": True}
    )
    agent.step()
    got = results(agent)
    assert got["bad"].is_error
    assert "Not available yet" in got["bad"].content
    assert got["g"].is_error
    assert "Rolled back with the rest of this turn" in got["g"].content
    assert dig(got["g"].meta, "runner", "transaction") == "turn"
    assert agent.environment is not None
    assert agent.environment.state(agent.ctx)["goal"] is None  # the goal call was rolled back too
    agent.step()
    got = results(agent)
    assert not any(got[i].is_error for i in ("v", "g2", "ok"))
    # one append: the three results and every slot event of the turn, in one seq run
    tail = [e for e in agent.ctx.events if e.seq > agent.ctx.events[-1].seq - 8]
    kinds = [e.event.kind for e in tail]
    assert kinds[-7:] == ["tool.result"] * 3 + ["slot"] * 4
    assert backend.paid == [("NEW222", 240)]
    agent.close()
