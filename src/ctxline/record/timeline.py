"""The one writer of a timeline: every append goes through the same rules.

Context, ``ctxline append``, ``ctxline import``, ``ctxline replay`` and the runner all
append through :class:`TimelineWriter`, so the record is the same whatever wrote it:

- **authority**: ctxline's own kinds (:data:`~ctxline.record.events.OWN_KINDS`: guide,
  tools, request, reduction, status) are refused from an app or an importer — they
  carry authority only when ctxline's step planner wrote them;
- **blobs first**: a tool result longer than :data:`BLOB_MIN_CHARS` is saved whole in
  the blob store before its event is appended (content-addressed, so saving again is
  free), as is every output the step's view shows as a preview — a handle the model
  reads always reads back;
- **one atomic append** with the expected head (the store checks the seq and the
  call/result pairing and writes all or nothing);
- **token counts** a step learned are stored after the append (a cache of the record,
  never part of it).

    writer = TimelineWriter(store, "demo")
    writer.append([UserMessage("hi")], expected_seq=0)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Literal

from ctxline.errors import ValidationError
from ctxline.record.blobs import BlobStore
from ctxline.record.events import OWN_KINDS, Event, Pending, StoredEvent, ToolResult
from ctxline.record.store import put_text
from ctxline.record.store.base import MAIN, Store

__all__ = ["BLOB_MIN_CHARS", "Authority", "TimelineWriter", "check_authority", "save_blobs"]

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


def save_blobs(
    blobs: BlobStore, events: Iterable[Event | Pending], extra: Iterable[str] = ()
) -> None:
    """Save long results and ``extra`` texts before their events are appended (streamed by
    the durable backends, never a whole encoded copy)."""
    for item in events:
        event = item.event if isinstance(item, Pending) else item
        if isinstance(event, ToolResult) and len(event.content) > BLOB_MIN_CHARS:
            put_text(blobs, event.content)
    for text in extra:
        put_text(blobs, text)


class TimelineWriter:
    """Appends to one timeline of one session (see the module docstring)."""

    def __init__(self, store: Store, session: str, timeline: str = MAIN) -> None:
        self.store = store
        self.session = session
        self.timeline = timeline

    def append(
        self,
        events: Sequence[Event | Pending],
        *,
        expected_seq: int | None = None,
        authority: Authority = "app",
        blobs: Sequence[str] = (),
        token_counts: Mapping[str, Mapping[str, int]] | None = None,
    ) -> list[StoredEvent]:
        """Append ``events`` atomically; returns them as stored.

        ``blobs`` are texts the events' view refers to (saved first); ``token_counts`` are
        counts a step learned (tokenizer → key → tokens), stored after the append.
        """
        if authority != "ctxline":
            check_authority(events)
        save_blobs(self.store.blobs, events, blobs)
        stored = self.store.append(
            self.session, list(events), expected_seq=expected_seq, timeline=self.timeline
        )
        for tokenizer, counts in (token_counts or {}).items():
            if counts:
                self.store.put_token_counts(tokenizer, dict(counts))
        return stored
