"""SQLite specifics: fail-closed opening, migrations, reopening, crashes and races."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ctxline.errors import IntegrityError, ValidationError
from ctxline.record.events import UserMessage
from ctxline.record.store import MemoryStore, SQLiteStore, open_store

WRITER = Path(__file__).with_name("writer_process.py")


def test_reopen_keeps_everything(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    s = SQLiteStore(db)
    s.create_session("s")
    stored = s.append("s", [UserMessage("one"), UserMessage("two")])
    s.fork("s", "main", 1, "alt")
    s.close()
    again = SQLiteStore(db)
    assert again.read("s") == stored
    assert again.timeline("s", "alt").fork_seq == 1
    assert again.schema_versions() == [1, 2, 3, 4, 5, 6, 7]
    assert again.integrity_check() == []
    again.close()


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda b: b"garbage" + b[7:], id="bad-header"),
        pytest.param(lambda b: b[:100] + b"\xff" * 4000 + b[4100:], id="smashed-pages"),
        pytest.param(lambda b: b[: len(b) // 2], id="truncated"),
    ],
)
def test_damaged_file_fails_closed_and_is_untouched(tmp_path: Path, damage: object) -> None:
    db = tmp_path / "d.db"
    s = SQLiteStore(db)
    s.create_session("s")
    s.append("s", [UserMessage("x" * 5000) for _ in range(20)])
    s.close()
    for suffix in ("-wal", "-shm"):
        Path(str(db) + suffix).unlink(missing_ok=True)
    assert callable(damage)
    broken = damage(db.read_bytes())
    db.write_bytes(broken)
    with pytest.raises(IntegrityError, match=r"untouched|damaged|integrity"):
        SQLiteStore(db)
    assert db.read_bytes() == broken


def test_non_database_file_is_never_overwritten(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("my precious notes\n")
    with pytest.raises(IntegrityError, match="not a SQLite database"):
        open_store(str(notes))
    assert notes.read_text() == "my precious notes\n"


def test_open_store_urls(tmp_path: Path) -> None:
    assert isinstance(open_store(":memory:"), MemoryStore)
    s = open_store(f"sqlite:///{tmp_path}/u.db")
    assert isinstance(s, SQLiteStore)
    assert s.path == f"{tmp_path}/u.db"
    with pytest.raises(ValidationError, match="unknown database URL"):
        open_store("mysql://x")


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "n.db"
    SQLiteStore(db).close()
    import sqlite3

    conn = sqlite3.connect(db)
    conn.execute("INSERT INTO migrations VALUES (99, 'future', '2030-01-01T00:00:00.000000Z')")
    conn.commit()
    conn.close()
    with pytest.raises(IntegrityError, match="newer ctxline"):
        SQLiteStore(db)


def _run_writer(db: Path, worker: str, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(WRITER), str(db), "s", worker, *extra],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )


def test_kill_9_loses_no_acknowledged_append(tmp_path: Path) -> None:
    db = tmp_path / "k.db"
    rng = random.Random(7)
    acked: dict[str, int] = {}
    kills = 0
    for round_ in range(24):
        proc = _run_writer(db, f"w{round_}")
        assert proc.stdout is not None
        # kill after a random number of acknowledged appends (waits on the writer, not on time)
        seen = [proc.stdout.readline() for _ in range(rng.randint(5, 12))]
        proc.send_signal(signal.SIGKILL)
        rest, _ = proc.communicate(timeout=60)
        assert proc.returncode == -signal.SIGKILL
        out = "".join(seen) + rest
        kills += 1
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[0] == "ack":
                acked[parts[2]] = int(parts[1])
    store = SQLiteStore(db)
    assert store.integrity_check() == []
    events = store.read("s")
    seqs = [e.seq for e in events]
    assert seqs == list(range(1, len(seqs) + 1)), "gap in the timeline"
    by_id = {e.id: e.seq for e in events}
    lost = [i for i in acked if i not in by_id]
    assert lost == []
    assert all(by_id[i] == seq for i, seq in acked.items())
    assert len(by_id) == len(events), "duplicated event"
    assert len(acked) > 100, "the writer should have acknowledged appends before each kill"
    print(
        f"kill-9 sqlite: kills={kills} acknowledged={len(acked)} stored={len(events)} lost=0 duplicated=0"
    )
    store.close()


def test_racing_appenders_are_gap_free_and_report_conflicts(tmp_path: Path) -> None:
    db = tmp_path / "race.db"
    SQLiteStore(db).close()
    start = f"--start-at={time.time() + 2.0}"
    procs = [_run_writer(db, f"r{i}", "--expected", "--count=60", start) for i in range(4)]
    outputs = [p.communicate(timeout=120)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs)
    conflicts = sum(line.startswith("conflict") for out in outputs for line in out.splitlines())
    acks = [line.split() for out in outputs for line in out.splitlines() if line.startswith("ack")]
    store = SQLiteStore(db)
    events = store.read("s")
    assert [e.seq for e in events] == list(range(1, 4 * 60 * 3 + 1))
    assert len({e.id for e in events}) == len(events)
    assert sorted(int(a[1]) for a in acks) == [e.seq for e in events]
    # each batch is contiguous: atomic appends never interleave
    for first in range(0, len(events), 3):
        owners = {e.id.rsplit("-", 1)[0] for e in events[first : first + 3]}
        assert len(owners) == 1
    print(f"race sqlite: workers=4 events={len(events)} conflicts={conflicts}")
    store.close()
