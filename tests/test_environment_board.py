"""A blackboard shared by two agents: optimistic concurrency, conflicts surfaced, no lost write."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

from board_process import board_env, worker
from ctxline import Context
from ctxline.environment import Blackboard, Environment
from ctxline.record.events import (
    AssistantMessage,
    Slot,
    StoredEvent,
    ToolCall,
    ToolResult,
    UserMessage,
)
from ctxline.record.jsonvalue import JsonValue
from ctxline.record.store import SQLiteStore
from ctxline.tools.base import ToolOutcome
from json_reads_a import strs


def agent(store: SQLiteStore, role: str) -> tuple[Environment, Context]:
    env = board_env(store, role)
    ctx = Context(store, role, sources=[env.source])
    ctx.append(UserMessage("Plan the trip together."))
    return env, ctx


def act(env: Environment, ctx: Context, name: str, **args: JsonValue) -> ToolOutcome:
    call = ToolCall(f"{ctx.session}-{len(ctx.events)}", name, args)
    ctx.append(AssistantMessage("", (call,)))
    outcome = env.call(ctx, call)
    ctx.record_outcome(call, outcome)
    return outcome


def chain_ok(history: list[StoredEvent]) -> bool:
    """Every write on the board was based on the version before it: none overwrote unseen data."""
    previous = 0
    for stored in history:
        assert isinstance(stored.event, Slot)
        if stored.event.meta["base"] != previous:
            return False
        previous = stored.seq
    return True


def test_a_stale_write_is_refused_with_feedback_and_the_view_shows_the_board(
    tmp_path: Path,
) -> None:
    store = SQLiteStore(tmp_path / "team.db")
    planner, p_ctx = agent(store, "planner")
    executor, e_ctx = agent(store, "executor")
    assert not act(planner, p_ctx, "update_goal", goal="Book Oslo for May 20").is_error
    tail = e_ctx.prepare().body["messages"][-1]["content"]
    assert "goal (shared; updated " in tail
    assert "): Book Oslo for May 20\n" in tail
    assert "by planner)" in tail
    p_ctx.prepare()
    # both have seen version v1; the planner changes it, then the executor writes on v1
    assert not act(planner, p_ctx, "update_goal", goal="Book Bergen for May 21").is_error
    lost = act(executor, e_ctx, "update_goal", goal="Book Oslo, window seat")
    assert lost.is_error
    assert lost.events == ()
    assert lost.content.startswith("Conflict: nothing was written. On the shared blackboard team,")
    assert "goal was changed by planner" in lost.content
    assert "(now Book Bergen for May 21)" in lost.content
    board = Blackboard(store, "team")
    board.refresh()
    assert board.get("goal").value == "Book Bergen for May 21"
    assert chain_ok(board.history("goal"))
    # after reading the new value, the executor's write goes through
    e_ctx.prepare()
    assert not act(executor, e_ctx, "update_goal", goal="Book Bergen, window seat").is_error
    # a commutative slot is rebased instead: both notes land
    p_ctx.prepare()
    e_ctx.prepare()
    assert not act(planner, p_ctx, "add_note", text="hotel near the station").is_error
    rebased = act(executor, e_ctx, "add_note", text="the user is vegetarian")
    assert not rebased.is_error
    assert "Written to the shared blackboard team" in rebased.content
    board.refresh()
    assert board.get("notes").value == ["hotel near the station", "the user is vegetarian"]
    # the executor's own record holds its results; the board holds the slot events
    assert not any(isinstance(e.event, Slot) and e.event.op != "snapshot" for e in e_ctx.events)
    store.close()


def test_two_processes_lose_no_write_and_every_loser_is_told(tmp_path: Path) -> None:
    db = str(tmp_path / "team.db")
    SQLiteStore(db).close()
    rounds = 12
    mp = multiprocessing.get_context("spawn")
    barrier = mp.Barrier(2)
    out = mp.Queue()
    procs = [
        mp.Process(target=worker, args=(db, role, rounds, barrier, out))
        for role in ("planner", "executor")
    ]
    for p in procs:
        p.start()
    reports = dict(out.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    store = SQLiteStore(db)
    board = Blackboard(store, "team")
    goals = board.history("goal")
    notes = board.history("notes")
    # the goal: in every round both saw the same version and both wrote; one won, one was told
    won = {
        role: [r for r in rep if "update_goal" in r["call"] and not r["error"]]
        for role, rep in reports.items()
    }
    told = {
        role: [r for r in rep if "update_goal" in r["call"] and r["error"]]
        for role, rep in reports.items()
    }
    assert sum(len(w) for w in won.values()) == len(goals) == rounds
    assert sum(len(t) for t in told.values()) == rounds
    for role, items in told.items():
        other = "executor" if role == "planner" else "planner"
        assert all(r["content"].startswith("Conflict: nothing was written") for r in items)
        assert all(f"goal was changed by {other}" in r["content"] for r in items)
    # 0 lost writes: every accepted goal is on the board, each based on the version before it
    board_goals = {str(e.event.value) for e in goals if isinstance(e.event, Slot)}
    assert board_goals == {
        f"{r['call'].split('-')[0]} plan {r['call'].rsplit('-', 1)[1]}"
        for w in won.values()
        for r in w
    }
    assert chain_ok(goals)
    # notes are commutative: all 2 x rounds land, none refused
    assert all(not r["error"] for rep in reports.values() for r in rep if "add_note" in r["call"])
    values = [v for e in notes if isinstance(e.event, Slot) for v in strs(e.event.value)]
    assert sorted(values) == sorted(f"{role} note {n}" for role in reports for n in range(rounds))
    # each agent's own record holds every outcome, the conflicts included
    for role, rep in reports.items():
        results = {
            e.event.call_id: e.event for e in store.read(role) if isinstance(e.event, ToolResult)
        }
        for r in rep:
            assert results[r["call"]].is_error is r["error"]
    store.close()
