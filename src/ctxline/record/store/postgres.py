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

import hashlib
import random
import re
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import errors as pg_errors
from psycopg_pool import ConnectionPool

from ctxline.errors import (
    BlobError,
    Conflict,
    CtxlineError,
    IntegrityError,
    UnknownSession,
    ValidationError,
)
from ctxline.record.blobs import BlobStore, blob_ref, parse_ref, verify
from ctxline.record.events import Event, JsonValue, Pending, StoredEvent, format_at, parse_at
from ctxline.record.store.base import (
    MAIN,
    Batch,
    ChainCheck,
    Clock,
    HealthCheck,
    IdFactory,
    SearchHit,
    SessionInfo,
    StorageError,
    Store,
    TimelineInfo,
    new_ulid,
    utc_now,
)
from ctxline.record.store.chain import GENESIS, PIECE_CHARS, Body
from ctxline.record.store.checks import (
    MAX_EVENT_BYTES,
    check_id,
    check_meta,
    check_name,
    check_pairing,
    check_read,
    check_seq,
    prepare_batch,
    resolve_retry,
)
from ctxline.record.store.pg_events import (
    Pieces,
    call_key,
    copy_rows,
    decode_meta,
    existing_ids,
    insert_events,
    link_at,
    read_events,
    verify_segments,
    visible_segments,
)
from ctxline.record.store.pg_health import pg_health
from ctxline.record.store.pg_migrations import PG_MIGRATIONS, apply_pg_migrations, index_events
from ctxline.record.store.sqlite_blobs import text_pieces
from ctxline.record.store.sqlite_events import Segment
from ctxline.record.store.textsearch import check_limit, index_words, parse_query, to_hits

__all__ = ["PostgresBlobs", "PostgresStore", "append_with_retry", "redact"]

Conn = psycopg.Connection[tuple[Any, ...]]
Prepared = tuple[list[Pending], list[Body], list[list[str]]]


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


def _refuse_nul(what: str, value: str) -> None:
    if "\x00" in value:
        raise ValidationError(f"{what} {value[:40]!r} contains a NUL character", field=what)


class PostgresBlobs:
    def __init__(self, store: PostgresStore) -> None:
        self._store = store

    def put(self, data: bytes) -> str:
        ref = blob_ref(data)
        view = memoryview(data)
        self._put(
            ref,
            len(data),
            lambda: (bytes(view[i : i + PIECE_CHARS]) for i in range(0, len(view), PIECE_CHARS)),
        )
        return ref

    def put_text(self, text: str) -> str:
        """Save ``text`` as UTF-8 (the same blob as ``put(text.encode())``), in pieces."""
        pieces = text_pieces(text)
        h, size = hashlib.sha256(), 0
        for piece in pieces():
            h.update(piece)
            size += len(piece)
        ref = "sha256:" + h.hexdigest()
        self._put(ref, size, pieces)
        return ref

    def _put(self, ref: str, size: int, pieces: Callable[[], Iterator[bytes]]) -> None:
        if size > MAX_EVENT_BYTES:
            raise ValidationError(
                f"a blob of {size:,} bytes is over the {MAX_EVENT_BYTES:,} a store holds",
                field="blob",
            )
        store = self._store
        store._writable("save a blob")
        with store._guard("save a blob"):
            try:
                with store._tx() as conn:
                    if conn.execute("SELECT 1 FROM blobs WHERE ref = %s", (ref,)).fetchone():
                        return
                    if size <= PIECE_CHARS:
                        conn.execute(
                            "INSERT INTO blobs(ref, size, data) VALUES (%s, %s, %s)"
                            " ON CONFLICT (ref) DO NOTHING",
                            (ref, size, b"".join(pieces())),
                        )
                        return
                    copy_rows(conn, "blobs", "ref, size, data", [(ref, size, Pieces(size, pieces))])
            except pg_errors.UniqueViolation:
                return  # another writer saved the same bytes at the same moment

    def get(self, ref: str) -> bytes:
        parse_ref(ref)
        with (
            self._store._guard("read a blob"),
            self._store._conn() as conn,
            conn.cursor(binary=True) as cur,
        ):
            row = cur.execute("SELECT data FROM blobs WHERE ref = %s", (ref,)).fetchone()
        if row is None:
            raise BlobError(f"blob {ref} is missing")
        return verify(ref, bytes(row[0]))

    def has(self, ref: str) -> bool:
        if "\x00" in ref:
            return False
        with self._store._guard("read a blob"), self._store._conn() as conn:
            return conn.execute("SELECT 1 FROM blobs WHERE ref = %s", (ref,)).fetchone() is not None


class PostgresStore:
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
        conn.execute(
            "INSERT INTO timelines(session, name, parent, fork_seq, head, created_at, link)"
            " VALUES (%s, %s, NULL, NULL, 0, %s, %s)",
            (session, MAIN, now, GENESIS),
        )
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

    _SESSION_SQL = (
        "SELECT s.id, s.created_at, s.meta,"
        " (SELECT head FROM timelines t WHERE t.session = s.id AND t.name = 'main'),"
        " (SELECT count(*) FROM timelines t WHERE t.session = s.id) FROM sessions s"
    )

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
            row = conn.execute(self._SESSION_SQL + " WHERE s.id = %s", (session,)).fetchone()
        if row is None:
            raise UnknownSession(session)
        return self._session_info(row)

    def sessions(self) -> list[SessionInfo]:
        with self._snapshot() as conn:
            rows = conn.execute(self._SESSION_SQL + " ORDER BY s.id").fetchall()
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

    # events

    @staticmethod
    def _known_calls(
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

    def append(
        self,
        session: str,
        events: Sequence[Event | Pending],
        *,
        expected_seq: int | None = None,
        timeline: str = MAIN,
    ) -> list[StoredEvent]:
        return self.append_batches([Batch(session, events, expected_seq, timeline)])[0]

    def append_batches(self, batches: Sequence[Batch]) -> list[list[StoredEvent]]:
        prepared: list[Prepared] = []
        for b in batches:
            batch, bodies = prepare_batch(
                b.session, b.timeline, b.events, b.expected_seq, b.create, b.meta
            )
            for s in bodies:
                _refuse_nul("kind", s.event.kind)
            prepared.append((batch, bodies, [index_words(p.event) for p in batch]))
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
            return [self._append_in(conn, b, p) for b, p in zip(batches, prepared, strict=True)]

    def _append_in(self, conn: Conn, b: Batch, prepared: Prepared) -> list[StoredEvent]:
        batch, bodies, words = prepared
        session, timeline = b.session, b.timeline
        segments, own = visible_segments(conn, session, timeline, True)
        head = own.head
        retried = resolve_retry(
            batch, bodies, existing_ids(conn, [p.id for p in batch if p.id is not None])
        )
        if retried is not None:
            return retried
        if b.expected_seq is not None and b.expected_seq != head:
            raise Conflict(session, timeline, b.expected_seq, head)
        known = self._known_calls(conn, session, segments, batch)
        check_pairing(batch, lambda cid: call_key(cid) in known)
        if not batch:
            return []
        now = self._clock()
        stored = [
            StoredEvent(head + i + 1, p.id or self._new_id(), p.at or now, p.event)
            for i, p in enumerate(batch)
        ]
        prev = own.link or link_at(conn, session, segments, head)
        link = insert_events(conn, session, timeline, prev, stored, bodies)
        index_events(
            conn, [(session, timeline, s.seq, w) for s, w in zip(stored, words, strict=True)]
        )
        conn.execute(
            "UPDATE timelines SET head = %s, link = %s WHERE session = %s AND name = %s",
            (head + len(stored), link, session, timeline),
        )
        return stored

    def read(
        self, session: str, timeline: str = MAIN, *, after_seq: int = 0, limit: int | None = None
    ) -> list[StoredEvent]:
        check_read(after_seq, limit)
        with self._snapshot() as conn:
            return read_events(conn, session, timeline, after_seq, limit, self._chained)

    def verify_chain(self, session: str, timeline: str = MAIN) -> ChainCheck:
        with self._snapshot() as conn:
            segments, own = visible_segments(conn, session, timeline, self._chained)
            if not self._chained:
                return ChainCheck(
                    session,
                    timeline,
                    own.head,
                    "",
                    0,
                    (
                        "no hash chain yet (a schema before version 3): it is computed on the next write open",
                    ),
                )
            return verify_segments(conn, session, timeline, segments, own)

    def head(self, session: str, timeline: str = MAIN) -> int:
        with self._guard("read the database"), self._conn() as conn:
            return visible_segments(conn, session, timeline, self._chained)[1].head

    def search(
        self, session: str, query: str, *, timeline: str = MAIN, limit: int = 10
    ) -> list[SearchHit]:
        """``websearch_to_tsquery`` over the visible events' tsvectors (GIN), ``ts_rank``."""
        parsed = parse_query(query)
        check_limit(limit)
        with self._snapshot() as conn:
            segments, _ = visible_segments(conn, session, timeline, self._chained)
            visible = " OR ".join(
                "(d.timeline = %s AND d.seq > %s AND d.seq <= %s)" for _ in segments
            )
            # rank on the index alone (seq and score through the sort), then read the winners
            ranked = conn.execute(
                "SELECT d.seq, ts_rank(d.tsv, q) AS score"
                " FROM search_docs d, websearch_to_tsquery('simple', %s) q"
                f" WHERE d.session = %s AND d.tsv @@ q AND ({visible})"
                " ORDER BY score DESC, d.seq DESC LIMIT %s",
                [
                    parsed.websearch(),
                    session,
                    *(v for s in segments for v in (s.name, s.base, s.upto)),
                    limit,
                ],
            ).fetchall()
            rows = []
            for seq, score in ranked:  # each hit read (and its link checked) like any read
                found = read_events(conn, session, timeline, int(seq) - 1, 1, self._chained)
                rows += [(ev, float(score)) for ev in found if ev.seq == int(seq)]
        return to_hits(rows, parsed, limit)

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


def _tables(conn: Conn) -> set[str]:
    return {
        r[0]
        for r in conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
        )
    }


def _read_only(conn: Conn) -> None:
    conn.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")


def append_with_retry(
    store: Store,
    session: str,
    make_events: Callable[[int], Sequence[Event | Pending]],
    *,
    timeline: str = MAIN,
    attempts: int = 10,
    retry_on: tuple[type[BaseException], ...] = (),
    on_conflict: Callable[[Conflict], None] | None = None,
) -> list[StoredEvent]:
    """Append ``make_events(head)`` at ``head``, re-reading the head after each Conflict.

    ``make_events`` gets the head it will be appended after, so it can decide what to
    write from what it has seen. Errors in ``retry_on`` (for example
    ``psycopg.OperationalError``, a dropped connection) are retried too; that is
    exactly-once only when the events carry client ids and the same content each
    time, so a batch that did commit is recognised and returned. The last error is
    raised after ``attempts`` tries. Works with any :class:`Store`.
    """
    if attempts < 1:
        raise ValidationError(f"attempts must be at least 1, got {attempts}", field="attempts")
    for attempt in range(1, attempts + 1):
        try:
            head = store.head(session, timeline)
            return store.append(session, make_events(head), expected_seq=head, timeline=timeline)
        except Conflict as exc:
            if on_conflict is not None:
                on_conflict(exc)
            if attempt == attempts:
                raise
        except retry_on:
            if attempt == attempts:
                raise
        time.sleep(random.uniform(0, min(0.05, 0.001 * 2**attempt)))
    raise AssertionError("unreachable")
