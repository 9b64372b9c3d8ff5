"""Prepare time per step through SQLite: every replay of the shared data, and as history grows.

Two parts, one JSON object:

- ``replays``: ``ctxline replay``'s code (:func:`ctxline.replay.replay_session`) on every
  dataset of ../shared/data (or the bundled examples/data) at the three windows the
  replay tests use (200k/32k, 32k/4k, 8k/1k) and at the peer harness's limits
  (tau-bench 7k and 4k, mini-swe-agent 28k, Claude Code 168k and 142k), each into a
  fresh SQLite database on disk: ``Context.prepare`` per step (refresh, plan, render,
  hash, the durable append of the step), p50 / p95 / max, and the same for the steps
  that reduced (trim, fold, compaction) apart;
- ``flat``: histories of 250 / 500 / 1,000 / 2,000 real mini-swe-agent messages (turns
  cycled with fresh call ids) in a 32k window with 4k reserved output, so reductions
  run; 200 measured steps each (append one recorded turn, prepare), p50 / p95, and the
  p50 at 2,000 over the p50 at 250.

Targets (issue 16): p95 ≤ 2 ms on every replay; p50 flat from 250 to 2,000 messages.

    python benchmarks/bench_latency.py [--steps 200] [--sizes 250,500,1000,2000]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from ctxline.context import Context
from ctxline.importers import load_tree
from ctxline.record.events import Pending
from ctxline.record.jsonvalue import as_array, dig
from ctxline.record.store import SQLiteStore
from ctxline.replay import ReplayStats, replay_session
from ctxline.tokens.counters import get_counter
from ctxline.view.options import PrepareOptions

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_trim import build, load_pool

REPO = Path(__file__).resolve().parents[1]
WINDOWS = {"200k": (200_000, 32_000), "32k": (32_000, 4_000), "8k": (8_000, 1_000)}
HARNESS = {
    "tau-bench": {"7k": (8_000, 1_000), "4k": (8_000, 4_000)},
    "mini-swe-agent": {"28k": (32_000, 4_000)},
    "claude-code": {"168k": (200_000, 32_000), "142k": (200_000, 58_000)},
}
REDUCING = ("fold", "trim", "compact")


def pct(xs: list[float], p: float) -> float | None:
    if not xs:
        return None
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, round(p / 100 * (len(xs) - 1)))], 3)


def figures(ms: list[float]) -> dict[str, Any]:
    return {
        "steps": len(ms),
        "p50_ms": pct(ms, 50),
        "p95_ms": pct(ms, 95),
        "max_ms": round(max(ms), 3) if ms else None,
    }


def replay(folder: Path, window: int, max_output: int, tmp: Path) -> dict[str, Any]:
    sessions = load_tree(folder, "auto")
    store = SQLiteStore(tempfile.mktemp(suffix=".db", dir=tmp))  # a fresh database per run
    options = PrepareOptions(context_window=window, max_output=max_output)
    counter = get_counter("o200k_base")
    stats = ReplayStats()
    every: list[float] = []
    reducing: list[float] = []
    for session in sessions:
        stats.trajectories += 1
        for step in replay_session(store, session, options=options, counter=counter, keep_ids=False):
            stats.add(step)
            if step.prep is None:
                continue
            every.append(step.ms)
            if any(dig(a, "action") in REDUCING for a in as_array(step.prep.report["actions"])):
                reducing.append(step.ms)
    store.close()
    summary = stats.summary()
    return {
        "window": window,
        "max_output": max_output,
        "all": figures(every),
        "reducing": figures(reducing),
        "over_limit_steps": summary["over_limit_steps"],
        "cache_breaks_per_100_steps": summary["cache_breaks_per_100_steps"],
    }


def flat(size: int, steps: int, tmp: Path) -> dict[str, Any]:
    system, task, turns = load_pool(31)
    history, stream = build(size, turns)
    store = SQLiteStore(tmp / f"flat-{size}.db")
    options = PrepareOptions(context_window=32_000, max_output=4_000)
    ctx = Context(store, "flat", options=options, counter=get_counter("o200k_base"))
    ctx.append(system, task, *[Pending(e) for turn in history for e in turn])
    now = datetime(2026, 12, 1, tzinfo=UTC)
    ctx.prepare(now=now)
    every: list[float] = []
    reducing: list[float] = []
    for i in range(steps):
        ctx.append(*stream.next())
        started = time.perf_counter()
        prep = ctx.prepare(now=now + timedelta(seconds=i + 1))
        ms = (time.perf_counter() - started) * 1000
        every.append(ms)
        if any(dig(a, "action") in REDUCING for a in as_array(prep.report["actions"])):
            reducing.append(ms)
    store.close()
    return {"messages": size, "all": figures(every), "reducing": figures(reducing)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--sizes", default="250,500,1000,2000")
    parser.add_argument(
        "--data",
        default=None,
        help="folder of recorded sessions (default: $CTXLINE_SHARED_DATA, else ../shared/data, "
        "else the bundled examples/data, said on stderr and in the JSON)",
    )
    args = parser.parse_args()
    if args.data is not None:
        root = Path(args.data)
        if not root.is_dir():
            parser.error(f"--data {args.data}: no such folder")
        source = "--data"
    else:
        root = Path(os.environ.get("CTXLINE_SHARED_DATA", REPO.parent / "shared" / "data"))
        source = "CTXLINE_SHARED_DATA" if "CTXLINE_SHARED_DATA" in os.environ else "../shared/data"
        if not root.is_dir():
            print(f"bench_latency: {root} not found; running on the bundled examples/data", file=sys.stderr)
            root, source = REPO / "examples" / "data", "examples/data (fallback)"
    out: dict[str, Any] = {
        "benchmark": "prepare_latency_sqlite",
        "data": str(root),
        "data_source": source,
        "replays": {},
    }
    with tempfile.TemporaryDirectory(prefix="ctxline-latency-") as name:
        tmp = Path(name)
        for folder in sorted(p for p in root.iterdir() if p.is_dir()):
            runs = dict(WINDOWS)
            runs.update({f"harness {k}": w for k, w in HARNESS.get(folder.name, {}).items()})
            out["replays"][folder.name] = {
                label: replay(folder, window, max_output, tmp) for label, (window, max_output) in runs.items()
            }
        out["flat"] = [flat(int(n), args.steps, tmp) for n in args.sizes.split(",")]
    worst = max(
        (r["all"]["p95_ms"] or 0.0) for runs in out["replays"].values() for r in runs.values()
    )
    first, last = out["flat"][0]["all"]["p50_ms"], out["flat"][-1]["all"]["p50_ms"]
    out["load_average_1_5_15"] = [round(x, 2) for x in os.getloadavg()]  # a shared machine's noise
    out["targets"] = {
        "worst_replay_p95_ms": worst,
        "p95_le_2ms_on_every_replay": worst <= 2.0,
        "p50_ratio_2000_over_250": round(last / first, 2) if first else None,
        "p50_flat": bool(first) and last / first <= 1.5,
    }
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
