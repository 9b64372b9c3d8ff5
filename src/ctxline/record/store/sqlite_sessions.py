"""The SQLite store's transactions, sessions, timelines and token-count cache.

Why a module of its own: :class:`~ctxline.record.store.sqlite.SQLiteStore` is this
class plus events, search and health; together they would not fit one module. Every
engine error leaves here typed (:func:`~ctxline.record.store.failures.sqlite_failure`):
``_write`` is one ``BEGIN IMMEDIATE`` transaction (rolled back on any error; inside a
streamed append, which holds the lock, it joins that one), and ``_reading`` one read
transaction, so every read sees one snapshot.

    with store._write("append") as conn: ...
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path

from ctxline.errors import UnknownSession, ValidationError
from ctxline.record.codec import format_at
from ctxline.record.events import JsonValue
from ctxline.record.store.base import MAIN, Clock, SessionInfo, StorageError, TimelineInfo
from ctxline.record.store.checks import check_id, check_meta, check_name, check_seq
from ctxline.record.store.failures import sqlite_failure
from ctxline.record.store.rows import SESSION_SQL, insert_main
from ctxline.record.store.sqlite_events import link_at, visible_segments
from ctxline.record.store.sqlite_files import file_state
from ctxline.record.store.sqlite_health import session_info

__all__ = ["SQLiteSessions"]


class SQLiteSessions:
    """What an open SQLite record does besides events (the base of ``SQLiteStore``)."""

    path: str
    read_only: bool
    _conn: sqlite3.Connection
    _lock: threading.RLock
    _clock: Clock
    _chained: bool
    _immutable: bool
    """A read-only connection with ``immutable=1`` (it opens no WAL file; see
    :func:`~ctxline.record.store.sqlite_files.read_only_params`)."""
    _state: tuple[int | bool, ...]
    _streaming: bool = False
    """A streamed append holds the write transaction: a write on this thread joins it."""

    def _reopen(self) -> None:
        raise NotImplementedError

    @contextmanager
    def _write(self, doing: str = "write") -> Iterator[sqlite3.Connection]:
        if self.read_only:
            raise StorageError(
                f"{self.path}: opened read-only, cannot {doing}; nothing was written"
            )
        with self._lock:
            conn = self._conn
            if self._streaming:  # inside a streamed append (this thread): join its transaction
                try:
                    yield conn
                except sqlite3.Error as exc:
                    raise sqlite_failure(exc, self.path, doing) from None
                return
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    yield conn
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                if conn.in_transaction:
                    with suppress(sqlite3.Error):
                        conn.execute("ROLLBACK")
                raise sqlite_failure(exc, self.path, doing) from None

    @contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection]:
        """One read transaction (one snapshot), engine errors typed.

        An ``immutable`` connection sees nothing a writer does, so before each read
        transaction the files are compared with those it opened (``stat`` only), and a
        changed database reopens it (joining the writer's ``-wal``); a database file that
        changed *during* the transaction (a checkpoint under it) fails the read instead of
        returning what may be a torn page.
        """
        with self._lock:
            nested = self._conn.in_transaction
            try:
                if self._immutable and not nested and file_state(Path(self.path)) != self._state:
                    self._reopen()
                conn = self._conn
                if not nested:
                    conn.execute("BEGIN")
                try:
                    yield conn
                finally:
                    if not nested and conn.in_transaction:
                        conn.execute("COMMIT")
            except sqlite3.Error as exc:
                raise sqlite_failure(exc, self.path, "read the database") from None
            if (
                self._immutable
                and not nested
                and file_state(Path(self.path))[:4] != self._state[:4]
            ):
                raise StorageError(
                    f"{self.path} was changed by a writer while it was read; nothing was"
                    " changed, run the command again"
                )

    def schema_versions(self) -> list[int]:
        with self._reading() as conn:
            return [r[0] for r in conn.execute("SELECT version FROM migrations ORDER BY version")]

    # sessions and timelines

    def _create_in(
        self, conn: sqlite3.Connection, session: str, meta: dict[str, JsonValue] | None
    ) -> bool:
        if conn.execute("SELECT 1 FROM sessions WHERE id = ?", (session,)).fetchone():
            return False
        now = format_at(self._clock())
        conn.execute(
            "INSERT INTO sessions(id, created_at, meta) VALUES (?, ?, ?)",
            (session, now, check_meta(meta)),
        )
        insert_main(conn, "?", session, now)
        return True

    def create_session(
        self, session: str, *, meta: dict[str, JsonValue] | None = None, exist_ok: bool = False
    ) -> SessionInfo:
        check_name("session", session)
        check_meta(meta)
        with self._write("create a session") as conn:
            if not self._create_in(conn, session, meta) and not exist_ok:
                raise ValidationError(f"session {session!r} already exists", field="session")
        return self.session(session)

    def session(self, session: str) -> SessionInfo:
        with self._reading() as conn:
            row = conn.execute(SESSION_SQL + " WHERE s.id = ?", (session,)).fetchone()
        if row is None:
            raise UnknownSession(session)
        return session_info(row)

    def sessions(self) -> list[SessionInfo]:
        with self._reading() as conn:
            rows = conn.execute(SESSION_SQL + " ORDER BY s.id").fetchall()
        return [session_info(r) for r in rows]

    def timeline(self, session: str, timeline: str = MAIN) -> TimelineInfo:
        with self._reading() as conn:
            own = visible_segments(conn, session, timeline, self._chained)[1]
        return TimelineInfo(session, timeline, own.head, own.parent, own.fork_seq)

    def timelines(self, session: str) -> list[TimelineInfo]:
        with self._reading() as conn:
            self.session(session)
            rows = conn.execute(
                "SELECT name, head, parent, fork_seq FROM timelines WHERE session = ?"
                " ORDER BY created_at, name",
                (session,),
            ).fetchall()
        return [TimelineInfo(session, r[0], r[1], r[2], r[3]) for r in rows]

    def fork(self, session: str, timeline: str, at_seq: int, name: str) -> TimelineInfo:
        check_name("timeline", name)
        check_seq("at_seq", at_seq)
        with self._write("fork a timeline") as conn:
            segments, own = visible_segments(conn, session, timeline, True)
            if conn.execute(
                "SELECT 1 FROM timelines WHERE session = ? AND name = ?", (session, name)
            ).fetchone():
                raise ValidationError(
                    f"timeline {name!r} already exists in {session!r}", field="name"
                )
            if not 0 <= at_seq <= own.head:
                raise ValidationError(
                    f"fork point {at_seq} is outside {timeline!r} (head {own.head})",
                    field="at_seq",
                )
            link = (
                own.link
                if at_seq == own.head and own.link
                else link_at(conn, session, segments, at_seq)
            )
            conn.execute(
                "INSERT INTO timelines(session, name, parent, fork_seq, head, created_at, link)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (session, name, timeline, at_seq, at_seq, format_at(self._clock()), link),
            )
        return self.timeline(session, name)

    # token counts

    def get_token_counts(self, event_ids: Sequence[str], tokenizer: str) -> dict[str, int]:
        found: dict[str, int] = {}
        with self._reading() as conn:
            for start in range(0, len(event_ids), 500):
                chunk = list(event_ids[start : start + 500])
                marks = ",".join("?" * len(chunk))
                for event_id, n in conn.execute(
                    "SELECT event_id, count FROM token_counts WHERE tokenizer = ?"
                    f" AND event_id IN ({marks})",
                    [tokenizer, *chunk],
                ):
                    if isinstance(n, int) and n >= 0:
                        found[event_id] = n
        return found

    def put_token_counts(self, tokenizer: str, counts: dict[str, int]) -> None:
        """Cache token counts; a read-only store keeps none (they are recomputed)."""
        check_name("tokenizer", tokenizer)
        for event_id, n in counts.items():
            check_id(event_id, "event_id")
            check_seq("count", n)
        if self.read_only or not counts:
            return
        with self._write("save token counts") as conn:
            conn.executemany(
                "INSERT OR REPLACE INTO token_counts(event_id, tokenizer, count) VALUES (?, ?, ?)",
                [(event_id, tokenizer, n) for event_id, n in counts.items()],
            )
