"""How the SQLite store writes, reads and checks events: rows, hash links, large bodies.

Why here: the store (:mod:`ctxline.record.store.sqlite`) holds the connection and the
locking; these functions are what happens inside one transaction, shared by appends,
reads, ``verify_chain``, the migration that computes the chain of an older database,
and ``ctxline doctor``.

* Rows: ``events`` holds the canonical JSON body; ``chain`` holds each event's body
  digest and hash link (:mod:`ctxline.record.store.chain`); ``timelines.link`` is the
  link of the head (for a fork without events of its own: its parent's link at the
  fork point).
* Large bodies (an event holding a string over ``PIECE_CHARS``): inserted as
  ``zeroblob(size)`` and written through SQLite's incremental blob I/O a piece at a
  time, so neither Python nor SQLite ever holds the whole body; such a body is stored
  with type BLOB (the same UTF-8 bytes; ``CAST(body AS TEXT)`` reads it as text).
* Reads check every returned row: seqs gap-free, each link recomputed from the
  previous link and the row, the last link against the head's; a row that fails is an
  :class:`~ctxline.errors.IntegrityError` naming its session, timeline and seq.

    rows = read_events(conn, "s", visible_segments(conn, "s", "main"), 0, None, "db")
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass

from ctxline.errors import IntegrityError, UnknownSession, UnknownTimeline, ValidationError
from ctxline.record.codec import format_at, parse_at
from ctxline.record.events import StoredEvent
from ctxline.record.store.chain import (
    GENESIS,
    PIECE_CHARS,
    Body,
    ChainCheck,
    chain_link,
)
from ctxline.record.store.checks import Existing, call_ids
from ctxline.record.store.rows import Segment, body_digest, parse_body

__all__ = [
    "Segment",
    "TimelineRow",
    "body_digest",
    "existing_ids",
    "insert_events",
    "link_at",
    "parse_body",
    "read_events",
    "timeline_row",
    "verify_segments",
    "visible_segments",
]

MAX_PROBLEMS = 20


@dataclass(frozen=True, slots=True)
class TimelineRow:
    parent: str | None
    fork_seq: int | None
    head: int
    link: str | None


def timeline_row(
    conn: sqlite3.Connection, session: str, timeline: str, chained: bool
) -> TimelineRow:
    link = "link" if chained else "NULL"
    row = conn.execute(
        f"SELECT parent, fork_seq, head, {link} FROM timelines WHERE session = ? AND name = ?",
        (session, timeline),
    ).fetchone()
    if row is None:
        if conn.execute("SELECT 1 FROM sessions WHERE id = ?", (session,)).fetchone() is None:
            raise UnknownSession(session)
        raise UnknownTimeline(session, timeline)
    return TimelineRow(row[0], row[1], row[2], row[3])


def visible_segments(
    conn: sqlite3.Connection, session: str, timeline: str, chained: bool
) -> tuple[list[Segment], TimelineRow]:
    """The segments ``timeline`` sees, root ancestor first, and its own row."""
    own = timeline_row(conn, session, timeline, chained)
    segments = [Segment(timeline, own.fork_seq or 0, own.head)]
    row = own
    seen = {timeline}
    upto_bound = own.head
    while row.parent is not None:
        if row.parent in seen:
            raise IntegrityError(
                f"timeline {session}/{timeline}: its ancestry loops ({row.parent})"
            )
        seen.add(row.parent)
        upto = min(upto_bound, row.fork_seq or 0)  # never above a nearer fork point
        upto_bound = upto
        name = row.parent
        row = timeline_row(conn, session, name, chained)
        segments.append(Segment(name, row.fork_seq or 0, upto))
    segments.reverse()
    return segments, own


def link_at(conn: sqlite3.Connection, session: str, segments: Sequence[Segment], seq: int) -> str:
    """The stored link of visible event ``seq`` (GENESIS for 0)."""
    if seq == 0:
        return GENESIS
    for seg in segments:
        if seg.base < seq <= seg.upto:
            row = conn.execute(
                "SELECT link FROM chain WHERE session = ? AND timeline = ? AND seq = ?",
                (session, seg.name, seq),
            ).fetchone()
            if row is None:
                raise IntegrityError(
                    f"{session}/{seg.name} seq {seq} has no hash link; run ctxline doctor"
                )
            return str(row[0])
    raise IntegrityError(
        f"{session}: seq {seq} is outside the visible timeline; run ctxline doctor"
    )


def _stored_at(at: object, where: str) -> str:
    if not isinstance(at, str):
        raise IntegrityError(f"{where}: the stored time is not text; run ctxline doctor")
    return at


def read_events(
    conn: sqlite3.Connection,
    session: str,
    timeline: str,
    after_seq: int,
    limit: int | None,
    chained: bool,
) -> list[StoredEvent]:
    """The visible events after ``after_seq``, every row checked (see the module doc)."""
    segments, own = visible_segments(conn, session, timeline, chained)
    out: list[StoredEvent] = []
    last = after_seq
    prev = link_at(conn, session, segments, min(after_seq, own.head)) if chained else ""
    for seg in segments:
        lo = max(seg.base, after_seq)
        want = None if limit is None else limit - len(out)
        if lo >= seg.upto or want == 0:
            continue
        join = (
            "c.link FROM events e LEFT JOIN chain c ON c.session = e.session"
            " AND c.timeline = e.timeline AND c.seq = e.seq"
            if chained
            else "NULL FROM events e"
        )
        rows = conn.execute(
            f"SELECT e.seq, e.id, e.at, e.body, {join}"
            " WHERE e.session = ? AND e.timeline = ? AND e.seq > ? AND e.seq <= ?"
            " ORDER BY e.seq LIMIT ?",
            (session, seg.name, lo, seg.upto, -1 if want is None else want),
        ).fetchall()
        rows.reverse()
        while rows:
            seq, eid, at, body, link = rows.pop()
            where = f"{session}/{seg.name} seq {seq}"
            if seq != last + 1:
                raise IntegrityError(
                    f"{session}/{seg.name}: seq {last + 1} is missing (the next stored event is"
                    f" seq {seq}); run ctxline doctor"
                )
            at = _stored_at(at, where)
            if chained:
                if link is None:
                    raise IntegrityError(f"{where} has no hash link; run ctxline doctor")
                if chain_link(prev, seq, eid, at, body_digest(body)) != link:
                    raise IntegrityError(
                        f"{where}: the stored event does not match its hash link (its body,"
                        " seq, id or time was changed outside ctxline); run ctxline doctor"
                    )
                prev = link
            box = [body]
            del body
            event = parse_body(box, where)
            try:
                when = parse_at(at)
            except ValidationError:
                raise IntegrityError(
                    f"{where}: the stored time {at[:40]!r} is not a time"
                ) from None
            out.append(StoredEvent(seq, eid, when, event))
            last = seq
        if limit is not None and len(out) >= limit:
            break
        if last < seg.upto:
            raise IntegrityError(
                f"{session}/{seg.name}: events {last + 1}-{seg.upto} are missing (the head is"
                f" {seg.upto}); run ctxline doctor"
            )
    if chained and last == own.head and own.link is not None and prev != own.link:
        raise IntegrityError(
            f"{session}/{timeline}: the head link does not match the last event (seq {last});"
            " events were removed or rewritten outside ctxline; run ctxline doctor"
        )
    return out


def existing_ids(conn: sqlite3.Connection, ids: Sequence[str]) -> dict[str, Existing]:
    """The given client ids that are stored already: seq, time and body digest."""
    found: dict[str, Existing] = {}
    for start in range(0, len(ids), 500):
        chunk = list(ids[start : start + 500])
        marks = ",".join("?" * len(chunk))
        for eid, seq, at, digest, sess, tl in conn.execute(
            f"SELECT e.id, e.seq, e.at, c.digest, e.session, e.timeline FROM events e LEFT JOIN chain c"
            " ON c.session = e.session AND c.timeline = e.timeline AND c.seq = e.seq"
            f" WHERE e.id IN ({marks})",
            chunk,
        ):
            try:
                when = parse_at(at)
            except ValidationError:
                raise IntegrityError(f"event {eid!r}: its stored time is not a time") from None
            found[eid] = Existing(seq, when, digest or "", sess, tl)
    return found


def insert_events(
    conn: sqlite3.Connection,
    session: str,
    timeline: str,
    prev: str,
    stored: Sequence[StoredEvent],
    bodies: Sequence[Body],
) -> str:
    """Insert events, their links and call ids; returns the new head link."""
    links = []
    small = []
    for s, body in zip(stored, bodies, strict=True):
        at = format_at(s.at)
        prev = chain_link(prev, s.seq, s.id, at, body.digest)
        links.append((session, timeline, s.seq, body.digest, prev))
        if body.data is not None:
            small.append((session, timeline, s.seq, s.id, at, s.kind, body.text))
            continue
        cur = conn.execute(
            "INSERT INTO events(session, timeline, seq, id, at, kind, body)"
            " VALUES (?, ?, ?, ?, ?, ?, zeroblob(?))",
            (session, timeline, s.seq, s.id, at, s.kind, body.size),
        )
        rowid = cur.lastrowid
        assert rowid is not None
        with conn.blobopen("events", "body", rowid) as blob:
            for piece in body.pieces():
                blob.write(piece)
    conn.executemany(
        "INSERT INTO events(session, timeline, seq, id, at, kind, body) VALUES (?, ?, ?, ?, ?, ?, ?)",
        small,
    )
    conn.executemany(
        "INSERT INTO chain(session, timeline, seq, digest, link) VALUES (?, ?, ?, ?, ?)", links
    )
    conn.executemany(
        "INSERT INTO tool_calls(session, timeline, call_id, seq) VALUES (?, ?, ?, ?)",
        [(session, timeline, cid, s.seq) for s in stored for cid in call_ids(s.event)],
    )
    return prev


def _streamed_digest(conn: sqlite3.Connection, rowid: int) -> str:
    h = hashlib.sha256()
    with conn.blobopen("events", "body", rowid, readonly=True) as blob:
        while piece := blob.read(PIECE_CHARS):
            h.update(piece)
    return "sha256:" + h.hexdigest()


def verify_segments(
    conn: sqlite3.Connection,
    session: str,
    timeline: str,
    segments: Sequence[Segment],
    own: TimelineRow,
    start: str = GENESIS,
) -> ChainCheck:
    """The links of the events of ``segments`` recomputed, from ``start`` (the link
    before the first segment's events); large bodies are hashed a piece at a time."""
    problems: list[str] = []
    prev = start
    last = segments[0].base if segments else 0
    checked = 0
    for seg in segments:
        rows = conn.execute(
            "SELECT e.seq, e.id, e.at, c.digest, c.link, e.rowid,"
            " CASE WHEN typeof(e.body) = 'blob' THEN NULL ELSE e.body END"
            " FROM events e LEFT JOIN chain c ON c.session = e.session"
            " AND c.timeline = e.timeline AND c.seq = e.seq"
            " WHERE e.session = ? AND e.timeline = ? AND e.seq > ? AND e.seq <= ? ORDER BY e.seq",
            (session, seg.name, seg.base, seg.upto),
        )
        for seq, eid, at, digest, link, rowid, body in rows:
            where = f"{session}/{seg.name} seq {seq}"
            checked += 1
            if seq != last + 1:
                problems.append(f"{session}/{seg.name}: seq {last + 1}-{seq - 1} missing")
            have = body_digest(body) if body is not None else _streamed_digest(conn, rowid)
            del body
            if link is None:
                problems.append(f"{where} has no hash link")
            elif not isinstance(at, str) or chain_link(prev, seq, eid, at, have) != link:
                what = (
                    "its body" if digest is not None and digest != have else "its seq, id or time"
                )
                problems.append(
                    f"{where}: the stored event does not match its hash link ({what} was"
                    " changed outside ctxline)"
                )
            prev = link if isinstance(link, str) else prev
            last = seq
            if len(problems) > MAX_PROBLEMS:
                break
        if last < seg.upto and len(problems) <= MAX_PROBLEMS:
            problems.append(f"{session}/{seg.name}: events {last + 1}-{seg.upto} are missing")
            last = seg.upto
    if own.link is not None and prev != own.link:
        problems.append(
            f"{session}/{timeline}: the head link does not match the last event (seq {last}):"
            " events were removed or rewritten outside ctxline"
        )
    return ChainCheck(session, timeline, own.head, own.link or prev, checked, tuple(problems))
