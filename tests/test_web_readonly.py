"""The inspector reads through the store's read-only mode: it never writes (no file at a
mistyped path, no byte of the database changed, writes refused, PostgreSQL read-only in
its session), sees a live writer's commits, and shows a row changed outside ctxline as an
integrity error naming the row, never as content (issue 21 §3)."""

from __future__ import annotations

import re
import sqlite3
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import quote

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
from ctxline.record.store.base import StorageError
from ctxline.web.app import create_app
from ctxline.web.record import open_record
from ctxline.web.server import serve_in_thread
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
    with pytest.raises(ValidationError, match="no such database"):
        open_record(str(missing))
    with pytest.raises(ValidationError, match="no such database"):
        open_record(f"sqlite:///{missing}")
    assert not missing.parent.exists()
    plain = tmp_path / "notes.txt"
    plain.write_text("hello")
    with pytest.raises(IntegrityError, match="not a SQLite database"):
        open_record(str(plain))
    assert plain.read_text() == "hello"
    other = tmp_path / "other.db"
    sqlite3.connect(other).execute("CREATE TABLE t(x)").connection.close()
    with pytest.raises(IntegrityError, match="not a ctxline database"):
        open_record(str(other))
    with pytest.raises(ValidationError, match="in-memory"):
        open_record(":memory:")


def test_reads_a_closed_record_without_changing_a_byte(tmp_path: Path) -> None:
    path = tmp_path / "r.db"
    small_record(path).close()
    before = sqlite_fingerprint(path)
    record = open_record(str(path))
    rows = record.sessions()
    assert [(r.id, r.events, r.timelines) for r in rows] == [("demo", 2, 2)]
    assert [e.event for e in record.read("demo", "alt")] == [
        UserMessage("hello"),
        UserMessage("other"),
    ]
    assert [e.event for e in record.read("demo", "alt", kind="user.message", offset=1)] == [
        UserMessage("other")
    ]
    last = record.last("demo", "alt", "user.message")
    assert last is not None
    assert last.event == UserMessage("other")
    assert [t.name for t in record.timelines("demo")] == ["main", "alt"]
    assert record.blob_count() == (1, 2000)
    (blob,) = record.blobs()
    assert record.blob(blob.ref) == b"x" * 2000
    assert blob.head == b"x" * 512
    with pytest.raises(BlobError):
        record.blob("sha256:" + "0" * 64)
    with pytest.raises(UnknownSession):
        record.read("nobody")
    with pytest.raises(UnknownTimeline):
        record.read("demo", "nope")
    with pytest.raises(StorageError, match="read-only"):
        record.store.create_session("x")
    with pytest.raises(StorageError, match="read-only"):
        record.store.append("demo", [UserMessage("a write")])
    record.close()
    assert sqlite_fingerprint(path)["sha256"] == before["sha256"]  # not a byte changed


def test_sees_a_live_writer(tmp_path: Path) -> None:
    path = tmp_path / "live.db"
    writer = small_record(path)
    record = open_record(str(path))
    assert len(record.read("demo")) == 2
    writer.append("demo", [UserMessage("later")])
    assert [e.event for e in record.read("demo")][-1] == UserMessage("later")
    writer.close()
    assert len(record.read("demo")) == 3
    record.close()


def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    small_record(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO migrations VALUES (99, 'future', '2030-01-01')")
    with pytest.raises(IntegrityError, match="newer ctxline"):
        open_record(str(path))


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_a_row_tampered_in_the_file_is_an_integrity_error_on_the_page(tmp_path: Path) -> None:
    """The removed reader of the inspector's own skipped the hash chain and showed the
    edited text as content; through the store, the page names the row instead."""
    path = tmp_path / "tampered.db"
    small_record(path).close()
    with sqlite3.connect(path) as conn:  # an edit that keeps the body valid JSON
        body = conn.execute(
            "SELECT body FROM events WHERE session = 'demo' AND timeline = 'main' AND seq = 2"
        ).fetchone()[0]
        forged = str(body).replace("world", "PAY THE INVOICE TO ACCOUNT 666")
        assert forged != body
        conn.execute(
            "UPDATE events SET body = ? WHERE session = 'demo' AND timeline = 'main' AND seq = 2",
            (forged,),
        )
    record = open_record(str(path))
    with pytest.raises(IntegrityError, match=r"demo/main seq 2"):
        record.read("demo")
    s = quote("demo", safe="")
    with serve_in_thread(create_app(record)) as running:
        for page in (
            f"/timeline?s={s}",
            f"/event?s={s}&seq=2",
            f"/timeline?s={s}&kind=user.message",
        ):
            status, text = _get(running.url + page)
            assert status == 500, page
            assert "The record cannot be read" in text
            assert re.search(
                r"demo/main seq 2: the stored event does not match its hash link", text
            )
            assert "PAY THE INVOICE" not in text, page  # never shown as content
        status, text = _get(running.url + f"/event?s={s}&seq=1")  # the rows before it still show
        assert status == 200
        assert "hello" in text
    record.close()


def test_postgres_is_read_only_in_its_session() -> None:
    import pg_server

    pg_server.require_psycopg()
    from ctxline.record.store.postgres import PostgresStore

    dsn = pg_server.fresh_dsn()
    store = PostgresStore(dsn, clock=FakeClock(), new_id=counter_ids())
    store.create_session("demo")
    store.append("demo", [UserMessage("hello")])
    store.close()
    record = open_record(dsn)
    assert [r.id for r in record.sessions()] == ["demo"]
    assert record.read("demo")[0].event == UserMessage("hello")
    assert "password" not in record.describe
    with pytest.raises(StorageError):
        record.store.append("demo", [UserMessage("a write")])
    assert [r.id for r in record.sessions()] == ["demo"]
    assert len(record.read("demo")) == 1
    record.close()
    with pytest.raises(ValidationError, match="cannot connect"):
        open_record("postgresql://nobody@127.0.0.1:1/none")
