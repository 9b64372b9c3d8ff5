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

from ctxline.blobs import BlobStore
from ctxline.errors import DuplicateEventId, PairingError, ValidationError
from ctxline.events import (
    AssistantMessage,
    Event,
    JsonValue,
    Pending,
    StoredEvent,
    ToolResult,
    canonical_json,
    event_to_json,
)

__all__ = [
    "MAIN",
    "Clock",
    "IdFactory",
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
