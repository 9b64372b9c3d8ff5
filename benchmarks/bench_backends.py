"""Append throughput and prepare latency, PostgreSQL against SQLite, with 1, 4 and 8
concurrent worker processes; prints one JSON object.

Why: choosing a backend for many workers needs numbers, not adjectives. SQLite
serializes every writer of a file (one machine), PostgreSQL serializes only writers of
the same timeline (many machines), and both pay a round trip or an fsync per commit.
Each worker is its own process with its own session (agents do not share timelines),
started together from a common start time:

* ``append``: single-event appends with ``expected_seq`` (the conflict and pairing
  checks run, as in real use) of an agent-shaped cycle (a ~300-char user message, a tool
  call, a ~2 KB result, a ~400-char reply) for ``--seconds``; reports events/s summed
  over workers and the p50/p95 latency of one append;
* ``prepare``: the agent loop on a session with 200 events already recorded: append a
  step (call, result, reply), then ``Context.prepare`` (catch up on new events, count
  them, render, log the request header) — reports the p50/p95 of ``prepare``.

PostgreSQL is ``$CTXLINE_TEST_PG`` or a throwaway server started with the tests'
helpers (``tests/pg_server.py``), a fresh database; SQLite is a file in a temporary
directory (``--dir``). The whole run takes about a minute with the default 3 seconds
per phase.

    .venv/bin/python benchmarks/bench_backends.py [--seconds 3] [--workers 1,4,8]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ctxline.context import Context
from ctxline.errors import TokenizerUnavailable
from ctxline.record.events import AssistantMessage, Event, ToolCall, ToolResult, UserMessage
from ctxline.record.store import open_store
from ctxline.tokens.counters import get_counter
from ctxline.view.options import PrepareOptions

HERE = Path(__file__).resolve()
REPO = HERE.parents[1]
HISTORY = 200
WORDS = [
    "the",
    "agent",
    "reads",
    "the",
    "failing",
    "test",
    "then",
    "opens",
    "the",
    "module",
    "and",
    "checks",
    "how",
    "the",
    "cache",
    "key",
    "is",
    "built",
    "before",
    "it",
    "edits",
    "anything",
]


def _text(i: int, chars: int) -> str:
    out = [f"[{i}]"]
    n, k = len(out[0]), i
    while n < chars:
        word = WORDS[k % len(WORDS)]
        out.append(word)
        n += len(word) + 1
        k += 7
    return " ".join(out)


def cycle(i: int, tag: str) -> list[Event]:
    """One agent step: user message, tool call, its result, reply (unique call ids)."""
    call = f"{tag}-call-{i}"
    return [
        UserMessage(_text(i, 300)),
        AssistantMessage("", (ToolCall(call, "read_file", {"path": f"src/module_{i}.py"}),)),
        ToolResult(call, _text(i, 2000), name="read_file"),
        AssistantMessage(_text(i, 400)),
    ]


def _ms(values_ns: Sequence[int], q: float) -> float:
    ordered = sorted(values_ns)
    if q == 0.5:
        return round(statistics.median(ordered) / 1e6, 3)
    return round(ordered[min(len(ordered) - 1, int(len(ordered) * q))] / 1e6, 3)


# --- the worker process -------------------------------------------------------------------


def _wait_for_go() -> None:
    """Say ready, then wait for the driver's go: every worker starts a phase together."""
    print("ready", flush=True)
    sys.stdin.readline()


def worker(url: str, name: str, seconds: float, tokenizer: str) -> dict[str, Any]:
    store = open_store(url)
    # append phase: single events, expected_seq, the agent-shaped cycle
    session = f"{name}-append"
    store.create_session(session)
    events = [e for i in range(int(seconds * 4_000)) for e in cycle(i, name)]
    head = 0
    latencies: list[int] = []
    _wait_for_go()
    started = time.perf_counter()
    deadline = started + seconds
    while time.perf_counter() < deadline and head < len(events):
        t0 = time.perf_counter_ns()
        store.append(session, [events[head]], expected_seq=head)
        latencies.append(time.perf_counter_ns() - t0)
        head += 1
    append_s = time.perf_counter() - started
    # prepare phase: the agent loop on a recorded history
    session = f"{name}-prepare"
    options = PrepareOptions(context_window=128_000, max_output=4_096, tokenizer=tokenizer)
    ctx = Context(store, session, options=options)
    store.append(session, [e for i in range(HISTORY // 4) for e in cycle(i, name)])
    ctx.prepare()  # the first request counts the whole history once
    prepares: list[int] = []
    _wait_for_go()
    deadline = time.perf_counter() + seconds
    step = HISTORY // 4
    while time.perf_counter() < deadline:
        ctx.append(*cycle(step, name)[1:])
        step += 1
        t0 = time.perf_counter_ns()
        ctx.prepare()
        prepares.append(time.perf_counter_ns() - t0)
    store.close()
    return {
        "appends": len(latencies),
        "append_s": append_s,
        "append_p50_ms": _ms(latencies, 0.5),
        "append_p95_ms": _ms(latencies, 0.95),
        "prepares": len(prepares),
        "prepare_p50_ms": _ms(prepares, 0.5),
        "prepare_p95_ms": _ms(prepares, 0.95),
        "prepare_ns": prepares,
        "append_ns": latencies,
    }


# --- the driver ----------------------------------------------------------------------------


def run(url: str, workers: int, seconds: float, tokenizer: str) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), *sys.path])}
    procs = [
        subprocess.Popen(
            [sys.executable, str(HERE), "--worker", url, f"w{i}", str(seconds), tokenizer],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for i in range(workers)
    ]
    for _phase in ("append", "prepare"):
        for p in procs:  # all set up (imported, connected, history written): go together
            assert p.stdout is not None
            line = p.stdout.readline()
            if line.strip() != "ready":
                raise RuntimeError(f"worker failed: {line}{p.communicate()[1][-2000:]}")
        for p in procs:
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
    results = []
    for p in procs:
        out, err = p.communicate(timeout=120 + 3 * seconds)
        if p.returncode != 0:
            raise RuntimeError(f"worker failed: {err.strip()[-2000:]}")
        results.append(json.loads(out.strip().splitlines()[-1]))
    appends = sum(r["appends"] for r in results)
    span = max(r["append_s"] for r in results)
    append_ns = [v for r in results for v in r["append_ns"]]
    prepare_ns = [v for r in results for v in r["prepare_ns"]]
    return {
        "append_events_per_s": round(appends / span),
        "append_p50_ms": _ms(append_ns, 0.5),
        "append_p95_ms": _ms(append_ns, 0.95),
        "prepares": len(prepare_ns),
        "prepare_p50_ms": _ms(prepare_ns, 0.5),
        "prepare_p95_ms": _ms(prepare_ns, 0.95),
    }


def postgres_url() -> tuple[str | None, str]:
    """A fresh database on $CTXLINE_TEST_PG or a throwaway server; (None, why) if none."""
    sys.path.insert(0, str(REPO / "tests"))
    try:
        import pg_server

        version = "server from $CTXLINE_TEST_PG" if os.environ.get("CTXLINE_TEST_PG") else ""
        url = pg_server.fresh_dsn()
        with pg_server.admin_connect(url) as conn:
            row = conn.execute("SHOW server_version").fetchone()
        return url, f"PostgreSQL {row[0] if row else '?'} {version}".strip()
    except BaseException as exc:  # pytest.skip raises a BaseException when there is no server
        return None, f"no PostgreSQL server: {exc}"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="per phase and run")
    parser.add_argument("--workers", default="1,4,8")
    parser.add_argument("--dir", default=None, help="parent folder of the SQLite files")
    parser.add_argument("--tokenizer", default="o200k")
    args = parser.parse_args(argv)
    tokenizer = args.tokenizer
    try:
        get_counter(tokenizer)
    except TokenizerUnavailable:
        tokenizer = "bytes"
    counts = [int(n) for n in args.workers.split(",")]
    report: dict[str, Any] = {
        "benchmark": "backends",
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "sqlite": sqlite3.sqlite_version,
            "platform": platform.platform(),
        },
        "seconds_per_phase": args.seconds,
        "history_events": HISTORY,
        "tokenizer": tokenizer,
        "workers": counts,
    }
    pg, server = postgres_url()
    report["postgres_server"] = server
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        for backend in ("sqlite", "postgres"):
            rows: dict[str, Any] = {}
            for n in counts:
                if backend == "sqlite":
                    url = str(Path(tmp) / f"bench-{n}.db")
                elif pg is not None:
                    sys.path.insert(0, str(REPO / "tests"))
                    import pg_server

                    url = pg_server.fresh_dsn()  # a new schema per run
                else:
                    continue
                rows[str(n)] = run(url, n, args.seconds, tokenizer)
            report[backend] = rows if rows else {"skipped": server}
    print(json.dumps(report))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        url, name, seconds, tokenizer = sys.argv[2:6]
        result = worker(url, name, float(seconds), tokenizer)
        print(json.dumps(result))
    else:
        main()
