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

A long import streams instead (:func:`stream_batches`): the same rules, chunk by chunk,
inside one transaction that commits at the end or leaves nothing.

    store.append("s", [Guide(...)])                      # ValidationError: ctxline's own
    write_batches(store, batches, authority="ctxline")   # a trusted restore
    with stream_batches(store) as tx:                    # chunks, one transaction
        tx.append([Batch("s", chunk, expected_seq=head, create=True)])
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Literal, cast

from ctxline.errors import ValidationError
from ctxline.record.blobs import BlobStore
from ctxline.record.events import OWN_KINDS, Event, JsonValue, Pending, StoredEvent, ToolResult
from ctxline.record.store.base import MAIN, Batch

if TYPE_CHECKING:
    from ctxline.record.store.base import AppendStream, Store

__all__ = [
    "BLOB_MIN_CHARS",
    "Authority",
    "CheckedAppends",
    "CheckedStream",
    "SavedTexts",
    "check_authority",
    "save_blobs",
    "stream_batches",
    "write_batches",
]

BLOB_MIN_CHARS = 1_024
"""Tool results longer than this are saved as blobs when they are appended (the search
index gives their handle too)."""

Authority = Literal["app", "ctxline"]


def check_authority(
    events: Iterable[Event | Pending], *, where: str = "append", start: int = 1
) -> None:
    """Refuse ctxline's own kinds from outside, naming the kind and the event's position
    (``start``: the position of the first of ``events``)."""
    for index, item in enumerate(events, start=start):
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


class SavedTexts:
    """The last few texts one writer saved as blobs, held and compared by identity.

    Why: the result a runner appends is saved as a blob, and the next step, which shows
    it as a preview, hands the same string again; saving it again is free in the store
    (content-addressed) but still encodes and hashes all of it to find its handle (a
    200 MB output: a full pass, issue 25). Held, a text cannot be replaced by another at
    the same address; at most ``most`` of them, which the writer's session holds anyway.
    """

    def __init__(self, most: int = 8) -> None:
        self._texts: deque[str] = deque(maxlen=most)

    def __contains__(self, text: object) -> bool:
        return any(t is text for t in self._texts)

    def add(self, text: str) -> None:
        self._texts.append(text)


def save_blobs(
    blobs: BlobStore,
    events: Iterable[Event | Pending],
    extra: Iterable[str] = (),
    *,
    saved: SavedTexts | None = None,
) -> None:
    """Save long results and ``extra`` texts before their events are appended (streamed by
    the durable backends, never a whole encoded copy); ``saved``: texts already saved to
    these blobs (the very same strings: skipped), and where the new ones are noted."""
    texts: list[str] = []
    for item in events:
        event = item.event if isinstance(item, Pending) else item
        if isinstance(event, ToolResult) and len(event.content) > BLOB_MIN_CHARS:
            texts.append(event.content)
    texts.extend(extra)
    for text in texts:
        if saved is not None and text in saved:
            continue
        _put_text(blobs, text)
        if saved is not None and len(text) > BLOB_MIN_CHARS:
            saved.add(text)


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


class CheckedStream:
    """A streamed append under the rules above (see :func:`stream_batches`)."""

    def __init__(self, raw: AppendStream, authority: Authority, where: str) -> None:
        self._raw = raw
        self._authority = authority
        self._where = where
        self.failed = False
        """A chunk raised: the transaction is rolled back however the block ends."""

    def append(self, batches: Sequence[Batch]) -> list[list[StoredEvent]]:
        """One chunk: checked, its long results saved as blobs, then appended (not yet
        committed)."""
        if self.failed:
            raise ValidationError(
                "an earlier chunk of this append failed; nothing is written", source=self._where
            )
        try:
            if self._authority != "ctxline":
                for batch in batches:
                    check_authority(batch.events, where=self._where)
            for batch in batches:
                save_blobs(self._raw.blobs, batch.events)
            return self._raw.append(batches)
        except BaseException:
            self.failed = True
            raise

    def read(
        self, session: str, timeline: str = MAIN, *, after_seq: int = 0, limit: int | None = None
    ) -> list[StoredEvent]:
        return self._raw.read(session, timeline, after_seq=after_seq, limit=limit)

    def set_meta(self, session: str, meta: dict[str, JsonValue]) -> None:
        self._raw.set_meta(session, meta)


@contextmanager
def stream_batches(
    store: Store, *, authority: Authority = "app", where: str = "append"
) -> Iterator[CheckedStream]:
    """One transaction for appends made chunk by chunk: all of them when the block ends,
    none when it raises (a bad line deep in a long import leaves nothing behind).

    The transaction holds the store's write lock for the whole block on SQLite (other
    writers wait, up to their busy timeout), and each timeline row it appends to on
    PostgreSQL; keep the block to reading and appending."""
    with store._append_stream_raw() as raw:
        stream = CheckedStream(raw, authority, where)
        yield stream
        if stream.failed:  # the error was caught in the block: still nothing half-written
            raise ValidationError(
                "a chunk of this append failed; nothing was written", source=where
            )


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
