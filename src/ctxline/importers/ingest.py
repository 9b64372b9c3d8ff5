"""Bring imported sessions into a store without duplicating anything.

Importers give every event a deterministic client id, so importing a file twice is
a no-op, and importing a log that has grown since appends only its new tail. A
session whose stored events are not a prefix of the file is refused with the first
differing position.

An import is all or nothing on every backend: every session is checked first, then
all of them are created and appended in one transaction
(:func:`~ctxline.record.timeline.write_batches`). A file whose second session
conflicts leaves the first unwritten too.

    results = import_sessions(store, load(Path("traj.json")))
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ctxline.errors import UnknownSession, ValidationError
from ctxline.importers import ImportedSession
from ctxline.record.authority import check_outside
from ctxline.record.codec import canonical_json, event_to_json
from ctxline.record.events import JsonValue, Pending, StoredEvent
from ctxline.record.store import Batch, Store
from ctxline.record.timeline import Authority, check_authority, write_batches

__all__ = ["ImportResult", "import_sessions"]


@dataclass(frozen=True, slots=True)
class ImportResult:
    """What importing one session did: the session id, its events, and how many were new."""

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


def _stored(store: Store, session: str) -> list[StoredEvent] | None:
    try:
        return store.read(session)
    except UnknownSession:
        return None


def _origin(imported: ImportedSession) -> str:
    file = imported.meta.get("file")
    return f" (in {file})" if isinstance(file, str) else ""


def import_sessions(
    store: Store, sessions: Iterable[ImportedSession], *, authority: Authority = "app"
) -> list[ImportResult]:
    """Import ``sessions`` in one transaction, through the timeline writer's rules (long
    results saved as blobs first); ValidationError (nothing written) when one conflicts
    with what the store holds, or appears twice with different events.

    ctxline's own kinds are refused unless ``authority="ctxline"``, which only a trusted
    restore (:func:`ctxline.restore.restore_sessions`) may pass."""
    todo: list[ImportedSession] = []
    by_id: dict[str, ImportedSession] = {}
    for imported in sessions:
        seen = by_id.get(imported.id)
        if seen is not None:
            if seen.events == imported.events:
                continue
            raise ValidationError(
                f"session {imported.id!r} appears twice with different events"
                f"{_origin(seen)}{_origin(imported)}; nothing was imported",
                field="session",
            )
        by_id[imported.id] = imported
        todo.append(imported)
    batches: list[Batch] = []
    results = []
    for imported in todo:
        existing = _stored(store, imported.id)
        new: Sequence[Pending] = imported.events
        for i, ev in enumerate(existing or []):
            if i >= len(new) or not _same(ev.id, canonical_json(event_to_json(ev.event)), new[i]):
                raise ValidationError(
                    f"session {imported.id!r} already holds different events (first difference at"
                    f" seq {ev.seq}); import it under another id or into another database;"
                    " nothing was imported",
                    field="session",
                )
        held = len(existing or [])
        tail = list(new[held:])
        if tail or existing is None:
            batches.append(
                Batch(imported.id, tail, held, create=True, meta=_session_meta(imported))
            )
        results.append(ImportResult(imported.id, held + len(tail), len(tail)))
    if batches:
        if authority != "ctxline":  # only a trusted restore brings ctxline's own kinds
            for batch in batches:
                check_authority(batch.events, where=f"import of {batch.session}")
                check_outside(batch.events, where=f"import of {batch.session}")
        write_batches(store, batches, authority="ctxline")  # checked above; blobs saved first
    return results
