"""Bring imported sessions into a store without duplicating anything.

Importers give every event a deterministic client id, so importing a file twice is
a no-op, and importing a log that has grown since appends only its new tail. A
session whose stored events are not a prefix of the file is refused with the first
differing position; nothing is written for it.

    results = import_sessions(store, load(Path("traj.json")))
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ctxline.errors import ValidationError
from ctxline.importers import ImportedSession
from ctxline.record.codec import canonical_json, event_to_json
from ctxline.record.events import JsonValue, Pending
from ctxline.record.store import Store
from ctxline.record.timeline import Authority, TimelineWriter

__all__ = ["ImportResult", "import_sessions"]


@dataclass(frozen=True, slots=True)
class ImportResult:
    session: str
    events: int
    """Events the session holds after the import."""
    appended: int
    """Events this import added (0 when the file was imported before)."""


def _same(stored_id: str, stored_body: bytes, pending: Pending) -> bool:
    return stored_id == pending.id and stored_body == canonical_json(event_to_json(pending.event))


def _session_meta(imported: ImportedSession) -> dict[str, JsonValue]:
    """The meta to store: an export's header carries the session's own meta, restored as is.

    Without this, export → import → export would nest the meta one level deeper each
    time and the round trip would not be byte-identical.
    """
    restored = imported.meta.get("session_meta")
    if imported.meta.get("format") == "events" and isinstance(restored, dict):
        return restored
    return imported.meta


def import_sessions(
    store: Store, sessions: Iterable[ImportedSession], *, authority: Authority = "app"
) -> list[ImportResult]:
    """Append each imported session's new events through the timeline writer's rules
    (long results saved as blobs first); a session that holds other events is refused.

    ctxline's own kinds are refused unless ``authority="ctxline"``, which only a trusted
    restore (:func:`ctxline.restore.restore_sessions`) may pass."""
    results = []
    for imported in sessions:
        store.create_session(imported.id, meta=_session_meta(imported), exist_ok=True)
        existing = store.read(imported.id)
        new: Sequence[Pending] = imported.events
        for i, ev in enumerate(existing):
            if i >= len(new) or not _same(ev.id, canonical_json(event_to_json(ev.event)), new[i]):
                raise ValidationError(
                    f"session {imported.id!r} already holds different events (first difference at"
                    f" seq {ev.seq}); import it under another id or into another database",
                    field="session",
                )
        tail = list(new[len(existing) :])
        if tail:
            TimelineWriter(store, imported.id).append(
                tail, expected_seq=len(existing), authority=authority
            )
        results.append(ImportResult(imported.id, len(existing) + len(tail), len(tail)))
    return results
