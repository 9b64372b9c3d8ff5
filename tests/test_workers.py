"""Many worker processes on shared sessions: nothing lost, nothing duplicated, forks isolated.

Why: with many agent workers (DESIGN.md §10) several processes append to the same
timelines, prepare requests from them and fork them while the parent keeps growing.
Each run here starts 4 worker processes per backend (PostgreSQL and SQLite) that, from
a common start time, mix:

* appends to the ``main`` timeline of two shared sessions with ``expected_seq`` set to
  the head they just read (a batch of 1-3 events, a tool call and its result included),
  reporting each :class:`~ctxline.errors.Conflict` and then resolving it with
  :func:`~ctxline.record.store.postgres.append_with_retry` (same client ids);
* forks of ``main`` at the head they read (racing the other workers' appends), then
  appends on their own fork, checking right away that the fork shows the parent's
  prefix and its own events only;
* ``Context.prepare`` from the shared ``main`` (not logged) and from their own fork
  (logged, then rebuilt byte for byte).

The parent then checks, from the store: every acknowledged event is present exactly
once, at its acknowledged seq, timelines are gap-free, every event was acknowledged,
each fork holds the parent's first ``fork_seq`` events and then exactly its own, and
conflicts were seen. It prints ``workers <backend>: workers=4 events=… conflicts=…
lost=0 duplicated=0``.

Run as a script, this file is the worker: ``python test_workers.py URL WORKER OPS SEED START_AT``.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path

from ctxline.context import Context
from ctxline.errors import Conflict
from ctxline.record.events import (
    AssistantMessage,
    Pending,
    StoredEvent,
    ToolCall,
    ToolResult,
    UserMessage,
)
from ctxline.record.store import MAIN, open_store
from ctxline.record.store.postgres import append_with_retry
from ctxline.view.options import PrepareOptions
from json_reads_a import dig

HERE = Path(__file__).resolve()
WORKERS = 4
OPS = 60
SESSIONS = ("shared-0", "shared-1")
WORKER_KINDS = {"user.message", "assistant.message", "tool.result"}


# --- the worker ------------------------------------------------------------------------


def _say(kind: str, **fields: object) -> None:
    print(json.dumps({"kind": kind, **fields}), flush=True)


def _same(batch: list[Pending]) -> Callable[[int], list[Pending]]:
    """For append_with_retry: the same batch (so the same client ids) whatever the head."""
    return lambda _head: batch


def worker(url: str, name: str, ops: int, seed: int, start_at: float) -> None:
    rng = random.Random(seed)
    store = open_store(url)
    options = PrepareOptions(context_window=4_000, max_output=500, tokenizer="bytes")
    counter = 0
    forks: list[tuple[str, str]] = []

    def batch() -> list[Pending]:
        nonlocal counter
        out: list[Pending] = []
        for _ in range(rng.randint(1, 3)):
            counter += 1
            eid = f"{name}-{counter}"
            if rng.random() < 0.3:
                call = AssistantMessage("", (ToolCall(f"call-{eid}", "ls", {"n": counter}),))
                out.append(Pending(call, id=eid))
                counter += 1
                out.append(
                    Pending(ToolResult(f"call-{eid}", f"out {counter}"), id=f"{name}-{counter}")
                )
            else:
                out.append(Pending(UserMessage(f"{name} says {counter}"), id=eid))
        return out

    def ack(session: str, timeline: str, stored: list[StoredEvent]) -> None:
        for ev in stored:
            _say("ack", session=session, timeline=timeline, seq=ev.seq, id=ev.id)

    time.sleep(max(0.0, start_at - time.time()))
    for _ in range(ops):
        session = rng.choice(SESSIONS)
        roll = rng.random()
        if roll < 0.55:
            events = batch()
            head = store.head(session)
            try:
                stored = store.append(session, events, expected_seq=head)
            except Conflict as exc:
                _say("conflict", expected=exc.expected, actual=exc.actual)
                stored = append_with_retry(
                    store,
                    session,
                    _same(events),
                    attempts=50,
                    on_conflict=lambda c: _say("conflict", expected=c.expected, actual=c.actual),
                )
                _say("retried")
            ack(session, MAIN, stored)
        elif roll < 0.7 or (roll >= 0.85 and not forks):
            head = store.head(session)
            fork = f"{name}-fork-{len(forks)}"
            store.fork(session, MAIN, head, fork)
            forks.append((session, fork))
            _say("fork", session=session, timeline=fork, at=head)
            own = store.append(session, batch(), expected_seq=head, timeline=fork)
            ack(session, fork, own)
            seen = store.read(session, fork)
            parent = store.read(session, MAIN, limit=head)
            assert [e.id for e in seen] == [e.id for e in parent] + [e.id for e in own], fork
        elif roll < 0.85:
            ctx = Context(store, session, options=options, create=False)
            prep = ctx.prepare(log=False)
            _say("prepared", session=session, timeline=MAIN, tokens=dig(prep.report["tokens"], "total"))
        else:
            session, fork = rng.choice(forks)
            ctx = Context(store, session, fork, options=options, create=False)
            prep = ctx.prepare()
            assert ctx.rebuild(prep.header.step) == prep.body_bytes
            _say("prepared", session=session, timeline=fork, tokens=dig(prep.report["tokens"], "total"))
    store.close()
    _say("done")


# --- the test ----------------------------------------------------------------------------


def _pg_url() -> str:
    import pg_server

    pg_server.require_psycopg()
    return pg_server.fresh_dsn()


def _run(url: str, label: str) -> None:
    store = open_store(url)
    for session in SESSIONS:
        store.create_session(session)
        store.append(session, [UserMessage(f"the task of {session}")])
    store.close()
    start_at = time.time() + 3.0  # every worker imported and connected by then
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    procs = [
        subprocess.Popen(
            [sys.executable, str(HERE), url, f"w{i}", str(OPS), str(1000 + i), str(start_at)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for i in range(WORKERS)
    ]
    outputs = [p.communicate(timeout=120) for p in procs]
    for p, (_, err) in zip(procs, outputs, strict=True):
        assert p.returncode == 0, err
    lines = [json.loads(line) for out, _ in outputs for line in out.splitlines()]
    kinds = Counter(line["kind"] for line in lines)
    assert kinds["done"] == WORKERS
    acked: dict[tuple[str, str], dict[str, int]] = defaultdict(dict)
    for line in lines:
        if line["kind"] == "ack":
            acked[(line["session"], line["timeline"])][line["id"]] = line["seq"]
    forks = {
        (line["session"], line["timeline"]): line["at"] for line in lines if line["kind"] == "fork"
    }

    store = open_store(url)
    lost = duplicated = events = 0
    all_ids: Counter[str] = Counter()
    for session in SESSIONS:
        info = {t.name: t for t in store.timelines(session)}
        main = store.read(session)
        assert [e.seq for e in main] == list(range(1, len(main) + 1)), "gap on main"
        for name, t in info.items():
            own = [e for e in store.read(session, name) if e.seq > (t.fork_seq or 0)]
            all_ids.update(e.id for e in own)
            events += len(own)
            want = acked.get((session, name), {})
            by_id = {e.id: e.seq for e in own}
            lost += sum(1 for i in want if i not in by_id)
            assert all(by_id.get(i) == seq for i, seq in want.items()), f"{name}: moved event"
            # besides the task (seq 1), only Context's own records may be unacknowledged (the
            # guide and tools it adopts when preparing, the logged request headers, …)
            unacked = [e for e in own if e.id not in want and e.seq > 1]
            assert not [e.kind for e in unacked if e.kind in WORKER_KINDS]
            if name != MAIN:
                at = forks[(session, name)]
                assert t.fork_seq == at
                seen = store.read(session, name)
                assert [e.id for e in seen[:at]] == [e.id for e in main[:at]], "fork prefix"
                assert [e.seq for e in seen] == list(range(1, len(seen) + 1))
        check = getattr(store, "integrity_check", None)
        assert check is not None
        assert check() == []
    store.close()
    duplicated = sum(n - 1 for n in all_ids.values() if n > 1)
    assert lost == 0
    assert duplicated == 0
    assert kinds["conflict"] > 0, "the workers should have raced"
    assert kinds["retried"] > 0
    print(
        f"workers {label}: workers={WORKERS} events={events} conflicts={kinds['conflict']}"
        f" resolved={kinds['retried']} forks={kinds['fork']} prepares={kinds['prepared']}"
        f" lost={lost} duplicated={duplicated}"
    )


def test_many_workers_postgres() -> None:
    _run(_pg_url(), "postgres")


def test_many_workers_sqlite(tmp_path: Path) -> None:
    _run(str(tmp_path / "workers.db"), "sqlite")


if __name__ == "__main__":
    url, name, ops, seed, start_at = sys.argv[1:6]
    worker(url, name, int(ops), int(seed), float(start_at))
    sys.exit(0)
