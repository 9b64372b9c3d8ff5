"""The rules every append follows, whoever calls it: the store's ``append`` is the writer's.

Why: a raw append that anyone can call is a way around the rules (issue 21: a retry
helper stored a ``guide`` event that ``Context.append`` refuses, and did not save a 6 KB
result as a blob). So every store's public ``append`` and ``append_batches`` apply them
(:class:`CheckedAppends`), and the raw append (``_append_raw``, ``_append_batches_raw``)
is called only from here and from :class:`~ctxline.record.timeline.TimelineWriter`:

- **authority**: ctxline's own kinds (:data:`~ctxline.record.events.OWN_KINDS`) are
  refused from an app or an importer;
- **blobs first**: a tool result longer than :data:`BLOB_MIN_CHARS` is saved whole in
  the blob store before its event is appended (content-addressed: saving again is free).

    store.append("s", [Guide(...)])                      # ValidationError: ctxline's own
    write_batches(store, batches, authority="ctxline")   # a trusted restore
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Literal, cast

from ctxline.errors import ValidationError
from ctxline.record.blobs import BlobStore
from ctxline.record.events import OWN_KINDS, Event, Pending, StoredEvent, ToolResult
from ctxline.record.store.base import MAIN, Batch

if TYPE_CHECKING:
    from ctxline.record.store.base import Store

__all__ = [
    "BLOB_MIN_CHARS",
    "Authority",
    "CheckedAppends",
    "check_authority",
    "save_blobs",
    "write_batches",
]

BLOB_MIN_CHARS = 1_024
"""Tool results longer than this are saved as blobs when they are appended (the search
index gives their handle too)."""

Authority = Literal["app", "ctxline"]


def check_authority(events: Iterable[Event | Pending], *, where: str = "append") -> None:
    """Refuse ctxline's own kinds from outside, naming the kind and the event's position."""
    for index, item in enumerate(events, start=1):
        event = item.event if isinstance(item, Pending) else item
        if event.kind in OWN_KINDS:
            raise ValidationError(
                f"event {index} is a {event.kind!r} event: that kind is ctxline's own record"
                " (written by its step planner) and cannot be appended or imported",
                field="kind",
                source=where,
            )


def _put_text(blobs: BlobStore, text: str) -> str:
    put = getattr(blobs, "put_text", None)  # the durable backends stream it
    if callable(put):
        ref: str = put(text)
        return ref
    return blobs.put(text.encode())


def save_blobs(
    blobs: BlobStore, events: Iterable[Event | Pending], extra: Iterable[str] = ()
) -> None:
    """Save long results and ``extra`` texts before their events are appended (streamed by
    the durable backends, never a whole encoded copy)."""
    for item in events:
        event = item.event if isinstance(item, Pending) else item
        if isinstance(event, ToolResult) and len(event.content) > BLOB_MIN_CHARS:
            _put_text(blobs, event.content)
    for text in extra:
        _put_text(blobs, text)


def write_batches(
    store: Store,
    batches: Sequence[Batch],
    *,
    authority: Authority = "app",
    where: str = "append",
) -> list[list[StoredEvent]]:
    """Every batch under the rules, then one atomic raw append of all of them."""
    if authority != "ctxline":
        for batch in batches:
            check_authority(batch.events, where=where)
    for batch in batches:
        save_blobs(store.blobs, batch.events)
    return store._append_batches_raw(batches)


class CheckedAppends:
    """The public ``append`` and ``append_batches`` of every store: an app's events, under
    the rules above. A store class defines ``_append_batches_raw``."""

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
        return write_batches(cast("Store", self), batches)

    def _append_raw(
        self,
        session: str,
        events: Sequence[Event | Pending],
        *,
        expected_seq: int | None = None,
        timeline: str = MAIN,
    ) -> list[StoredEvent]:
        return self._append_batches_raw([Batch(session, events, expected_seq, timeline)])[0]

    def _append_batches_raw(self, batches: Sequence[Batch]) -> list[list[StoredEvent]]:
        raise NotImplementedError
