"""How the PostgreSQL store writes, reads and checks events inside one transaction.

The same rules as SQLite (:mod:`ctxline.record.store.sqlite_events`): ``chain`` holds
each event's digest and hash link, ``timelines.link`` the head's; reads check every
returned row and raise :class:`~ctxline.errors.IntegrityError` naming the seq.

Large bodies (an event holding a string over ``PIECE_CHARS``) go to the server with
``COPY … FROM STDIN (FORMAT BINARY)``, a piece at a time: a parameter would cost the
encoded text, psycopg's copy of it and libpq's on top of the caller's string. Text in
binary COPY is the raw UTF-8 (the connection's encoding must be UTF-8; otherwise the
rows go as parameters).

    rows = read_events(conn, "s", "main", 0, None, chained=True)
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import psycopg

from ctxline.errors import IntegrityError, UnknownSession, UnknownTimeline, ValidationError
from ctxline.record.codec import format_at, parse_at
from ctxline.record.events import Event, StoredEvent
from ctxline.record.store.chain import GENESIS, Body, ChainCheck, chain_link
from ctxline.record.store.checks import Existing, call_ids
from ctxline.record.store.external import resolved
from ctxline.record.store.rows import Segment, parse_body, text_of
from ctxline.record.store.sql_events import (
    ChainWalk,
    Row,
    Timeline,
    read_checked,
    walk_segments,
)
from ctxline.record.store.sql_events import link_at as sql_link_at

__all__ = [
    "PgTimeline",
    "Pieces",
    "blob_text",
    "call_key",
    "copy_rows",
    "existing_ids",
    "fetch_all",
    "has_external",
    "has_redactions",
    "insert_events",
    "large_body",
    "link_at",
    "read_events",
    "verify_segments",
    "visible_segments",
]

Conn = psycopg.Connection[tuple[Any, ...]]
COPY_HEADER = b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0)


def call_key(call_id: str) -> str:
    """A tool call id as stored: backslash and NUL escaped (text cannot hold NUL)."""
    return call_id.replace("\\", "\\\\").replace("\x00", "\\0")


PgTimeline = Timeline


def timeline_row(
    conn: Conn, session: str, timeline: str, chained: bool, *, lock: bool = False
) -> PgTimeline:
    link = "link" if chained else "NULL"
    row = conn.execute(
        f"SELECT parent, fork_seq, head, {link} FROM timelines WHERE session = %s AND name = %s"
        + (" FOR UPDATE" if lock else ""),
        (session, timeline),
    ).fetchone()
    if row is None:
        if conn.execute("SELECT 1 FROM sessions WHERE id = %s", (session,)).fetchone() is None:
            raise UnknownSession(session)
        raise UnknownTimeline(session, timeline)
    return PgTimeline(row[0], None if row[1] is None else int(row[1]), int(row[2]), row[3])


def visible_segments(
    conn: Conn, session: str, timeline: str, chained: bool, *, lock: bool = False
) -> tuple[list[Segment], PgTimeline]:
    own = timeline_row(conn, session, timeline, chained, lock=lock)
    row_of = lambda name: timeline_row(conn, session, name, chained)  # noqa: E731
    return walk_segments(session, timeline, own, row_of, False), own


def link_at(conn: Conn, session: str, segments: Sequence[Segment], seq: int) -> str:
    return sql_link_at(conn, "%s", session, segments, seq)


def read_events(
    conn: Conn,
    session: str,
    timeline: str,
    after_seq: int,
    limit: int | None,
    chained: bool,
    redactable: bool = False,
    external: bool = False,
) -> list[StoredEvent]:
    segments, own = visible_segments(conn, session, timeline, chained)
    prev = link_at(conn, session, segments, min(after_seq, own.head)) if chained else ""
    red = "c.digest, c.redacted" if chained and redactable else "NULL, NULL"
    ext = "c.external" if chained and external else "NULL"
    join = (
        "LEFT JOIN chain c ON c.session = e.session AND c.timeline = e.timeline AND c.seq = e.seq"
        if chained
        else ""
    )

    def fetch(name: str, lo: int, upto: int, want: int | None) -> list[Row]:
        return fetch_all(
            conn,
            f"SELECT e.seq, e.id, e.at, {SMALL_BODY}, {'c.link' if chained else 'NULL'}, {red},"
            f" {ext}"
            f" FROM events e {join}"
            " WHERE e.session = %s AND e.timeline = %s AND e.seq > %s AND e.seq <= %s"
            " ORDER BY e.seq LIMIT %s",
            (LARGE_BODY, session, name, lo, upto, want),
        )

    def fix(name: str, row: Row) -> Row:
        seq, eid, at, body, link, digest, redacted, ext_ref = row
        seq = int(seq)
        if body is None:
            body = large_body(conn, session, name, seq)
        return seq, eid, at, body, link, digest, redacted, ext_ref

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
        fix,
        partial(blob_text, conn),
    )


LARGE_BODY = 8 * 1024 * 1024
"""Bodies over this many bytes are fetched in slices (:func:`large_body`)."""
SMALL_BODY = "CASE WHEN octet_length(e.body) > %s THEN NULL ELSE e.body END"
SLICE_BYTES = 2 * 1024 * 1024
"""Bytes per slice of a large body (a slice may end inside a character: they are joined
before they are decoded)."""


def fetch_all(conn: Conn, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
    """Every row, with the cursor closed at once (its libpq result freed, not at gc)."""
    with conn.cursor() as cur:
        return cur.execute(sql, params).fetchall()


def large_body(conn: Conn, session: str, timeline: str, seq: int) -> str:
    """A body too large for one result, in slices: libpq holds a whole row (twice: its
    read buffer and its result), so a 200 MB body fetched at once would cost 600 MB.

    One statement on a server-side cursor, a slice of its UTF-8 bytes per fetch: the
    body is detoasted once on the server, and a byte offset is found at once, where a
    ``substr`` of characters per statement decompressed and walked the whole prefix each
    time (quadratic: 80 s for 200 MB in 8M-character slices); libpq's buffer stays the
    size of one slice (it kept 64 MB after 32M-character slices, issue 25)."""
    source = (
        "SELECT convert_to(body, 'UTF8') AS b FROM events"
        " WHERE session = %s AND timeline = %s AND seq = %s"
    )
    data = _sliced(conn, source, (session, timeline, seq))
    return (data or bytearray()).decode()


def _sliced(conn: Conn, source: str, params: Sequence[Any]) -> bytearray | None:
    """The bytes of column ``b`` of the one row ``source`` selects, a slice per fetch
    (None: no row)."""
    data: bytearray | None = None
    with conn.transaction(), conn.cursor(name="ctxline_large_body", binary=True) as cur:
        cur.itersize = 1
        cur.execute(
            "SELECT octet_length(s.b), g - 1, substring(s.b FROM g FOR %s) FROM"
            f" ({source} OFFSET 0) s,"
            " generate_series(1, greatest(octet_length(s.b), 1), %s) g ORDER BY g",
            (SLICE_BYTES, *params, SLICE_BYTES),
        )
        for size, at, piece in cur:
            if data is None:
                data = bytearray(size)  # filled in place: no list of slices and its join
            data[at : at + len(piece)] = piece
    return data


def blob_text(conn: Conn, ref: str, where: str) -> str:
    """The content of an external row (``store.external``) in slices, not checked against
    its handle here: the whole event's digest, checked against the row's link, covers it."""
    # an expression, so the server detoasts the value once (a bare column would be
    # decompressed again for every slice)
    data = _sliced(conn, "SELECT data || ''::bytea AS b FROM blobs WHERE ref = %s", (ref,))
    if data is None:
        raise IntegrityError(f"{where}: its content blob {ref[:80]} is missing; run ctxline doctor")
    return text_of(data, where)


def existing_ids(conn: Conn, ids: Sequence[str]) -> dict[str, Existing]:
    if not ids:
        return {}
    rows = conn.execute(
        "SELECT e.id, e.seq, e.at, c.digest, e.session, e.timeline FROM events e LEFT JOIN chain c"
        " ON c.session = e.session AND c.timeline = e.timeline AND c.seq = e.seq"
        " WHERE e.id = ANY(%s)",
        (list(ids),),
    ).fetchall()
    found = {}
    for eid, seq, at, digest, sess, tl in rows:
        try:
            when = parse_at(at)
        except ValidationError:
            raise IntegrityError(f"event {eid!r}: its stored time is not a time") from None
        found[eid] = Existing(int(seq), when, digest or "", sess, tl)
    return found


@dataclass(frozen=True, slots=True)
class Pieces:
    """A large field for :func:`copy_rows` (bytea): its size, and its bytes in pieces."""

    size: int
    source: Callable[[], Iterator[bytes]]

    def pieces(self) -> Iterator[bytes]:
        return self.source()


def _text(value: str) -> bytes:
    data = value.encode()
    return struct.pack(">i", len(data)) + data


def copy_rows(conn: Conn, table: str, columns: str, rows: Sequence[tuple[Any, ...]]) -> None:
    """Rows through binary COPY; a field is text (str), bigint (int), or a :class:`Body`
    (text) or :class:`Pieces` (bytea) sent a piece at a time."""
    with (
        conn.cursor() as cur,
        cur.copy(f"COPY {table} ({columns}) FROM STDIN (FORMAT BINARY)") as cp,
    ):
        cp.write(COPY_HEADER)
        for row in rows:
            head = [struct.pack(">h", len(row))]
            for value in row:
                if isinstance(value, Body | Pieces):
                    cp.write(b"".join(head) + struct.pack(">i", value.size))
                    head = []
                    for piece in value.pieces():
                        cp.write(piece)
                elif isinstance(value, int):
                    head.append(struct.pack(">iq", 8, value))
                else:
                    head.append(_text(value))
            if head:
                cp.write(b"".join(head))
        cp.write(struct.pack(">h", -1))


def insert_events(
    conn: Conn,
    session: str,
    timeline: str,
    prev: str,
    stored: Sequence[StoredEvent],
    bodies: Sequence[Body],
) -> str:
    """Insert events, their links and call ids; returns the new head link."""
    links, small, big = [], [], []
    binary = conn.info.encoding in ("utf-8", "utf8")
    for s, body in zip(stored, bodies, strict=True):
        at = format_at(s.at)
        prev = chain_link(prev, s.seq, s.id, at, body.digest)
        links.append((session, timeline, s.seq, body.digest, prev, body.external))
        if body.data is None and binary:
            big.append((session, timeline, s.seq, s.id, at, s.kind, body))
        else:
            text = body.text if body.data is not None else b"".join(body.pieces()).decode()
            small.append((session, timeline, s.seq, s.id, at, s.kind, text))
    with conn.cursor() as cur:
        if small:
            cur.executemany(
                "INSERT INTO events(session, timeline, seq, id, at, kind, body)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s)",
                small,
            )
        cur.executemany(
            "INSERT INTO chain(session, timeline, seq, digest, link, external)"
            " VALUES (%s, %s, %s, %s, %s, %s)",
            links,
        )
        calls = [(session, timeline, call_key(c), s.seq) for s in stored for c in call_ids(s.event)]
        if calls:
            cur.executemany(
                "INSERT INTO tool_calls(session, timeline, call_id, seq) VALUES (%s, %s, %s, %s)",
                calls,
            )
    if big:
        copy_rows(conn, "events", "session, timeline, seq, id, at, kind, body", big)
    return prev


def verify_segments(
    conn: Conn,
    session: str,
    timeline: str,
    segments: Sequence[Segment],
    own: PgTimeline,
    start: str = GENESIS,
    redactable: bool | None = None,
    external: bool | None = None,
) -> ChainCheck:
    """The links of the events of ``segments`` recomputed from ``start`` (bodies hashed
    by the server: ``sha256`` of their UTF-8, so no body crosses the wire; a redacted
    one is read to check its form, an external one to hash the whole event with its
    content put back). ``redactable``, ``external``: ``chain.redacted``,
    ``chain.external`` exist (None: look)."""
    if redactable is None:
        redactable = has_redactions(conn)
    if external is None:
        external = has_external(conn)
    red = "c.redacted" if redactable else "NULL"
    ext = "c.external" if external else "NULL"
    walk = ChainWalk(session, start, segments[0].base if segments else 0)
    for seg in segments:
        lo = seg.base
        while not walk.full:
            rows = conn.execute(
                f"SELECT e.seq, e.id, e.at, c.digest, c.link, {red}, {ext},"
                " 'sha256:' || encode(sha256(convert_to(e.body, 'UTF8')), 'hex')"
                " FROM events e LEFT JOIN chain c ON c.session = e.session"
                " AND c.timeline = e.timeline AND c.seq = e.seq"
                " WHERE e.session = %s AND e.timeline = %s AND e.seq > %s AND e.seq <= %s"
                " ORDER BY e.seq LIMIT 1000",
                (session, seg.name, lo, seg.upto),
            ).fetchall()
            if not rows:
                break
            for seq, eid, at, digest, link, redacted, ext_ref, have in rows:
                if ext_ref is not None:
                    have = walk.whole(
                        partial(_external_event, conn, session, seg.name, int(seq), str(ext_ref))
                    )
                form = None
                if redacted is not None:
                    where = f"{session}/{seg.name} seq {int(seq)}"
                    form = lambda n=seg.name, q=int(seq), w=where: parse_body(  # noqa: E731
                        [large_body(conn, session, n, q)], w
                    )
                walk.row(seg.name, int(seq), eid, at, digest, link, have, redacted, form)
            lo = walk.last
        walk.end(seg)
    return walk.result(timeline, own)


def _external_event(conn: Conn, session: str, timeline: str, seq: int, ref: str) -> Event:
    where = f"{session}/{timeline} seq {seq}"
    event = parse_body([large_body(conn, session, timeline, seq)], where)
    return resolved(event, partial(blob_text, conn, ref, where), where)


def has_external(conn: Conn) -> bool:
    """Whether the schema has ``chain.external`` (version 7, ``external``)."""
    return (
        conn.execute(
            "SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema()"
            " AND table_name = 'chain' AND column_name = 'external'"
        ).fetchone()
        is not None
    )


def has_redactions(conn: Conn) -> bool:
    """Whether the schema has ``chain.redacted`` (version 6, ``redaction``)."""
    return (
        conn.execute(
            "SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema()"
            " AND table_name = 'chain' AND column_name = 'redacted'"
        ).fetchone()
        is not None
    )


def decode_meta(session: str, text: str) -> dict[str, Any]:
    try:
        meta = json.loads(text)
        if not isinstance(meta, dict):
            raise ValueError("not an object")
        return meta
    except (ValueError, TypeError, RecursionError) as exc:
        raise IntegrityError(
            f"session {session[:80]!r}: its stored meta cannot be read ({exc}); run ctxline doctor"
        ) from None
