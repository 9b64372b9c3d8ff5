"""Resuming a long session: opening a Context on it and preparing, against reading its rows.

Builds sessions of 400 and 2,000 steps (20,000 with ``--big``) with the real
:class:`~ctxline.Context` on SQLite, through a fast synthetic agent loop (each step: a
prepare, an assistant tool call, a ~300-character result; the 128k default window, so
the longer sessions compact), then measures, best of ``--repeats``:

- ``raw_read_s``: ``SELECT body FROM events WHERE session=?`` (no parsing);
- ``store_read_s``: the store's plain ``read`` (parsing, the hash chain checked);
- ``open_prepare_s``: ``Context(store, session)`` and its first ``prepare(log=False)``
  (the tokenizer loaded beforehand: its one-off load is not the session's cost);
- ``request_bytes_per_step``: the logged request headers as stored (packed) and as they
  would be in the plain form written before packing, and the whole record per step;
- ``header_parse_us``: reading one header back (``json.loads`` + parse), both forms.

    .venv/bin/python benchmarks/bench_resume.py [--big] [--steps 400,2000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from ctxline import Context
from ctxline.record.codec import canonical_json, event_to_json
from ctxline.record.events import (
    AssistantMessage,
    RequestHeader,
    SystemMessage,
    ToolCall,
    ToolResult,
    UserMessage,
)
from ctxline.record.jsonvalue import JsonObject
from ctxline.record.parse import event_from_json
from ctxline.record.store import open_store
from ctxline.tokens.counters import get_counter

TOOLS: list[JsonObject] = [
    {
        "name": "bash",
        "description": "Run a shell command and return its output.",
        "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}},
    }
]


def _clock() -> Callable[[], datetime]:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    ticks = iter(range(1, 10**9))
    return lambda: start + timedelta(seconds=next(ticks))


def build(db: str, steps: int) -> float:
    store = open_store(db)
    ctx = Context(store, "s", clock=_clock())
    ctx.set_tools(TOOLS)
    ctx.append(
        SystemMessage("You are a coding agent."), UserMessage("Fix the failing test in util.py")
    )
    start = time.perf_counter()
    for i in range(steps):
        ctx.prepare()
        call = ToolCall(f"c{i}", "bash", {"cmd": f"sed -n {i},{i + 40}p src/util.py"})
        ctx.append(
            AssistantMessage(f"Step {i}: reading the next part.", tool_calls=(call,)),
            ToolResult(f"c{i}", f"{i}: def helper_{i}(x): return x + {i}\n" * 8, name="bash"),
        )
    store.close()
    return time.perf_counter() - start


def _best(fn: Callable[[], object], repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def measure(db: str, steps: int, repeats: int) -> dict[str, object]:
    def raw() -> None:
        con = sqlite3.connect(db)
        con.execute("SELECT body FROM events WHERE session=?", ("s",)).fetchall()
        con.close()

    store = open_store(db)

    def read() -> None:
        store.read("s")

    def open_prepare() -> None:
        ctx = Context(store, "s", create=False)
        ctx.set_tools(TOOLS)
        ctx.prepare(log=False)

    raw_s, read_s, open_s = _best(raw, repeats), _best(read, repeats), _best(open_prepare, repeats)
    events = store.read("s")
    store.close()
    con = sqlite3.connect(db)
    bodies = con.execute("SELECT kind, length(body) FROM events WHERE session=?", ("s",)).fetchall()
    con.close()
    headers = [e.event for e in events if isinstance(e.event, RequestHeader)]
    packed = [canonical_json(event_to_json(h)) for h in headers]
    plain = [canonical_json(event_to_json(replace(h, plain=True))) for h in headers]
    total = sum(n for _, n in bodies)
    stored_requests = sum(n for kind, n in bodies if kind == "request")
    sample = list(range(0, len(headers), max(1, len(headers) // 200)))

    def parse(form: list[bytes]) -> float:
        start = time.perf_counter()
        for i in sample:
            event_from_json(json.loads(form[i]))
        return (time.perf_counter() - start) / len(sample) * 1e6

    return {
        "steps": steps,
        "events": len(events),
        "raw_read_s": round(raw_s, 4),
        "store_read_s": round(read_s, 4),
        "open_prepare_s": round(open_s, 4),
        "open_prepare_over_raw_read": round(open_s / raw_s, 1),
        "open_prepare_over_store_read": round(open_s / read_s, 2),
        "request_bytes_per_step": {
            "stored": round(stored_requests / len(headers)),
            "packed": round(sum(map(len, packed)) / len(headers)),
            "plain_before": round(sum(map(len, plain)) / len(headers)),
        },
        "record_bytes_per_step": {
            "stored": round(total / len(headers)),
            "plain_before": round((total - stored_requests + sum(map(len, plain))) / len(headers)),
        },
        "header_parse_us": {
            "packed": round(parse(packed), 1),
            "plain_before": round(parse(plain), 1),
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", default="400,2000")
    parser.add_argument(
        "--big", action="store_true", help="also 20,000 steps (several minutes to build)"
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--dir", default=None, help="where the SQLite files go (default: a temp dir)"
    )
    args = parser.parse_args()
    sizes = [int(s) for s in args.steps.split(",") if s]
    if args.big:
        sizes.append(20_000)
    get_counter("o200k_base").count("warm")  # the tokenizer's one-off load
    results = []
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        for steps in sizes:
            db = os.path.join(tmp, f"s{steps}.db")
            built = build(db, steps)
            row = measure(db, steps, args.repeats)
            row["build_s"] = round(built, 1)
            results.append(row)
            print(json.dumps(row), file=sys.stderr)
    out = {
        "benchmark": "resume",
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
        "sessions": results,
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
