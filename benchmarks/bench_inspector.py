"""The inspector's pages on a short and a long session, side by side; prints one JSON object.

Why: a page must cost what it shows, not what the session holds. Before, the session
page rebuilt every request of the run (and measured every message of each by
serializing it again), so it took 11 s at 250 steps, 99 s at 1,000, and never came back
at 20,000. Here each session is written the way an agent writes one — through a real
:class:`ctxline.Context` on SQLite: prepare (which logs the request header), then an
assistant tool call and its result, N times — and served by the real app over HTTP.
Each page is fetched ``--repeat`` times (the median is reported, after one warm-up
fetch), and every long-session figure is also given as a ratio to the short one's.

    .venv/bin/python benchmarks/bench_inspector.py [--steps 400,20000] [--repeat 3] [--dir DIR]
        [--every 2000] [--pages "middle step,last step"]

Pages: the session page (first and last page of events), the step page of the first,
middle and last step (each rebuilds its request and the one before it), a late step
not shown before (at nine tenths of the run, fetched after the last), the diff of the
last step, one event, and the first and last page of cache breaks (200 requests a page;
the candidates among them rebuilt). A step's request is rebuilt from the nearest fold
checkpoint before it (``ctxline.web.checkpoints``, one every ``--every`` events, made
by the first late page); ``--every 0`` measures the cold rebuilds of before (each
request folded from seq 1). ``first_s`` is each page's first fetch: the first late page
of a run reads the record up to it through the store (hash-checked) and makes the
checkpoints; the median is of the fetches after it (a step page fetched again takes the
steps rebuilt the first time: the last 32 are kept, so the median is its template's cost). Building the 20,000-step session takes about 3 minutes
on 2 cores (it is kept in ``--dir`` and reused when the file is there: pass ``--fresh``
to rebuild it); the fetches take well under a minute more.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from urllib.parse import quote

from ctxline import (
    AssistantMessage,
    Context,
    PrepareOptions,
    SystemMessage,
    ToolCall,
    ToolResult,
    UserMessage,
)
from ctxline.record.jsonvalue import JsonObject
from ctxline.record.store import SQLiteStore
from ctxline.web.app import create_app
from ctxline.web.checkpoints import EVERY
from ctxline.web.record import open_record
from ctxline.web.server import serve_in_thread

SESSION = "bench/long-run"
TOOLS: list[JsonObject] = [
    {
        "name": "run",
        "description": "run a shell command",
        "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}},
    }
]


def build(path: Path, steps: int, lines: int) -> float:
    """A session of ``steps`` logged requests (each after a tool call and its result)."""
    path.unlink(missing_ok=True)
    store = SQLiteStore(path)
    options = PrepareOptions(model="gpt-4.1", context_window=16_000, max_output=1_000)
    ctx = Context(store, SESSION, options=options)
    ctx.set_tools(TOOLS)
    ctx.append(
        SystemMessage("You are a careful agent."),
        UserMessage("Count the files, one folder at a time."),
    )
    start = time.perf_counter()
    for i in range(steps):
        ctx.prepare()
        ctx.append(
            AssistantMessage(
                f"Looking at folder {i}.", (ToolCall(f"c{i}", "run", {"cmd": f"ls /data/{i}"}),)
            ),
            ToolResult(f"c{i}", "\n".join(f"file-{i}-{j}.txt" for j in range(lines)), "run"),
        )
    took = time.perf_counter() - start
    store.close()
    return took


def fetch(url: str) -> tuple[float, int, int]:
    start = time.perf_counter()
    with urllib.request.urlopen(url, timeout=600) as response:
        body = response.read()
        status = response.status
    return time.perf_counter() - start, status, len(body)


def measure(
    path: Path, steps: int, repeat: int, every: int, only: set[str] | None = None
) -> dict[str, object]:
    s = quote(SESSION, safe="")
    record = open_record(str(path), every=every)
    head = record.timelines(SESSION)[0].head
    last_page = -(-head // 200)
    pages = {
        "session page 1": f"/timeline?s={s}",
        "session last page": f"/timeline?s={s}&page={last_page}",
        "step 1": f"/request?s={s}&step=1",
        "middle step": f"/request?s={s}&step={max(steps // 2, 1)}",
        "last step": f"/request?s={s}&step={steps}",
        "late step not shown before": f"/request?s={s}&step={max(steps * 9 // 10, 1)}",
        "diff of the last step": f"/diff?s={s}&step={steps}",
        "last event": f"/event?s={s}&seq={head}",
        "breaks page 1": f"/breaks?s={s}",
        "breaks last page": f"/breaks?s={s}&page={-(-steps // 200)}",
    }
    unknown = (only or set()) - set(pages)
    if unknown:
        raise SystemExit(f"--pages: no page named {sorted(unknown)} (pages: {', '.join(pages)})")
    if only:
        pages = {name: link for name, link in pages.items() if name in only}
    out: dict[str, object] = {"steps": steps, "events": head, "db_bytes": path.stat().st_size}
    with serve_in_thread(create_app(record)) as running:
        for name, link in pages.items():
            first, status, size = fetch(running.url + link)
            assert status == 200, (name, status)
            times = [fetch(running.url + link)[0] for _ in range(repeat)]
            out[name] = {
                "first_s": round(first, 4),
                "median_s": round(statistics.median(times), 4),
                "bytes": size,
            }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", default="400,20000", help="session lengths, comma-separated")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--lines", type=int, default=20, help="lines of each tool result")
    parser.add_argument("--dir", default=None, help="where the databases go (kept for reuse)")
    parser.add_argument("--fresh", action="store_true", help="rebuild the databases")
    parser.add_argument(
        "--every", type=int, default=EVERY, help="events between fold checkpoints (0: none)"
    )
    parser.add_argument(
        "--pages",
        default="",
        help="only these pages, comma-separated names as in the output (in their usual order)",
    )
    args = parser.parse_args(argv)
    only = {name.strip() for name in args.pages.split(",") if name.strip()} or None
    folder = Path(args.dir or tempfile.gettempdir()) / "ctxline-bench-inspector"
    folder.mkdir(parents=True, exist_ok=True)
    lengths = [int(n) for n in args.steps.split(",") if n.strip()]
    results: list[dict[str, object]] = []
    for n in lengths:
        path = folder / f"session-{n}-{args.lines}.db"
        built = None
        if args.fresh or not path.exists():
            built = round(build(path, n, args.lines), 2)
        row = measure(path, n, args.repeat, args.every, only)
        row["build_s"] = built
        results.append(row)
    report: dict[str, object] = {
        "benchmark": "inspector pages by session length",
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_average_1_5_15": [round(x, 2) for x in os.getloadavg()],
        "every": args.every,
        "sessions": results,
    }
    if len(results) >= 2:
        short, long = results[0], results[-1]
        report["ratio_long_to_short"] = {
            name: round(
                float(long[name]["median_s"]) / max(float(short[name]["median_s"]), 1e-9),  # type: ignore[index]
                2,
            )
            for name in short
            if isinstance(short[name], dict)
        }
        report["ratio_first_long_to_short"] = {
            name: round(
                float(long[name]["first_s"]) / max(float(short[name]["first_s"]), 1e-9),  # type: ignore[index]
                2,
            )
            for name in short
            if isinstance(short[name], dict)
        }
    json.dump(report, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
