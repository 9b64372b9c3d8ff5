"""The inspector's reader: the store opened read-only, plus the few counts a page needs.

Why through the store: every event a page shows is read by :meth:`Store.read`, which
checks each row's hash link, so a row changed outside ctxline is an
:class:`~ctxline.errors.IntegrityError` on the page naming the session, timeline and
seq — never shown as content (a reader of the inspector's own, ``web/readonly.py``,
skipped the chain and showed a tampered row as if ctxline had written it). Blobs are
read through the store's blob store, which re-hashes them. ``open_store(url,
read_only=True)`` never creates, migrates or writes: a mistyped path is an error, and
PostgreSQL sessions are read-only.

What the store has no call for — a page of one kind's seqs, the last request, request
and reduction counts per session, a page of blob handles with their sizes — is asked of
the store's read-only transaction as metadata only (kinds, seqs, handles, sizes); the
content behind any of them is read through the store, checked.

    record = open_record("ctxline.db")
    record.read("demo", "main", after_seq=200, limit=200)
"""

from __future__ import annotations

import bisect
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, suppress
from dataclasses import dataclass
from typing import Any

from ctxline.errors import BlobError, IntegrityError, UnknownTimeline, ValidationError
from ctxline.record.events import StoredEvent
from ctxline.record.store import Store, open_store
from ctxline.record.store.base import MAIN, TimelineInfo
from ctxline.web.checkpoints import EVERY, Checkpoints

__all__ = ["BlobRow", "InspectorRecord", "SessionRow", "open_record"]

Meta = Callable[[str, Sequence[Any]], list[tuple[Any, ...]]]
"""Runs one metadata query (``?`` marks) in a read-only transaction of the store."""


@dataclass(frozen=True, slots=True)
class SessionRow:
    id: str
    created_at: str
    events: int
    """Events on the ``main`` timeline."""
    timelines: int
    requests: int
    """Logged requests, all timelines."""
    reductions: int
    meta: dict[str, Any]


@dataclass(frozen=True, slots=True)
class BlobRow:
    ref: str
    size: int
    head: bytes
    """The first bytes (for a preview), from the verified blob ('' when it is damaged)."""


def _segments(timelines: Sequence[TimelineInfo], timeline: str) -> list[tuple[str, int, int]]:
    """(timeline, after seq, up to seq) of what ``timeline`` shows, oldest first."""
    by_name = {t.name: t for t in timelines}
    if timeline not in by_name:
        raise UnknownTimeline(timelines[0].session if timelines else "", timeline)
    out: list[tuple[str, int, int]] = []
    name: str | None = timeline
    upto = by_name[timeline].head
    while name is not None:
        info = by_name[name]
        out.append((name, int(info.fork_seq or 0), upto))
        name, upto = info.parent, min(upto, int(info.fork_seq or 0))
    return list(reversed(out))


class InspectorRecord:
    """The read side of a record for the inspector's pages (see the module doc).

    Thread-safe: the server answers from a thread pool, and a read-only SQLite
    connection may only be used by the thread that opened it, so each thread opens the
    store once (``opener``) and keeps it; the first store also checks the URL up front.
    """

    def __init__(
        self,
        opener: Callable[[], Store],
        describe: str,
        meta: Callable[[Store], Meta],
        *,
        every: int = EVERY,
    ) -> None:
        self._opener = opener
        self._meta_of = meta
        self._local = threading.local()
        self._opened: list[Store] = []
        self._lock = threading.Lock()
        self._prefix: tuple[tuple[str, str], list[StoredEvent]] | None = None
        self._kinds: dict[str, list[StoredEvent]] = {}
        """The kept prefix's events by kind, in seq order (a step's header found in memory)."""
        self._checkpoints: tuple[tuple[str, str], Checkpoints] | None = None
        self.every = every
        """Events between two fold checkpoints (:mod:`ctxline.web.checkpoints`)."""
        self.describe = describe
        """The database, as the page header shows it (a password is never included)."""
        self.store  # noqa: B018 (open it now: a bad URL fails here, not on the first page)

    @property
    def store(self) -> Store:
        """This thread's read-only store."""
        store: Store | None = getattr(self._local, "store", None)
        if store is None:
            store = self._opener()
            self._local.store = store
            with self._lock:
                self._opened.append(store)
        return store

    def _meta(self, sql: str, args: Sequence[Any]) -> list[tuple[Any, ...]]:
        return self._meta_of(self.store)(sql, args)

    def sessions(self) -> list[SessionRow]:
        counts: dict[str, dict[str, int]] = {}
        for sid, kind, n in self._meta(
            "SELECT session, kind, count(*) FROM events WHERE kind IN ('request', 'reduction')"
            " GROUP BY session, kind",
            (),
        ):
            counts.setdefault(str(sid), {})[str(kind)] = int(n)
        return [
            SessionRow(
                s.id,
                s.created_at.isoformat(),
                s.events,
                s.timelines,
                counts.get(s.id, {}).get("request", 0),
                counts.get(s.id, {}).get("reduction", 0),
                dict(s.meta),
            )
            for s in sorted(self.store.sessions(), key=lambda s: s.id)
        ]

    def timelines(self, session: str) -> list[TimelineInfo]:
        return self.store.timelines(session)

    def read(
        self,
        session: str,
        timeline: str = MAIN,
        *,
        after_seq: int = 0,
        limit: int | None = None,
        kind: str | None = None,
        offset: int = 0,
    ) -> list[StoredEvent]:
        """The visible events after ``after_seq`` (at most ``limit``), each hash-checked by
        the store; with ``kind``, only that kind's, skipping the first ``offset`` of them."""
        if kind is None:
            return self.store.read(session, timeline, after_seq=after_seq, limit=limit)
        kept = self._kept(session, timeline, kind)
        if kept is None:
            return [
                self._one(session, timeline, seq)
                for seq in self._seqs(session, timeline, kind, after_seq, offset, limit)
            ]
        # the kept prefix (read and checked) answers for its part; the rows after it are asked
        of_kind, covered = kept
        start = bisect.bisect_right(of_kind, after_seq, key=lambda ev: ev.seq)
        found = of_kind[start + offset :][:limit]
        if limit is not None and len(found) == limit:
            return found
        skip = max(0, offset - (len(of_kind) - start))
        left = None if limit is None else limit - len(found)
        after = max(after_seq, covered)
        return found + [
            self._one(session, timeline, seq)
            for seq in self._seqs(session, timeline, kind, after, skip, left)
        ]

    def prefix(self, session: str, timeline: str, upto: int) -> list[StoredEvent]:
        """The first ``upto`` visible events, kept for the next step page of this timeline.

        A timeline only grows at its end, so a prefix once read (and checked) stays
        true: walking a long run step by step reads each event once, not once a page.
        One timeline is kept.
        """
        key = (session, timeline)
        with self._lock:
            have = self._prefix[1] if self._prefix is not None and self._prefix[0] == key else []
        if len(have) >= upto:
            return have[:upto]
        more = self.read(session, timeline, after_seq=len(have), limit=upto - len(have))
        events = have + more
        with self._lock:
            kept = self._prefix
            same = kept is not None and kept[0] == key
            if kept is None or not same or len(kept[1]) < len(events):
                # kept meanwhile by another page: the same timeline's is a prefix of ours
                start = len(kept[1]) if kept is not None and same else 0
                kinds = {k: list(v) for k, v in self._kinds.items()} if same else {}
                for ev in events[start:]:
                    kinds.setdefault(ev.kind, []).append(ev)
                self._prefix, self._kinds = (key, events), kinds
        return events

    def _kept(self, session: str, timeline: str, kind: str) -> tuple[list[StoredEvent], int] | None:
        """(the kept prefix's events of ``kind``, its length) when the prefix is this timeline's."""
        with self._lock:
            if self._prefix is None or self._prefix[0] != (session, timeline):
                return None
            return self._kinds.get(kind, []), len(self._prefix[1])

    def checkpoints(self, session: str, timeline: str) -> Checkpoints:
        """The fold checkpoints of the timeline whose prefix is kept (one timeline, as the
        prefix: they are folds of its events)."""
        key = (session, timeline)
        with self._lock:
            if self._checkpoints is None or self._checkpoints[0] != key:
                self._checkpoints = (key, Checkpoints(self.every))
            return self._checkpoints[1]

    def _seqs(
        self,
        session: str,
        timeline: str,
        kind: str,
        after_seq: int,
        offset: int,
        limit: int | None,
    ) -> Iterator[int]:
        skip, left = offset, limit
        for name, base, top in _segments(self.timelines(session), timeline):
            lo = max(base, after_seq)
            if lo >= top or left == 0:
                continue
            rows = self._meta(
                "SELECT seq FROM events WHERE session = ? AND timeline = ? AND seq > ?"
                " AND seq <= ? AND kind = ? ORDER BY seq LIMIT ? OFFSET ?",
                (session, name, lo, top, kind, (1 << 62) if left is None else left + skip, 0),
            )
            for (seq,) in rows[skip:]:
                yield int(seq)
                if left is not None:
                    left -= 1
            skip = max(0, skip - len(rows))

    def _one(self, session: str, timeline: str, seq: int) -> StoredEvent:
        found = self.store.read(session, timeline, after_seq=seq - 1, limit=1)
        if not found or found[0].seq != seq:
            raise IntegrityError(f"{session}/{timeline} seq {seq} was counted but not read back")
        return found[0]

    def last(self, session: str, timeline: str, kind: str) -> StoredEvent | None:
        """The last visible event of ``kind`` (found from the end: a few rows, not the run)."""
        for name, base, top in reversed(_segments(self.timelines(session), timeline)):
            rows = self._meta(
                "SELECT seq FROM events WHERE session = ? AND timeline = ? AND seq > ?"
                " AND seq <= ? AND kind = ? ORDER BY seq DESC LIMIT 1",
                (session, name, base, top, kind),
            )
            if rows:
                return self._one(session, timeline, int(rows[0][0]))
        return None

    def blob_count(self) -> tuple[int, int]:
        """(blobs, bytes in all)."""
        rows = self._meta("SELECT count(*), sum(size) FROM blobs", ())
        return int(rows[0][0] or 0), int(rows[0][1] or 0)

    def blobs(self, *, offset: int = 0, limit: int = 50) -> list[BlobRow]:
        """One page of blobs, by handle (each preview from the verified bytes)."""
        out = []
        for ref, size in self._meta(
            "SELECT ref, size FROM blobs ORDER BY ref LIMIT ? OFFSET ?", (limit, offset)
        ):
            try:
                head = self.blob(str(ref))[:512]
            except BlobError:
                head = b""
            out.append(BlobRow(str(ref), int(size), head))
        return out

    def blob(self, ref: str) -> bytes:
        """The verified bytes; BlobError when missing, malformed or corrupt."""
        return self.store.blobs.get(ref)

    def close(self) -> None:
        """Close every thread's store (call once the server has stopped)."""
        with self._lock:
            opened, self._opened = self._opened, []
        for store in opened:
            with suppress(sqlite3.ProgrammingError):  # another thread's: freed with it
                store.close()
        self._local = threading.local()


def _sqlite_meta(store: Any) -> Meta:
    def meta(sql: str, args: Sequence[Any]) -> list[tuple[Any, ...]]:
        reading: AbstractContextManager[Any] = store._reading()  # the store's read transaction
        with reading as conn:
            return [tuple(r) for r in conn.execute(sql, tuple(args)).fetchall()]

    return meta


def _postgres_meta(store: Any) -> Meta:
    def meta(sql: str, args: Sequence[Any]) -> list[tuple[Any, ...]]:
        snapshot: AbstractContextManager[Any] = store._snapshot()  # READ ONLY, one snapshot
        with snapshot as conn:
            return [tuple(r) for r in conn.execute(sql.replace("?", "%s"), tuple(args))]

    return meta


def open_record(url: str, *, every: int = EVERY) -> InspectorRecord:
    """The record at ``url`` (a path, ``sqlite:///path`` or ``postgresql://…``), read-only;
    ``every``: events between two fold checkpoints of a step page (0: none, cold rebuilds).

    Raises :class:`ValidationError` for a missing file (never creating one) or a server
    that cannot be reached, :class:`~ctxline.errors.IntegrityError` for a file that is not
    a ctxline record or has a newer schema.
    """
    if url in (":memory:", "memory://", "memory:"):
        raise ValidationError(
            "an in-memory store keeps nothing to inspect; give a database", field="db"
        )

    def opener() -> Store:
        return open_store(url, read_only=True)

    if url.startswith(("postgresql://", "postgres://")):
        from ctxline.record.store.postgres import redact

        return InspectorRecord(opener, redact(url), _postgres_meta, every=every)
    path = url.removeprefix("sqlite://").removeprefix("/") if url.startswith("sqlite://") else url
    return InspectorRecord(opener, path, _sqlite_meta, every=every)
