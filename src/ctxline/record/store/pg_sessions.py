"""The PostgreSQL store's connections, sessions, timelines and token-count cache.

Why a module of its own: :class:`~ctxline.record.store.postgres.PostgresStore` is this
class plus events, search and health. Server refusals leave here typed
(:func:`pg_failure`): a read-only server, a full disk or a missing privilege is a
:class:`~ctxline.record.store.base.StorageError`; a dropped connection stays
``psycopg.OperationalError``, so ``append_with_retry(retry_on=…)`` can retry it.

    with store._snapshot() as conn: ...
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import errors as pg_errors
from psycopg_pool import ConnectionPool

from ctxline.errors import CtxlineError, IntegrityError, UnknownSession, ValidationError
from ctxline.record.codec import format_at, parse_at
from ctxline.record.events import JsonValue
from ctxline.record.store.base import MAIN, Clock, SessionInfo, StorageError, TimelineInfo
from ctxline.record.store.checks import check_id, check_meta, check_name, check_seq
from ctxline.record.store.pg_events import decode_meta, link_at, visible_segments
from ctxline.record.store.rows import SESSION_SQL, insert_main

__all__ = ["PgSessions", "pg_failure", "redact"]

Conn = psycopg.Connection[tuple[Any, ...]]


def redact(dsn: str) -> str:
    """The DSN without its password, for error messages."""
    dsn = re.sub(r"(://[^:/@]*):[^@/]*@", r"\1:***@", dsn)
    return re.sub(r"(password=)\S+", r"\1***", dsn)


def pg_failure(exc: psycopg.Error, where: str, doing: str) -> CtxlineError | None:
    """The typed error for a server refusal that is not ctxline's to retry, else None
    (connection errors stay psycopg's, for ``append_with_retry(retry_on=…)``)."""
    nothing = "nothing was written"
    if isinstance(exc, pg_errors.ReadOnlySqlTransaction):
        return StorageError(
            f"{where}: cannot {doing}: the database is read-only ({exc}); {nothing}"
        )
    if isinstance(exc, pg_errors.DiskFull):
        return StorageError(f"{where}: cannot {doing}: the server's disk is full; {nothing}")
    if isinstance(exc, pg_errors.InsufficientPrivilege):
        return StorageError(f"{where}: cannot {doing}: permission denied ({exc}); {nothing}")
    if isinstance(exc, pg_errors.OutOfMemory):
        return StorageError(f"{where}: cannot {doing}: the server ran out of memory; {nothing}")
    if isinstance(exc, pg_errors.ProgramLimitExceeded):
        return ValidationError(
            f"a value is too big for PostgreSQL ({exc}); {nothing}", field="event"
        )
    if isinstance(exc, pg_errors.DataCorrupted | pg_errors.IndexCorrupted):
        return IntegrityError(f"{where} is damaged ({exc}); run ctxline doctor")
    if isinstance(exc, pg_errors.UndefinedTable | pg_errors.UndefinedColumn):
        return IntegrityError(f"{where}: the ctxline tables are missing or incomplete ({exc})")
    return None


class PgSessions:
    """What a PostgreSQL record does besides events (the base of ``PostgresStore``)."""

    read_only: bool
    _where: str
    _pool: ConnectionPool[Conn]
    _clock: Clock
    _chained: bool

    @contextmanager
    def _guard(self, doing: str) -> Iterator[None]:
        try:
            yield
        except psycopg.Error as exc:
            typed = pg_failure(exc, self._where, doing)
            if typed is None:
                raise
            raise typed from None

    def _writable(self, doing: str) -> None:
        if self.read_only:
            raise StorageError(
                f"{self._where}: opened read-only, cannot {doing}; nothing was written"
            )

    @contextmanager
    def _conn(self) -> Iterator[Conn]:
        """A pooled connection in autocommit mode: each statement is its own transaction."""
        with self._pool.connection() as conn:
            yield conn

    @contextmanager
    def _tx(self) -> Iterator[Conn]:
        """A pooled connection inside one transaction, committed when the block ends."""
        with self._pool.connection() as conn, conn.transaction():
            yield conn

    @contextmanager
    def _snapshot(self) -> Iterator[Conn]:
        """A read-only transaction that sees one consistent snapshot."""
        with self._guard("read the database"), self._tx() as conn:
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            yield conn

    def schema_versions(self) -> list[int]:
        with self._snapshot() as conn:
            return [
                int(r[0]) for r in conn.execute("SELECT version FROM migrations ORDER BY version")
            ]

    # sessions and timelines

    def _create_in(self, conn: Conn, session: str, meta: dict[str, JsonValue] | None) -> bool:
        now = format_at(self._clock())
        inserted = conn.execute(
            "INSERT INTO sessions(id, created_at, meta) VALUES (%s, %s, %s)"
            " ON CONFLICT (id) DO NOTHING RETURNING id",
            (session, now, check_meta(meta)),
        ).fetchone()
        if inserted is None:
            return False
        insert_main(conn, "%s", session, now)
        return True

    def create_session(
        self, session: str, *, meta: dict[str, JsonValue] | None = None, exist_ok: bool = False
    ) -> SessionInfo:
        check_name("session", session)
        check_meta(meta)
        self._writable("create a session")
        with self._guard("create a session"), self._tx() as conn:
            if not self._create_in(conn, session, meta) and not exist_ok:
                raise ValidationError(f"session {session!r} already exists", field="session")
        return self.session(session)

    @staticmethod
    def _session_info(row: tuple[Any, ...]) -> SessionInfo:
        try:
            created = parse_at(row[1])
        except ValidationError:
            raise IntegrityError(
                f"session {str(row[0])[:80]!r}: its stored time is not a time"
            ) from None
        return SessionInfo(row[0], created, int(row[3]), int(row[4]), decode_meta(row[0], row[2]))

    def session(self, session: str) -> SessionInfo:
        with self._snapshot() as conn:
            row = conn.execute(SESSION_SQL + " WHERE s.id = %s", (session,)).fetchone()
        if row is None:
            raise UnknownSession(session)
        return self._session_info(row)

    def sessions(self) -> list[SessionInfo]:
        with self._snapshot() as conn:
            rows = conn.execute(SESSION_SQL + " ORDER BY s.id").fetchall()
        return [self._session_info(r) for r in rows]

    def timeline(self, session: str, timeline: str = MAIN) -> TimelineInfo:
        with self._snapshot() as conn:
            own = visible_segments(conn, session, timeline, self._chained)[1]
        return TimelineInfo(session, timeline, own.head, own.parent, own.fork_seq)

    def timelines(self, session: str) -> list[TimelineInfo]:
        with self._snapshot() as conn:
            if conn.execute("SELECT 1 FROM sessions WHERE id = %s", (session,)).fetchone() is None:
                raise UnknownSession(session)
            rows = conn.execute(
                "SELECT name, head, parent, fork_seq FROM timelines WHERE session = %s"
                " ORDER BY created_at, name",
                (session,),
            ).fetchall()
        return [TimelineInfo(session, r[0], int(r[1]), r[2], r[3]) for r in rows]

    def fork(self, session: str, timeline: str, at_seq: int, name: str) -> TimelineInfo:
        check_name("timeline", name)
        check_seq("at_seq", at_seq)
        self._writable("fork a timeline")
        with self._guard("fork a timeline"), self._tx() as conn:
            segments, own = visible_segments(conn, session, timeline, True)
            exists = ValidationError(
                f"timeline {name!r} already exists in {session!r}", field="name"
            )
            if conn.execute(
                "SELECT 1 FROM timelines WHERE session = %s AND name = %s", (session, name)
            ).fetchone():
                raise exists
            if not 0 <= at_seq <= own.head:
                raise ValidationError(
                    f"fork point {at_seq} is outside {timeline!r} (head {own.head})", field="at_seq"
                )
            link = (
                own.link
                if at_seq == own.head and own.link
                else link_at(conn, session, segments, at_seq)
            )
            inserted = conn.execute(
                "INSERT INTO timelines(session, name, parent, fork_seq, head, created_at, link)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (session, name) DO NOTHING RETURNING name",
                (session, name, timeline, at_seq, at_seq, format_at(self._clock()), link),
            ).fetchone()
            if inserted is None:  # forked by another worker since the check
                raise exists
        return self.timeline(session, name)

    # token counts

    def get_token_counts(self, event_ids: Sequence[str], tokenizer: str) -> dict[str, int]:
        ids = [i for i in event_ids if "\x00" not in i]  # such an id cannot have been stored
        if not ids or "\x00" in tokenizer:
            return {}
        with self._guard("read token counts"), self._conn() as conn:
            rows = conn.execute(
                "SELECT event_id, count FROM token_counts WHERE tokenizer = %s AND event_id = ANY(%s)",
                (tokenizer, ids),
            ).fetchall()
        return {r[0]: int(r[1]) for r in rows}

    def put_token_counts(self, tokenizer: str, counts: dict[str, int]) -> None:
        """Cache token counts; a read-only store keeps none (they are recomputed)."""
        check_name("tokenizer", tokenizer)
        for event_id, n in counts.items():
            check_id(event_id, "event_id")
            check_seq("count", n)
        if self.read_only or not counts:
            return
        with self._guard("save token counts"), self._tx() as conn, conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO token_counts(event_id, tokenizer, count) VALUES (%s, %s, %s)"
                " ON CONFLICT (event_id, tokenizer) DO UPDATE SET count = EXCLUDED.count",
                [(event_id, tokenizer, n) for event_id, n in counts.items()],
            )


def _tables(conn: Conn) -> set[str]:
    return {
        r[0]
        for r in conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
        )
    }


def _read_only(conn: Conn) -> None:
    conn.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
