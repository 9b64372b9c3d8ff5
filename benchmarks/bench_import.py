"""Time to parse and to import all of the shared real agent logs; prints one JSON object.

Why: importing recorded trajectories is how ctxline is tried, tested and replayed;
it should take seconds for a whole benchmark's worth of sessions, and re-importing
(which appends nothing) should be cheaper still.

    .venv/bin/python benchmarks/bench_import.py [DATA_DIR] [--repeats N] [--dir DIR]

DATA_DIR defaults to ``$CTXLINE_SHARED_DATA``, else ``../shared/data`` from the repo root.
Every file the CLI's folder import would take is parsed with ``ctxline.importers.load``
(format auto-detected; files that are not trajectories are skipped and listed; a
Claude Code sub-agent file already loaded with its main file is not loaded twice).
``load_s`` is the parse time, ``import_s`` the time to append every session into a
fresh SQLite database (durability normal) with ``ctxline.importers.ingest.import_sessions``,
``reimport_s`` the same import again (idempotent: nothing appended). Times are the
best of ``--repeats`` (default 3) runs; ``mb`` is the size of the input files.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from ctxline.errors import ValidationError
from ctxline.importers import ImportedSession, detect_format, load
from ctxline.importers.ingest import import_sessions
from ctxline.record.store import SQLiteStore

ROOT = Path(__file__).resolve().parents[1]
SUFFIXES = (".json", ".jsonl", ".traj")


def default_data() -> Path:
    return Path(os.environ.get("CTXLINE_SHARED_DATA", ROOT.parent / "shared" / "data"))


def trajectory_files(data: Path) -> tuple[list[tuple[Path, str]], list[str]]:
    """(file, format) for every trajectory under ``data``, shallow files first; and the skipped."""
    found: list[tuple[Path, str]] = []
    skipped: list[str] = []
    candidates = sorted(
        (p for p in data.rglob("*") if p.is_file() and p.suffix in SUFFIXES),
        key=lambda p: (len(p.relative_to(data).parts), p),
    )
    for path in candidates:
        try:
            found.append((path, detect_format(path)))
        except ValidationError:
            skipped.append(str(path.relative_to(data)))
    return found, skipped


def load_all(files: Sequence[tuple[Path, str]]) -> list[ImportedSession]:
    sessions: dict[str, ImportedSession] = {}
    for path, fmt in files:
        for session in load(path, fmt):
            sessions.setdefault(session.id, session)
    return list(sessions.values())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", nargs="?", type=Path, default=None)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=None, help="parent of the temp directory")
    args = parser.parse_args(argv)
    data: Path = args.data or default_data()
    if not data.is_dir():
        print(f"error: no data folder at {data}", file=sys.stderr)
        return 2
    repeats = max(1, int(args.repeats))

    files, skipped = trajectory_files(data)
    megabytes = sum(path.stat().st_size for path, _ in files) / 1e6

    load_times: list[float] = []
    sessions: list[ImportedSession] = []
    for _ in range(repeats):
        start = time.perf_counter()
        sessions = load_all(files)
        load_times.append(time.perf_counter() - start)
    events = sum(len(s.events) for s in sessions)

    import_times: list[float] = []
    reimport_times: list[float] = []
    db_bytes = 0
    with tempfile.TemporaryDirectory(prefix="ctxline-bench-", dir=args.dir) as tmp:
        for n in range(repeats):
            path = Path(tmp) / f"import-{n}.db"
            store = SQLiteStore(path)
            try:
                start = time.perf_counter()
                results = import_sessions(store, sessions)
                import_times.append(time.perf_counter() - start)
                assert sum(r.appended for r in results) == events
                start = time.perf_counter()
                again = import_sessions(store, sessions)
                reimport_times.append(time.perf_counter() - start)
                assert sum(r.appended for r in again) == 0
            finally:
                store.close()
            db_bytes = path.stat().st_size

    load_s, import_s, reimport_s = min(load_times), min(import_times), min(reimport_times)
    by_format = Counter(str(s.meta.get("format")) for s in sessions)
    events_by_format: Counter[str] = Counter()
    for s in sessions:
        events_by_format[str(s.meta.get("format"))] += len(s.events)
    result = {
        "benchmark": "import_shared_data",
        "data": str(data),
        "cpus": os.cpu_count(),
        "repeats": repeats,
        "files": len(files),
        "skipped_files": skipped,
        "mb": round(megabytes, 2),
        "sessions": len(sessions),
        "events": events,
        "sessions_by_format": dict(sorted(by_format.items())),
        "events_by_format": dict(sorted(events_by_format.items())),
        "load_s": round(load_s, 3),
        "load_mb_per_s": round(megabytes / load_s, 1),
        "import_s": round(import_s, 3),
        "import_events_per_s": round(events / import_s),
        "reimport_s": round(reimport_s, 3),
        "total_s": round(load_s + import_s, 3),
        "total_events_per_s": round(events / (load_s + import_s)),
        "db_mb": round(db_bytes / 1e6, 2),
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
