"""Full reads and writes of a long session through the CLI against raw reads; prints JSON.

Why: ``ctxline show`` took 129 s on a 20,000-step session before its first line (one
rich table of 60,000 rows), ``requests`` 74 s, ``export`` 9 s, and ``import --trusted``
of its export 34 s with no output until the end, holding every event at once. They now
read in chunks and print as they go: the figure that matters to a person is the time to
the first line, and the total should stay a small multiple of reading the same rows with
plain SQL (``SELECT … FROM events … ORDER BY seq``, every row fetched, nothing parsed) —
for an import, of reading its file with ``json.loads`` per line.

    .venv/bin/python benchmarks/bench_long_session.py [--steps 20000] [--dir DIR] [--only import]

Each command runs as a real ``ctxline`` process with its output piped; the time to the
first byte of output (stdout, or stderr for an import's progress lines) and to its end
are measured from the start of the process (so they include Python's start-up and
imports, given on their own as ``ctxline --version``), with the process's peak RSS. The
imports read the session's export (``--trusted``: every own event checked and
re-derived), the same file without ctxline's own kinds (plain ``import``), and the
export again into the database that holds it (nothing new: the stored events are
compared a chunk at a time). The session is the one ``benchmarks/bench_inspector.py``
writes (through a real ``Context``: prepare, an assistant tool call, its result, N
times), built here when its file is missing (about 4 minutes at 20,000 steps on 2
cores); the reads take about a minute more, the imports about as long.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import selectors
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


def run_import(args: list[str]) -> dict[str, float | int]:
    """Seconds to the first byte on stdout or stderr (an import's progress goes to stderr)
    and to the end, the bytes of each, and the process's peak RSS (``VmHWM``, read every
    50 ms and when its output ends)."""
    cli = Path(sys.executable).with_name("ctxline")
    start = time.perf_counter()
    proc = subprocess.Popen(
        [str(cli), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=os.environ
    )
    assert proc.stdout is not None
    assert proc.stderr is not None
    sel = selectors.DefaultSelector()
    sizes = {"stdout": 0, "stderr": 0}
    sel.register(proc.stdout, selectors.EVENT_READ, "stdout")
    sel.register(proc.stderr, selectors.EVENT_READ, "stderr")
    first: dict[str, float] = {}
    tail = b""
    peak = 0
    while sel.get_map():
        peak = max(peak, _hwm_kb(proc.pid))
        for key, _ in sel.select(timeout=0.05):
            data = os.read(key.fd, 1 << 16)
            if not data:
                sel.unregister(key.fileobj)
                continue
            first.setdefault(key.data, time.perf_counter() - start)
            sizes[key.data] += len(data)
            if key.data == "stderr":
                tail = (tail + data)[-500:]
    peak = max(peak, _hwm_kb(proc.pid))
    status = proc.wait()
    total = time.perf_counter() - start
    assert status == 0, (args, status, tail)
    return {
        "first_output_s": round(min(first.values()), 3),
        "first_stdout_s": round(first.get("stdout", total), 3),
        "total_s": round(total, 3),
        "stdout_bytes": sizes["stdout"],
        "stderr_bytes": sizes["stderr"],
        "peak_rss_mb": round(peak / 1024, 1),
    }


def _hwm_kb(pid: int) -> int:
    """The process's peak RSS so far (``VmHWM``: its own, from its ``exec``; a child's
    ``ru_maxrss`` would count the parent's pages at ``fork``); 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def raw_parse(path: Path) -> dict[str, float | int]:
    """Reading a JSONL file with ``json.loads`` per line: the floor of any import of it."""
    start = time.perf_counter()
    lines = 0
    with path.open("rb") as handle:
        for raw in handle:
            json.loads(raw)
            lines += 1
    return {"total_s": round(time.perf_counter() - start, 3), "lines": lines}


OWN = frozenset({"guide", "tools", "request", "reduction", "status"})


def imports(path: Path, folder: Path, progress: bool) -> dict[str, object]:
    """The import figures: the export, trusted; without own kinds, plain; again, trusted."""
    export = folder / f"{path.stem}.jsonl"
    if not export.exists():
        with export.open("wb") as out:
            subprocess.run(
                [str(Path(sys.executable).with_name("ctxline")), "export", "--db", str(path),
                 "--session", SESSION],
                stdout=out, check=True, env=os.environ,
            )  # fmt: skip
    plain = folder / f"{path.stem}-app.jsonl"
    if not plain.exists():
        with export.open("rb") as src, plain.open("wb") as out:
            for raw in src:
                if json.loads(raw)["kind"] not in OWN:
                    out.write(raw)
    flag = ["--progress"] if progress else []
    dbs = {name: folder / f"import-{name}.db" for name in ("trusted", "plain")}
    for db in dbs.values():
        for suffix in ("", "-wal", "-shm"):
            Path(f"{db}{suffix}").unlink(missing_ok=True)
    parsed = raw_parse(export)
    results: dict[str, object] = {
        "raw_json_parse_of_the_export": parsed,
        "export_bytes": export.stat().st_size,
        "import --trusted (the export)": run_import(
            ["import", str(export), "--db", str(dbs["trusted"]), "--trusted", *flag]
        ),
        "import (the export without own kinds)": run_import(
            ["import", str(plain), "--db", str(dbs["plain"]), *flag]
        ),
        "import --trusted again (nothing new)": run_import(
            ["import", str(export), "--db", str(dbs["trusted"]), "--trusted", *flag]
        ),
    }
    for row in results.values():
        if isinstance(row, dict) and "peak_rss_mb" in row:
            row["total_vs_raw_parse"] = round(float(row["total_s"]) / float(parsed["total_s"]), 1)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--lines", type=int, default=20, help="lines of each tool result")
    parser.add_argument("--dir", default=None, help="where the database goes (kept for reuse)")
    parser.add_argument("--only", choices=("reads", "import", "all"), default="all")
    parser.add_argument(
        "--no-progress-flag",
        action="store_true",
        help="import without --progress (to time a ctxline from before it had one)",
    )
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
    if args.only == "import":
        commands = {k: v for k, v in commands.items() if k.startswith("ctxline --version")}
    results: dict[str, object] = {name: run_cli(a) for name, a in commands.items()}
    for name, row in results.items():
        if isinstance(row, dict) and name != "ctxline --version (start-up)":
            row["total_vs_raw_read"] = round(float(row["total_s"]) / float(raw["total_s"]), 1)
    report: dict[str, object] = {
        "benchmark": "full reads and writes of a long session through the CLI",
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_average_1_5_15": [round(x, 2) for x in os.getloadavg()],
        "steps": args.steps,
        "events": raw["rows"],
        "db_bytes": path.stat().st_size,
        "build_s": built,
        "raw_sql_read": raw,
        "commands": results,
    }
    if args.only != "reads":
        report["imports"] = imports(path, folder, not args.no_progress_flag)
    json.dump(report, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
