"""The PostgreSQL store: one shared record for many workers on many machines.

Why: SQLite serializes writers on one machine; a fleet of agent workers needs a
server. This backend keeps the exact semantics of :class:`~ctxline.record.store.SQLiteStore`
(same contract suite), with psycopg 3 and a small connection pool per store:

* An append locks its timeline row (``SELECT … FOR UPDATE``), checks the head against
  ``expected_seq`` and writes the batch and the new head in one transaction, so a
  conflicting append raises :class:`~ctxline.errors.Conflict` and writes nothing. The
  ``(session, timeline, seq)`` primary key backs this up: a duplicate seq is also
  reported as ``Conflict``.
* Client event ids are unique (``UNIQUE (id)``). When a connection drops after
  ``COMMIT`` the caller cannot know whether the append happened; sending the same
  batch again returns the stored events and writes nothing.
* Readers never skip an event that commits later: a seq is taken under the timeline
  lock and the head moves in the same transaction as the rows, and reads are bounded
  by the head they saw, so tailing with ``after_seq`` sees every event, in order.
* Event bodies are canonical JSON in ``text`` (PostgreSQL text cannot hold U+0000;
  JSON escapes it as ``\\u0000``); blobs are ``bytea``, content-addressed and
  verified on every read. Schema migrations are recorded in ``migrations``.
* Every event carries a hash link and reads check them
  (:mod:`ctxline.record.store.pg_events`); a large body or blob is streamed to the
  server with binary ``COPY``, never bound as one parameter. A read-only server, a
  full disk or a missing privilege is a :class:`~ctxline.record.store.base.StorageError`;
  a dropped connection stays ``psycopg.OperationalError`` (retry it).

Conflicts are normal when workers share a timeline. :func:`append_with_retry`
resolves them: it reads the head, asks ``make_events(head)`` for the batch, appends
with ``expected_seq=head`` and, on ``Conflict``, re-reads the head and tries again
(up to ``attempts`` times, with a little jitter). Give the events stable client ids
(and pass ``retry_on=(psycopg.OperationalError,)``) and a retry after a dropped
connection is exactly-once too.

    store = PostgresStore("postgresql://ctxline@db.internal/ctxline")
    store.create_session("run-7", exist_ok=True)
    append_with_retry(store, "run-7", lambda head: [Pending(UserMessage("hi"), id="w1-1")])
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import psycopg
from psycopg import errors as pg_errors
from psycopg_pool import ConnectionPool

from ctxline.errors import (
    Conflict,
    IntegrityError,
    ValidationError,
)
from ctxline.record.blobs import BlobStore
from ctxline.record.events import Pending, StoredEvent
from ctxline.record.store.base import (
    MAIN,
    Batch,
    Clock,
    HealthCheck,
    IdFactory,
    StorageError,
    new_ulid,
    utc_now,
)
from ctxline.record.store.pg_blobs import PostgresBlobs
from ctxline.record.store.pg_events import (
    call_key,
    existing_ids,
    has_external,
    has_redactions,
    insert_events,
    link_at,
    read_events,
    verify_segments,
    visible_segments,
)
from ctxline.record.store.pg_health import pg_health
from ctxline.record.store.pg_memory import PgMemories
from ctxline.record.store.pg_migrations import PG_MIGRATIONS, apply_pg_migrations, index_events
from ctxline.record.store.pg_redaction import redact_pg
from ctxline.record.store.pg_sessions import PgSessions, _read_only, _tables, pg_failure, redact
from ctxline.record.store.redaction import Redaction
from ctxline.record.store.retry import append_with_retry
from ctxline.record.store.rows import Segment
from ctxline.record.store.sql_store import Dialect, Prepared, SqlEvents, SqlStream, prepare
from ctxline.record.store.textsearch import Query
from ctxline.record.store.writes import CheckedAppends

__all__ = ["PostgresBlobs", "PostgresStore", "append_with_retry", "pg_failure", "redact"]

Conn = psycopg.Connection[tuple[Any, ...]]


class PostgresStore(CheckedAppends, PgSessions, SqlEvents):
    _sql = Dialect(
        "%s",
        visible_segments,
        link_at,
        read_events,
        existing_ids,
        insert_events,
        index_events,
        verify_segments,
        "SELECT d.seq, ts_rank(d.tsv, q) AS score"
        " FROM search_docs d, websearch_to_tsquery('simple', %s) q"
        " WHERE d.session = %s AND d.tsv @@ q AND ({visible})"
        " ORDER BY score DESC, d.seq DESC LIMIT %s",
        Query.websearch,
    )

    def __init__(
        self,
        dsn: str,
        *,
        clock: Clock = utc_now,
        new_id: IdFactory = new_ulid,
        pool_size: int = 4,
        connect_timeout: float = 10.0,
        migrate: bool = True,
        read_only: bool = False,
        create: bool = True,
    ) -> None:
        if pool_size < 1:
            raise ValidationError(
                f"pool_size must be at least 1, got {pool_size}", field="pool_size"
            )
        self.dsn = dsn
        self.read_only = read_only
        self._where = redact(dsn)
        self._clock = clock
        self._new_id = new_id
        try:  # one plain connection first: a bad DSN fails here at once, with a clear message
            first = psycopg.connect(
                dsn, autocommit=True, connect_timeout=max(1, round(connect_timeout))
            )
        except psycopg.Error as exc:
            detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            what = (
                "cannot connect to" if isinstance(exc, psycopg.OperationalError) else "bad URL for"
            )
            raise ValidationError(
                f"{what} PostgreSQL at {redact(dsn)}: {detail}", field="db"
            ) from None
        with self._guard("open the database"), first, first.transaction():
            tables = _tables(first)
            if (read_only or not create) and "migrations" not in tables:
                raise ValidationError(
                    f"no ctxline database at {self._where} (no ctxline tables in its schema;"
                    " nothing was created)",
                    field="db",
                )
            if migrate and not read_only:  # ``migrate=False``: look only (``ctxline doctor``)
                apply_pg_migrations(first, clock)
                tables = _tables(first)
            elif "migrations" in tables:
                done = {int(r[0]) for r in first.execute("SELECT version FROM migrations")}
                newer = done - {v for v, _, _ in PG_MIGRATIONS}
                if newer:
                    raise IntegrityError(
                        f"the database has schema versions {sorted(newer)} from a newer ctxline;"
                        " upgrade ctxline"
                    )
            self._chained = "chain" in tables
            self._redactable = self._chained and has_redactions(first)
            self._external = self._chained and has_external(first)
        self._pool: ConnectionPool[Conn] = ConnectionPool(
            dsn,
            min_size=1,
            max_size=pool_size,
            kwargs={"autocommit": True},
            check=ConnectionPool.check_connection,
            configure=_read_only if read_only else None,
            name="ctxline",
            open=False,
        )
        self._pool.open(wait=True, timeout=connect_timeout)
        self._blobs = PostgresBlobs(self)

    @property
    def blobs(self) -> BlobStore:
        return self._blobs

    @property
    def memories(self) -> PgMemories:
        """The memories kept across sessions (:mod:`ctxline.record.store.memories`)."""
        return PgMemories(self)

    # events

    def _known_calls(
        self, conn: Conn, session: str, segments: list[Segment], batch: Sequence[Pending]
    ) -> Callable[[str], bool]:
        known = self._known_keys(conn, session, segments, batch)
        return lambda cid: call_key(cid) in known

    @staticmethod
    def _known_keys(
        conn: Conn, session: str, segments: list[Segment], batch: Sequence[Pending]
    ) -> set[str]:
        """The call ids answered in ``batch`` that a visible earlier event made."""
        from ctxline.record.events import ToolResult

        wanted = sorted(
            {call_key(p.event.call_id) for p in batch if isinstance(p.event, ToolResult)}
        )
        known: set[str] = set()
        for seg in segments if wanted else []:
            rows = conn.execute(
                "SELECT DISTINCT call_id FROM tool_calls WHERE session = %s AND timeline = %s"
                " AND call_id = ANY(%s) AND seq <= %s",
                (session, seg.name, wanted, seg.upto),
            ).fetchall()
            known.update(r[0] for r in rows)
        return known

    def _append_batches_raw(self, batches: Sequence[Batch]) -> list[list[StoredEvent]]:
        """The raw append (see :mod:`ctxline.record.store.writes`: only the writer calls it)."""
        prepared = [prepare(b) for b in batches]
        self._writable("append")
        with self._guard("append"):
            for attempt in range(3):
                try:
                    return self._append_once(batches, prepared)
                except pg_errors.UniqueViolation as exc:
                    constraint = exc.diag.constraint_name
                    if constraint == "events_seq_key" and len(batches) == 1:
                        b = batches[0]  # a writer that bypassed the lock took the seq
                        actual = self.head(b.session, b.timeline)
                        expected = b.expected_seq if b.expected_seq is not None else actual
                        raise Conflict(b.session, b.timeline, expected, actual) from None
                    if constraint != "events_id_key" or attempt == 2:
                        raise
                    # Another writer stored one of these client ids at the same moment (on
                    # another timeline): go again, and the retry check sorts it out.
        raise AssertionError("unreachable")

    def _append_once(
        self, batches: Sequence[Batch], prepared: list[Prepared]
    ) -> list[list[StoredEvent]]:
        with self._tx() as conn:
            for b in batches:  # sessions first, then every timeline row locked in one order
                if b.create:
                    self._create_in(conn, b.session, b.meta)
            for session, timeline in sorted({(b.session, b.timeline) for b in batches}):
                visible_segments(conn, session, timeline, True, lock=True)
            return [self._append_rows(conn, b, p) for b, p in zip(batches, prepared, strict=True)]

    @contextmanager
    def _append_stream_raw(self) -> Iterator[SqlStream]:
        """One transaction for many chunks, on one pooled connection; blobs are saved on it
        too (a savepoint each), so a rolled-back stream leaves none. Each timeline row is
        locked when its first chunk comes and stays locked to the end."""
        self._writable("append")
        with self._guard("append"):
            try:
                with self._tx() as conn:
                    yield SqlStream(self, conn, PostgresBlobs(self, conn), self._begin_batch)
            except pg_errors.UniqueViolation:
                # another writer took one of these ids or seqs at the same moment (the
                # non-streamed append retries; a whole stream is not replayed here)
                raise StorageError(
                    f"{self._where}: another writer stored the same event ids at the same"
                    " moment; nothing was written, run it again"
                ) from None

    def _begin_batch(self, conn: Conn, b: Batch) -> bool:
        created = b.create and self._create_in(conn, b.session, b.meta)
        visible_segments(conn, b.session, b.timeline, True, lock=True)
        return created

    def _redact_rows(self, redactions: Sequence[Redaction]) -> int:
        """Redactions (:func:`~ctxline.record.store.redaction.redact` is the one caller)."""
        self._writable("redact events")
        with self._guard("redact events"), self._tx() as conn:
            return redact_pg(conn, redactions)

    def _reading(self) -> AbstractContextManager[Conn]:
        return self._snapshot()

    def head(self, session: str, timeline: str = MAIN) -> int:
        with self._guard("read the database"), self._conn() as conn:
            return visible_segments(conn, session, timeline, self._chained)[1].head

    def health(self) -> list[HealthCheck]:
        """Schema, timeline heads, every row parsed, every hash link, call ids, every blob
        re-hashed (in SQL), and each tsvector recomputed from its event."""
        with self._snapshot() as conn:
            return pg_health(conn, {v for v, _, _ in PG_MIGRATIONS})

    def integrity_check(self) -> list[str]:
        """Every problem :meth:`health` finds; empty when healthy."""
        return [p for check in self.health() for p in check.problems]

    def close(self) -> None:
        self._pool.close()
