"""Steady-state prepare() time per step as history grows (it must stay flat).

Histories are built from real mini-swe-agent events (../shared/data, or the bundled
examples/data) repeated to 100 / 1,000 / 10,000 events. Each measured step appends
one assistant call and its result, then prepares — through the same :class:`Context`
an agent would use, on an in-memory store, so the time covers refresh, guide check,
prepare, hashing and logging the request header.

    python benchmarks/bench_prepare.py [--steps 200] [--sizes 100,1000,10000]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from ctxline.context import Context
from ctxline.importers import load
from ctxline.record.events import (
    AssistantMessage,
    Event,
    Pending,
    SystemMessage,
    ToolCall,
    ToolResult,
    UserMessage,
)
from ctxline.record.store import MemoryStore
from ctxline.tokens.counters import get_counter
from ctxline.view.options import PrepareOptions

REPO = Path(__file__).resolve().parents[1]


def source_events() -> list[Event]:
    root = Path(os.environ.get("CTXLINE_SHARED_DATA", REPO.parent / "shared" / "data"))
    folder = (
        root / "mini-swe-agent" if root.is_dir() else REPO / "examples" / "data" / "mini-swe-agent"
    )
    events: list[Event] = []
    for path in sorted(folder.glob("*.traj.json"))[:3]:
        for session in load(path):
            events.extend(p.event for p in session.events if not isinstance(p.event, SystemMessage))
    return events


def history(n: int, pool: list[Event]) -> list[Event]:
    """``n`` events cycled from the pool, with call ids made unique per cycle."""
    out: list[Event] = []
    cycle = 0
    while len(out) < n:
        for ev in pool:
            if isinstance(ev, AssistantMessage):
                ev = AssistantMessage(
                    ev.text,
                    tuple(ToolCall(f"{c.id}-{cycle}", c.name, c.arguments) for c in ev.tool_calls),
                )
            elif isinstance(ev, ToolResult):
                ev = ToolResult(f"{ev.call_id}-{cycle}", ev.content, ev.name, ev.is_error)
            out.append(ev)
            if len(out) >= n:
                break
        cycle += 1
    # end on a complete group so the first measured step starts clean
    while out and isinstance(out[-1], AssistantMessage) and out[-1].tool_calls:
        out.pop()
    return out


def measure(
    n: int, steps: int, provider: str, tokenizer: str, pool: list[Event]
) -> dict[str, object]:
    options = PrepareOptions(
        provider="anthropic" if provider == "anthropic" else "openai",
        tokenizer=tokenizer,
        context_window=10**9,
        max_output=4096,
    )
    ctx = Context(MemoryStore(), "bench", options=options, counter=get_counter(tokenizer))
    ctx.append(SystemMessage("You are a coding agent."), UserMessage("Fix the failing test."))
    ctx.append(*[Pending(e) for e in history(n, pool)])
    now = datetime(2026, 11, 30, tzinfo=UTC)
    first = time.perf_counter()
    ctx.prepare(now=now)
    cold_ms = (time.perf_counter() - first) * 1000
    times = []
    for i in range(steps):
        ctx.append(
            AssistantMessage("", (ToolCall(f"bench-{i}", "bash", {"command": f"ls {i}"}),)),
            ToolResult(f"bench-{i}", f"file_{i}.py\nREADME.md\n"),
        )
        t = time.perf_counter()
        prep = ctx.prepare(now=now + timedelta(seconds=i))
        times.append((time.perf_counter() - t) * 1000)
    times.sort()
    return {
        "events": n,
        "provider": provider,
        "tokenizer": tokenizer,
        "steps": steps,
        "cold_ms": round(cold_ms, 2),
        "prepare_ms_p50": round(statistics.median(times), 3),
        "prepare_ms_p95": round(times[int(len(times) * 0.95) - 1], 3),
        "request_tokens": prep.report.tokens.total,
        "body_mb": round(len(prep.body_bytes) / 1e6, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--sizes", default="100,1000,10000")
    parser.add_argument("--tokenizer", default="o200k_base")
    args = parser.parse_args()
    pool = source_events()
    runs = [
        measure(int(n), args.steps, provider, args.tokenizer, pool)
        for provider in ("openai", "anthropic")
        for n in args.sizes.split(",")
    ]
    print(json.dumps({"benchmark": "prepare_per_step", "runs": runs}, indent=1))


if __name__ == "__main__":
    main()
