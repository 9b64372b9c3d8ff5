"""Bring imported sessions into a store without duplicating anything.

Importers give every event a deterministic client id, so importing a file twice is
a no-op, and importing a log that has grown since appends only its new tail. A
session whose stored events are not a prefix of the file is refused with the first
differing position.

An import is all or nothing on every backend: the events are checked and appended a
chunk of :data:`CHUNK` at a time inside one transaction
(:func:`~ctxline.record.store.writes.stream_batches`) that commits when the last
session is done. A bad line 15,000 events into a file, or a second session that
conflicts, leaves nothing of the import behind — not the first session, not the
chunks already appended. Nothing holds a whole session: the stored prefix is compared
a chunk at a time, and :func:`import_stream` reports its progress after each chunk.

    results = import_sessions(store, load(Path("traj.json")))
    results = import_stream(store, stream_tree(Path("export.jsonl")), progress=print)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from ctxline.errors import UnknownSession, ValidationError
from ctxline.importers import ImportedSession
from ctxline.importers.stream import StreamedSession
from ctxline.record.authority import check_outside
from ctxline.record.codec import canonical_json, event_to_json
from ctxline.record.events import Pending, StoredEvent
from ctxline.record.store import Batch, Store
from ctxline.record.store.writes import CheckedStream, stream_batches
from ctxline.record.timeline import Authority, check_authority

__all__ = [
    "CHUNK",
    "FIRST_CHUNK",
    "ImportProgress",
    "ImportResult",
    "import_sessions",
    "import_stream",
]

CHUNK = 1_000
"""Events checked and appended (or compared with the stored ones) per step."""
FIRST_CHUNK = 100
"""The first step of each session is this small, so its first progress comes at once."""


@dataclass(frozen=True, slots=True)
class ImportResult:
    """What importing one session did: the session id, its events, and how many were new."""

    session: str
    events: int
    """Events the session holds after the import."""
    appended: int
    """Events this import added (0 when the file was imported before)."""


@dataclass(frozen=True, slots=True)
class ImportProgress:
    """How far an import is into one session (nothing is committed before the end)."""

    session: str
    read: int
    """Events of the file read and checked so far."""
    appended: int
    """Of them, the new ones appended (inside the import's transaction)."""
    done: bool
    """The session's last event is read."""


Progress = Callable[[ImportProgress], None]


def _same(stored: StoredEvent, pending: Pending) -> bool:
    """Whether ``pending`` is the stored event: the same id and the same canonical JSON
    (told by a strict walk of the two events when they match field for field, which
    writes the same JSON; by encoding both when they do not)."""
    if stored.id != pending.id:
        return False
    return _same_value(stored.event, pending.event) or canonical_json(
        event_to_json(stored.event)
    ) == canonical_json(event_to_json(pending.event))


def _same_value(a: object, b: object) -> bool:
    """``a`` and ``b`` match strictly: one type all the way down, the same keys and items,
    floats by ``repr`` (0.0 is not -0.0), dataclasses field by field — so they encode to
    the same JSON. False only means "encode them to see"."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        assert isinstance(b, dict)
        return a.keys() == b.keys() and all(_same_value(v, b[k]) for k, v in a.items())
    if isinstance(a, list | tuple):
        assert isinstance(b, list | tuple)
        return len(a) == len(b) and all(map(_same_value, a, b))
    if isinstance(a, float):
        return repr(a) == repr(b)
    if a is None or isinstance(a, str | int):
        return a == b
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        return all(
            _same_value(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a)
        )
    return a == b and repr(a) == repr(b)  # a time: the same instant in the same zone


def _origin(file: str | None) -> str:
    return f" (in {file})" if file else ""


class _Stored:
    """The events a session holds already, read a chunk at a time inside the import."""

    def __init__(self, tx: CheckedStream, session: str, chunk: int) -> None:
        self._tx, self._session, self._chunk = tx, session, chunk
        self._buffer: list[StoredEvent] = []
        self._at = 0
        self.last = 0
        """The seq of the last stored event handed out."""
        try:
            self._fill()
            self.exists = True
        except UnknownSession:
            self.exists = False
            self._done = True

    def _fill(self) -> None:
        self._buffer = self._tx.read(self._session, after_seq=self.last, limit=self._chunk)
        self._at = 0
        self._done = len(self._buffer) < self._chunk

    def next(self) -> StoredEvent | None:
        if self._at == len(self._buffer):
            if self._done:
                return None
            self._fill()
            if not self._buffer:
                return None
        ev = self._buffer[self._at]
        self._at += 1
        self.last = ev.seq
        return ev


class _Session:
    """One session through the import: compared with what is stored, then appended."""

    def __init__(
        self, tx: CheckedStream, s: StreamedSession, authority: Authority, chunk: int
    ) -> None:
        self.tx, self.s, self.authority, self.chunk = tx, s, authority, chunk
        self.stored = _Stored(tx, s.id, chunk)
        self.exists = self.stored.exists
        self.held = 0
        self.read = 0
        self.appended = 0
        self.new: list[Pending] = []
        self.meta_later = False

    def differs(self, seq: int) -> ValidationError:
        return ValidationError(
            f"session {self.s.id!r} already holds different events (first difference at"
            f" seq {seq}); import it under another id or into another database;"
            " nothing was imported",
            field="session",
        )

    def take(self, pending: Pending) -> None:
        self.read += 1
        if self.held == self.read - 1:  # still inside what the store holds
            ev = self.stored.next()
            if ev is not None:
                if not _same(ev, pending):
                    raise self.differs(ev.seq)
                self.held += 1
                return
        self.new.append(pending)

    def flush(self, *, final: bool) -> None:
        if not self.new and (self.exists or not final):
            return
        events, self.new = self.new, []
        if self.authority != "ctxline":  # only a trusted restore brings ctxline's own kinds
            where, start = f"import of {self.s.id}", self.held + self.appended + 1
            check_authority(events, where=where, start=start)
            check_outside(events, where=where, start=start)
        create = not self.exists
        meta = self.s.stored_meta
        if create and meta is None:  # the importer's meta, whose counts come at the end
            meta = self.s.meta()
            self.meta_later = not final
        self.tx.append(
            [Batch(self.s.id, events, self.held + self.appended, create=create, meta=meta)]
        )
        self.exists = True
        self.appended += len(events)

    def finish(self) -> ImportResult:
        if self.held == self.read:  # the file ended inside the stored events: none may be left
            ev = self.stored.next()
            if ev is not None:
                raise self.differs(ev.seq)
        self.flush(final=True)
        if self.meta_later:  # created before its counts were known: they are now
            self.tx.set_meta(self.s.id, self.s.meta())
        return ImportResult(self.s.id, self.held + self.appended, self.appended)


def import_stream(
    store: Store,
    sessions: Iterable[StreamedSession],
    *,
    authority: Authority = "app",
    progress: Progress | None = None,
    chunk: int = CHUNK,
) -> list[ImportResult]:
    """Import ``sessions`` in one transaction, their events read, checked and appended a
    chunk at a time (see the module doc; the first chunk of each session is
    :data:`FIRST_CHUNK` events); ``progress`` hears after each chunk.

    ValidationError, and nothing written, when a session conflicts with what the store
    holds, appears twice with different events, or a line of its file is bad. ctxline's
    own kinds are refused unless ``authority="ctxline"``, which only a trusted restore
    (:func:`ctxline.restore.restore_events`) may pass."""
    results: list[ImportResult] = []
    first = min(FIRST_CHUNK, chunk)
    first_file: dict[str, str | None] = {}
    with stream_batches(store, authority="ctxline", where="import") as tx:
        for s in sessions:
            if s.id in first_file:
                _repeat(tx, s, first_file[s.id], chunk)
                continue
            first_file[s.id] = s.file
            one = _Session(tx, s, authority, chunk)
            for pending, _line in s.events:
                one.take(pending)
                if one.read == first or one.read % chunk == 0:  # a small first chunk: news soon
                    one.flush(final=False)
                    if progress is not None:
                        progress(ImportProgress(s.id, one.read, one.appended, False))
            result = one.finish()
            if progress is not None:
                progress(ImportProgress(s.id, one.read, result.appended, True))
            results.append(result)
    return results


def _repeat(tx: CheckedStream, s: StreamedSession, first: str | None, chunk: int) -> None:
    """A session seen already in this import: skipped when its events are the same (a
    main file and its copy beside a sub-agent's), refused when they differ."""
    stored = _Stored(tx, s.id, chunk)
    for pending, _line in s.events:
        ev = stored.next()
        if ev is None or not _same(ev, pending) or (pending.at is not None and pending.at != ev.at):
            break
    else:
        if stored.next() is None:
            return
    raise ValidationError(
        f"session {s.id!r} appears twice with different events"
        f"{_origin(first)}{_origin(s.file)}; nothing was imported",
        field="session",
    )


def import_sessions(
    store: Store, sessions: Iterable[ImportedSession], *, authority: Authority = "app"
) -> list[ImportResult]:
    """Import ``sessions`` (read whole by a loader) in one transaction, through the
    timeline writer's rules (long results saved as blobs first): :func:`import_stream`
    of them."""
    return import_stream(store, _streamed(sessions), authority=authority)


def _streamed(sessions: Iterable[ImportedSession]) -> Iterator[StreamedSession]:
    for imported in sessions:
        yield StreamedSession.of(imported)
