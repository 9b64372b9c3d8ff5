"""Full reads of a long session through the CLI against a raw read of its rows; prints JSON.

Why: ``ctxline show`` took 129 s on a 20,000-step session before its first line (one
rich table of 60,000 rows), ``requests`` 74 s, ``export`` 9 s. They now read in chunks
and print as they go: the figure that matters to a person is the time to the first
line, and the total should stay a small multiple of reading the same rows with plain
SQL (``SELECT … FROM events … ORDER BY seq``, every row fetched, nothing parsed).

    .venv/bin/python benchmarks/bench_long_session.py [--steps 20000] [--dir DIR]

Each command runs as a real ``ctxline`` process with its output piped; the time to the
first byte of stdout and to its end are measured from the start of the process (so they
include Python's start-up and imports, given on their own as ``ctxline --version``).
The session is the one ``benchmarks/bench_inspector.py`` writes (through a real
``Context``: prepare, an assistant tool call, its result, N times), built here when its
file is missing (about 4 minutes at 20,000 steps on 2 cores); the reads take about a
minute more.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_inspector import SESSION, build


def run_cli(args: list[str]) -> dict[str, float | int]:
    """Seconds to the first byte of stdout and to its end, and the bytes printed."""
    cli = Path(sys.executable).with_name("ctxline")
    start = time.perf_counter()
    with subprocess.Popen(
        [str(cli), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=os.environ
    ) as proc:
        assert proc.stdout is not None
        first = proc.stdout.read(1)
        first_s = time.perf_counter() - start
        size = len(first) + len(proc.stdout.read())
        err = proc.stderr.read() if proc.stderr else b""
        code = proc.wait()
    total = time.perf_counter() - start
    assert code == 0, (args, code, err[-500:])
    return {"first_output_s": round(first_s, 3), "total_s": round(total, 3), "bytes": size}


def raw_read(path: Path) -> dict[str, float | int]:
    start = time.perf_counter()
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    cur = conn.execute(
        "SELECT seq, id, at, body FROM events WHERE session = ? AND timeline = 'main' ORDER BY seq",
        (SESSION,),
    )
    cur.fetchone()
    first = time.perf_counter() - start
    rows = 1 + len(cur.fetchall())
    total = time.perf_counter() - start
    conn.close()
    return {"first_row_s": round(first, 4), "total_s": round(total, 3), "rows": rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--lines", type=int, default=20, help="lines of each tool result")
    parser.add_argument("--dir", default=None, help="where the database goes (kept for reuse)")
    args = parser.parse_args(argv)
    folder = Path(args.dir or tempfile.gettempdir()) / "ctxline-bench-inspector"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"session-{args.steps}-{args.lines}.db"
    built = None
    if not path.exists():
        built = round(build(path, args.steps, args.lines), 2)
    db = ["--db", str(path), "--session", SESSION]
    raw = raw_read(path)
    commands = {
        "ctxline --version (start-up)": ["--version"],
        "show": ["show", *db],
        "show --since 30000 --limit 100": ["show", *db, "--since", "30000", "--limit", "100"],
        "requests": ["requests", *db],
        "requests --json": ["requests", *db, "--json"],
        "export": ["export", *db],
    }
    results: dict[str, object] = {name: run_cli(a) for name, a in commands.items()}
    for name, row in results.items():
        if isinstance(row, dict) and name != "ctxline --version (start-up)":
            row["total_vs_raw_read"] = round(float(row["total_s"]) / float(raw["total_s"]), 1)
    report = {
        "benchmark": "full reads of a long session through the CLI",
        "python": platform.python_version(),
        "steps": args.steps,
        "events": raw["rows"],
        "db_bytes": path.stat().st_size,
        "build_s": built,
        "raw_sql_read": raw,
        "commands": results,
    }
    json.dump(report, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
