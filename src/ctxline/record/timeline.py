"""The one writer of a timeline: every append goes through the same rules.

Context, ``ctxline append``, ``ctxline import``, ``ctxline replay`` and the runner all
append through :class:`TimelineWriter` (or :func:`write_batches`, several sessions in one
transaction), so the record is the same whatever wrote it; a store's own ``append`` is
this writer with an app's authority (:mod:`ctxline.record.store.writes`), and the raw
append is called from nowhere else:

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

from collections.abc import Mapping, Sequence

from ctxline.record.events import Event, Pending, StoredEvent
from ctxline.record.store.base import MAIN, Store
from ctxline.record.store.writes import (
    BLOB_MIN_CHARS,
    Authority,
    SavedTexts,
    check_authority,
    save_blobs,
    write_batches,
)

__all__ = [
    "BLOB_MIN_CHARS",
    "Authority",
    "TimelineWriter",
    "check_authority",
    "save_blobs",
    "write_batches",
]


class TimelineWriter:
    """Appends to one timeline of one session (see the module docstring)."""

    def __init__(self, store: Store, session: str, timeline: str = MAIN) -> None:
        self.store = store
        self.session = session
        self.timeline = timeline
        self._saved = SavedTexts()
        """Long texts this writer saved as blobs (a preview of one is not saved again)."""

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
        save_blobs(self.store.blobs, events, blobs, saved=self._saved)
        stored = self.store._append_raw(
            self.session, list(events), expected_seq=expected_seq, timeline=self.timeline
        )
        for tokenizer, counts in (token_counts or {}).items():
            if counts:
                self.store.put_token_counts(tokenizer, dict(counts))
        return stored
