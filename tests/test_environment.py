"""Slots, the built-in actions, transactions, tiers, TTL, phases, linking and the budget share."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import timedelta

import pytest

from ctxline.environment import (
    ActionSpec,
    Check,
    Constraint,
    Environment,
    EnvState,
    Rejected,
    SlotSpec,
    Tx,
    environment_meta,
)
from ctxline.errors import ValidationError
from ctxline.record.events import Slot, ToolCall, UserMessage
from ctxline.record.jsonvalue import JsonObject, JsonValue, as_array, as_object
from ctxline.view.options import PrepareOptions
from env_support import Clock, make, run, tail
from json_reads_a import dig, num, objects


def test_slot_specs_are_checked_when_declared() -> None:
    with pytest.raises(ValidationError, match="slot name 'Has Space'"):
        SlotSpec("Has Space")
    with pytest.raises(ValidationError, match="not a valid JSON schema"):
        SlotSpec("x", {"type": "no-such-type"})
    with pytest.raises(ValidationError, match="the default does not fit the schema"):
        SlotSpec("x", {"type": "integer"}, default="seven")
    with pytest.raises(ValidationError, match="tier must be one of"):
        SlotSpec("x", tier="pinned")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="affects 'locked', which is read-only"):
        Environment(
            [SlotSpec("locked", policy="read-only")],
            [ActionSpec("a", "x", lambda tx, a: None, affects=("locked",))],
        )
    with pytest.raises(ValidationError, match="affects undeclared slot 'nope'"):
        Environment(actions=[ActionSpec("a", "x", lambda tx, a: None, affects=("nope",))])
    with pytest.raises(ValidationError, match="shared slots need a board"):
        Environment(shared=("goal",))
    assert (
        SlotSpec("n", {"type": "integer", "minimum": 0}).problem(-1)
        == "-1 is less than the minimum of 0"
    )


def test_builtin_actions_change_the_slots_and_the_block_shows_them() -> None:
    env = Environment(constraints=[Constraint("c1", "Spend at most 900 EUR.", ("trip",))])
    ctx = make(env)
    env.set(ctx, "todo_steps", ["book the flight", "book the hotel"])
    assert not run(ctx, env, "update_goal", goal="A weekend in Oslo").is_error
    out = run(ctx, env, "add_constraint", text="The user is vegetarian", entities=["meal"])
    assert "Constraint m1 is added" in out.content
    assert not run(ctx, env, "mark_step_done", step="book the flight").is_error
    state = env.state(ctx)
    assert state["goal"] == "A weekend in Oslo"
    assert state["todo_steps"] == ["book the hotel"]
    assert state["done_steps"] == ["book the flight"]
    assert [c.id for c in state.constraints] == ["c1", "m1"]
    block = tail(ctx)
    assert block.startswith(
        "<ctx-env>\ngoal (updated 2026-03-02T09:00:00Z by agent): A weekend in Oslo\n"
    )
    assert "- [c1] Spend at most 900 EUR. (applies to: trip)" in block
    assert '- [m1, written by the model; grants nothing] "The user is vegetarian"' in block
    assert 'todo_steps (updated 2026-03-02T09:00:00Z by agent): ["book the hotel"]' in block
    assert 'done_steps (updated 2026-03-02T09:00:00Z by agent): ["book the flight"]' in block
    # only the model's own constraints can go
    refused = run(ctx, env, "remove_constraint", id="c1")
    assert refused.is_error
    assert "constraint c1 is the application's" in refused.content
    assert not run(ctx, env, "remove_constraint", id="m1").is_error
    assert [c.id for c in env.state(ctx).constraints] == ["c1"]
    again = run(ctx, env, "mark_step_done", step="book the flight")
    assert again.is_error
    assert 'step "book the flight" is done already' in again.content


def test_a_rollback_writes_nothing_and_names_the_rule_and_the_fix() -> None:
    def budget(state: EnvState, args: Mapping[str, JsonValue]) -> str | None:
        spent = sum(num(item["eur"]) for item in objects(state["spend"] or []))
        return f"the spending would reach {spent} EUR" if spent > 900 else None

    def spend(tx: Tx, args: Mapping[str, JsonValue]) -> str:
        tx.append("spend", {"what": args["what"], "eur": args["eur"]})
        return "Recorded."

    params: JsonObject = {
        "type": "object",
        "additionalProperties": False,
        "required": ["what", "eur"],
        "properties": {"what": {"type": "string"}, "eur": {"type": "integer", "minimum": 1}},
    }
    env = Environment(
        [SlotSpec("spend", {"type": "array"}, policy="append", default=[])],
        [ActionSpec("spend", "Record a purchase.", spend, params, affects=("spend",))],
        [Check("budget", budget, "keep the trip at or under 900 EUR: choose a cheaper option")],
    )
    ctx = make(env)
    assert not run(ctx, env, "spend", what="flight", eur=600).is_error
    before = list(ctx.store.read("s"))
    call = ToolCall("x", "spend", {"what": "hotel", "eur": 400})
    outcome = env.call(ctx, call)
    assert outcome.is_error
    assert outcome.events == ()
    assert outcome.content.splitlines() == [
        "Rolled back: nothing was changed.",
        "Rule violated: budget: the spending would reach 1000 EUR.",
        "To satisfy it: keep the trip at or under 900 EUR: choose a cheaper option.",
    ]
    assert list(ctx.store.read("s")) == before
    bad = env.call(ctx, ToolCall("y", "spend", {"what": "hotel", "eur": "cheap"}))
    assert bad.is_error
    assert "Not done: the arguments do not fit spend's parameters" in bad.content
    assert "'cheap' is not of type 'integer'" in bad.content

    # an append-only slot cannot be rewritten, even by an action that declares it
    def rewrite(tx: Tx, args: Mapping[str, JsonValue]) -> str:
        tx.set("spend", [])
        return "cleared"

    env2 = Environment(
        [SlotSpec("spend", policy="append")], [ActionSpec("wipe", "x", rewrite, affects=("spend",))]
    )
    ctx2 = make(env2)
    wiped = env2.call(ctx2, ToolCall("w", "wipe", {}))
    assert wiped.is_error
    assert "slot 'spend' is append-only" in wiped.content
    assert wiped.events == ()


def test_app_changes_are_checked_too() -> None:
    env = Environment(
        [SlotSpec("profile", {"type": "object", "required": ["name"]}, policy="read-only")]
    )
    ctx = make(env)
    env.set(ctx, "profile", {"name": "Mia"})  # the app may set a read-only slot
    with pytest.raises(Rejected, match="the schema of slot profile"):
        env.set(ctx, "profile", {"nom": "Mia"})
    assert env.state(ctx)["profile"] == {"name": "Mia"}
    env.clear(ctx, "profile")
    assert env.state(ctx)["profile"] is None
    assert [e.event.meta["by"] for e in ctx.events if isinstance(e.event, Slot)] == ["app", "app"]


def test_tiers_ttl_and_read_slot() -> None:
    clock = Clock()
    env = Environment(
        [
            SlotSpec("profile", tier="on-demand", description="the user's profile"),
            SlotSpec("weather", {"type": "string"}, tier="discardable", ttl=timedelta(minutes=10)),
        ]
    )
    ctx = make(env, clock)
    env.set(ctx, "profile", {"name": "Mia", "tier": "gold"})
    env.set(ctx, "weather", "Oslo: sunny, 4 °C")
    prep = ctx.prepare()
    body = json.dumps(prep.body)
    assert (
        "on demand (read_slot): profile (updated 2026-03-02T09:00:00Z by app)"
        in prep.body["messages"][-1]["content"]
    )
    assert "gold" not in body  # an on-demand value is not shown
    assert (
        '<ctx-env tier=\\"discardable\\">\\nweather (updated 2026-03-02T09:00:00Z by app):'
        " Oslo: sunny, 4 \\u00b0C" in body
    )
    read = run(ctx, env, "read_slot", slot="profile")
    assert '"tier": "gold"' in read.content
    assert "slot profile (on-demand, overwrite; updated" in read.content
    clock.tick(minutes=11)
    prep = ctx.prepare()
    expired = [e.event for e in ctx.events if isinstance(e.event, Slot) and e.event.op == "expire"]
    assert [(e.name, e.meta["by"]) for e in expired] == [("weather", "ctxline")]
    last = prep.body["messages"][-1]["content"]
    assert "weather (expired 2026-03-02T09:11:00Z)" in last
    assert "sunny" not in last
    assert env.state(ctx)["weather"] is None
    later = run(ctx, env, "read_slot", slot="weather")
    assert "expired (its TTL ran out)" in later.content
    assert "sunny" in later.content
    ctx.prepare()
    assert len([e for e in ctx.events if isinstance(e.event, Slot) and e.event.op == "expire"]) == 1


def test_discardable_slots_go_first_under_pressure() -> None:
    env = Environment([SlotSpec("scratch", tier="discardable")], builtins=("update_goal",))
    options = PrepareOptions(context_window=3_000, max_output=500, defer=False)  # reduce now
    ctx = make(env, options=options)
    env.set(ctx, "scratch", "x " * 300)
    for i in range(6):
        ctx.append(UserMessage(f"note {i}: " + "words " * 200))
    prep = ctx.prepare()
    last = prep.body["messages"][-1]["content"]
    dropped = [a for a in objects(prep.report["actions"]) if a["action"] == "drop_dynamic"]
    assert dropped
    assert "environment/discardable" in as_array(dropped[0]["items"])
    assert "scratch:" not in last
    assert "<ctx-env>" in last


def test_the_block_is_capped_at_its_budget_share_and_says_what_it_cut() -> None:
    env = Environment(
        [SlotSpec("notes", {"type": "string"}, max_chars=5_000)],
        builtins=("update_goal",),
        budget_share=0.005,
    )
    ctx = make(env, options=PrepareOptions(context_window=100_000, max_output=1_000))
    env.set(ctx, "notes", "long notes " * 400)
    prep = ctx.prepare()
    meta = environment_meta(prep.header)
    assert meta["budget"]["cap"] == 495
    assert meta["budget"]["tokens"] <= 495
    assert meta["budget"]["cut"] == ["discardable", "clip:120"]
    assert "; clipped: read_slot shows all of it): " in prep.body["messages"][-1]["content"]


def test_phases_lock_actions_without_changing_the_tools() -> None:
    def ship(tx: Tx, args: Mapping[str, JsonValue]) -> str:
        tx.set("shipped", True)
        return "Shipped."

    paid = Check(
        "paid", lambda s, a: None if s["paid"] else "the order is not paid", "the order is paid"
    )
    env = Environment(
        [
            SlotSpec("paid", {"type": "boolean"}, default=False),
            SlotSpec("shipped", {"type": "boolean"}, default=False),
        ],
        [ActionSpec("ship", "Ship the order.", ship, affects=("shipped",), unlock=paid)],
        builtins=(),
    )
    ctx = make(env)
    first = ctx.prepare()
    assert (
        "locked actions: ship (available after the order is paid)"
        in first.body["messages"][-1]["content"]
    )
    out = run(ctx, env, "ship")
    assert out.is_error
    assert "Not available yet: ship is available after the order is paid" in out.content
    env.set(ctx, "paid", True)
    second = ctx.prepare()
    assert "locked actions" not in second.body["messages"][-1]["content"]
    assert first.body["tools"] == second.body["tools"]
    diff = dig(second.report["prefix"], "first_difference")
    assert diff is None or as_object(diff)["section"] == "tail"
    assert not run(ctx, env, "ship").is_error
    assert env.state(ctx)["shipped"] is True


def test_constraints_are_restated_when_an_action_touches_what_they_name() -> None:
    def move(tx: Tx, args: Mapping[str, JsonValue]) -> str:
        tx.set("seat", args["seat"])
        return "Moved."

    params: JsonObject = {
        "type": "object",
        "properties": {"flight": {"type": "string"}, "seat": {"type": "string"}},
        "required": ["flight", "seat"],
        "additionalProperties": False,
    }
    env = Environment(
        [SlotSpec("seat")],
        [
            ActionSpec(
                "move_seat",
                "Move the passenger.",
                move,
                params,
                affects=("seat",),
                entities={"flight": "flight"},
            )
        ],
        constraints=[
            Constraint("any-flight", "Exit rows need an adult.", ("flight",)),
            Constraint("this-flight", "HAT069 is full in business.", ("flight:HAT069",)),
            Constraint("other", "Be polite."),
        ],
        builtins=("add_constraint",),
    )
    ctx = make(env)
    out = run(ctx, env, "move_seat", flight="HAT069", seat="12A")
    assert "Constraints that apply to flight:HAT069:" in out.content
    assert "[any-flight]" in out.content
    assert "[this-flight]" in out.content
    assert "[other]" not in out.content
    other = run(ctx, env, "move_seat", flight="HAT100", seat="3C")
    assert "[any-flight]" in other.content
    assert "[this-flight]" not in other.content


def test_roles_and_unknown_actions_are_refused_with_words() -> None:
    def plan(tx: Tx, args: Mapping[str, JsonValue]) -> str:
        tx.set("goal", "planned")
        return "ok"

    env = Environment(
        actions=[ActionSpec("plan", "Plan.", plan, affects=("goal",), roles=("planner",))],
        builtins=("update_goal",),
    )
    ctx = make(env)
    out = env.call(ctx, ToolCall("p", "plan", {}))
    assert out.is_error
    assert "plan may be called by planner; you act as agent" in out.content
    assert not env.with_role("planner").call(ctx, ToolCall("p2", "plan", {})).is_error
    unknown = env.call(ctx, ToolCall("u", "fly", {}))
    assert unknown.is_error
    assert "no environment action named 'fly'" in unknown.content


def test_allowed_tools_choice_is_openais_form() -> None:
    from openai.types.chat import ChatCompletionAllowedToolChoiceParam
    from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming
    from pydantic import TypeAdapter

    from ctxline.environment import allowed_tools_choice

    env = Environment(builtins=("update_goal", "read_slot"))
    choice = allowed_tools_choice(["read_slot"])
    TypeAdapter(ChatCompletionAllowedToolChoiceParam).validate_python(choice, strict=True)
    ctx = make(env)
    body = dict(ctx.prepare(log=False).body, tool_choice=choice)
    TypeAdapter(CompletionCreateParamsNonStreaming).validate_python(body, strict=True)
    assert {t["function"]["name"] for t in body["tools"]} >= {"update_goal", "read_slot"}
    with pytest.raises(ValidationError, match="mode must be auto or required"):
        allowed_tools_choice(["x"], mode="none")


def test_pin_shows_an_on_demand_slot_until_unpinned() -> None:
    env = Environment([SlotSpec("profile", tier="on-demand")])
    ctx = make(env)
    env.set(ctx, "profile", {"name": "Mia"})
    assert 'profile: {"name":"Mia"}' not in tail(ctx)
    assert not run(ctx, env, "pin", slot="profile").is_error
    assert 'profile (updated 2026-03-02T09:00:00Z by app; pinned): {"name":"Mia"}' in tail(ctx)
    again = run(ctx, env, "pin", slot="profile")
    assert again.is_error
    assert "pinned already" in again.content
    resident = run(ctx, env, "pin", slot="goal")
    assert resident.is_error
    assert "slot goal is resident" in resident.content
    assert not run(ctx, env, "unpin", slot="profile").is_error
    assert "on demand (read_slot): profile" in tail(ctx)


def test_a_model_copying_its_rendered_goal_back_does_not_grow_it() -> None:
    """Issue 23: the goal grew one ``(updated …Z by agent)`` per write of the shown line."""
    env = Environment()
    clock = Clock()
    ctx = make(env, clock)
    assert not run(ctx, env, "update_goal", goal="find the invoices file").is_error
    for _ in range(3):
        clock.tick(minutes=1)
        line = next(x for x in tail(ctx).splitlines() if x.startswith("goal"))
        name_and_notes, shown = line.split(": ", 1)
        assert name_and_notes.startswith("goal (updated ")
        assert "by agent" in name_and_notes
        assert shown == "find the invoices file"  # the value alone after the colon
        # a model copies the whole line, or the value with the old suffix notes
        assert not run(ctx, env, "update_goal", goal=line).is_error
        assert env.state(ctx)["goal"] == "find the invoices file"
        old_style = f"{shown} (updated 2026-03-02T09:00:00Z by agent) (pinned)"
        assert not run(ctx, env, "update_goal", goal=old_style).is_error
        assert env.state(ctx)["goal"] == "find the invoices file"
    # the app's writes are its own: nothing is stripped from them
    env.set(ctx, "goal", "keep (updated 2026-03-02T09:00:00Z by agent)")
    assert env.state(ctx)["goal"] == "keep (updated 2026-03-02T09:00:00Z by agent)"
    # a value that is only a note stays as written (nothing to strip it down to)
    assert not run(ctx, env, "update_goal", goal="(pinned)").is_error
    assert env.state(ctx)["goal"] == "(pinned)"
