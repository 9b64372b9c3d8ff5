"""Sessions read as they are imported: a long export is never held whole.

Why: ``ctxline import`` of a 20,000-step export (60,000 events) read the whole file,
built every event, checked them all and only then wrote anything — 34 s of silence and
every event in memory at once. :func:`stream_tree` yields :class:`StreamedSession`
values whose events are read from the file as they are consumed, so the importer
(:func:`~ctxline.importers.ingest.import_stream`) checks and appends them a chunk at a
time inside one transaction and can say how far it got.

ctxline's own JSONL (the ``events`` format, what ``ctxline export`` writes) streams line
by line, with every rule of :func:`~ctxline.importers.events.load_events`; the other
formats are one JSON document (or, for Claude Code, a file whose records refer back and
forth), read whole by their loader as before and handed on as streamed sessions. Errors
are the loaders' own :class:`~ctxline.errors.ValidationError`, naming the file and line
— raised when the reader reaches the line, which may be after earlier events were
appended (the import's transaction then leaves nothing).

    for session in stream_tree(Path("export.jsonl")):
        for pending, line in session.events:
            ...
        meta = session.meta()   # complete once the events are read
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from ctxline.errors import ValidationError
from ctxline.importers import TRAJECTORY_SUFFIXES, _common, _jsonl_format, detect_format, load
from ctxline.importers._common import (
    ImportedSession,
    SessionBuilder,
    SourceFile,
    parse_json,
)
from ctxline.importers.events import HEADER_KIND, add_event, header, stem_meta
from ctxline.record.events import JsonValue, Pending
from ctxline.text import decode_bytes

__all__ = ["Located", "StreamedSession", "read_ahead", "stream_file", "stream_tree"]

Located = tuple[Pending, int | None]
"""An event and the file line it came from (None where the format has no lines)."""


@dataclass(frozen=True, slots=True)
class StreamedSession:
    """One session of a file: its id, its events as they are read, and its meta.

    ``events`` can be iterated once; ``meta()`` is the importer's meta (format, file,
    event counts), complete once ``events`` is exhausted; ``stored_meta`` is the meta to
    store when it is known before the events (an export's header carries the session's
    own), else None (the importer's meta is stored, once it is complete).
    """

    id: str
    events: Iterator[Located]
    meta: Callable[[], dict[str, JsonValue]]
    stored_meta: dict[str, JsonValue] | None

    @property
    def file(self) -> str | None:
        """The file's name, as errors and the meta name it."""
        file = self.meta().get("file")
        return file if isinstance(file, str) else None

    @staticmethod
    def of(imported: ImportedSession) -> StreamedSession:
        """A session a loader read whole, handed on event by event."""
        lines = imported.lines
        located = ((p, lines[i] if i < len(lines) else None) for i, p in enumerate(imported.events))
        restored = restored_meta(imported.meta)
        stored = imported.meta if restored is None else restored  # known before the events
        return StreamedSession(imported.id, located, lambda: imported.meta, stored)


def restored_meta(meta: dict[str, JsonValue]) -> dict[str, JsonValue] | None:
    """An export header's session meta, stored as is (without this, export → import →
    export would nest the meta one level deeper each time); None for any other session."""
    restored = meta.get("session_meta")
    if meta.get("format") == "events" and isinstance(restored, dict):
        return restored
    return None


# --- ctxline's own JSONL, line by line ----------------------------------------------


class _Lines:
    """The non-blank lines of a JSONL file as ``(number, object)``, one pushed back at most.

    The same reading as :meth:`SourceFile.lines`: UTF-8 with replacement, a leading BOM
    dropped, lines split at ``\\n`` only, blank lines (``str.strip``) skipped."""

    def __init__(self, path: Path, handle: IO[bytes]) -> None:
        self.path = path
        self._handle = handle
        self._number = 0
        self._back: tuple[int, dict[str, Any]] | None = None

    def push(self, item: tuple[int, dict[str, Any]]) -> None:
        self._back = item

    def next(self) -> tuple[int, dict[str, Any]] | None:
        if self._back is not None:
            item, self._back = self._back, None
            return item
        for raw in self._handle:
            self._number += 1
            text = decode_bytes(raw)
            del raw
            if self._number == 1 and text.startswith("\ufeff"):
                text = text[1:]
            if text.endswith("\n"):
                text = text[:-1]
            if not text.strip():
                continue
            value = parse_json(text, line=self._number)
            if not isinstance(value, dict):
                raise ValidationError(
                    f"expected a JSON object, got {type(value).__name__}", line=self._number
                )
            return self._number, value
        return None


def _open(path: Path) -> IO[bytes]:
    try:
        size = path.stat().st_size
        limit = _common.MAX_FILE_BYTES  # read here: a test lowers it
        if size > limit:
            raise ValidationError(
                f"the file is {size:,} bytes; ctxline reads at most {limit:,} bytes"
                " per file (split it)"
            )
        return path.open("rb")
    except OSError as exc:
        raise ValidationError(f"cannot read the file: {exc.strerror or exc}") from None


class _EventsSession:
    """The events of one session of an ``events`` file, read from the shared lines."""

    def __init__(self, lines: _Lines, session: str, meta: dict[str, JsonValue], name: str) -> None:
        self._lines = lines
        self._meta = meta
        self._name = name
        self.builder = SessionBuilder(session)
        self.done = False

    def events(self) -> Iterator[Located]:
        ids: set[str] = set()
        builder = self.builder
        while (item := self._lines.next()) is not None:
            line, obj = item
            if obj.get("kind") == HEADER_KIND:
                self._lines.push(item)
                break
            add_event(builder, ids, obj, line)
            yield builder.events.pop(), line
        self.done = True

    def meta(self) -> dict[str, JsonValue]:
        return self.builder.final_meta({"format": "events", "file": self._name, **self._meta})


def _events_sessions(path: Path) -> Iterator[StreamedSession]:
    """The sessions of an ``events`` file, each read as the one before it is done."""
    stem = SourceFile.stem_of(path)
    with _open(path) as handle:
        lines = _Lines(path, handle)
        seen: set[tuple[str, JsonValue]] = set()
        item = lines.next()
        first = True
        while item is not None or first:
            if item is not None and item[1].get("kind") == HEADER_KIND:
                line, obj = item
                session, meta = header(obj, line)
                key = (session, meta["timeline"])
                if key in seen:
                    raise ValidationError(
                        f"session {session!r} timeline {meta['timeline']!r} appears twice",
                        line=line,
                    )
                seen.add(key)
            else:  # events before any header: the file's own session
                if item is not None:
                    lines.push(item)
                session, meta = stem, stem_meta()
                seen.add((stem, "main"))
            first = False
            one = _EventsSession(lines, session, meta, path.name)
            events = one.events()
            yield StreamedSession(
                one.builder.id, events, one.meta, restored_meta({"format": "events", **meta})
            )
            for _ in events:  # whatever the importer left unread is still checked
                pass
            item = lines.next()


def _located(path: Path, fmt: str, items: Iterator[Any]) -> Iterator[Any]:
    """``items``, with each error located in ``path`` as :func:`load` locates it."""
    try:
        yield from items
    except ValidationError as exc:
        raise exc if exc.source else exc.located(source=str(path)) from None
    except (KeyError, TypeError, AttributeError, IndexError, RecursionError) as exc:
        raise ValidationError(
            f"unexpected structure for format {fmt}: {type(exc).__name__}: {exc}",
            source=str(path),
        ) from exc


def _streamed_events(path: Path) -> Iterator[StreamedSession]:
    for session in _located(path, "events", _events_sessions(path)):
        yield StreamedSession(
            session.id,
            _located(path, "events", session.events),
            session.meta,
            session.stored_meta,
        )


# --- which files stream -------------------------------------------------------------

_HEAD_LINES = 50


def sniff_events(path: Path) -> bool:
    """Whether auto-detection would read ``path`` as ``events`` JSONL, told from its first
    lines only; False when that needs the whole file (then :func:`load` decides).

    It is ``events`` exactly when the first non-blank line is a complete JSON object
    (so the whole file is one document only if that line is all of it, and then the
    same object decides) and :func:`~ctxline.importers._jsonl_format` of the first
    records says so."""
    try:
        with path.open("rb") as handle:
            head: list[str] = []
            for raw in handle:
                text = decode_bytes(raw)
                if not head and text.startswith("\ufeff"):
                    text = text[1:]
                if text.strip():
                    head.append(text.rstrip("\n"))
                    if len(head) >= _HEAD_LINES + 1:
                        break
    except OSError:
        return False
    if not head or not head[0].lstrip().startswith("{"):
        return False
    try:
        parse_json(head[0], line=1)
    except ValidationError:
        return False
    return _jsonl_format(head) == "events"


def stream_file(path: Path, format: str = "auto") -> Iterator[StreamedSession]:
    """The sessions of one file: ``events`` JSONL streamed, any other format loaded whole."""
    path = Path(path)
    if format == "events" or (format == "auto" and sniff_events(path)):
        yield from _streamed_events(path)
        return
    for imported in load(path, format):
        yield StreamedSession.of(imported)


def stream_tree(
    path: Path,
    format: str = "auto",
    *,
    skipped: Callable[[Path, ValidationError], None] | None = None,
) -> Iterator[StreamedSession]:
    """:func:`~ctxline.importers.load_tree`, streamed: a file, or every trajectory file
    under a folder (shallower first; with ``format="auto"``, a file that is not a
    trajectory goes to ``skipped``). A session repeated across files is yielded again:
    the importer skips a repeat with the same events and refuses one that differs."""
    path = Path(path)
    if not path.exists():
        raise ValidationError("no such file or folder", source=str(path))
    if path.is_file():
        yield from stream_file(path, format)
        return
    files: Iterable[Path] = sorted(
        (p for p in path.rglob("*") if p.is_file() and p.suffix in TRAJECTORY_SUFFIXES),
        key=lambda p: (len(p.relative_to(path).parts), str(p)),
    )
    for file in files:
        fmt = format
        if format == "auto":
            if sniff_events(file):
                fmt = "events"
            else:
                try:
                    fmt = detect_format(file)
                except ValidationError as exc:
                    if skipped is not None:
                        skipped(file, exc)
                    continue
        yield from stream_file(file, fmt)


def read_ahead(sessions: Iterable[StreamedSession], most: int) -> Iterator[StreamedSession]:
    """``sessions``, with their first ``most`` events read (and checked, by whatever wraps
    them) before this returns: a small file is read whole before the store is opened, so a
    bad line in it creates no database (past ``most`` events, a new database may be left
    empty — the import's transaction never leaves events behind)."""
    source = iter(sessions)
    ahead: list[StreamedSession] = []
    count = 0
    for s in source:
        first = list(itertools.islice(s.events, most - count))
        count += len(first)
        ahead.append(StreamedSession(s.id, itertools.chain(first, s.events), s.meta, s.stored_meta))
        if count >= most:
            break
    return itertools.chain(ahead, source)
