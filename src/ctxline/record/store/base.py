"""The Store protocol every backend implements, and the checks they share.

A store holds sessions; a session holds timelines (``main`` and its forks); a
timeline is a gap-free sequence of events numbered 1, 2, … . A fork sees its
parent's events up to the fork point, then its own, numbered on from there.

``append`` is all or nothing: it checks ``expected_seq`` against the head (raising
:class:`~ctxline.errors.Conflict`), checks that every tool result answers an earlier
call in the timeline (raising :class:`~ctxline.errors.PairingError`), and treats a
batch whose client ids are all stored already, with the same content, as a retry
that returns the stored events and writes nothing. ``append_batches`` does the same
for several sessions and timelines in one transaction (a multi-session import), and
``_append_stream_raw`` keeps one transaction open for many such appends, chunk after
chunk (a long import that never holds the whole session): committed when its block
ends, rolled back — nothing written — when the block raises.

Every stored event carries a hash link (:mod:`ctxline.record.store.chain`); reads of
the durable backends check the links of what they return and raise
:class:`~ctxline.errors.IntegrityError` naming the seq of a row changed outside
ctxline; ``verify_chain`` checks a whole timeline and returns what it found. An
environment that refuses a write (read-only file or file system, full disk, locked
database) raises :class:`StorageError`, and nothing is written.

    store = open_store("ctxline.db")
    store.create_session("demo")
    store.append("demo", [UserMessage("hi")], expected_seq=0)
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Protocol, runtime_checkable

from ctxline.errors import CtxlineError
from ctxline.record.blobs import BlobStore
from ctxline.record.events import Event, JsonValue, Pending, StoredEvent
from ctxline.record.store.chain import ChainCheck
from ctxline.record.store.checks import (
    MAIN,
    as_pending,
    call_ids,
    check_name,
    check_new_ids,
    check_pairing,
    encode_batch,
    resolve_retry,
    same_content,
)

__all__ = [
    "MAIN",
    "AppendStream",
    "Batch",
    "ChainCheck",
    "Clock",
    "HealthCheck",
    "IdFactory",
    "SearchHit",
    "SessionInfo",
    "StorageError",
    "Store",
    "TimelineInfo",
    "as_pending",
    "call_ids",
    "check_name",
    "check_new_ids",
    "check_pairing",
    "encode_batch",
    "new_ulid",
    "resolve_retry",
    "same_content",
    "utc_now",
]

Clock = Callable[[], datetime]
IdFactory = Callable[[], str]

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def utc_now() -> datetime:
    return datetime.now(UTC)


def new_ulid() -> str:
    """A ULID: 48-bit millisecond time + 80 random bits, Crockford base32 (26 chars)."""
    value = (time.time_ns() // 1_000_000) << 80 | int.from_bytes(os.urandom(10), "big")
    chars = []
    for _ in range(26):
        chars.append(_CROCKFORD[value & 31])
        value >>= 5
    return "".join(reversed(chars))


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """A session as the store lists it: id, creation time, event count, timelines, meta."""

    id: str
    created_at: datetime
    events: int
    """Events on the ``main`` timeline."""
    timelines: int = 1
    meta: dict[str, JsonValue] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TimelineInfo:
    """A timeline of a session: its name, head, and the parent it was forked from (if any)."""

    session: str
    name: str
    head: int
    parent: str | None = None
    fork_seq: int | None = None


@dataclass(frozen=True, slots=True)
class HealthCheck:
    """One integrity check of a store: what it looked at, and what it found wrong."""

    name: str
    detail: str
    problems: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.problems


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One event found by :meth:`Store.search`.

    ``snippet`` is raw record text around the first match (escape it before showing it
    to a model); ``handle`` is the ``sha256:`` blob handle of a tool result longer than
    1,024 characters (saved whole when appended), else ''. ``score`` is higher for
    better matches; its scale depends on the backend (BM25 or ``ts_rank``).
    """

    seq: int
    kind: str
    snippet: str
    handle: str
    score: float


class StorageError(CtxlineError):
    """The environment refused the database: a read-only file or file system, a full
    disk, a locked or unreachable database. Nothing was written; the record is as it was."""


@dataclass(frozen=True, slots=True)
class Batch:
    """One part of :meth:`Store.append_batches`: events for one timeline of one session.

    ``create=True`` creates the session (with ``meta``) when it does not exist yet, in
    the same transaction, so a refused batch leaves no empty session behind.
    """

    session: str
    events: Sequence[Event | Pending]
    expected_seq: int | None = None
    timeline: str = MAIN
    create: bool = False
    meta: dict[str, JsonValue] | None = None


class AppendStream(Protocol):
    """One open transaction of :meth:`Store._append_stream_raw`: raw appends, chunk after
    chunk, each seeing the ones before it (heads, call pairing, retries), and reads of
    what it holds so far; nothing is visible to others until the block ends."""

    @property
    def blobs(self) -> BlobStore:
        """The store's blobs, saved inside this transaction where the backend can (SQL:
        rolled back with it; memory: an unreferenced blob stays, as after any refused append)."""
        ...

    def append(self, batches: Sequence[Batch]) -> list[list[StoredEvent]]:
        """:meth:`Store._append_batches_raw` inside this transaction."""
        ...

    def read(
        self, session: str, timeline: str = MAIN, *, after_seq: int = 0, limit: int | None = None
    ) -> list[StoredEvent]:
        """:meth:`Store.read` inside this transaction (what it appended included)."""
        ...

    def set_meta(self, session: str, meta: dict[str, JsonValue]) -> None:
        """Replace the meta of a session this transaction created (an import learns a
        session's event count at its end); ValidationError for any other session."""
        ...


@runtime_checkable
class Store(Protocol):
    """Durable, append-only storage of sessions, timelines and blobs."""

    @property
    def blobs(self) -> BlobStore: ...

    def create_session(
        self, session: str, *, meta: dict[str, JsonValue] | None = None, exist_ok: bool = False
    ) -> SessionInfo: ...

    def session(self, session: str) -> SessionInfo: ...

    def sessions(self) -> list[SessionInfo]: ...

    def timelines(self, session: str) -> list[TimelineInfo]: ...

    def timeline(self, session: str, timeline: str = MAIN) -> TimelineInfo: ...

    def fork(self, session: str, timeline: str, at_seq: int, name: str) -> TimelineInfo: ...

    def append(
        self,
        session: str,
        events: Sequence[Event | Pending],
        *,
        expected_seq: int | None = None,
        timeline: str = MAIN,
    ) -> list[StoredEvent]:
        """Append an app's events atomically under the writer's rules (ctxline's own kinds
        refused, long results saved as blobs first: :mod:`ctxline.record.store.writes`);
        ``expected_seq=None`` appends at the head, whatever it is."""
        ...

    def append_batches(self, batches: Sequence[Batch]) -> list[list[StoredEvent]]:
        """Append every batch in one transaction, in order: all of them or none
        (each checked as :meth:`append` checks one); the stored events per batch."""
        ...

    def _append_raw(
        self,
        session: str,
        events: Sequence[Event | Pending],
        *,
        expected_seq: int | None = None,
        timeline: str = MAIN,
    ) -> list[StoredEvent]:
        """The append without the writer's rules: only
        :class:`~ctxline.record.timeline.TimelineWriter` calls it."""
        ...

    def _append_batches_raw(self, batches: Sequence[Batch]) -> list[list[StoredEvent]]:
        """:meth:`append_batches` without the writer's rules (see :meth:`_append_raw`)."""
        ...

    def _append_stream_raw(self) -> AbstractContextManager[AppendStream]:
        """One transaction for many raw appends (see :class:`AppendStream`): committed when
        the block ends, rolled back when it raises; only
        :func:`~ctxline.record.store.writes.stream_batches` calls it."""
        ...

    def read(
        self, session: str, timeline: str = MAIN, *, after_seq: int = 0, limit: int | None = None
    ) -> list[StoredEvent]:
        """The visible events after ``after_seq`` (at most ``limit``), their hash links
        checked (IntegrityError names the first bad seq)."""
        ...

    def verify_chain(self, session: str, timeline: str = MAIN) -> ChainCheck:
        """Recompute every visible event's hash link and compare it with the stored one
        (and the timeline's head link); never raises for what it finds."""
        ...

    def head(self, session: str, timeline: str = MAIN) -> int: ...

    def search(
        self, session: str, query: str, *, timeline: str = MAIN, limit: int = 10
    ) -> list[SearchHit]:
        """The timeline's visible events matching ``query`` (words and "phrases", any of
        them), best first; ValidationError for a query without words."""
        ...

    def get_token_counts(self, event_ids: Sequence[str], tokenizer: str) -> dict[str, int]: ...

    def put_token_counts(self, tokenizer: str, counts: dict[str, int]) -> None: ...

    def close(self) -> None: ...
