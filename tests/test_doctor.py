"""``ctxline doctor`` and fail-closed opening: damaged pages, lost WAL files, drifted indexes.

Why: the record must never be served wrong. These tests damage real files the way
crashes and careless copies do — a ``-wal`` deleted after a kill -9, a shortened or
foreign ``-wal``, smashed pages, a corrupt blob, a head that disagrees with its
events, a search index out of step — and check that opening fails with a clear error
that names what is missing, that nothing is modified, and that ``ctxline doctor``
reports each problem (exit 2) and a healthy record as healthy (exit 0).

    .venv/bin/pytest tests/test_doctor.py -q
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

import pg_server
from ctxline.cli.doctor import doctor_cmd
from ctxline.errors import IntegrityError
from ctxline.record.events import AssistantMessage, ToolCall, ToolResult, UserMessage
from ctxline.record.store import SQLiteStore

SRC = str(Path(__file__).resolve().parents[1] / "src")


def doctor(db: str, *extra: str) -> Result:
    return CliRunner().invoke(doctor_cmd, ["--db", db, *extra], catch_exceptions=False)


def doctor_json(db: str) -> tuple[int, dict[str, object]]:
    result = doctor(db, "--json")
    return result.exit_code, json.loads(result.stdout)


def fill(store: SQLiteStore, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        call = AssistantMessage("", (ToolCall(f"c{i}", "bash", {"command": f"ls dir{i}"}),))
        store.append(
            "s",
            [
                UserMessage(f"step {i}: list the files"),
                call,
                ToolResult(f"c{i}", f"file_{i}.txt\n" * (200 if i % 3 == 0 else 2)),
            ],
        )


def healthy_db(path: Path, n: int = 6) -> Path:
    store = SQLiteStore(path)
    store.create_session("s")
    fill(store, n)
    store.blobs.put(b"a saved output " * 100)
    store.close()
    return path


def snapshot(db: Path) -> dict[str, bytes]:
    """The bytes of the database and its WAL files, as they are now."""
    out = {}
    for suffix in ("", "-wal", "-shm"):
        p = Path(f"{db}{suffix}")
        if p.exists():
            out[suffix] = p.read_bytes()
    return out


def crashed_copy(tmp_path: Path, *, checkpointed: int, pending: int) -> Path:
    """A database as a crash leaves it: ``checkpointed`` appends in the file, ``pending``
    more only in its -wal, with the -shm index that describes them.

    The three files are copied while the writer still has them open, which is exactly
    what a kill -9 leaves behind (the copy holds no locks).
    """
    live = tmp_path / "live"
    live.mkdir(parents=True)
    store = SQLiteStore(live / "c.db")
    store._conn.execute("PRAGMA wal_autocheckpoint = 0")
    store.create_session("s")
    fill(store, checkpointed)
    store._conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
    fill(store, pending, start=checkpointed)
    crash = tmp_path / "crash"
    crash.mkdir()
    for suffix in ("", "-wal", "-shm"):
        shutil.copyfile(f"{live / 'c.db'}{suffix}", f"{crash / 'c.db'}{suffix}")
    store.close()
    return crash / "c.db"


# --- doctor on a healthy record ---------------------------------------------------------


def test_doctor_healthy_sqlite_exits_0_and_changes_nothing(tmp_path: Path) -> None:
    db = healthy_db(tmp_path / "h.db")
    before = snapshot(db)
    code, report = doctor_json(str(db))
    assert code == 0
    assert report["healthy"] is True
    checks = report["checks"]
    assert isinstance(checks, list)
    assert [c["check"] for c in checks] == [
        "file",
        "pages",
        "schema",
        "timelines",
        "rows",
        "chain",
        "calls",
        "blobs",
        "search",
    ]
    assert all(c["ok"] for c in checks)
    assert snapshot(db) == before
    text = doctor(str(db)).stdout
    assert "healthy: 9 check(s) passed" in text
    assert "integrity_check" in text


def test_doctor_memory_and_missing_file(tmp_path: Path) -> None:
    assert doctor(":memory:").exit_code == 0
    missing = tmp_path / "nope.db"
    result = doctor(str(missing))
    assert result.exit_code == 2
    assert "no such database file" in result.stderr
    assert not missing.exists()


# --- doctor finds each kind of damage ----------------------------------------------------


def _damage(db: Path, *statements: str) -> None:
    conn = sqlite3.connect(db)
    for sql in statements:
        conn.execute(sql)
    conn.commit()
    conn.close()


@pytest.mark.parametrize(
    ("statements", "check", "needle"),
    [
        pytest.param(
            ["UPDATE blobs SET data = CAST('tampered' AS BLOB)"],
            "blobs",
            "corrupt: its bytes do not match its hash",
            id="corrupt-blob",
        ),
        pytest.param(
            ["UPDATE timelines SET head = head + 2 WHERE name = 'main'"],
            "timelines",
            "timeline s/main: head 20 but 18 events",
            id="head-ahead",
        ),
        pytest.param(
            ["DELETE FROM events WHERE seq = 18"],
            "timelines",
            "head 18 but 17 events",
            id="lost-event",
        ),
        pytest.param(
            ["DELETE FROM search_docs WHERE seq = 4"],
            "search",
            "event s/main#4 is missing from the search index",
            id="unindexed-event",
        ),
        pytest.param(
            [
                "INSERT INTO search_fts(search_fts, rowid, text) SELECT 'delete', d.id, 'step 3'"
                " FROM search_docs d WHERE d.seq = 7",
            ],
            "search",
            "event s/main#7",
            id="fts-row-gone",
        ),
        pytest.param(
            ["INSERT INTO search_fts(rowid, text) VALUES (999, 'forged words')"],
            "search",
            "FTS5 row 999 has no search entry",
            id="extra-fts-row",
        ),
    ],
)
def test_doctor_reports_each_problem(
    tmp_path: Path, statements: list[str], check: str, needle: str
) -> None:
    db = healthy_db(tmp_path / "d.db")
    _damage(db, *statements)
    code, report = doctor_json(str(db))
    assert code == 2
    assert report["healthy"] is False
    checks = report["checks"]
    assert isinstance(checks, list)
    failed = {c["check"]: c["problems"] for c in checks if not c["ok"]}
    assert check in failed, failed
    assert any(needle in p for p in failed[check]), failed
    result = doctor(str(db))
    assert result.exit_code == 2
    assert f"FAIL  {check}" in result.stdout
    assert result.stderr.strip().startswith("error:")
    assert "problem(s) found" in result.stderr


def test_doctor_damaged_pages_fails_closed(tmp_path: Path) -> None:
    db = healthy_db(tmp_path / "p.db", n=20)
    data = bytearray(db.read_bytes())
    data[4096 * 3 : 4096 * 3 + 2000] = b"\xff" * 2000
    db.write_bytes(bytes(data))
    before = snapshot(db)
    code, report = doctor_json(str(db))
    assert code == 2
    checks = report["checks"]
    assert isinstance(checks, list)
    assert [c["check"] for c in checks] == ["file"]
    assert "untouched" in checks[0]["problems"][0]
    with pytest.raises(IntegrityError):
        SQLiteStore(db)
    after = snapshot(db)
    assert after[""] == before[""], "the damaged file itself is never written"
    # the read-only quick_check connection may leave an empty -wal (and its index) behind
    assert after.get("-wal", b"") == b""


# --- a lost, shortened or foreign -wal -----------------------------------------------------


def test_missing_wal_is_refused_at_open_and_files_are_untouched(tmp_path: Path) -> None:
    db = crashed_copy(tmp_path, checkpointed=3, pending=2)
    wal = Path(f"{db}-wal")
    saved = wal.read_bytes()
    wal.unlink()
    before = snapshot(db)
    with pytest.raises(
        IntegrityError, match=r"c\.db-wal is missing .* WAL frame\(s\) of committed"
    ):
        SQLiteStore(db)
    assert snapshot(db) == before, "a refused open must not touch the files"
    code, report = doctor_json(str(db))
    assert code == 2
    checks = report["checks"]
    assert isinstance(checks, list)
    assert "c.db-wal is missing" in checks[0]["problems"][0]
    assert snapshot(db) == before
    # putting the -wal back recovers every acknowledged append
    wal.write_bytes(saved)
    store = SQLiteStore(db)
    assert store.head("s") == 15
    assert store.integrity_check() == []
    store.close()


def test_deleting_the_index_accepts_the_loss(tmp_path: Path) -> None:
    """What SQLite does without the -wal: it serves the database file as it was at the
    last checkpoint. ctxline refuses until the user chooses that by deleting -shm."""
    db = crashed_copy(tmp_path, checkpointed=3, pending=2)
    Path(f"{db}-wal").unlink()
    Path(f"{db}-shm").unlink()
    store = SQLiteStore(db)
    assert store.head("s") == 9  # the two appends that lived only in the -wal are gone
    assert store.integrity_check() == []
    store.close()


def test_fully_checkpointed_index_without_wal_is_fine(tmp_path: Path) -> None:
    """A crash after the last checkpoint (e.g. while closing) loses nothing: no alarm."""
    db = crashed_copy(tmp_path, checkpointed=4, pending=0)
    Path(f"{db}-wal").unlink()
    store = SQLiteStore(db)
    assert store.head("s") == 12
    store.close()


def test_truncated_wal_is_refused(tmp_path: Path) -> None:
    db = crashed_copy(tmp_path, checkpointed=2, pending=3)
    wal = Path(f"{db}-wal")
    wal.write_bytes(wal.read_bytes()[: wal.stat().st_size // 3])
    before = snapshot(db)
    with pytest.raises(IntegrityError, match="is truncated"):
        SQLiteStore(db)
    assert snapshot(db) == before


def test_foreign_wal_is_refused(tmp_path: Path) -> None:
    db = crashed_copy(tmp_path / "a", checkpointed=2, pending=2)
    other = crashed_copy(tmp_path / "b", checkpointed=1, pending=3)
    shutil.copyfile(f"{other}-wal", f"{db}-wal")
    before = snapshot(db)
    with pytest.raises(IntegrityError, match="does not belong to this database"):
        SQLiteStore(db)
    assert snapshot(db) == before


def _writer(db: Path, events: int, hold: bool) -> subprocess.Popen[str]:
    """A process that appends, never checkpoints, prints ``ready`` and then waits."""
    code = textwrap.dedent(
        f"""
        import sys, time
        from ctxline.record.store import SQLiteStore
        from ctxline.record.events import UserMessage
        store = SQLiteStore({str(db)!r})
        store._conn.execute("PRAGMA wal_autocheckpoint = 0")
        store.create_session("s", exist_ok=True)
        for i in range({events}):
            store.append("s", [UserMessage(f"acknowledged {{i}}")])
        print("ready", flush=True)
        time.sleep(60 if {hold} else 0)
        """
    )
    return subprocess.Popen(
        [sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": SRC},
    )


def test_kill_9_then_deleted_wal_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "k.db"
    proc = _writer(db, 40, hold=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    wal = Path(f"{db}-wal")
    assert wal.exists()
    assert Path(f"{db}-shm").exists()
    saved = wal.read_bytes()
    wal.unlink()
    with pytest.raises(IntegrityError, match=r"k\.db-wal is missing"):
        SQLiteStore(db)
    wal.write_bytes(saved)
    store = SQLiteStore(db)
    assert store.head("s") == 40
    store.close()


def test_a_live_database_is_not_mistaken_for_a_crash(tmp_path: Path) -> None:
    """Another process has the database open with frames only in its -wal: the index is
    theirs and current, so opening must work and see every commit."""
    db = tmp_path / "live.db"
    proc = _writer(db, 25, hold=True)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        store = SQLiteStore(db)
        assert store.head("s") == 25
        store.close()
    finally:
        proc.kill()
        proc.communicate()


def _lock_holder(shm: Path) -> int:
    """The pid another process sees holding the -shm dead-man-switch byte (0: none)."""
    code = textwrap.dedent(
        f"""
        import fcntl, os, struct
        fd = os.open({str(shm)!r}, os.O_RDONLY)
        probe = struct.pack("hhqqi4x", fcntl.F_WRLCK, 0, 128, 1, 0)
        kind, _, _, _, pid = struct.unpack("hhqqi4x", fcntl.fcntl(fd, fcntl.F_GETLK, probe))
        print(0 if kind == fcntl.F_UNLCK else pid)
        """
    )
    return int(
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout
    )


def test_second_open_in_one_process_keeps_sqlite_locks(tmp_path: Path) -> None:
    """Closing any descriptor of a file drops this process's POSIX locks on it, so the
    checks must not read the files of a database this process already has open."""
    db = tmp_path / "twice.db"
    first = SQLiteStore(db)
    first.create_session("s")
    first.append("s", [UserMessage("one")])
    assert _lock_holder(Path(f"{db}-shm")) == os.getpid()
    second = SQLiteStore(db)
    assert _lock_holder(Path(f"{db}-shm")) == os.getpid()
    second.append("s", [UserMessage("two")])
    second.close()
    assert first.head("s") == 2
    assert _lock_holder(Path(f"{db}-shm")) == os.getpid()
    first.close()


# --- PostgreSQL ------------------------------------------------------------------------


@pytest.fixture
def pg_url() -> str:
    pg_server.require_psycopg()
    return pg_server.fresh_dsn()


def test_doctor_postgres(pg_url: str) -> None:
    from ctxline.record.store.postgres import PostgresStore

    code, report = doctor_json(pg_url)
    assert code == 2  # an empty schema is not a ctxline database, and doctor does not create one
    assert "not a ctxline database" in json.dumps(report)
    store = PostgresStore(pg_url)
    store.create_session("s")
    store.append(
        "s",
        [
            UserMessage("find the invoice"),
            AssistantMessage("", (ToolCall("c1", "grep", {"pattern": "invoice"}),)),
            ToolResult("c1", "invoice_2024.pdf"),
        ],
    )
    ref = store.blobs.put(b"saved output")
    store.close()
    code, report = doctor_json(pg_url)
    assert code == 0, report
    checks = report["checks"]
    assert isinstance(checks, list)
    assert [c["check"] for c in checks] == [
        "schema",
        "timelines",
        "rows",
        "chain",
        "calls",
        "blobs",
        "search",
    ]
    assert "postgresql://" in str(report["db"])
    with pg_server.admin_connect(pg_url) as conn:
        conn.execute("UPDATE blobs SET data = 'x'::bytea WHERE ref = %s", (ref,))
        conn.execute("DELETE FROM search_docs WHERE seq = 1")
        conn.execute("UPDATE search_docs SET tsv = to_tsvector('simple', 'wrong') WHERE seq = 3")
    code, report = doctor_json(pg_url)
    assert code == 2
    text = json.dumps(report)
    assert f"blob {ref} is corrupt" in text
    assert "event s/main#1 is missing from the search index" in text
    assert "event s/main#3: its index entry does not match its text" in text
