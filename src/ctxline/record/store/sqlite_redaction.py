"""The SQLite store's part of a redaction: the body written, the search index changed,
and no copy of the erased text left in the files.

Why: SQLite keeps what it no longer needs — a freed cell stays in its page, a deleted
FTS5 entry stays in an older segment until a merge, an old page stays in the ``-wal``
until it is truncated — so a redaction on SQLite also runs with ``secure_delete`` on
(set for every read-write connection), merges both full-text indexes (``optimize``) and
truncates the ``-wal`` (``wal_checkpoint(TRUNCATE)``, when no other connection reads).

    done = redact_sqlite(conn, redactions)          # inside BEGIN IMMEDIATE
    scrub_sqlite(conn)                               # after COMMIT
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from ctxline.record.events import Event
from ctxline.record.store.chain import Body
from ctxline.record.store.migrations import index_events
from ctxline.record.store.redaction import Redaction
from ctxline.record.store.sql_redaction import redact_rows
from ctxline.record.store.sqlite_events import read_events
from ctxline.record.store.textsearch import index_words

__all__ = ["redact_sqlite", "scrub_sqlite"]

_ROW = "WHERE session = ? AND timeline = ? AND seq = ?"


def _read_one(conn: sqlite3.Connection, r: Redaction) -> Event:
    (stored,) = read_events(conn, r.session, r.timeline, r.seq - 1, 1, True, True, True)
    return stored.event


def _write_body(conn: sqlite3.Connection, r: Redaction, body: Body) -> None:
    key = (r.session, r.timeline, r.seq)
    if body.data is not None:
        conn.execute(f"UPDATE events SET body = ? {_ROW}", (body.text, *key))
        return
    conn.execute(f"UPDATE events SET body = zeroblob(?) {_ROW}", (body.size, *key))
    (rowid,) = conn.execute(f"SELECT rowid FROM events {_ROW}", key).fetchone()
    with conn.blobopen("events", "body", rowid) as blob:
        for piece in body.pieces():
            blob.write(piece)


def _reindex(conn: sqlite3.Connection, r: Redaction, old: Event, new: Event) -> None:
    key = (r.session, r.timeline, r.seq)
    row = conn.execute(f"SELECT id FROM search_docs {_ROW}", key).fetchone()
    if row is not None:  # a contentless FTS5 row is deleted by giving back what it indexed
        conn.execute(
            "INSERT INTO search_fts(search_fts, rowid, text) VALUES ('delete', ?, ?)",
            (row[0], " ".join(index_words(old))),
        )
        conn.execute("DELETE FROM search_docs WHERE id = ?", (row[0],))
    index_events(conn, [(*key, index_words(new))])


def redact_sqlite(conn: sqlite3.Connection, redactions: Sequence[Redaction]) -> int:
    """Check and write ``redactions`` inside the caller's write transaction."""
    return redact_rows(conn, "?", redactions, _read_one, _write_body, _reindex)


def scrub_sqlite(conn: sqlite3.Connection) -> None:
    """Merge both full-text indexes (dropping deleted entries) and truncate the ``-wal``;
    outside a transaction. A checkpoint that other readers block is left for later."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute("INSERT INTO search_fts(search_fts) VALUES ('optimize')")
        if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'memory_fts'").fetchone():
            conn.execute("INSERT INTO memory_fts(memory_fts) VALUES ('optimize')")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
