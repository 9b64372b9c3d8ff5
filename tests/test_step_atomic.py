"""A step is one atomic append: a killed worker never leaves half a step in the record.

``Context.prepare`` plans the whole step purely and hands it to the writer as ONE append
(the tools and guide adoption, an expired rule, the status snapshot, the reductions, the
request header). A worker killed with SIGKILL at random moments — often in the middle of
a reduction — must leave only whole steps: every run of ctxline's own events ends with
its request header, and every logged request rebuilds to its logged hash.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from conftest import REPO
from ctxline import (
    AssistantMessage,
    Context,
    MemoryStore,
    PrepareOptions,
    SQLiteStore,
    ToolCall,
    ToolResult,
    UserMessage,
)
from ctxline.record.events import OWN_KINDS, StoredEvent
from ctxline.record.jsonvalue import as_str
from ctxline.record.store import Batch, Store
from json_reads_a import objects


def _whole_steps(events: list[StoredEvent]) -> int:
    """The number of steps; fails when a run of ctxline's own events lacks its header."""
    steps = 0
    pending: list[str] = []
    for ev in events:
        if ev.kind == "request":
            steps += 1
            pending = []
        elif ev.kind in OWN_KINDS:
            pending.append(ev.kind)
        else:
            assert not pending, f"seq {ev.seq}: {pending} were written without their request"
    assert not pending, f"the record ends with {pending} and no request: half a step"
    return steps


class CountingStore(MemoryStore):
    """A memory store that counts appends (the raw append every writer ends in: one
    transaction each)."""

    def __init__(self) -> None:
        super().__init__()
        self.appends = 0

    def _append_batches_raw(self, batches: Sequence[Batch]) -> list[list[StoredEvent]]:
        self.appends += 1
        return super()._append_batches_raw(batches)


def test_a_step_that_reduces_is_one_append() -> None:
    store = CountingStore()
    ctx = Context(store, "s", options=PrepareOptions(context_window=3_000, max_output=300, tokenizer="bytes/4"))
    ctx.append(UserMessage("task"))
    kinds: set[str] = set()
    for i in range(12):
        ctx.append(
            AssistantMessage(f"s{i}", (ToolCall(f"c{i}", "cat", {"i": i}),)),
            ToolResult(f"c{i}", "z " * 600),
        )
        before = store.appends
        prep = ctx.prepare()
        assert store.appends == before + 1
        kinds.update(as_str(a["action"]) for a in objects(prep.report["actions"]))
    assert kinds & {"trim", "compact"}
    assert _whole_steps(store.read("s")) == 12


def test_log_false_appends_nothing() -> None:
    store = CountingStore()
    ctx = Context(store, "s")
    ctx.append(UserMessage("task"))
    before = (store.appends, store.head("s"))
    ctx.prepare(log=False)
    assert (store.appends, store.head("s")) == before


def test_kill_minus_nine_never_leaves_half_a_step(tmp_path: Path) -> None:
    db = tmp_path / "steps.db"
    rng = random.Random(11)
    script = REPO / "tests" / "step_process.py"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO / "src"), os.environ.get("PYTHONPATH")]))}
    acknowledged = 0
    for _ in range(12):
        proc = subprocess.Popen(
            [sys.executable, str(script), str(db), "s"], stdout=subprocess.PIPE, text=True, env=env
        )
        assert proc.stdout is not None
        first = proc.stdout.readline()  # wait until the worker is stepping
        assert first.startswith("step "), first
        time.sleep(rng.uniform(0.0, 0.4))
        os.kill(proc.pid, signal.SIGKILL)
        rest = proc.stdout.read()
        proc.wait()
        proc.stdout.close()
        lines = [first, *rest.splitlines()]
        acknowledged = max(acknowledged, max(int(line.split()[1]) for line in lines if line.startswith("step ")))
    store: Store = SQLiteStore(db)
    try:
        events = store.read("s")
        steps = _whole_steps(events)
        assert steps >= acknowledged  # nothing acknowledged was lost
        ctx = Context(store, "s", create=False)
        rebuilt = sum(1 for _ in ctx.rebuild_all())
        assert rebuilt == steps
        assert any(e.kind == "reduction" for e in events)  # kills landed on steps that reduce
    finally:
        store.close()
