"""The SQLite store: the embedded default, durable and safe across processes.

WAL journal, a busy timeout and ``BEGIN IMMEDIATE`` make concurrent appenders from
several processes serialize instead of failing; the expected-seq check happens inside
that write transaction, so a conflict writes nothing. ``durability="full"`` adds
``synchronous=FULL`` (survives power loss, about 7 times slower per append); ``"normal"``
survives a killed process. Opening an existing file first checks it
(:mod:`ctxline.record.store.sqlite_files`) and fails closed: a damaged file, a WAL
database whose ``-wal`` lost or would lose committed frames, or an empty file beside
a non-empty ``-wal`` raises :class:`~ctxline.errors.IntegrityError` and is never
replaced or modified. Every event carries a hash link; reads check the links of what
they return (:mod:`ctxline.record.store.sqlite_events`). Appends index their events
for :meth:`SQLiteStore.search` (FTS5, BM25) in the same transaction.

``read_only=True`` opens without ever writing: a missing file is an error (nothing is
created), pending migrations are not applied (an older record reads without its hash
chain), and a file on a read-only file system opens as it is. ``create=False`` refuses
a missing database but may migrate an existing one. Engine errors are typed
(:mod:`ctxline.record.store.failures`): a read-only file or a full disk is a
:class:`~ctxline.record.store.base.StorageError`, and nothing is written.

    store = SQLiteStore("ctxline.db")
    reader = SQLiteStore("ctxline.db", read_only=True)
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Literal

from ctxline.errors import IntegrityError, ValidationError
from ctxline.record.blobs import BlobStore
from ctxline.record.events import Pending, StoredEvent
from ctxline.record.store.base import (
    MAIN,
    Batch,
    Clock,
    HealthCheck,
    IdFactory,
    new_ulid,
    utc_now,
)
from ctxline.record.store.failures import sqlite_failure
from ctxline.record.store.migrations import SQLITE_MIGRATIONS, apply_sqlite_migrations, index_events
from ctxline.record.store.redaction import Redaction
from ctxline.record.store.sql_store import Dialect, Prepared, SqlEvents, SqlStream, prepare
from ctxline.record.store.sqlite_blobs import SQLiteBlobs
from ctxline.record.store.sqlite_events import (
    Segment,
    existing_ids,
    has_external,
    has_redactions,
    insert_events,
    link_at,
    read_events,
    verify_segments,
    visible_segments,
)
from ctxline.record.store.sqlite_files import (
    SQLITE_MAGIC,
    check_sqlite_file,
    file_state,
    held_open,
    open_read_only,
)
from ctxline.record.store.sqlite_health import connection_health
from ctxline.record.store.sqlite_memory import SQLiteMemories
from ctxline.record.store.sqlite_redaction import redact_sqlite, scrub_sqlite
from ctxline.record.store.sqlite_sessions import SQLiteSessions
from ctxline.record.store.textsearch import Query
from ctxline.record.store.writes import CheckedAppends

__all__ = ["SQLITE_MAGIC", "SQLiteBlobs", "SQLiteStore", "check_sqlite_file"]

Durability = Literal["normal", "full"]


class SQLiteStore(CheckedAppends, SQLiteSessions, SqlEvents):
    _sql = Dialect(
        "?",
        visible_segments,
        link_at,
        read_events,
        existing_ids,
        insert_events,
        index_events,
        verify_segments,
        "SELECT d.seq, -bm25(search_fts) AS score"
        " FROM search_fts JOIN search_docs d ON d.id = search_fts.rowid"
        " WHERE search_fts MATCH ? AND d.session = ? AND ({visible})"
        " ORDER BY score DESC, d.seq DESC LIMIT ?",
        Query.fts5,
    )

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        durability: Durability = "normal",
        check: bool = True,
        clock: Clock = utc_now,
        new_id: IdFactory = new_ulid,
        busy_timeout_ms: int = 30_000,
        read_only: bool = False,
        create: bool = True,
    ) -> None:
        self.path = str(path)
        self.read_only = read_only
        self._clock = clock
        self._new_id = new_id
        self._lock = threading.RLock()
        self._timeout_ms = busy_timeout_ms
        self._immutable = False
        self._state: tuple[int | bool, ...] = ()
        memory = self.path == ":memory:"
        file = Path(self.path)
        if not memory and check:
            check_sqlite_file(file)
        if not memory and (read_only or not create) and not _exists(file):
            raise ValidationError(f"no such database {self.path} (nothing was created)", field="db")
        try:
            if read_only and not memory:
                self._conn, self._immutable = open_read_only(file, timeout=busy_timeout_ms / 1000)
                self._state = file_state(file)
            else:
                self._conn = sqlite3.connect(
                    self.path,
                    isolation_level=None,
                    check_same_thread=False,
                    timeout=busy_timeout_ms / 1000,
                )
        except sqlite3.Error as exc:
            raise sqlite_failure(exc, self.path, "open the database") from None
        try:
            self._conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            if not memory and not read_only:
                self._conn.execute("PRAGMA journal_mode = WAL")
                self._conn.execute(
                    f"PRAGMA synchronous = {'FULL' if durability == 'full' else 'NORMAL'}"
                )
            self._conn.execute("PRAGMA foreign_keys = ON")
            if read_only:
                self._chained = self._check_schema()
            else:
                self._conn.execute("PRAGMA secure_delete = ON")  # freed cells are zeroed
                with self._write("open the database for writing") as conn:
                    apply_sqlite_migrations(conn, self._clock)
                self._chained = True
            self._redactable = self._chained and has_redactions(self._conn)
            self._external = self._chained and has_external(self._conn)
        except sqlite3.Error as exc:
            self._conn.close()
            raise sqlite_failure(exc, self.path, "open the database") from None
        except BaseException:
            self._conn.close()
            raise
        self._held = ExitStack()
        if not memory:  # so later opens in this process leave this one's locks alone
            self._held.enter_context(held_open(file, shm=not self._immutable))
        self._blobs = SQLiteBlobs(self)

    def _reopen(self) -> None:
        """A fresh read-only connection (an ``immutable`` one saw the files change)."""
        file = Path(self.path)
        conn, immutable = open_read_only(file, timeout=self._timeout_ms / 1000)
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self._timeout_ms)}")
            conn.execute("PRAGMA foreign_keys = ON")
        except BaseException:
            conn.close()
            raise
        held = ExitStack()
        held.enter_context(held_open(file, shm=not immutable))
        self._conn.close()
        self._held.close()
        self._conn, self._immutable, self._held = conn, immutable, held
        self._state = file_state(file)
        self._chained = self._check_schema()
        self._redactable = self._chained and has_redactions(self._conn)
        self._external = self._chained and has_external(self._conn)

    def _check_schema(self) -> bool:
        tables = {r[0] for r in self._conn.execute("SELECT name FROM sqlite_master")}
        if "migrations" not in tables:
            raise IntegrityError(f"{self.path} is not a ctxline database (no migrations table)")
        done = {r[0] for r in self._conn.execute("SELECT version FROM migrations")}
        newer = done - {v for v, _, _ in SQLITE_MIGRATIONS}
        if newer:
            raise IntegrityError(
                f"the database has schema versions {sorted(newer)} from a newer ctxline; upgrade ctxline"
            )
        return "chain" in tables

    @property
    def blobs(self) -> BlobStore:
        return self._blobs

    @property
    def memories(self) -> SQLiteMemories:
        """The memories kept across sessions (:mod:`ctxline.record.store.memories`)."""
        return SQLiteMemories(self)

    # events

    def _known_call(self, session: str, segments: list[Segment], call_id: str) -> bool:
        for seg in segments:
            row = self._conn.execute(
                "SELECT 1 FROM tool_calls WHERE session = ? AND timeline = ? AND call_id = ?"
                " AND seq <= ? LIMIT 1",
                (session, seg.name, call_id, seg.upto),
            ).fetchone()
            if row is not None:
                return True
        return False

    def _append_batches_raw(self, batches: Sequence[Batch]) -> list[list[StoredEvent]]:
        """The raw append (see :mod:`ctxline.record.store.writes`: only the writer calls it)."""
        prepared = [prepare(b) for b in batches]
        with self._write("append") as conn:
            return [
                self._append_in(conn, b, pending)
                for b, pending in zip(batches, prepared, strict=True)
            ]

    def _append_in(
        self, conn: sqlite3.Connection, b: Batch, prepared: Prepared
    ) -> list[StoredEvent]:
        if b.create:
            self._create_in(conn, b.session, b.meta)
        return self._append_rows(conn, b, prepared)

    @contextmanager
    def _append_stream_raw(self) -> Iterator[SqlStream]:
        """One ``BEGIN IMMEDIATE`` transaction for many chunks (blobs saved in it too)."""
        with self._write("append") as conn:
            self._streaming = True
            try:
                yield SqlStream(self, conn, self._blobs, self._begin_batch)
            finally:
                self._streaming = False

    def _begin_batch(self, conn: sqlite3.Connection, b: Batch) -> bool:
        return b.create and self._create_in(conn, b.session, b.meta)

    def _known_calls(
        self, conn: object, session: str, segments: list[Segment], batch: Sequence[Pending]
    ) -> Callable[[str], bool]:
        return lambda cid: self._known_call(session, segments, cid)

    def _redact_rows(self, redactions: Sequence[Redaction]) -> int:
        """Redactions (:func:`~ctxline.record.store.redaction.redact` is the one caller)."""
        with self._write("redact events") as conn:
            return redact_sqlite(conn, redactions)

    def _scrub(self) -> None:
        """No copy of erased text left in the files (``sqlite_redaction.scrub_sqlite``)."""
        if self.read_only:
            return
        with self._lock:
            try:
                scrub_sqlite(self._conn)
            except sqlite3.Error as exc:
                raise sqlite_failure(exc, self.path, "erase") from None

    def head(self, session: str, timeline: str = MAIN) -> int:
        with self._reading() as conn:
            return visible_segments(conn, session, timeline, self._chained)[1].head

    def health(self, *, full: bool = True) -> list[HealthCheck]:
        """Pages (``integrity_check``, or ``quick_check`` unless ``full``), schema, timeline
        heads, every row parsed, every hash link, call ids, every blob re-hashed, and the
        search index against the record."""
        with self._lock:
            try:
                return connection_health(self._conn, full=full)
            except sqlite3.Error as exc:
                raise sqlite_failure(exc, self.path, "check the database") from None

    def integrity_check(self) -> list[str]:
        """Every problem :meth:`health` finds (quick page check); empty when healthy."""
        return [p for check in self.health(full=False) for p in check.problems]

    def close(self) -> None:
        with self._lock:
            self._conn.close()
            self._held.close()


def _exists(file: Path) -> bool:
    try:
        return file.stat().st_size > 0
    except OSError:
        return False
