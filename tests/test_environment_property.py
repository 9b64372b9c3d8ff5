"""Random action sequences never reach an invalid state; a failed call changes nothing."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airline_desk import NOW, Backend, load_bookings, make_env
from ctxline import Context, MemoryStore
from ctxline.environment import Environment
from ctxline.environment.actions import check_problem
from ctxline.record.events import AssistantMessage, ToolCall, UserMessage
from ctxline.record.jsonvalue import JsonValue
from json_reads_a import objects

BOOKING_IDS = st.sampled_from(["NEW222", "OLD111", "INS333", "BIZ444", "EVE555", "ZZZ999", ""])
TEXT = st.text(min_size=0, max_size=30)
STEPS: list[JsonValue] = ["check the booking", "refund", "tell the user"]

CALLS = st.one_of(
    st.tuples(st.just("refund"), st.fixed_dictionaries({"booking_id": BOOKING_IDS})),
    st.tuples(
        st.just("refund"),
        st.fixed_dictionaries(
            {"booking_id": st.sampled_from(["NEW222", "INS333", "BIZ444", "OLD111"])}
        ),
    ),
    st.tuples(
        st.just("verify_identity"),
        st.fixed_dictionaries(
            {
                "user_id": st.sampled_from(["mia_li_3668", "eve_7", "nobody"]),
                "date_of_birth": st.sampled_from(["1990-04-05", "1991-01-01"]),
            }
        ),
    ),
    st.tuples(st.just("update_goal"), st.fixed_dictionaries({"goal": TEXT})),
    st.tuples(st.just("add_constraint"), st.fixed_dictionaries({"text": TEXT})),
    st.tuples(
        st.just("remove_constraint"),
        st.fixed_dictionaries({"id": st.sampled_from(["m1", "m2", "refund-window"])}),
    ),
    st.tuples(
        st.just("mark_step_done"), st.fixed_dictionaries({"step": st.sampled_from([*STEPS, "fly"])})
    ),
    st.tuples(
        st.just("read_slot"),
        st.fixed_dictionaries({"slot": st.sampled_from(["bookings", "refunds", "nope"])}),
    ),
    st.tuples(st.sampled_from(["refund", "update_goal"]), st.just({"unexpected": 1})),
)


def _invalid(env: Environment, ctx: Context) -> list[str]:
    """Every schema and validator problem of the state that holds now (empty: valid)."""
    state = env.state(ctx, now=NOW)
    problems = []
    for name, spec in env.specs.items():
        value = state.slot(name).value
        if value is not None and (problem := spec.problem(value)) is not None:
            problems.append(f"{name}: {problem}")
    problems += [p for c in env.validators if (p := check_problem(c, state, {})) is not None]
    return problems


@pytest.mark.parametrize("per_turn", [False, True])
@pytest.mark.parametrize("verified", [False, True])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(calls=st.lists(CALLS, min_size=1, max_size=14))
def test_random_action_sequences_never_reach_an_invalid_state(
    calls: list[tuple[str, dict[str, JsonValue]]], per_turn: bool, verified: bool
) -> None:
    if verified:  # half the sequences start verified, so refunds can succeed (and be wrong)
        calls = [
            ("verify_identity", {"user_id": "mia_li_3668", "date_of_birth": "1990-04-05"}),
            *calls,
        ]
    backend = Backend()
    from airline_desk import NOW as now

    env = make_env(backend, builtins=True, turn_transactions=per_turn)
    store = MemoryStore(clock=lambda: now)
    ctx = Context(store, "p", sources=[env.source], clock=lambda: now)
    ctx.append(UserMessage("refunds please"))
    env.set(ctx, "bookings", load_bookings(backend, "mia_li_3668"))
    env.set(ctx, "todo_steps", STEPS)
    batches = (
        [calls[i : i + 2] for i in range(0, len(calls), 2)] if per_turn else [[c] for c in calls]
    )
    for n, batch in enumerate(batches):
        tool_calls = tuple(
            ToolCall(f"c{n}-{i}", name, args) for i, (name, args) in enumerate(batch)
        )
        ctx.append(AssistantMessage("", tool_calls))
        before = [e.event for e in store.read("p")]
        paid_before = list(backend.paid)
        outcomes = env.turn(ctx, list(tool_calls)) if per_turn else [env.call(ctx, tool_calls[0])]
        assert [e.event for e in store.read("p")] == before  # answering writes nothing
        events = [e for o in outcomes for e in o.events]
        if any(o.is_error for o in outcomes):
            if per_turn:  # all or nothing
                assert events == [] or all(not o.is_error for o in outcomes)
            assert all(not o.events for o in outcomes if o.is_error)
            if not events:
                assert backend.paid == paid_before  # nothing ran for a refused turn
        ctx.append(*(o.result(c) for o, c in zip(outcomes, tool_calls, strict=True)), *events)
        assert _invalid(env, ctx) == []
        state = env.state(ctx)
        # the side effect and the record agree: every refund paid is in the refunds slot, once
        assert [(r["booking"], r["amount"]) for r in objects(state["refunds"])] == backend.paid
        assert all(
            c.by == "app" for c in state.constraints if c.id in ("refund-window", "identity")
        )
        assert {"refund-window", "identity"} <= {c.id for c in state.constraints}
