"""What both SQL stores do with events around their engine: append, read, verify, search.

Why a module of its own: SQLite and PostgreSQL run one sequence per append (the visible
timeline, the retry check, the expected seq, call pairing, the rows, the index, the
head) and the same read, chain check and two-step search (rank on the index alone,
then read each winner like any read); each store class mixes in :class:`SqlEvents`
and gives it a :class:`Dialect`: its events functions, its parameter mark, its ranking
SQL and its query syntax. The transaction (``_reading``) and the call-id lookup stay
the store's own.

    class SQLiteStore(CheckedAppends, SqlEvents, SQLiteSessions):
        _sql = Dialect("?", visible_segments, ...)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from ctxline.errors import Conflict, ValidationError
from ctxline.record.blobs import BlobStore, text_ref
from ctxline.record.events import JsonValue, Pending, StoredEvent, ToolResult
from ctxline.record.store.base import MAIN, Batch, Clock, SearchHit
from ctxline.record.store.chain import GENESIS, Body, ChainCheck
from ctxline.record.store.checks import (
    Existing,
    check_meta,
    check_pairing,
    check_read,
    prepare_batch,
    resolve_retry,
)
from ctxline.record.store.external import external_body, is_external
from ctxline.record.store.rows import PieceBlobs, Segment
from ctxline.record.store.sql_events import Timeline
from ctxline.record.store.textsearch import Query, check_limit, index_words, parse_query, to_hits

__all__ = ["Dialect", "Prepared", "SqlEvents", "SqlStream", "prepare"]

Prepared = tuple[list[Pending], list[Body], list[list[str]]]
"""A batch checked before its transaction: its events, their bodies and index words."""


def prepare(b: Batch) -> Prepared:
    """A batch's events checked and encoded, and their search words, before any lock."""
    batch, bodies = prepare_batch(b.session, b.timeline, b.events, b.expected_seq, b.create, b.meta)
    return batch, bodies, [index_words(p.event) for p in batch]


@dataclass(frozen=True, slots=True)
class Dialect:
    """One SQL engine's part of :class:`SqlEvents`."""

    mark: str
    visible: Callable[[Any, str, str, bool], tuple[list[Segment], Timeline]]
    link_at: Callable[[Any, str, Sequence[Segment], int], str]
    read: Callable[[Any, str, str, int, int | None, bool, bool, bool], list[StoredEvent]]
    existing: Callable[[Any, Sequence[str]], dict[str, Existing]]
    insert: Callable[[Any, str, str, str, Sequence[StoredEvent], Sequence[Body]], str]
    index: Callable[[Any, Sequence[tuple[str, str, int, list[str]]]], int]
    verify: Callable[[Any, str, str, Sequence[Segment], Timeline, str, bool, bool], ChainCheck]
    rank_sql: str
    """The search's ranking SELECT (seq, score) with ``{visible}`` to fill; its
    parameters are the query text, the session, the segments' and the limit."""
    match: Callable[[Query], str]


class SqlEvents:
    """The events half of a SQL store (see the module doc); the store defines
    ``_reading`` (one read snapshot) and ``_known_calls``, and sets ``_sql``."""

    _sql: Dialect
    _chained: bool
    _redactable: bool
    """The schema has ``chain.redacted`` (version 6): reads check redacted rows."""
    _external: bool
    """The schema has ``chain.external`` (version 7): reads put external content back."""
    _clock: Clock
    _new_id: Callable[[], str]

    def _reading(self) -> AbstractContextManager[Any]:
        raise NotImplementedError

    def _known_calls(
        self, conn: Any, session: str, segments: list[Segment], batch: Sequence[Pending]
    ) -> Callable[[str], bool]:
        """Whether a call id was made by a visible earlier event."""
        raise NotImplementedError

    def _append_rows(
        self, conn: Any, b: Batch, prepared: Prepared, now: datetime | None = None
    ) -> list[StoredEvent]:
        """One batch inside the append's transaction (its session exists already); events
        without a time get ``now`` (None: the clock's reading)."""
        sql = self._sql
        batch, bodies, words = prepared
        session, timeline = b.session, b.timeline
        segments, own = sql.visible(conn, session, timeline, True)
        head = own.head
        found = sql.existing(conn, [p.id for p in batch if p.id is not None])
        retried = resolve_retry(batch, bodies, found, (session, timeline))
        if retried is not None:
            return retried
        if b.expected_seq is not None and b.expected_seq != head:
            raise Conflict(session, timeline, b.expected_seq, head)
        check_pairing(batch, self._known_calls(conn, session, segments, batch))
        if not batch:
            return []
        now = now or self._clock()
        stored = [
            StoredEvent(head + i + 1, p.id or self._new_id(), p.at or now, p.event)
            for i, p in enumerate(batch)
        ]
        bodies = [self._stored_once(conn, body) for body in bodies]
        prev = own.link or sql.link_at(conn, session, segments, head)
        link = sql.insert(conn, session, timeline, prev, stored, bodies)
        sql.index(conn, [(session, timeline, s.seq, w) for s, w in zip(stored, words, strict=True)])
        m = sql.mark
        conn.execute(
            f"UPDATE timelines SET head = {m}, link = {m} WHERE session = {m} AND name = {m}",
            (head + len(stored), link, session, timeline),
        )
        return stored

    def _stored_once(self, conn: Any, body: Body) -> Body:
        """An external row for a huge result whose blob is saved (``store.external``);
        the body as it is otherwise (an inline row is always right, only larger)."""
        if not is_external(body.event):
            return body
        blobs = self.blobs
        content = cast(ToolResult, body.event).content
        ref = blobs.ref_of(content) if isinstance(blobs, PieceBlobs) else text_ref(content)
        m = self._sql.mark
        if conn.execute(f"SELECT 1 FROM blobs WHERE ref = {m}", (ref,)).fetchone() is None:
            return body
        return external_body(body, ref)

    @property
    def blobs(self) -> BlobStore:
        raise NotImplementedError

    def read(
        self, session: str, timeline: str = MAIN, *, after_seq: int = 0, limit: int | None = None
    ) -> list[StoredEvent]:
        check_read(after_seq, limit)
        with self._reading() as conn:
            return self._sql.read(
                conn,
                session,
                timeline,
                after_seq,
                limit,
                self._chained,
                self._redactable,
                self._external,
            )

    def verify_chain(self, session: str, timeline: str = MAIN) -> ChainCheck:
        with self._reading() as conn:
            segments, own = self._sql.visible(conn, session, timeline, self._chained)
            if not self._chained:
                return ChainCheck(
                    session,
                    timeline,
                    own.head,
                    "",
                    0,
                    (
                        "no hash chain yet (a schema before version 3): it is computed on the next"
                        " write open",
                    ),
                )
            return self._sql.verify(
                conn,
                session,
                timeline,
                segments,
                own,
                GENESIS,
                self._redactable,
                self._external,
            )

    def search(
        self, session: str, query: str, *, timeline: str = MAIN, limit: int = 10
    ) -> list[SearchHit]:
        """The dialect's full-text ranking over the visible events (a fork: its parent up
        to the fork point); each hit is read, and its link checked, like any read."""
        sql = self._sql
        parsed = parse_query(query)
        check_limit(limit)
        with self._reading() as conn:
            segments, _ = sql.visible(conn, session, timeline, self._chained)
            m = sql.mark
            visible = " OR ".join(
                f"(d.timeline = {m} AND d.seq > {m} AND d.seq <= {m})" for _ in segments
            )
            # rank first (only seq and score go through the sort), then read the winners
            ranked = conn.execute(
                sql.rank_sql.format(visible=visible),
                [
                    sql.match(parsed),
                    session,
                    *(v for s in segments for v in (s.name, s.base, s.upto)),
                    limit,
                ],
            ).fetchall()
            rows = []
            for seq, score in ranked:
                found = sql.read(
                    conn,
                    session,
                    timeline,
                    int(seq) - 1,
                    1,
                    self._chained,
                    self._redactable,
                    self._external,
                )
                rows += [(ev, float(score)) for ev in found if ev.seq == int(seq)]
        return to_hits(rows, parsed, limit)


class SqlStream:
    """The open transaction of a SQL store's ``_append_stream_raw`` (see
    :class:`~ctxline.record.store.base.AppendStream`) on the connection ``conn``.

    ``begin(conn, batch)`` is the store's part before a batch's rows: the session
    created when the batch asks (True when it was), and on PostgreSQL the timeline row
    locked. Every event of a session without a time gets the one reading taken at that
    session's first chunk, as the events of one batch share one."""

    def __init__(
        self,
        store: SqlEvents,
        conn: Any,
        blobs: BlobStore,
        begin: Callable[[Any, Batch], bool],
    ) -> None:
        self._store = store
        self._conn = conn
        self._blobs = blobs
        self._begin = begin
        self._now: dict[str, datetime] = {}
        self._created: set[str] = set()

    @property
    def blobs(self) -> BlobStore:
        return self._blobs

    def append(self, batches: Sequence[Batch]) -> list[list[StoredEvent]]:
        prepared = [prepare(b) for b in batches]
        out = []
        for b, p in zip(batches, prepared, strict=True):
            if self._begin(self._conn, b):
                self._created.add(b.session)
            now = self._now.get(b.session) or self._now.setdefault(b.session, self._store._clock())
            out.append(self._store._append_rows(self._conn, b, p, now))
        return out

    def read(
        self, session: str, timeline: str = MAIN, *, after_seq: int = 0, limit: int | None = None
    ) -> list[StoredEvent]:
        check_read(after_seq, limit)
        store = self._store
        return store._sql.read(
            self._conn,
            session,
            timeline,
            after_seq,
            limit,
            store._chained,
            store._redactable,
            store._external,
        )

    def set_meta(self, session: str, meta: dict[str, JsonValue]) -> None:
        if session not in self._created:
            raise ValidationError(
                f"session {session!r} was not created by this append; its meta stays",
                field="session",
            )
        m = self._store._sql.mark
        self._conn.execute(
            f"UPDATE sessions SET meta = {m} WHERE id = {m}", (check_meta(meta), session)
        )
