"""Append throughput and latency of the stores; prints one JSON object.

Why: every agent step appends to the record before anything else happens, so an
append must cost far less than a model call, and the price of ``durability="full"``
(an fsync per commit) should be a known number, not a guess.

    .venv/bin/python benchmarks/bench_store.py [--seconds S] [--dir DIR]

Each scenario appends a repeating agent-shaped cycle (a ~300-char user message, an
assistant tool call, a ~2 KB tool result that pairs with it, a ~400-char assistant
reply) to one session, always passing ``expected_seq`` (the head it expects), so the
conflict check and the tool-result pairing check run on every append, as in real use.
Scenarios: single-event appends and batches of 100, on SQLite at durability normal
and full and on the memory store; single appends with client ids (the retry-safe
path); and a stale ``expected_seq`` rejected with ``Conflict``. A scenario stops at
its event count or after ``--seconds`` (default 6), whichever comes first; the whole
run takes well under a minute on 2 cores. SQLite files go to a temporary directory
(``--dir`` picks its parent: it should be on the disk you care about, not tmpfs).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal

from ctxline.errors import Conflict
from ctxline.record.codec import canonical_json, event_to_json
from ctxline.record.events import (
    AssistantMessage,
    Event,
    Pending,
    ToolCall,
    ToolResult,
    UserMessage,
)
from ctxline.record.store import MemoryStore, SQLiteStore, Store

SESSION = "bench"
BATCH = 100

WORDS = (
    "the agent reads the failing test then opens the module and checks how the cache key"
    " is built before it edits anything"
)

_WORDS = WORDS.split(" ")


def _text(i: int, chars: int) -> str:
    out: list[str] = [f"[{i}]"]
    n = len(out[0])
    k = i
    while n < chars:
        word = _WORDS[k % len(_WORDS)]
        out.append(word)
        n += len(word) + 1
        k += 7
    return " ".join(out)


def workload(count: int) -> list[Event]:
    """``count`` events: user, tool call, its result, reply, repeated; every call id unique."""
    events: list[Event] = []
    i = 0
    while len(events) < count:
        call = f"call-{i}"
        events.extend(
            [
                UserMessage(_text(i, 300)),
                AssistantMessage(
                    "", (ToolCall(call, "read_file", {"path": f"src/pkg/module_{i}.py"}),)
                ),
                ToolResult(call, _text(i, 2000), name="read_file"),
                AssistantMessage(_text(i, 400)),
            ]
        )
        i += 1
    return events[:count]


def _us(ns: float) -> float:
    return round(ns / 1000, 1)


def _summary(latencies_ns: Sequence[int], events: int, elapsed_s: float) -> dict[str, object]:
    ordered = sorted(latencies_ns)
    p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
    return {
        "appends": len(ordered),
        "events": events,
        "seconds": round(elapsed_s, 3),
        "events_per_s": round(events / elapsed_s),
        "p50_us": _us(statistics.median(ordered)),
        "p95_us": _us(p95),
        "max_us": _us(ordered[-1]),
    }


def run_appends(
    store: Store,
    events: Sequence[Event],
    batch: int,
    max_s: float,
    *,
    client_ids: bool = False,
) -> dict[str, object]:
    """Append ``events`` in batches of ``batch`` with expected_seq; the latency summary."""
    store.create_session(SESSION)
    head = 0
    latencies: list[int] = []
    start = time.perf_counter()
    deadline = start + max_s
    for first in range(0, len(events), batch):
        part = events[first : first + batch]
        chunk: Sequence[Event | Pending] = (
            [Pending(ev, f"client-{first + j}") for j, ev in enumerate(part)]
            if client_ids
            else part
        )
        t0 = time.perf_counter_ns()
        stored = store.append(SESSION, chunk, expected_seq=head)
        latencies.append(time.perf_counter_ns() - t0)
        head = stored[-1].seq
        if time.perf_counter() > deadline:
            break
    elapsed = time.perf_counter() - start
    assert store.head(SESSION) == head
    return _summary(latencies, head, elapsed)


def run_conflicts(store: Store, events: Sequence[Event], count: int) -> dict[str, object]:
    """Appends with a stale expected_seq on a session holding ``events``: all refused."""
    store.create_session(SESSION)
    store.append(SESSION, list(events), expected_seq=0)
    head = store.head(SESSION)
    probe = [UserMessage("late")]
    latencies: list[int] = []
    start = time.perf_counter()
    for i in range(count):
        t0 = time.perf_counter_ns()
        try:
            store.append(SESSION, probe, expected_seq=head - 1 - (i % 3))
        except Conflict:
            latencies.append(time.perf_counter_ns() - t0)
        else:
            raise AssertionError("a stale expected_seq was accepted")
    elapsed = time.perf_counter() - start
    assert store.head(SESSION) == head
    summary = _summary(latencies, 0, elapsed)
    del summary["events"], summary["events_per_s"]
    summary["refused"] = summary.pop("appends")
    return summary


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=6.0, help="cap per scenario")
    parser.add_argument("--dir", type=Path, default=None, help="parent of the temp directory")
    args = parser.parse_args(argv)
    cap: float = args.seconds

    events = workload(100_000)
    sizes = [len(canonical_json(event_to_json(ev))) for ev in events[:400]]
    result: dict[str, object] = {
        "benchmark": "store_append",
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "sqlite": sqlite3.sqlite_version,
            "platform": platform.platform(),
        },
        "event_bytes_avg": round(sum(sizes) / len(sizes)),
        "batch": BATCH,
        "seconds_cap_per_scenario": cap,
    }

    with tempfile.TemporaryDirectory(prefix="ctxline-bench-", dir=args.dir) as tmp:
        counter = iter(range(1_000_000))

        def sqlite(durability: Literal["normal", "full"]) -> Callable[[], Store]:
            def make() -> Store:
                path = Path(tmp) / f"bench-{next(counter)}.db"
                return SQLiteStore(path, durability=durability)

            return make

        def scenario(
            make: Callable[[], Store], count: int, batch: int, **kw: bool
        ) -> dict[str, object]:
            store = make()
            try:
                return run_appends(store, events[:count], batch, cap, **kw)
            finally:
                store.close()

        sqlite_result: dict[str, object] = {}
        durabilities: tuple[tuple[Literal["normal", "full"], int], ...] = (
            ("normal", 20_000),
            ("full", 10_000),
        )
        for durability, single_n in durabilities:
            sqlite_result[durability] = {
                "single": scenario(sqlite(durability), single_n, 1),
                f"batch_{BATCH}": scenario(sqlite(durability), 50_000, BATCH),
            }
        sqlite_result["normal_single_client_ids"] = scenario(
            sqlite("normal"), 20_000, 1, client_ids=True
        )
        result["sqlite"] = sqlite_result
        result["memory"] = {
            "single": scenario(MemoryStore, 50_000, 1),
            f"batch_{BATCH}": scenario(MemoryStore, 100_000, BATCH),
        }
        conflicts: dict[str, object] = {}
        for name, make in (("sqlite_normal", sqlite("normal")), ("memory", MemoryStore)):
            store = make()
            try:
                conflicts[name] = run_conflicts(store, events[:1_000], 1_000)
            finally:
                store.close()
        result["stale_expected_seq_refused"] = conflicts

    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
