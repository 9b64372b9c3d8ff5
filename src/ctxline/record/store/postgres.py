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

import json
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
    UnknownSession,
    UnknownTimeline,
    ValidationError,
)
from ctxline.record.blobs import BlobStore, blob_ref, parse_ref, verify
from ctxline.record.codec import canonical_json, format_at, parse_at
from ctxline.record.events import Event, JsonValue, Pending, StoredEvent, ToolResult
from ctxline.record.parse import event_from_json
from ctxline.record.store.base import (
    MAIN,
    Clock,
    HealthCheck,
    IdFactory,
    SearchHit,
    SessionInfo,
    Store,
    TimelineInfo,
    as_pending,
    call_ids,
    check_name,
    check_new_ids,
    check_pairing,
    encode_batch,
    new_ulid,
    resolve_retry,
    utc_now,
)
from ctxline.record.store.pg_migrations import PG_MIGRATIONS, apply_pg_migrations, index_events
from ctxline.record.store.textsearch import check_limit, index_words, parse_query, to_hits

__all__ = ["PostgresBlobs", "PostgresStore", "append_with_retry"]

Conn = psycopg.Connection[tuple[Any, ...]]


def redact(dsn: str) -> str:
    """The DSN without its password, for error messages."""
    dsn = re.sub(r"(://[^:/@]*):[^@/]*@", r"\1:***@", dsn)
    return re.sub(r"(password=)\S+", r"\1***", dsn)


def _call_key(call_id: str) -> str:
    """A tool call id as stored: backslash and NUL escaped (text cannot hold NUL)."""
    return call_id.replace("\\", "\\\\").replace("\x00", "\\0")


def _check_text(what: str, value: str) -> None:
    if "\x00" in value:
        raise ValidationError(f"{what} {value!r} contains a NUL character", field=what)


class PostgresBlobs:
    def __init__(self, store: PostgresStore) -> None:
        self._store = store

    def put(self, data: bytes) -> str:
        ref = blob_ref(data)
        with self._store._tx() as conn:
            conn.execute(
                "INSERT INTO blobs(ref, size, data) VALUES (%s, %s, %s) ON CONFLICT (ref) DO NOTHING",
                (ref, len(data), bytes(data)),
            )
        return ref

    def get(self, ref: str) -> bytes:
        parse_ref(ref)
        with self._store._conn() as conn:
            row = conn.execute("SELECT data FROM blobs WHERE ref = %s", (ref,)).fetchone()
        if row is None:
            raise BlobError(f"blob {ref} is missing")
        return verify(ref, bytes(row[0]))

    def has(self, ref: str) -> bool:
        if "\x00" in ref:
            return False
        with self._store._conn() as conn:
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
    ) -> None:
        if pool_size < 1:
            raise ValidationError(
                f"pool_size must be at least 1, got {pool_size}", field="pool_size"
            )
        self.dsn = dsn
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
        with first, first.transaction():
            if (
                migrate
            ):  # ``migrate=False``: look only (``ctxline doctor``), never change the schema
                apply_pg_migrations(first, clock)
        self._pool: ConnectionPool[Conn] = ConnectionPool(
            dsn,
            min_size=1,
            max_size=pool_size,
            kwargs={"autocommit": True},
            check=ConnectionPool.check_connection,
            name="ctxline",
            open=False,
        )
        self._pool.open(wait=True, timeout=connect_timeout)
        self._blobs = PostgresBlobs(self)

    @property
    def blobs(self) -> BlobStore:
        return self._blobs

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
        with self._tx() as conn:
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            yield conn

    def schema_versions(self) -> list[int]:
        with self._conn() as conn:
            return [r[0] for r in conn.execute("SELECT version FROM migrations ORDER BY version")]

    # sessions and timelines

    def create_session(
        self, session: str, *, meta: dict[str, JsonValue] | None = None, exist_ok: bool = False
    ) -> SessionInfo:
        check_name("session", session)
        meta_text = canonical_json(meta or {}).decode()
        with self._tx() as conn:
            if conn.execute("SELECT 1 FROM sessions WHERE id = %s", (session,)).fetchone():
                if not exist_ok:
                    raise ValidationError(f"session {session!r} already exists", field="session")
            else:
                now = format_at(self._clock())
                inserted = conn.execute(
                    "INSERT INTO sessions(id, created_at, meta) VALUES (%s, %s, %s)"
                    " ON CONFLICT (id) DO NOTHING RETURNING id",
                    (session, now, meta_text),
                ).fetchone()
                if inserted is None:  # created by another worker since the check
                    if not exist_ok:
                        raise ValidationError(
                            f"session {session!r} already exists", field="session"
                        )
                else:
                    conn.execute(
                        "INSERT INTO timelines(session, name, parent, fork_seq, head, created_at)"
                        " VALUES (%s, %s, NULL, NULL, 0, %s)",
                        (session, MAIN, now),
                    )
        return self.session(session)

    _SESSION_SQL = (
        "SELECT s.id, s.created_at, s.meta,"
        " (SELECT head FROM timelines t WHERE t.session = s.id AND t.name = 'main'),"
        " (SELECT count(*) FROM timelines t WHERE t.session = s.id) FROM sessions s"
    )

    @staticmethod
    def _session_info(row: tuple[Any, ...]) -> SessionInfo:
        return SessionInfo(row[0], parse_at(row[1]), int(row[3]), int(row[4]), json.loads(row[2]))

    def session(self, session: str) -> SessionInfo:
        with self._conn() as conn:
            row = conn.execute(self._SESSION_SQL + " WHERE s.id = %s", (session,)).fetchone()
        if row is None:
            raise UnknownSession(session)
        return self._session_info(row)

    def sessions(self) -> list[SessionInfo]:
        with self._conn() as conn:
            rows = conn.execute(self._SESSION_SQL + " ORDER BY s.id").fetchall()
        return [self._session_info(r) for r in rows]

    @staticmethod
    def _timeline_row(
        conn: Conn, session: str, timeline: str, *, lock: bool = False
    ) -> tuple[str | None, int | None, int]:
        row = conn.execute(
            "SELECT parent, fork_seq, head FROM timelines WHERE session = %s AND name = %s"
            + (" FOR UPDATE" if lock else ""),
            (session, timeline),
        ).fetchone()
        if row is None:
            if conn.execute("SELECT 1 FROM sessions WHERE id = %s", (session,)).fetchone() is None:
                raise UnknownSession(session)
            raise UnknownTimeline(session, timeline)
        return row[0], row[1], int(row[2])

    def timeline(self, session: str, timeline: str = MAIN) -> TimelineInfo:
        with self._conn() as conn:
            parent, fork_seq, head = self._timeline_row(conn, session, timeline)
        return TimelineInfo(session, timeline, head, parent, fork_seq)

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
        with self._tx() as conn:
            head = self._timeline_row(conn, session, timeline)[2]
            exists = ValidationError(
                f"timeline {name!r} already exists in {session!r}", field="name"
            )
            if conn.execute(
                "SELECT 1 FROM timelines WHERE session = %s AND name = %s", (session, name)
            ).fetchone():
                raise exists
            if not 0 <= at_seq <= head:
                raise ValidationError(
                    f"fork point {at_seq} is outside {timeline!r} (head {head})", field="at_seq"
                )
            inserted = conn.execute(
                "INSERT INTO timelines(session, name, parent, fork_seq, head, created_at)"
                " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (session, name) DO NOTHING RETURNING name",
                (session, name, timeline, at_seq, at_seq, format_at(self._clock())),
            ).fetchone()
            if inserted is None:  # forked by another worker since the check
                raise exists
        return self.timeline(session, name)

    # events

    def _chain(
        self, conn: Conn, session: str, timeline: str, *, lock: bool = False
    ) -> list[tuple[str, int, int]]:
        """(timeline, lowest own seq - 1, highest visible seq), root ancestor first."""
        chain: list[tuple[str, int, int]] = []
        parent, fork_seq, upto = self._timeline_row(conn, session, timeline, lock=lock)
        name = timeline
        while True:
            chain.append((name, fork_seq or 0, upto))
            if parent is None:
                break
            name, upto = parent, fork_seq or 0
            parent, fork_seq, _ = self._timeline_row(conn, session, name)
        chain.reverse()
        return chain

    @staticmethod
    def _known_calls(
        conn: Conn, session: str, chain: list[tuple[str, int, int]], batch: Sequence[Pending]
    ) -> set[str]:
        """The call ids answered in ``batch`` that a visible earlier event made."""
        wanted = sorted(
            {_call_key(p.event.call_id) for p in batch if isinstance(p.event, ToolResult)}
        )
        known: set[str] = set()
        if not wanted:
            return known
        for name, _, upto in chain:
            rows = conn.execute(
                "SELECT DISTINCT call_id FROM tool_calls WHERE session = %s AND timeline = %s"
                " AND call_id = ANY(%s) AND seq <= %s",
                (session, name, wanted, upto),
            ).fetchall()
            known.update(r[0] for r in rows)
        return known

    @staticmethod
    def _existing(conn: Conn, batch: Sequence[Pending]) -> dict[str, StoredEvent]:
        ids = [p.id for p in batch if p.id is not None]
        if not ids:
            return {}
        rows = conn.execute(
            "SELECT seq, id, at, body FROM events WHERE id = ANY(%s)", (ids,)
        ).fetchall()
        return {row[1]: PostgresStore._stored(row) for row in rows}

    @staticmethod
    def _stored(row: tuple[Any, ...]) -> StoredEvent:
        return StoredEvent(
            int(row[0]), row[1], parse_at(row[2]), event_from_json(json.loads(row[3]))
        )

    def append(
        self,
        session: str,
        events: Sequence[Event | Pending],
        *,
        expected_seq: int | None = None,
        timeline: str = MAIN,
    ) -> list[StoredEvent]:
        batch = as_pending(events)
        check_new_ids(batch)
        for p in batch:
            if p.id is not None:
                _check_text("id", p.id)
        bodies = encode_batch(batch)
        found = [index_words(p.event) for p in batch]
        for attempt in range(3):
            try:
                return self._append_once(session, timeline, batch, bodies, found, expected_seq)
            except pg_errors.UniqueViolation as exc:
                constraint = exc.diag.constraint_name
                if constraint == "events_seq_key":  # a writer that bypassed the lock took the seq
                    actual = self.head(session, timeline)
                    raise Conflict(
                        session,
                        timeline,
                        expected_seq if expected_seq is not None else actual,
                        actual,
                    ) from None
                if constraint != "events_id_key" or attempt == 2:
                    raise
                # Another writer stored one of these client ids at the same moment (on
                # another timeline): go again, and the retry check sorts it out.
        raise AssertionError("unreachable")

    def _append_once(
        self,
        session: str,
        timeline: str,
        batch: list[Pending],
        bodies: list[str],
        found: list[list[str]],
        expected_seq: int | None,
    ) -> list[StoredEvent]:
        with self._tx() as conn:
            chain = self._chain(conn, session, timeline, lock=True)
            head = chain[-1][2]
            retried = resolve_retry(batch, self._existing(conn, batch))
            if retried is not None:
                return retried
            if expected_seq is not None and expected_seq != head:
                raise Conflict(session, timeline, expected_seq, head)
            known = self._known_calls(conn, session, chain, batch)
            check_pairing(batch, lambda cid: _call_key(cid) in known)
            now = self._clock()
            stored = [
                StoredEvent(head + i + 1, p.id or self._new_id(), p.at or now, p.event)
                for i, p in enumerate(batch)
            ]
            if not stored:
                return stored
            with conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO events(session, timeline, seq, id, at, kind, body)"
                    " VALUES (%s, %s, %s, %s, %s, %s, %s)",
                    [
                        (session, timeline, s.seq, s.id, format_at(s.at), s.kind, body)
                        for s, body in zip(stored, bodies, strict=True)
                    ],
                )
                calls = [
                    (session, timeline, _call_key(cid), s.seq)
                    for s in stored
                    for cid in call_ids(s.event)
                ]
                if calls:
                    cur.executemany(
                        "INSERT INTO tool_calls(session, timeline, call_id, seq) VALUES (%s, %s, %s, %s)",
                        calls,
                    )
            index_events(
                conn, [(session, timeline, s.seq, w) for s, w in zip(stored, found, strict=True)]
            )
            conn.execute(
                "UPDATE timelines SET head = %s WHERE session = %s AND name = %s",
                (head + len(stored), session, timeline),
            )
        return stored

    def read(
        self, session: str, timeline: str = MAIN, *, after_seq: int = 0, limit: int | None = None
    ) -> list[StoredEvent]:
        out: list[StoredEvent] = []
        with self._snapshot() as conn:
            for name, base, upto in self._chain(conn, session, timeline):
                lo = max(base, after_seq)
                want = None if limit is None or limit < 0 else limit - len(out)
                if lo < upto and want != 0:
                    rows = conn.execute(
                        "SELECT seq, id, at, body FROM events WHERE session = %s AND timeline = %s"
                        " AND seq > %s AND seq <= %s ORDER BY seq LIMIT %s",
                        (session, name, lo, upto, want),
                    ).fetchall()
                    out.extend(self._stored(r) for r in rows)
                if limit is not None and len(out) >= limit:
                    return out[:limit]
        return out

    def head(self, session: str, timeline: str = MAIN) -> int:
        with self._conn() as conn:
            return self._timeline_row(conn, session, timeline)[2]

    def search(
        self, session: str, query: str, *, timeline: str = MAIN, limit: int = 10
    ) -> list[SearchHit]:
        """``websearch_to_tsquery`` over the visible events' tsvectors (GIN), ``ts_rank``."""
        parsed = parse_query(query)
        check_limit(limit)
        with self._snapshot() as conn:
            chain = self._chain(conn, session, timeline)
            visible = " OR ".join("(d.timeline = %s AND d.seq > %s AND d.seq <= %s)" for _ in chain)
            # rank on the index alone (seq and score through the sort), then read the winners
            rows = conn.execute(
                "WITH top AS (SELECT d.timeline, d.seq, ts_rank(d.tsv, q) AS score"
                " FROM search_docs d, websearch_to_tsquery('simple', %s) q"
                f" WHERE d.session = %s AND d.tsv @@ q AND ({visible})"
                " ORDER BY score DESC, d.seq DESC LIMIT %s)"
                " SELECT e.seq, e.id, e.at, e.body, top.score FROM top JOIN events e"
                " ON e.session = %s AND e.timeline = top.timeline AND e.seq = top.seq",
                [parsed.websearch(), session, *(v for c in chain for v in c), limit, session],
            ).fetchall()
        return to_hits(((self._stored(r[:4]), float(r[4])) for r in rows), parsed, limit)

    # token counts

    def get_token_counts(self, event_ids: Sequence[str], tokenizer: str) -> dict[str, int]:
        ids = [i for i in event_ids if "\x00" not in i]  # such an id cannot have been stored
        if not ids or "\x00" in tokenizer:
            return {}
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT event_id, count FROM token_counts WHERE tokenizer = %s AND event_id = ANY(%s)",
                (tokenizer, ids),
            ).fetchall()
        return {r[0]: int(r[1]) for r in rows}

    def put_token_counts(self, tokenizer: str, counts: dict[str, int]) -> None:
        _check_text("tokenizer", tokenizer)
        for event_id in counts:
            _check_text("event_id", event_id)
        if not counts:
            return
        with self._tx() as conn, conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO token_counts(event_id, tokenizer, count) VALUES (%s, %s, %s)"
                " ON CONFLICT (event_id, tokenizer) DO UPDATE SET count = EXCLUDED.count",
                [(event_id, tokenizer, n) for event_id, n in counts.items()],
            )

    def health(self) -> list[HealthCheck]:
        """Schema, timeline heads against events, every blob re-hashed (in SQL), and the
        search index against the record (each tsvector recomputed from its event)."""
        with self._snapshot() as conn:
            tables = {
                r[0]
                for r in conn.execute(
                    "SELECT table_name FROM information_schema.tables"
                    " WHERE table_schema = current_schema()"
                )
            }
            if "migrations" not in tables:
                return [
                    HealthCheck(
                        "schema",
                        "migrations table",
                        ("no migrations table: not a ctxline database",),
                    )
                ]
            done = {int(r[0]) for r in conn.execute("SELECT version FROM migrations")}
            known = {v for v, _, _ in PG_MIGRATIONS}
            detail = f"schema versions {sorted(done)}"
            if known - done:
                detail += f" (versions {sorted(known - done)} are applied on the next open)"
            newer = [f"schema versions {sorted(done - known)} come from a newer ctxline"]
            checks = [HealthCheck("schema", detail, tuple(newer if done - known else ()))]
            problems: list[str] = []
            rows = conn.execute(
                "SELECT t.session, t.name, t.head, coalesce(t.fork_seq, 0),"
                " (SELECT count(*) FROM events e WHERE e.session = t.session AND e.timeline = t.name),"
                " (SELECT coalesce(max(seq), 0) FROM events e"
                " WHERE e.session = t.session AND e.timeline = t.name)"
                " FROM timelines t ORDER BY t.session, t.name"
            ).fetchall()
            for session, name, head, base, n, top in rows:
                if n != head - base or (n and top != head):
                    problems.append(
                        f"timeline {session}/{name}: head {head} but {n} events (max seq {top})"
                    )
            checks.append(
                HealthCheck(
                    "timelines", f"{len(rows)} timeline(s): heads against events", _few(problems)
                )
            )
            n_blobs = conn.execute("SELECT count(*) FROM blobs").fetchall()[0][0]
            bad = [
                f"blob {ref} is corrupt: its bytes do not match its hash"
                for (ref,) in conn.execute(
                    "SELECT ref FROM blobs WHERE ref <> 'sha256:' || encode(sha256(data), 'hex')"
                    " ORDER BY ref"
                ).fetchall()
            ]
            checks.append(HealthCheck("blobs", f"{n_blobs} blob(s) re-hashed", _few(bad)))
            checks.append(_search_health(conn, "search_docs" in tables))
        return checks

    def integrity_check(self) -> list[str]:
        """Every problem :meth:`health` finds; empty when healthy."""
        return [p for check in self.health() for p in check.problems]

    def close(self) -> None:
        self._pool.close()


def _few(problems: list[str], most: int = 20) -> tuple[str, ...]:
    if len(problems) <= most:
        return tuple(problems)
    return (*problems[:most], f"… and {len(problems) - most} more")


def _search_health(conn: Conn, built: bool) -> HealthCheck:
    if not built:
        return HealthCheck("search", "no search index yet (schema before version 2)")
    problems: list[str] = []
    docs = {
        (r[0], r[1], int(r[2]))
        for r in conn.execute("SELECT session, timeline, seq FROM search_docs").fetchall()
    }
    indexed = 0
    last: tuple[str, str, int] = ("", "", 0)
    while True:
        chunk = conn.execute(
            "SELECT session, timeline, seq, body FROM events WHERE (session, timeline, seq) > (%s, %s, %s)"
            " ORDER BY session, timeline, seq LIMIT 1000",
            last,
        ).fetchall()
        if not chunk:
            break
        last = (chunk[-1][0], chunk[-1][1], int(chunk[-1][2]))
        compare: list[tuple[str, str, int, str]] = []
        for session, timeline, seq, body in chunk:
            key = (session, timeline, int(seq))
            found = index_words(event_from_json(json.loads(body)))
            present = key in docs
            docs.discard(key)
            where = f"{session}/{timeline}#{seq}"
            if found and not present:
                problems.append(f"event {where} is missing from the search index")
            elif present and not found:
                problems.append(f"event {where} has nothing to search but is indexed")
            elif present:
                compare.append((*key, " ".join(found)))
        if compare:
            indexed += len(compare)
            stale = conn.execute(
                "SELECT x.s, x.t, x.q FROM unnest(%s::text[], %s::text[], %s::bigint[], %s::text[])"
                " AS x(s, t, q, txt) JOIN search_docs d"
                " ON d.session = x.s AND d.timeline = x.t AND d.seq = x.q"
                " WHERE d.tsv <> to_tsvector('simple', x.txt)",
                [list(col) for col in zip(*compare, strict=True)],
            ).fetchall()
            problems += [
                f"event {s}/{t}#{q}: its index entry does not match its text" for s, t, q in stale
            ]
    problems += [f"search entry for {s}/{t}#{q} has no event" for s, t, q in sorted(docs)]
    return HealthCheck(
        "search", f"{indexed} indexed event(s) against the record (tsvector)", _few(problems)
    )


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
