"""The inspector's reader never writes: no file at a mistyped path, no byte changed, no side
files left, a live writer's commits seen, and PostgreSQL refusing writes in its session."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from conftest import FakeClock, counter_ids
from ctxline import UserMessage
from ctxline.errors import (
    BlobError,
    IntegrityError,
    UnknownSession,
    UnknownTimeline,
    ValidationError,
)
from ctxline.record.store import SQLiteStore
from ctxline.web.readonly import open_readonly
from web_support import sqlite_fingerprint


def small_record(path: Path) -> SQLiteStore:
    store = SQLiteStore(path, clock=FakeClock(), new_id=counter_ids())
    store.create_session("demo")
    store.append("demo", [UserMessage("hello"), UserMessage("world")])
    store.fork("demo", "main", 1, "alt")
    store.append("demo", [UserMessage("other")], timeline="alt")
    store.blobs.put(b"x" * 2000)
    return store


def test_a_mistyped_path_creates_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "nope" / "ctxline.db"
    with pytest.raises(ValidationError, match="no such database file"):
        open_readonly(str(missing))
    with pytest.raises(ValidationError, match="no such database file"):
        open_readonly(f"sqlite:///{missing}")
    assert not missing.parent.exists()
    plain = tmp_path / "notes.txt"
    plain.write_text("hello")
    with pytest.raises(ValidationError, match="not a SQLite database"):
        open_readonly(str(plain))
    other = tmp_path / "other.db"
    sqlite3.connect(other).execute("CREATE TABLE t(x)").connection.close()
    with pytest.raises(ValidationError, match="holds no ctxline record"):
        open_readonly(str(other))
    with pytest.raises(ValidationError, match="in-memory"):
        open_readonly(":memory:")


def test_reads_a_closed_record_without_changing_a_byte(tmp_path: Path) -> None:
    path = tmp_path / "r.db"
    small_record(path).close()
    before = sqlite_fingerprint(path)
    assert before["side_files"] == []
    record = open_readonly(str(path))
    rows = record.sessions()
    assert [(r.id, r.events, r.timelines) for r in rows] == [("demo", 2, 2)]
    assert [e.event for e in record.read("demo", "alt")] == [
        UserMessage("hello"),
        UserMessage("other"),
    ]
    assert [t.name for t in record.timelines("demo")] == ["main", "alt"]
    assert record.blob_count() == (1, 2000)
    (blob,) = record.blobs()
    assert record.blob(blob.ref) == b"x" * 2000
    with pytest.raises(BlobError):
        record.blob("sha256:" + "0" * 64)
    with pytest.raises(UnknownSession):
        record.read("nobody")
    with pytest.raises(UnknownTimeline):
        record.read("demo", "nope")
    # immutable reads of a database nobody has open leave no -wal or -shm behind
    assert sqlite_fingerprint(path) == before


def test_sees_a_live_writer_and_leaves_its_files_alone(tmp_path: Path) -> None:
    path = tmp_path / "live.db"
    writer = small_record(path)  # open: its -wal and -shm exist
    record = open_readonly(str(path))
    assert len(record.read("demo")) == 2
    writer.append("demo", [UserMessage("later")])
    assert [e.event for e in record.read("demo")][-1] == UserMessage("later")
    with pytest.raises(IntegrityError, match="readonly"):
        record.run(
            lambda q: q("INSERT INTO sessions(id, created_at, meta) VALUES ('x', 'y', '{}')", ())
        )
    writer.close()
    assert len(record.read("demo")) == 3


def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    small_record(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO migrations VALUES (99, 'future', '2030-01-01')")
    with pytest.raises(IntegrityError, match="newer ctxline"):
        open_readonly(str(path))


def test_postgres_is_read_only_in_its_session() -> None:
    import pg_server

    pg_server.require_psycopg()
    from ctxline.record.store.postgres import PostgresStore

    dsn = pg_server.fresh_dsn()
    store = PostgresStore(dsn, clock=FakeClock(), new_id=counter_ids())
    store.create_session("demo")
    store.append("demo", [UserMessage("hello")])
    store.close()
    record = open_readonly(dsn)
    assert [r.id for r in record.sessions()] == ["demo"]
    assert record.read("demo")[0].event == UserMessage("hello")
    import psycopg

    with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
        record.run(
            lambda q: q("INSERT INTO sessions(id, created_at, meta) VALUES ('x', 'y', '{}')", ())
        )
    assert [r.id for r in record.sessions()] == ["demo"]
    with pytest.raises(ValidationError, match="cannot connect"):
        open_readonly("postgresql://nobody@127.0.0.1:1/none")
