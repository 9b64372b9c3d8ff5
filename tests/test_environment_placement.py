"""Where the environment block goes (tail, appended on change, the cost model) and rebuilds."""

from __future__ import annotations

import re
from typing import Any

import pytest

from ctxline import Context
from ctxline.environment import Environment, environment_meta
from ctxline.record.events import RequestHeader, Slot, UserMessage
from env_support import Clock, make, run
from json_reads_b import at


@pytest.mark.parametrize("placement", ["tail", "append"])
def test_every_request_rebuilds_and_a_cold_context_plans_the_same(placement: str) -> None:
    clock = Clock()
    env = Environment(placement=placement)  # type: ignore[arg-type]
    ctx = make(env, clock)
    for i in range(12):
        clock.tick(seconds=30)
        ctx.prepare()
        if i % 4 == 0:
            run(ctx, env, "update_goal", goal=f"goal {i}")
        ctx.append(UserMessage(f"step {i}"))
    snapshots = [e for e in ctx.events if isinstance(e.event, Slot) and e.event.op == "snapshot"]
    assert (len(snapshots) == 4) is (placement == "append")  # one per change, never more
    for header, prep in ctx.rebuild_all():
        assert prep.sha256 == header.sha256
    cold = Context(ctx.store, "s", sources=[env.source], clock=clock)
    assert cold.prepare(log=False).body_bytes == ctx.prepare(log=False).body_bytes
    headers = [e.event for e in ctx.events if isinstance(e.event, RequestHeader)]
    for header in headers[1:]:
        diff = at(header.report, "prefix", "first_difference")
        assert diff is None or at(diff, "section") == "tail"  # never a break in history


def test_auto_placement_is_decided_from_the_record() -> None:
    clock = Clock()
    env = Environment(expected_steps=40)
    ctx = make(env, clock)
    for i in range(16):
        clock.tick(seconds=5)
        ctx.prepare()
        ctx.append(UserMessage("ok " * 50))
        if i == 1:
            run(ctx, env, "update_goal", goal="stable goal")
    metas = [environment_meta(e.event) for e in ctx.events if isinstance(e.event, RequestHeader)]
    decided = [m for m in metas if m.get("decided_now")]
    assert decided, metas[-1]
    assert all(m["placement"] == "tail" for m in metas[:5])  # too little evidence: the tail
    decision = decided[-1]["decision"]
    assert decision["inputs"]["T"] == 40.0
    assert decision["placement"] == metas[-1]["placement"]
    # a block that rarely changes is cheaper appended than re-sent as the tail every step
    assert decision["placement"] == "append"
    assert decision["c_append"] < decision["c_tail"]
    assert decided[0]["decision"]["placement"] == "tail"  # it changed 1 step in 4 at first
    cold = Context(ctx.store, "s", sources=[env.source], clock=clock)
    assert cold.prepare(log=False).body_bytes == ctx.prepare(log=False).body_bytes


def test_ctxline_request_rebuilds_an_appended_block_without_the_environment(tmp_path: Any) -> None:
    from click.testing import CliRunner

    from ctxline import open_store
    from ctxline.cli.main import main

    db = str(tmp_path / "env.db")
    env = Environment(placement="append")
    ctx = Context(open_store(db), "s", sources=[env.source])
    ctx.append(UserMessage("Plan the trip."))
    for i in range(3):
        run(ctx, env, "update_goal", goal=f"goal {i}")
        ctx.prepare()
    assert sum(1 for e in ctx.events if isinstance(e.event, Slot) and e.event.op == "snapshot") == 3
    logged = ctx.prepare().body_bytes
    steps = len(ctx.requests())
    ctx.store.close()
    out = CliRunner().invoke(main, ["request", "--db", db, "--session", "s", "--step", str(steps)])
    assert out.exit_code == 0, out.output
    assert out.stdout_bytes.rstrip(b"\n") == logged
    # every version stays where it was appended
    assert len(re.findall(rb"<ctx-env>\\ngoal \(updated [^)]*\): goal ", logged)) == 3
