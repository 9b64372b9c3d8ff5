"""The Store protocol every backend implements, and the checks they share.

A store holds sessions; a session holds timelines (``main`` and its forks); a
timeline is a gap-free sequence of events numbered 1, 2, … . A fork sees its
parent's events up to the fork point, then its own, numbered on from there.

``append`` is all or nothing: it checks ``expected_seq`` against the head (raising
:class:`~ctxline.errors.Conflict`), checks that every tool result answers an earlier
call in the timeline (raising :class:`~ctxline.errors.PairingError`), and treats a
batch whose client ids are all stored already, with the same content, as a retry
that returns the stored events and writes nothing.

    store = open_store("ctxline.db")
    store.create_session("demo")
    store.append("demo", [UserMessage("hi")], expected_seq=0)
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Protocol, runtime_checkable

from ctxline.errors import DuplicateEventId, PairingError, ValidationError
from ctxline.record.blobs import BlobStore
from ctxline.record.codec import canonical_json, event_to_json
from ctxline.record.events import (
    AssistantMessage,
    Event,
    JsonValue,
    Pending,
    StoredEvent,
    ToolResult,
)

__all__ = [
    "MAIN",
    "Clock",
    "HealthCheck",
    "IdFactory",
    "SearchHit",
    "SessionInfo",
    "Store",
    "TimelineInfo",
    "new_ulid",
    "utc_now",
]

MAIN = "main"

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
    id: str
    created_at: datetime
    events: int
    """Events on the ``main`` timeline."""
    timelines: int = 1
    meta: dict[str, JsonValue] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TimelineInfo:
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
        """Append atomically; ``expected_seq=None`` appends at the head, whatever it is."""
        ...

    def read(
        self, session: str, timeline: str = MAIN, *, after_seq: int = 0, limit: int | None = None
    ) -> list[StoredEvent]: ...

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


# --- checks shared by the backends --------------------------------------------------


def as_pending(items: Iterable[Event | Pending]) -> list[Pending]:
    return [item if isinstance(item, Pending) else Pending(item) for item in items]


def check_new_ids(batch: Sequence[Pending]) -> None:
    seen: set[str] = set()
    for p in batch:
        if p.id is not None:
            if p.id in seen:
                raise DuplicateEventId(p.id, "twice in one append")
            seen.add(p.id)


def same_content(stored: StoredEvent, pending: Pending) -> bool:
    if canonical_json(event_to_json(stored.event)) != canonical_json(event_to_json(pending.event)):
        return False
    return pending.at is None or pending.at == stored.at


def resolve_retry(
    batch: Sequence[Pending], existing: dict[str, StoredEvent]
) -> list[StoredEvent] | None:
    """The stored events if ``batch`` is a retry of an acknowledged append, else None.

    ``existing`` maps the batch's client ids that are already stored to their events.
    Raises :class:`DuplicateEventId` when an id is reused for different content, or when
    a batch mixes stored and new ids (a retry never changes its batch).
    """
    if not existing:
        return None
    for p in batch:
        if p.id is None or p.id not in existing:
            missing = p.id or "(no id)"
            raise DuplicateEventId(
                next(iter(existing)), f"batch mixes stored ids with a new event {missing}"
            )
        if not same_content(existing[p.id], p):
            raise DuplicateEventId(p.id, "stored with different content")
    return [existing[p.id] for p in batch if p.id is not None]


def check_pairing(batch: Sequence[Pending], is_known_call: Callable[[str], bool]) -> None:
    """Every tool result must answer a call earlier in the timeline or earlier in ``batch``."""
    new_calls: set[str] = set()
    for i, p in enumerate(batch):
        ev = p.event
        if isinstance(ev, AssistantMessage):
            new_calls.update(c.id for c in ev.tool_calls)
        elif (
            isinstance(ev, ToolResult)
            and ev.call_id not in new_calls
            and not is_known_call(ev.call_id)
        ):
            raise PairingError(ev.call_id, f"event {i + 1} of the batch")


def call_ids(event: Event) -> list[str]:
    return [c.id for c in event.tool_calls] if isinstance(event, AssistantMessage) else []


def check_name(what: str, value: str) -> None:
    if not value or not value.strip() or any(ord(ch) < 32 for ch in value):
        raise ValidationError(f"invalid {what} name {value!r}", field=what)
    _check_utf8(what, value)


def _check_utf8(what: str, value: str) -> None:
    try:
        value.encode()
    except UnicodeEncodeError as exc:
        bad = exc.object[exc.start : exc.end]
        raise ValidationError(
            f"{what} {value[:40]!r} holds a lone surrogate ({bad!r}) that UTF-8 cannot store;"
            " clean it first (ctxline.text.clean_text)",
            field=what,
        ) from None


def encode_batch(batch: Sequence[Pending]) -> list[str]:
    """Each event's canonical JSON text, checked before anything is written.

    Every backend calls this, so they all refuse the same batches with a
    :class:`ValidationError`: text with a lone surrogate (UTF-8 cannot hold it), or a
    value JSON cannot hold (NaN, a set, an object).
    """
    bodies = []
    for i, p in enumerate(batch, start=1):
        if p.id is not None:
            _check_utf8("id", p.id)
        try:
            bodies.append(canonical_json(event_to_json(p.event)).decode())
        except UnicodeEncodeError as exc:
            bad = exc.object[exc.start : exc.end]
            raise ValidationError(
                f"event {i} of the batch ({p.event.kind}) holds a lone surrogate ({bad!r}) that"
                " UTF-8 cannot store; clean it first (ctxline.text.clean_text)",
                field="event",
            ) from None
        except (ValueError, TypeError) as exc:
            raise ValidationError(
                f"event {i} of the batch ({p.event.kind}) is not valid JSON: {exc}", field="event"
            ) from None
    return bodies
