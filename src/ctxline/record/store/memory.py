"""The in-memory store: the reference backend, and the one tests reach for.

It keeps the same guarantees as the durable backends (atomic batches, expected-seq
conflicts, idempotent retries, pairing checks, fork isolation, the same hash links)
within one process; ``append_batches`` undoes what it did when a later batch fails, and
a streamed append (``_append_stream_raw``) holds the store's lock for its whole block
and undoes every chunk when the block raises.

    store = MemoryStore()
    store.create_session("s")
    store.append("s", [UserMessage("hi")], expected_seq=0)
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime

from ctxline.errors import (
    Conflict,
    IntegrityError,
    UnknownSession,
    UnknownTimeline,
    ValidationError,
)
from ctxline.record.blobs import BlobStore, MemoryBlobs
from ctxline.record.codec import format_at
from ctxline.record.events import JsonValue, Pending, StoredEvent
from ctxline.record.store.base import (
    MAIN,
    Batch,
    ChainCheck,
    Clock,
    IdFactory,
    SearchHit,
    SessionInfo,
    TimelineInfo,
    new_ulid,
    utc_now,
)
from ctxline.record.store.chain import GENESIS, Body, chain_link, encode_body
from ctxline.record.store.checks import (
    Existing,
    call_ids,
    check_id,
    check_meta,
    check_name,
    check_pairing,
    check_read,
    check_seq,
    prepare_batch,
    resolve_retry,
)
from ctxline.record.store.memories import InMemoryMemories
from ctxline.record.store.redaction import Redaction, check_form, removed_refs
from ctxline.record.store.textsearch import (
    bm25_scores,
    check_limit,
    index_words,
    parse_query,
    to_hits,
)
from ctxline.record.store.writes import CheckedAppends

__all__ = ["MemoryStore"]


@dataclass
class _Timeline:
    name: str
    parent: str | None
    fork_seq: int | None
    start: str = GENESIS
    """The link before this timeline's own events (its parent's at the fork point)."""
    own: list[StoredEvent] = field(default_factory=list)
    links: list[str] = field(default_factory=list)
    calls: dict[str, int] = field(default_factory=dict)

    @property
    def link(self) -> str:
        return self.links[-1] if self.links else self.start

    @property
    def base(self) -> int:
        return self.fork_seq or 0

    @property
    def head(self) -> int:
        return self.base + len(self.own)


@dataclass
class _Session:
    info: SessionInfo
    timelines: dict[str, _Timeline]


class MemoryStore(CheckedAppends):
    """A store in this process's memory: the contract of every backend, nothing durable."""

    def __init__(self, *, clock: Clock = utc_now, new_id: IdFactory = new_ulid) -> None:
        self._clock = clock
        self._new_id = new_id
        self._sessions: dict[str, _Session] = {}
        self._ids: dict[str, tuple[str, str, int]] = {}
        self._digests: dict[str, str] = {}
        # event id -> (the chained digest, its redacted body's digest), for redacted events
        self._redacted: dict[str, tuple[str, str]] = {}
        self._counts: dict[tuple[str, str], int] = {}
        self._blobs = MemoryBlobs()
        self._lock = threading.RLock()
        self._memories = InMemoryMemories(clock, new_id)
        # event id -> indexed words and their counts, filled on first search
        self._words: dict[str, tuple[list[str], Counter[str]]] = {}

    @property
    def blobs(self) -> BlobStore:
        return self._blobs

    @property
    def memories(self) -> InMemoryMemories:
        """The memories kept across sessions (of this process only)."""
        return self._memories

    # sessions and timelines

    def create_session(
        self, session: str, *, meta: dict[str, JsonValue] | None = None, exist_ok: bool = False
    ) -> SessionInfo:
        check_name("session", session)
        check_meta(meta)
        with self._lock:
            if session in self._sessions:
                if exist_ok:
                    return self.session(session)
                raise ValidationError(f"session {session!r} already exists", field="session")
            self._create(session, meta)
            return self.session(session)

    def _create(self, session: str, meta: dict[str, JsonValue] | None) -> None:
        info = SessionInfo(session, self._clock(), 0, 1, dict(meta or {}))
        self._sessions[session] = _Session(info, {MAIN: _Timeline(MAIN, None, None)})

    def _session(self, session: str) -> _Session:
        found = self._sessions.get(session)
        if found is None:
            raise UnknownSession(session)
        return found

    def _timeline(self, session: str, timeline: str) -> _Timeline:
        found = self._session(session).timelines.get(timeline)
        if found is None:
            raise UnknownTimeline(session, timeline)
        return found

    def session(self, session: str) -> SessionInfo:
        with self._lock:
            s = self._session(session)
            return SessionInfo(
                s.info.id, s.info.created_at, s.timelines[MAIN].head, len(s.timelines), s.info.meta
            )

    def sessions(self) -> list[SessionInfo]:
        with self._lock:
            return [self.session(name) for name in sorted(self._sessions)]

    def _info(self, session: str, t: _Timeline) -> TimelineInfo:
        return TimelineInfo(session, t.name, t.head, t.parent, t.fork_seq)

    def timelines(self, session: str) -> list[TimelineInfo]:
        with self._lock:
            s = self._session(session)
            return [self._info(session, t) for t in s.timelines.values()]

    def timeline(self, session: str, timeline: str = MAIN) -> TimelineInfo:
        with self._lock:
            return self._info(session, self._timeline(session, timeline))

    def fork(self, session: str, timeline: str, at_seq: int, name: str) -> TimelineInfo:
        check_name("timeline", name)
        check_seq("at_seq", at_seq)
        with self._lock:
            parent = self._timeline(session, timeline)
            s = self._session(session)
            if name in s.timelines:
                raise ValidationError(
                    f"timeline {name!r} already exists in {session!r}", field="name"
                )
            if not 0 <= at_seq <= parent.head:
                raise ValidationError(
                    f"fork point {at_seq} is outside {timeline!r} (head {parent.head})",
                    field="at_seq",
                )
            child = _Timeline(name, timeline, at_seq, self._link_at(session, timeline, at_seq))
            s.timelines[name] = child
            return self._info(session, child)

    # events

    def _chain(self, session: str, timeline: str) -> list[tuple[_Timeline, int]]:
        """(timeline, highest visible seq) from the root ancestor down to ``timeline``."""
        chain: list[tuple[_Timeline, int]] = []
        t = self._timeline(session, timeline)
        upto = t.head
        while True:
            chain.append((t, upto))
            if t.parent is None:
                break
            upto = min(upto, t.base)  # never above a nearer fork point
            t = self._timeline(session, t.parent)
        chain.reverse()
        return chain

    def _known_call(self, session: str, timeline: str, call_id: str) -> bool:
        return any(
            t.calls.get(call_id, upto + 1) <= upto for t, upto in self._chain(session, timeline)
        )

    def _link_at(self, session: str, timeline: str, seq: int) -> str:
        for t, upto in self._chain(session, timeline):
            if t.base < seq <= upto:
                return t.links[seq - t.base - 1]
        return GENESIS

    def _append_batches_raw(self, batches: Sequence[Batch]) -> list[list[StoredEvent]]:
        """The raw append (see :mod:`ctxline.record.store.writes`: only the writer calls it)."""
        prepared = [
            prepare_batch(b.session, b.timeline, b.events, b.expected_seq, b.create, b.meta)
            for b in batches
        ]
        with self._lock:
            undo: list[Callable[[], None]] = []
            try:
                return [
                    self._append_locked(b, batch, bodies, undo)
                    for b, (batch, bodies) in zip(batches, prepared, strict=True)
                ]
            except BaseException:
                for step in reversed(undo):
                    step()
                raise

    @contextmanager
    def _append_stream_raw(self) -> Iterator[_MemoryStream]:
        """One transaction of many chunks (see :class:`~ctxline.record.store.base.AppendStream`):
        the lock is held throughout, so no reader sees a chunk before the block ends."""
        with self._lock:
            stream = _MemoryStream(self)
            try:
                yield stream
            except BaseException:
                for step in reversed(stream.undo):
                    step()
                raise

    def _append_locked(
        self,
        b: Batch,
        batch: list[Pending],
        bodies: list[Body],
        undo: list[Callable[[], None]],
        clock: Callable[[], datetime] | None = None,
        created: set[str] | None = None,
    ) -> list[StoredEvent]:
        session, timeline = b.session, b.timeline
        if b.create and session not in self._sessions:
            self._create(session, b.meta)
            undo.append(lambda: self._drop(session))
            if created is not None:
                created.add(session)
        t = self._timeline(session, timeline)
        existing = {
            p.id: self._existing(p.id) for p in batch if p.id is not None and p.id in self._ids
        }
        retried = resolve_retry(batch, bodies, existing, (session, timeline))
        if retried is not None:
            return retried
        if b.expected_seq is not None and b.expected_seq != t.head:
            raise Conflict(session, timeline, b.expected_seq, t.head)
        check_pairing(batch, lambda cid: self._known_call(session, timeline, cid))
        now = (clock or self._clock)()
        stored = [
            StoredEvent(t.head + i + 1, p.id or self._new_id(), p.at or now, p.event)
            for i, p in enumerate(batch)
        ]
        size = len(t.own)
        added: list[str] = []
        for ev, body in zip(stored, bodies, strict=True):
            t.links.append(chain_link(t.link, ev.seq, ev.id, format_at(ev.at), body.digest))
            t.own.append(ev)
            self._ids[ev.id] = (session, timeline, ev.seq)
            self._digests[ev.id] = body.digest
            for cid in call_ids(ev.event):
                if cid not in t.calls:
                    t.calls[cid] = ev.seq
                    added.append(cid)

        def back() -> None:
            for ev in t.own[size:]:
                self._ids.pop(ev.id, None)
                self._digests.pop(ev.id, None)
            del t.own[size:], t.links[size:]
            for cid in added:
                t.calls.pop(cid, None)

        undo.append(back)
        return stored

    def _drop(self, session: str) -> None:
        self._sessions.pop(session, None)

    def _set_meta(self, session: str, meta: dict[str, JsonValue]) -> Callable[[], None]:
        """Replace a session's meta; returns the step that puts the old one back."""
        check_meta(meta)
        s = self._session(session)
        old = s.info
        s.info = replace(old, meta=dict(meta))

        def back() -> None:
            s.info = old

        return back

    def _existing(self, event_id: str) -> Existing:
        ev = self._lookup(event_id)
        session, timeline, _ = self._ids[event_id]
        return Existing(ev.seq, ev.at, self._digests[event_id], session, timeline)

    def verify_chain(self, session: str, timeline: str = MAIN) -> ChainCheck:
        with self._lock:
            chain = self._chain(session, timeline)
            prev = GENESIS
            problems = []
            checked = 0
            for t, upto in chain:
                for ev, link in zip(t.own[: upto - t.base], t.links, strict=False):
                    where = f"{session}/{t.name} seq {ev.seq}"
                    digest = encode_body(ev.event).digest
                    red = self._redacted.get(ev.id)
                    if red is not None:  # a tombstone: its own digest, the chained one linked
                        if digest != red[1]:
                            problems.append(f"{where}: the redacted event does not match its digest")
                        try:
                            check_form(ev.event, red[0], where)
                        except IntegrityError as exc:
                            problems.append(str(exc).removesuffix("; run ctxline doctor"))
                        digest = red[0]
                    prev = chain_link(prev, ev.seq, ev.id, format_at(ev.at), digest)
                    checked += 1
                    if prev != link:
                        problems.append(f"{where}: the event does not match its hash link")
            own = chain[-1][0]
            return ChainCheck(session, timeline, own.head, own.link, checked, tuple(problems))

    def _redact_rows(self, redactions: Sequence[Redaction]) -> int:
        """Redactions (:func:`~ctxline.record.store.redaction.redact` is the one caller):
        all checked first, then all written."""
        with self._lock:
            plan = []
            for r in redactions:
                where = f"{r.session}/{r.timeline} seq {r.seq}"
                t = self._timeline(r.session, r.timeline)
                if not t.base < r.seq <= t.head:
                    raise ValidationError(f"{where}: no such event to redact", field="seq")
                old = t.own[r.seq - t.base - 1]
                if old.kind != r.event.kind:
                    raise ValidationError(
                        f"{where}: a {r.event.kind} event cannot replace a {old.kind} event",
                        field="event",
                    )
                chained = self._digests[old.id]
                try:
                    check_form(r.event, chained, where)
                except IntegrityError as exc:
                    raise ValidationError(str(exc), field="event") from None
                plan.append((t, old, r.event, chained))
            for t, old, event, chained in plan:
                t.own[old.seq - t.base - 1] = StoredEvent(old.seq, old.id, old.at, event)
                self._redacted[old.id] = (chained, encode_body(event).digest)
                self._words.pop(old.id, None)
                for ref in removed_refs(old.event, event):
                    self._blobs._data.pop(ref, None)
                for key in [k for k in self._counts if k[0] == old.id]:
                    del self._counts[key]
            return len(plan)

    def _lookup(self, event_id: str) -> StoredEvent:
        session, timeline, seq = self._ids[event_id]
        t = self._timeline(session, timeline)
        return t.own[seq - t.base - 1]

    def read(
        self, session: str, timeline: str = MAIN, *, after_seq: int = 0, limit: int | None = None
    ) -> list[StoredEvent]:
        check_read(after_seq, limit)
        with self._lock:
            out: list[StoredEvent] = []
            for t, upto in self._chain(session, timeline):
                lo = max(after_seq, t.base)
                out.extend(t.own[lo - t.base : upto - t.base])
            return out if limit is None else out[:limit]

    def head(self, session: str, timeline: str = MAIN) -> int:
        with self._lock:
            return self._timeline(session, timeline).head

    def search(
        self, session: str, query: str, *, timeline: str = MAIN, limit: int = 10
    ) -> list[SearchHit]:
        parsed = parse_query(query)
        check_limit(limit)
        with self._lock:
            visible = self.read(session, timeline)
            docs: list[tuple[int, list[str], Counter[str]]] = []
            for ev in visible:
                cached = self._words.get(ev.id)
                if cached is None:
                    found = index_words(ev.event)
                    cached = self._words[ev.id] = (found, Counter(found))
                if cached[0]:
                    docs.append((ev.seq, cached[0], cached[1]))
        by_seq = {ev.seq: ev for ev in visible}
        scored = bm25_scores(docs, parsed)
        return to_hits(((by_seq[seq], score) for seq, score in scored), parsed, limit)

    # token counts

    def get_token_counts(self, event_ids: Sequence[str], tokenizer: str) -> dict[str, int]:
        with self._lock:
            return {
                i: self._counts[(i, tokenizer)] for i in event_ids if (i, tokenizer) in self._counts
            }

    def put_token_counts(self, tokenizer: str, counts: dict[str, int]) -> None:
        check_name("tokenizer", tokenizer)
        for event_id, n in counts.items():
            check_id(event_id, "event_id")
            check_seq("count", n)
        with self._lock:
            for event_id, n in counts.items():
                self._counts[(event_id, tokenizer)] = n

    def close(self) -> None:
        pass


class _MemoryStream:
    """The open transaction of :meth:`MemoryStore._append_stream_raw`."""

    def __init__(self, store: MemoryStore) -> None:
        self._store = store
        self._now: dict[str, datetime] = {}
        """Each session's one reading of the clock, taken at its first chunk."""
        self.undo: list[Callable[[], None]] = []
        self._created: set[str] = set()

    @property
    def blobs(self) -> BlobStore:
        return self._store.blobs

    def append(self, batches: Sequence[Batch]) -> list[list[StoredEvent]]:
        store = self._store
        prepared = [
            prepare_batch(b.session, b.timeline, b.events, b.expected_seq, b.create, b.meta)
            for b in batches
        ]
        return [
            store._append_locked(b, batch, bodies, self.undo, self._clock(b.session), self._created)
            for b, (batch, bodies) in zip(batches, prepared, strict=True)
        ]

    def _clock(self, session: str) -> Callable[[], datetime]:
        def now() -> datetime:
            if session not in self._now:
                self._now[session] = self._store._clock()
            return self._now[session]

        return now

    def read(
        self, session: str, timeline: str = MAIN, *, after_seq: int = 0, limit: int | None = None
    ) -> list[StoredEvent]:
        return self._store.read(session, timeline, after_seq=after_seq, limit=limit)

    def set_meta(self, session: str, meta: dict[str, JsonValue]) -> None:
        if session not in self._created:
            raise ValidationError(
                f"session {session!r} was not created by this append; its meta stays",
                field="session",
            )
        self.undo.append(self._store._set_meta(session, meta))
