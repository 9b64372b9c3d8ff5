"""Schema migrations, recorded in a ``migrations`` table.

Each migration runs once, inside the opening write transaction, and is recorded with
its version, name and time; a database written by a newer ctxline (a version this
build does not know) is refused rather than guessed at. A migration is SQL, or a
Python step when it must read the record (version 2 builds the search index from
the events already stored).

Version 2, ``search``: ``search_docs`` maps a stable integer id to an event (session,
timeline, seq) and ``search_fts`` is a contentless FTS5 table (``content=''``: the
index only, the text stays in ``events``) over the normalized words of
:mod:`ctxline.record.store.textsearch`, with FTS5's ``ascii`` tokenizer, so FTS5 splits
exactly where ctxline did. Appends index their events in the same transaction.

Version 4, ``memory``: the memories kept across sessions and their FTS5 index
(:mod:`ctxline.record.store.sqlite_memory`).

Version 5, ``memory_index``: partial indexes over each owner's current and not forgotten
memories, newest first, so the memory overview reads only the entries it shows.

Version 6, ``redaction``: ``chain.redacted``, the digest of a redacted event's body
(:mod:`ctxline.record.store.redaction`); NULL for every row until ``forget`` redacts
one, so an older file's chain verifies exactly as before.

Version 7, ``external``: ``chain.external``, the blob handle of a huge tool result's
content stored once (:mod:`ctxline.record.store.external`); NULL for every older row,
which keeps its content and verifies exactly as before.

Version 3, ``chain``: ``chain`` holds each event's body digest and hash link
(:mod:`ctxline.record.store.chain`), and ``timelines.link`` the link of each head; the
migration computes both for the events already stored, parents before forks. A
timeline with a gap, or a head that disagrees with its events, stops the migration
(and so the open) with an :class:`~ctxline.errors.IntegrityError`: a chain is never
computed over a damaged record.

    with conn:  # inside BEGIN IMMEDIATE
        apply_sqlite_migrations(conn, utc_now)
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence

from ctxline.errors import IntegrityError
from ctxline.record.parse import event_from_json
from ctxline.record.store.base import Clock
from ctxline.record.store.chain import GENESIS, chain_link
from ctxline.record.store.rows import apply_steps
from ctxline.record.store.sql_migrations import (
    EXTERNAL_SQL,
    REDACTION_SQL,
    chain_timelines,
    record_sql,
)
from ctxline.record.store.sqlite_events import body_digest, link_at, visible_segments
from ctxline.record.store.sqlite_memory import MEMORY_INDEX_SQL, MEMORY_SQL
from ctxline.record.store.textsearch import index_words

__all__ = ["SQLITE_MIGRATIONS", "apply_sqlite_migrations", "index_events"]

Step = str | Callable[[sqlite3.Connection], None]


def index_events(conn: sqlite3.Connection, rows: Sequence[tuple[str, str, int, list[str]]]) -> int:
    """Add (session, timeline, seq, words) to the search index; rows without words are skipped."""
    rows = [r for r in rows if r[3]]
    if not rows:
        return 0
    (top,) = conn.execute("SELECT coalesce(max(id), 0) FROM search_docs").fetchone()
    conn.executemany(
        "INSERT INTO search_docs(id, session, timeline, seq) VALUES (?, ?, ?, ?)",
        [(top + i + 1, r[0], r[1], r[2]) for i, r in enumerate(rows)],
    )
    conn.executemany(
        "INSERT INTO search_fts(rowid, text) VALUES (?, ?)",
        [(top + i + 1, " ".join(r[3])) for i, r in enumerate(rows)],
    )
    return len(rows)


def _search_index(conn: sqlite3.Connection) -> None:
    conn.execute(
        "CREATE TABLE search_docs (id INTEGER PRIMARY KEY, session TEXT NOT NULL,"
        " timeline TEXT NOT NULL, seq INTEGER NOT NULL, UNIQUE (session, timeline, seq))"
    )
    conn.execute("CREATE VIRTUAL TABLE search_fts USING fts5(text, content='', tokenize='ascii')")
    after = 0
    while True:  # back-fill from the events already stored, in rowid order
        chunk = conn.execute(
            "SELECT rowid, session, timeline, seq, body FROM events WHERE rowid > ?"
            " ORDER BY rowid LIMIT 500",
            (after,),
        ).fetchall()
        if not chunk:
            return
        index_events(
            conn,
            [(r[1], r[2], r[3], index_words(event_from_json(json.loads(r[4])))) for r in chunk],
        )
        after = chunk[-1][0]


def _chain(conn: sqlite3.Connection) -> None:
    conn.execute(
        "CREATE TABLE chain (session TEXT NOT NULL, timeline TEXT NOT NULL, seq INTEGER NOT NULL,"
        " digest TEXT NOT NULL, link TEXT NOT NULL, PRIMARY KEY (session, timeline, seq))"
        " WITHOUT ROWID"
    )
    conn.execute("ALTER TABLE timelines ADD COLUMN link TEXT")
    chain_timelines(conn, _chain_timeline)


def _chain_timeline(
    conn: sqlite3.Connection, session: str, name: str, parent: str | None, base: int, head: int
) -> None:
    prev = GENESIS
    if parent is not None and base:
        segments, _ = visible_segments(conn, session, parent, True)
        prev = link_at(conn, session, segments, base)
    last = base
    links: list[tuple[str, str, int, str, str]] = []
    rows = conn.execute(
        "SELECT seq, id, at, body FROM events WHERE session = ? AND timeline = ? ORDER BY seq",
        (session, name),
    )
    for seq, eid, at, body in rows:
        if seq != last + 1 or not isinstance(at, str):
            raise IntegrityError(
                f"cannot compute the hash chain: {session}/{name} seq {last + 1} is missing or"
                " damaged; run ctxline doctor"
            )
        digest = body_digest(body)
        del body
        prev = chain_link(prev, seq, eid, at, digest)
        links.append((session, name, seq, digest, prev))
        last = seq
        if len(links) >= 500:
            conn.executemany("INSERT INTO chain VALUES (?, ?, ?, ?, ?)", links)
            links = []
    conn.executemany("INSERT INTO chain VALUES (?, ?, ?, ?, ?)", links)
    if last != head:
        raise IntegrityError(
            f"cannot compute the hash chain: {session}/{name} has head {head} but its events end"
            f" at seq {last}; run ctxline doctor"
        )
    conn.execute(
        "UPDATE timelines SET link = ? WHERE session = ? AND name = ?", (prev, session, name)
    )


SQLITE_MIGRATIONS: tuple[tuple[int, str, Step], ...] = (
    (
        1,
        "record",
        record_sql(
            text="TEXT",
            integer="INTEGER",
            blob="BLOB",
            id_unique=" UNIQUE",
            keys="PRIMARY KEY (session, timeline, seq),",
        ),
    ),
    (2, "search", _search_index),
    (3, "chain", _chain),
    (4, "memory", MEMORY_SQL),
    (5, "memory_index", MEMORY_INDEX_SQL),
    (6, "redaction", REDACTION_SQL),
    (7, "external", EXTERNAL_SQL),
)


def apply_sqlite_migrations(conn: sqlite3.Connection, clock: Clock) -> list[int]:
    """Apply pending migrations inside the caller's transaction; returns those applied."""
    return apply_steps(
        conn,
        SQLITE_MIGRATIONS,
        clock,
        create="CREATE TABLE IF NOT EXISTS migrations (version INTEGER PRIMARY KEY, name TEXT"
        " NOT NULL, applied_at TEXT NOT NULL)",
        mark="?",
    )
