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
from functools import partial

from ctxline.errors import IntegrityError, UnknownSession, UnknownTimeline, ValidationError
from ctxline.record.codec import format_at, parse_at
from ctxline.record.events import Event, StoredEvent
from ctxline.record.store.chain import (
    GENESIS,
    PIECE_CHARS,
    Body,
    ChainCheck,
    chain_link,
)
from ctxline.record.store.checks import Existing, call_ids
from ctxline.record.store.external import resolved
from ctxline.record.store.rows import Segment, body_digest, parse_body, text_of
from ctxline.record.store.sql_events import (
    ChainWalk,
    Row,
    Timeline,
    read_checked,
    walk_segments,
)
from ctxline.record.store.sql_events import link_at as sql_link_at

__all__ = [
    "Segment",
    "TimelineRow",
    "blob_text",
    "body_digest",
    "existing_ids",
    "has_external",
    "has_redactions",
    "insert_events",
    "link_at",
    "parse_body",
    "read_events",
    "timeline_row",
    "verify_segments",
    "visible_segments",
]

TimelineRow = Timeline


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
    row_of = lambda name: timeline_row(conn, session, name, chained)  # noqa: E731
    return walk_segments(session, timeline, own, row_of, True), own


def link_at(conn: sqlite3.Connection, session: str, segments: Sequence[Segment], seq: int) -> str:
    """The stored link of visible event ``seq`` (GENESIS for 0)."""
    return sql_link_at(conn, "?", session, segments, seq)


def read_events(
    conn: sqlite3.Connection,
    session: str,
    timeline: str,
    after_seq: int,
    limit: int | None,
    chained: bool,
    redactable: bool = False,
    external: bool = False,
) -> list[StoredEvent]:
    """The visible events after ``after_seq``, every row checked (see the module doc);
    ``redactable``: the schema has ``chain.redacted`` (version 6); ``external``: it has
    ``chain.external`` (version 7)."""
    segments, own = visible_segments(conn, session, timeline, chained)
    prev = link_at(conn, session, segments, min(after_seq, own.head)) if chained else ""
    red = "c.digest, c.redacted" if redactable else "NULL, NULL"
    ext = "c.external" if external else "NULL"
    join = (
        f"c.link, {red}, {ext} FROM events e LEFT JOIN chain c ON c.session = e.session"
        " AND c.timeline = e.timeline AND c.seq = e.seq"
        if chained
        else "NULL, NULL, NULL, NULL FROM events e"
    )

    def fetch(name: str, lo: int, upto: int, want: int | None) -> list[Row]:
        return conn.execute(
            f"SELECT e.seq, e.id, e.at, e.body, {join}"
            " WHERE e.session = ? AND e.timeline = ? AND e.seq > ? AND e.seq <= ?"
            " ORDER BY e.seq LIMIT ?",
            (session, name, lo, upto, -1 if want is None else want),
        ).fetchall()

    return read_checked(
        session,
        timeline,
        after_seq,
        limit,
        chained,
        segments,
        own,
        prev,
        fetch,
        _as_read,
        partial(blob_text, conn),
    )


def blob_text(conn: sqlite3.Connection, ref: str, where: str) -> str:
    """The content of an external row (``store.external``), not checked against its handle
    here: the whole event's digest, checked against the row's link, covers it."""
    row = conn.execute("SELECT rowid, typeof(data) FROM blobs WHERE ref = ?", (ref,)).fetchone()
    if row is None or row[1] != "blob":
        raise IntegrityError(
            f"{where}: its content blob {ref[:80]} is missing or not bytes; run ctxline doctor"
        )
    with conn.blobopen("blobs", "data", row[0], readonly=True) as blob:
        data = blob.read()
    shrink_after_read(conn, len(data))
    return text_of(data, where)


SHRINK_BYTES = 8 << 20
"""A blob read at least this large gives SQLite's page cache back to the OS after it."""


def shrink_after_read(conn: sqlite3.Connection, size: int) -> None:
    """``PRAGMA shrink_memory`` after a large read: the read filled the connection's page
    cache (about 2 MB) with pages of a blob nothing reads again soon, and a process that
    holds a 50 MB result must stay under 3x of it while it builds its tokenizer (issue 25)."""
    if size >= SHRINK_BYTES:
        conn.execute("PRAGMA shrink_memory")


def _as_read(name: str, row: Row) -> Row:
    return row


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
        links.append((session, timeline, s.seq, body.digest, prev, body.external))
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
        "INSERT INTO chain(session, timeline, seq, digest, link, external)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        links,
    )
    conn.executemany(
        "INSERT INTO tool_calls(session, timeline, call_id, seq) VALUES (?, ?, ?, ?)",
        [(session, timeline, cid, s.seq) for s in stored for cid in call_ids(s.event)],
    )
    return prev


def has_external(conn: sqlite3.Connection) -> bool:
    """Whether the schema has ``chain.external`` (version 7, ``external``)."""
    return (
        conn.execute("SELECT 1 FROM pragma_table_info('chain') WHERE name = 'external'").fetchone()
        is not None
    )


def has_redactions(conn: sqlite3.Connection) -> bool:
    """Whether the schema has ``chain.redacted`` (version 6, ``redaction``)."""
    return (
        conn.execute("SELECT 1 FROM pragma_table_info('chain') WHERE name = 'redacted'").fetchone()
        is not None
    )


def _parsed(conn: sqlite3.Connection, rowid: int, where: str) -> Event:
    (body,) = conn.execute(
        "SELECT CAST(body AS TEXT) FROM events WHERE rowid = ?", (rowid,)
    ).fetchone()
    return parse_body([body], where)


def _external_event(conn: sqlite3.Connection, rowid: int, ref: str, where: str) -> Event:
    return resolved(_parsed(conn, rowid, where), partial(blob_text, conn, ref, where), where)


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
    redactable: bool | None = None,
    external: bool | None = None,
) -> ChainCheck:
    """The links of the events of ``segments`` recomputed, from ``start`` (the link
    before the first segment's events); large bodies are hashed a piece at a time, an
    external row's whole event with its content put back. ``redactable``, ``external``:
    the schema has ``chain.redacted``, ``chain.external`` (None: look)."""
    if redactable is None:
        redactable = has_redactions(conn)
    if external is None:
        external = has_external(conn)
    walk = ChainWalk(session, start, segments[0].base if segments else 0)
    red = "c.redacted" if redactable else "NULL"
    ext = "c.external" if external else "NULL"
    for seg in segments:
        rows = conn.execute(
            f"SELECT e.seq, e.id, e.at, c.digest, c.link, e.rowid, {red}, {ext},"
            " CASE WHEN typeof(e.body) = 'blob' THEN NULL ELSE e.body END"
            " FROM events e LEFT JOIN chain c ON c.session = e.session"
            " AND c.timeline = e.timeline AND c.seq = e.seq"
            " WHERE e.session = ? AND e.timeline = ? AND e.seq > ? AND e.seq <= ? ORDER BY e.seq",
            (session, seg.name, seg.base, seg.upto),
        )
        for seq, eid, at, digest, link, rowid, redacted, ext_ref, body in rows:
            if ext_ref is not None:
                where = f"{session}/{seg.name} seq {seq}"
                have = walk.whole(partial(_external_event, conn, rowid, str(ext_ref), where))
            else:
                have = body_digest(body) if body is not None else _streamed_digest(conn, rowid)
            form = None
            if redacted is not None:
                where = f"{session}/{seg.name} seq {seq}"
                form = lambda r=rowid, w=where: _parsed(conn, r, w)  # noqa: E731
            del body
            walk.row(seg.name, seq, eid, at, digest, link, have, redacted, form)
            if walk.full:
                break
        walk.end(seg)
    return walk.result(timeline, own)
