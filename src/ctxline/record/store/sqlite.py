"""The SQLite store: the embedded default, durable and safe across processes.

WAL journal, a busy timeout and ``BEGIN IMMEDIATE`` make concurrent appenders from
several processes serialize instead of failing; the expected-seq check happens inside
that write transaction, so a conflict writes nothing. ``durability="full"`` adds
``synchronous=FULL`` (survives power loss, about 7 times slower per append); ``"normal"``
survives a killed process. Opening an existing file first checks its header, its WAL
files and ``PRAGMA quick_check`` (:mod:`ctxline.record.store.sqlite_health`) and fails
closed: a damaged file, or a WAL database whose ``-wal`` lost committed frames,
raises :class:`~ctxline.errors.IntegrityError` and is never replaced or modified.
Appends also index their events for :meth:`SQLiteStore.search` (FTS5, BM25) in the
same transaction.

    store = SQLiteStore("ctxline.db")
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Literal

from ctxline.errors import (
    BlobError,
    Conflict,
    IntegrityError,
    UnknownSession,
    UnknownTimeline,
    ValidationError,
)
from ctxline.record.blobs import BlobStore, blob_ref, parse_ref, verify
from ctxline.record.codec import canonical_json, format_at, parse_at
from ctxline.record.events import Event, JsonValue, Pending, StoredEvent
from ctxline.record.parse import event_from_json
from ctxline.record.store.base import (
    MAIN,
    Clock,
    HealthCheck,
    IdFactory,
    SearchHit,
    SessionInfo,
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
from ctxline.record.store.migrations import apply_sqlite_migrations, index_events
from ctxline.record.store.sqlite_health import (
    SQLITE_MAGIC,
    check_sqlite_file,
    connection_health,
    held_open,
)
from ctxline.record.store.textsearch import check_limit, index_words, parse_query, to_hits

__all__ = ["SQLITE_MAGIC", "SQLiteBlobs", "SQLiteStore", "check_sqlite_file"]

Durability = Literal["normal", "full"]


class SQLiteBlobs:
    def __init__(self, store: SQLiteStore) -> None:
        self._store = store

    def put(self, data: bytes) -> str:
        ref = blob_ref(data)
        with self._store._write() as conn:
            conn.execute(
                "INSERT OR IGNORE INTO blobs(ref, size, data) VALUES (?, ?, ?)",
                (ref, len(data), data),
            )
        return ref

    def get(self, ref: str) -> bytes:
        parse_ref(ref)
        with self._store._lock:
            row = self._store._conn.execute(
                "SELECT data FROM blobs WHERE ref = ?", (ref,)
            ).fetchone()
        if row is None:
            raise BlobError(f"blob {ref} is missing")
        return verify(ref, bytes(row[0]))

    def has(self, ref: str) -> bool:
        with self._store._lock:
            return (
                self._store._conn.execute("SELECT 1 FROM blobs WHERE ref = ?", (ref,)).fetchone()
                is not None
            )


class SQLiteStore:
    """The default store: one SQLite file in WAL mode, durable appends, zero set-up."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        durability: Durability = "normal",
        check: bool = True,
        clock: Clock = utc_now,
        new_id: IdFactory = new_ulid,
        busy_timeout_ms: int = 30_000,
    ) -> None:
        self.path = str(path)
        self._clock = clock
        self._new_id = new_id
        self._lock = threading.RLock()
        memory = self.path == ":memory:"
        if not memory and check:
            check_sqlite_file(Path(self.path))
        try:
            self._conn = sqlite3.connect(
                self.path,
                isolation_level=None,
                check_same_thread=False,
                timeout=busy_timeout_ms / 1000,
            )
        except sqlite3.Error as exc:
            raise IntegrityError(f"{self.path}: cannot open the database ({exc})") from None
        try:
            self._conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            if not memory:
                self._conn.execute("PRAGMA journal_mode = WAL")
            self._conn.execute(
                f"PRAGMA synchronous = {'FULL' if durability == 'full' else 'NORMAL'}"
            )
            self._conn.execute("PRAGMA foreign_keys = ON")
            with self._write() as conn:
                apply_sqlite_migrations(conn, self._clock)
        except sqlite3.DatabaseError as exc:
            self._conn.close()
            raise IntegrityError(f"{self.path}: cannot open the database ({exc})") from None
        except BaseException:
            self._conn.close()
            raise
        self._held = ExitStack()
        if not memory:  # so later opens in this process leave this one's locks alone
            self._held.enter_context(held_open(Path(self.path)))
        self._blobs = SQLiteBlobs(self)

    @property
    def blobs(self) -> BlobStore:
        return self._blobs

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    def schema_versions(self) -> list[int]:
        with self._lock:
            return [
                r[0] for r in self._conn.execute("SELECT version FROM migrations ORDER BY version")
            ]

    # sessions and timelines

    def create_session(
        self, session: str, *, meta: dict[str, JsonValue] | None = None, exist_ok: bool = False
    ) -> SessionInfo:
        check_name("session", session)
        with self._write() as conn:
            if conn.execute("SELECT 1 FROM sessions WHERE id = ?", (session,)).fetchone():
                if not exist_ok:
                    raise ValidationError(f"session {session!r} already exists", field="session")
            else:
                now = format_at(self._clock())
                conn.execute(
                    "INSERT INTO sessions(id, created_at, meta) VALUES (?, ?, ?)",
                    (session, now, canonical_json(meta or {}).decode()),
                )
                conn.execute(
                    "INSERT INTO timelines(session, name, parent, fork_seq, head, created_at)"
                    " VALUES (?, ?, NULL, NULL, 0, ?)",
                    (session, MAIN, now),
                )
        return self.session(session)

    _SESSION_SQL = (
        "SELECT s.id, s.created_at, s.meta,"
        " (SELECT head FROM timelines t WHERE t.session = s.id AND t.name = 'main'),"
        " (SELECT count(*) FROM timelines t WHERE t.session = s.id) FROM sessions s"
    )

    @staticmethod
    def _session_info(row: tuple[str, str, str, int, int]) -> SessionInfo:
        return SessionInfo(row[0], parse_at(row[1]), row[3], row[4], json.loads(row[2]))

    def session(self, session: str) -> SessionInfo:
        with self._lock:
            row = self._conn.execute(self._SESSION_SQL + " WHERE s.id = ?", (session,)).fetchone()
        if row is None:
            raise UnknownSession(session)
        return self._session_info(row)

    def sessions(self) -> list[SessionInfo]:
        with self._lock:
            rows = self._conn.execute(self._SESSION_SQL + " ORDER BY s.id").fetchall()
        return [self._session_info(r) for r in rows]

    def _timeline_row(self, session: str, timeline: str) -> tuple[str | None, int | None, int]:
        row = self._conn.execute(
            "SELECT parent, fork_seq, head FROM timelines WHERE session = ? AND name = ?",
            (session, timeline),
        ).fetchone()
        if row is None:
            if (
                self._conn.execute("SELECT 1 FROM sessions WHERE id = ?", (session,)).fetchone()
                is None
            ):
                raise UnknownSession(session)
            raise UnknownTimeline(session, timeline)
        return row[0], row[1], row[2]

    def timeline(self, session: str, timeline: str = MAIN) -> TimelineInfo:
        with self._lock:
            parent, fork_seq, head = self._timeline_row(session, timeline)
        return TimelineInfo(session, timeline, head, parent, fork_seq)

    def timelines(self, session: str) -> list[TimelineInfo]:
        with self._lock:
            self.session(session)
            rows = self._conn.execute(
                "SELECT name, head, parent, fork_seq FROM timelines WHERE session = ? ORDER BY created_at, name",
                (session,),
            ).fetchall()
        return [TimelineInfo(session, r[0], r[1], r[2], r[3]) for r in rows]

    def fork(self, session: str, timeline: str, at_seq: int, name: str) -> TimelineInfo:
        check_name("timeline", name)
        with self._write() as conn:
            head = self._timeline_row(session, timeline)[2]
            if conn.execute(
                "SELECT 1 FROM timelines WHERE session = ? AND name = ?", (session, name)
            ).fetchone():
                raise ValidationError(
                    f"timeline {name!r} already exists in {session!r}", field="name"
                )
            if not 0 <= at_seq <= head:
                raise ValidationError(
                    f"fork point {at_seq} is outside {timeline!r} (head {head})", field="at_seq"
                )
            conn.execute(
                "INSERT INTO timelines(session, name, parent, fork_seq, head, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (session, name, timeline, at_seq, at_seq, format_at(self._clock())),
            )
        return self.timeline(session, name)

    # events

    def _chain(self, session: str, timeline: str) -> list[tuple[str, int, int]]:
        """(timeline, lowest own seq - 1, highest visible seq), root ancestor first."""
        chain: list[tuple[str, int, int]] = []
        parent, fork_seq, upto = self._timeline_row(session, timeline)
        name = timeline
        while True:
            chain.append((name, fork_seq or 0, upto))
            if parent is None:
                break
            name, upto = parent, fork_seq or 0
            parent, fork_seq, _ = self._timeline_row(session, name)
        chain.reverse()
        return chain

    def _known_call(self, session: str, chain: list[tuple[str, int, int]], call_id: str) -> bool:
        for name, _, upto in chain:
            row = self._conn.execute(
                "SELECT 1 FROM tool_calls WHERE session = ? AND timeline = ? AND call_id = ? AND seq <= ?"
                " LIMIT 1",
                (session, name, call_id, upto),
            ).fetchone()
            if row is not None:
                return True
        return False

    def _existing(self, batch: Sequence[Pending]) -> dict[str, StoredEvent]:
        ids = [p.id for p in batch if p.id is not None]
        found: dict[str, StoredEvent] = {}
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for row in self._conn.execute(
                f"SELECT seq, id, at, body FROM events WHERE id IN ({marks})", chunk
            ):
                found[row[1]] = self._stored(row)
        return found

    @staticmethod
    def _stored(row: tuple[int, str, str, str]) -> StoredEvent:
        return StoredEvent(row[0], row[1], parse_at(row[2]), event_from_json(json.loads(row[3])))

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
        bodies = encode_batch(batch)
        found = [index_words(p.event) for p in batch]
        with self._write() as conn:
            head = self._timeline_row(session, timeline)[2]
            retried = resolve_retry(batch, self._existing(batch))
            if retried is not None:
                return retried
            if expected_seq is not None and expected_seq != head:
                raise Conflict(session, timeline, expected_seq, head)
            chain = self._chain(session, timeline)
            check_pairing(batch, lambda cid: self._known_call(session, chain, cid))
            now = self._clock()
            stored = [
                StoredEvent(head + i + 1, p.id or self._new_id(), p.at or now, p.event)
                for i, p in enumerate(batch)
            ]
            conn.executemany(
                "INSERT INTO events(session, timeline, seq, id, at, kind, body) VALUES (?, ?, ?, ?, ?, ?, ?)",
                [
                    (session, timeline, s.seq, s.id, format_at(s.at), s.kind, body)
                    for s, body in zip(stored, bodies, strict=True)
                ],
            )
            conn.executemany(
                "INSERT INTO tool_calls(session, timeline, call_id, seq) VALUES (?, ?, ?, ?)",
                [(session, timeline, cid, s.seq) for s in stored for cid in call_ids(s.event)],
            )
            index_events(
                conn,
                [(session, timeline, s.seq, w) for s, w in zip(stored, found, strict=True)],
            )
            conn.execute(
                "UPDATE timelines SET head = ? WHERE session = ? AND name = ?",
                (head + len(stored), session, timeline),
            )
        return stored

    def read(
        self, session: str, timeline: str = MAIN, *, after_seq: int = 0, limit: int | None = None
    ) -> list[StoredEvent]:
        out: list[StoredEvent] = []
        with self._lock:
            for name, base, upto in self._chain(session, timeline):
                rows = self._conn.execute(
                    "SELECT seq, id, at, body FROM events WHERE session = ? AND timeline = ?"
                    " AND seq > ? AND seq <= ? ORDER BY seq",
                    (session, name, max(base, after_seq), upto),
                ).fetchall()
                out.extend(self._stored(r) for r in rows)
                if limit is not None and len(out) >= limit:
                    return out[:limit]
        return out

    def head(self, session: str, timeline: str = MAIN) -> int:
        with self._lock:
            return self._timeline_row(session, timeline)[2]

    def search(
        self, session: str, query: str, *, timeline: str = MAIN, limit: int = 10
    ) -> list[SearchHit]:
        """FTS5 over the visible events (a fork: its parent up to the fork point), BM25."""
        parsed = parse_query(query)
        check_limit(limit)
        with self._lock:
            chain = self._chain(session, timeline)
            visible = " OR ".join("(d.timeline = ? AND d.seq > ? AND d.seq <= ?)" for _ in chain)
            # rank first (only seq and score go through the sort), then read the winners
            ranked = self._conn.execute(
                "SELECT d.timeline, d.seq, -bm25(search_fts) AS score"
                " FROM search_fts JOIN search_docs d ON d.id = search_fts.rowid"
                f" WHERE search_fts MATCH ? AND d.session = ? AND ({visible})"
                " ORDER BY score DESC, d.seq DESC LIMIT ?",
                [parsed.fts5(), session, *(v for c in chain for v in c), limit],
            ).fetchall()
            rows = []
            for name, seq, score in ranked:
                row = self._conn.execute(
                    "SELECT seq, id, at, body FROM events WHERE session = ? AND timeline = ? AND seq = ?",
                    (session, name, seq),
                ).fetchone()
                if row is not None:
                    rows.append((self._stored(row), float(score)))
        return to_hits(rows, parsed, limit)

    # token counts

    def get_token_counts(self, event_ids: Sequence[str], tokenizer: str) -> dict[str, int]:
        found: dict[str, int] = {}
        with self._lock:
            for start in range(0, len(event_ids), 500):
                chunk = list(event_ids[start : start + 500])
                marks = ",".join("?" * len(chunk))
                for event_id, n in self._conn.execute(
                    f"SELECT event_id, count FROM token_counts WHERE tokenizer = ? AND event_id IN ({marks})",
                    [tokenizer, *chunk],
                ):
                    found[event_id] = n
        return found

    def put_token_counts(self, tokenizer: str, counts: dict[str, int]) -> None:
        with self._write() as conn:
            conn.executemany(
                "INSERT OR REPLACE INTO token_counts(event_id, tokenizer, count) VALUES (?, ?, ?)",
                [(event_id, tokenizer, n) for event_id, n in counts.items()],
            )

    def health(self, *, full: bool = True) -> list[HealthCheck]:
        """Pages (``integrity_check``, or ``quick_check`` unless ``full``), schema, timeline
        heads against events, every blob re-hashed, the search index against the record."""
        with self._lock:
            return connection_health(self._conn, full=full)

    def integrity_check(self) -> list[str]:
        """Every problem :meth:`health` finds (quick page check); empty when healthy."""
        return [p for check in self.health(full=False) for p in check.problems]

    def close(self) -> None:
        with self._lock:
            self._conn.close()
            self._held.close()
