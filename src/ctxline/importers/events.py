"""ctxline's own canonical JSONL (what ``ctxline export`` writes) → sessions.

Why: this is the lossless round trip. Each line is one event in the canonical JSON
form of :mod:`ctxline.record.events`, validated by :func:`~ctxline.record.events.pending_from_json`,
which keeps a client ``id`` and an ``at`` time when the line has them (stored fields
such as ``seq`` are ignored). Lines without an id get ``<session>#<n>``, so importing
the same file twice appends nothing new.

A header line ``{"kind": "ctxline.session", "session": ID, "timeline": "main",
"version": 1}`` names the session; without one the session is the file stem. A file
may hold several sessions, each starting with its header. Any malformed line fails
the whole load with an error naming the line — nothing is returned partially::

    {"kind": "ctxline.session", "session": "demo", "timeline": "main", "version": 1}
    {"kind": "user.message", "text": "Help me cancel my plan"}
    {"kind": "assistant.message", "text": "", "tool_calls": [{"id": "c1", "name": "lookup", "arguments": {}}]}
    {"kind": "tool.result", "call_id": "c1", "content": "plan: pro"}
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ctxline.errors import ValidationError
from ctxline.importers._common import ImportedSession, SessionBuilder, SourceFile, opt_int, opt_str
from ctxline.record.codec import CANONICAL_VERSION
from ctxline.record.events import JsonValue
from ctxline.record.parse import pending_from_json

__all__ = ["HEADER_KIND", "header", "load_events", "stem_meta"]

HEADER_KIND = "ctxline.session"


def stem_meta() -> dict[str, JsonValue]:
    """The meta of a session without a header (named after the file)."""
    return {"timeline": "main", "version": CANONICAL_VERSION}


def header(obj: dict[str, Any], line: int) -> tuple[str, dict[str, JsonValue]]:
    """A session header line: the session id and its meta (``session_meta``: the header's
    ``meta``, the session's own, restored as is)."""
    session = opt_str(obj, "session", line=line)
    if not session or not session.strip():
        raise ValidationError(
            "the session header needs a non-empty session id", field="session", line=line
        )
    timeline = opt_str(obj, "timeline", line=line) or "main"
    version = opt_int(obj, "version", line=line)
    if version is not None and version < 1:
        raise ValidationError(f"unsupported version {version}", field="version", line=line)
    meta: dict[str, JsonValue] = {"timeline": timeline, "version": version or CANONICAL_VERSION}
    extra = obj.get("meta")
    if extra is not None:
        if not isinstance(extra, dict):
            raise ValidationError("expected an object", field="meta", line=line)
        meta["session_meta"] = extra
    return session, meta


def add_event(builder: SessionBuilder, ids: set[str], obj: dict[str, Any], line: int) -> None:
    """One event line into ``builder``; an id seen before in this session is refused."""
    pending = pending_from_json(obj, line=line)
    if pending.id is not None:
        if pending.id in ids:
            raise ValidationError(f"event id {pending.id!r} appears twice", field="id", line=line)
        ids.add(pending.id)
    builder.add(pending.event, id=pending.id, at=pending.at)


def load_events(src: SourceFile) -> list[ImportedSession]:
    sessions: list[ImportedSession] = []
    seen: set[tuple[str, JsonValue]] = set()
    builder: SessionBuilder | None = None
    meta: dict[str, JsonValue] = {}
    ids: set[str] = set()
    lines: list[int] = []

    def close() -> None:
        if builder is not None:
            session = builder.finish({"format": "events", "file": src.name, **meta})
            sessions.append(replace(session, lines=tuple(lines)))

    for line, obj in src.lines():
        if obj.get("kind") == HEADER_KIND:
            close()
            session, meta = header(obj, line)
            key = (session, meta["timeline"])
            if key in seen:
                raise ValidationError(
                    f"session {session!r} timeline {meta['timeline']!r} appears twice", line=line
                )
            seen.add(key)
            builder = SessionBuilder(session)
            ids = set()
            lines = []
            continue
        if builder is None:
            builder = SessionBuilder(src.stem)
            seen.add((src.stem, "main"))
            meta = stem_meta()
        add_event(builder, ids, obj, line)
        lines.append(line)
    if builder is None:
        builder = SessionBuilder(src.stem)
        meta = stem_meta()
    close()
    return sessions
