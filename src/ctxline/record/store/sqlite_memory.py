"""The SQLite store's memories: schema version 4, FTS5 search, supersede in one transaction.

``memories`` holds every entry (current, superseded, forgotten) in insertion order; a
partial unique index allows one current entry per (scope, owner, key), so a second
writer can never leave two current facts under one key. ``memory_fts`` is an FTS5 table
(``ascii`` tokenizer) over the normalized words of :func:`~.memories.memory_words`,
keyed by the entry's rowid; forgetting an entry deletes its row there and erases its
text. See :mod:`ctxline.record.store.memories` for the semantics.

    store.memories.remember(NewMemory("tests run with make check", "project", "shop"))
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

from ctxline.errors import IntegrityError
from ctxline.record.codec import format_at
from ctxline.record.store.memories import (
    MemoryEntry,
    MemoryHit,
    NewMemory,
    Owner,
    check_new,
    memory_words,
    unknown,
)
from ctxline.record.store.memory_sql import (
    COLUMNS,
    M_COLUMNS,
    MEMORY_INDEX_SQL,
    SqlMemories,
    entry_of,
    memory_table_sql,
    new_row,
    owners_clause,
)
from ctxline.record.store.textsearch import check_limit, parse_query

if TYPE_CHECKING:
    from ctxline.record.store.sqlite import SQLiteStore

__all__ = ["MEMORY_INDEX_SQL", "MEMORY_SQL", "SQLiteMemories"]

MEMORY_SQL = memory_table_sql(
    "INTEGER", "TEXT", (), "CREATE VIRTUAL TABLE memory_fts USING fts5(words, tokenize='ascii')"
)
"""Migration 4, ``memory`` (see :data:`~ctxline.record.store.migrations.SQLITE_MIGRATIONS`)."""


class SQLiteMemories(SqlMemories):
    """``SQLiteStore.memories`` (the :class:`~.memories.MemoryBackend` Protocol)."""

    mark = "?"

    def __init__(self, store: SQLiteStore) -> None:
        self._store = store

    def _reading(self) -> AbstractContextManager[sqlite3.Connection]:
        return self._store._reading()

    def _check(self, conn: sqlite3.Connection) -> None:
        found = conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'memories'").fetchone()
        if found is None:
            raise IntegrityError(
                f"{self._store.path} has no memory tables yet (a schema before version 4):"
                " open it once for writing to migrate it"
            )

    def remember(self, new: NewMemory) -> MemoryEntry:
        new = check_new(new)
        ident = "m-" + self._store._new_id()
        at = self._store._clock()
        with self._store._write("remember") as conn:
            self._check(conn)
            if new.key:
                conn.execute(
                    "UPDATE memories SET superseded_by = ? WHERE scope = ? AND owner = ? AND key = ?"
                    " AND superseded_by IS NULL AND forgotten_at IS NULL",
                    (ident, new.scope, new.owner, new.key),
                )
            cur = conn.execute(
                f"INSERT INTO memories({COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, NULL, ?)",
                new_row(ident, new, at),
            )
            conn.execute(
                "INSERT INTO memory_fts(rowid, words) VALUES (?, ?)",
                (cur.lastrowid, " ".join(memory_words(new.text, new.key, new.tags))),
            )
        return MemoryEntry(
            ident,
            new.scope,
            new.owner,
            new.text,
            new.key,
            new.tags,
            new.author,
            new.session,
            at,
            meta=dict(new.meta),
        )

    def search(self, query: str, owners: Sequence[Owner], *, limit: int = 10) -> list[MemoryHit]:
        parsed = parse_query(query)
        check_limit(limit)
        where, params = owners_clause(owners, "?", "0")
        with self._store._reading() as conn:
            self._check(conn)
            rows = conn.execute(
                f"SELECT {M_COLUMNS}, -bm25(memory_fts) AS score FROM memory_fts"
                " JOIN memories m ON m.n = memory_fts.rowid"
                f" WHERE memory_fts MATCH ? AND m.forgotten_at IS NULL AND {where}"
                " ORDER BY score DESC, m.n DESC LIMIT ?",
                [parsed.fts5(), *params, limit],
            ).fetchall()
        return [MemoryHit(entry_of(r[:-1]), round(float(r[-1]), 6)) for r in rows]

    def forget(self, memory_id: str) -> MemoryEntry:
        with self._store._write("forget a memory") as conn:
            self._check(conn)
            row = conn.execute("SELECT n FROM memories WHERE id = ?", (memory_id,)).fetchone()
            if row is None:
                raise unknown(memory_id)
            conn.execute(
                "UPDATE memories SET text = '', tags = '[]', forgotten_at = coalesce(forgotten_at, ?)"
                " WHERE n = ?",
                (format_at(self._store._clock()), row[0]),
            )
            conn.execute("DELETE FROM memory_fts WHERE rowid = ?", (row[0],))
        return self.get(memory_id)
