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
from contextlib import AbstractContextManager
from datetime import datetime
from typing import TYPE_CHECKING

from ctxline.record.store.memories import MemoryEntry, NewMemory, unknown
from ctxline.record.store.memory_sql import (
    MEMORY_INDEX_SQL,
    SqlMemories,
    memory_table_sql,
    new_row,
)
from ctxline.record.store.textsearch import Query

if TYPE_CHECKING:
    from ctxline.record.store.sqlite import SQLiteStore

__all__ = ["MEMORY_INDEX_SQL", "MEMORY_SQL", "SQLiteMemories"]

MEMORY_SQL = memory_table_sql(
    "INTEGER", "TEXT", (), "CREATE VIRTUAL TABLE memory_fts USING fts5(words, tokenize='ascii')"
)
"""Migration 4, ``memory`` (see :data:`~ctxline.record.store.migrations.SQLITE_MIGRATIONS`)."""


class SQLiteMemories(SqlMemories):
    """``SQLiteStore.memories`` (the :class:`~.memories.MemoryBackend` Protocol)."""

    _store: SQLiteStore
    mark = "?"
    tables_sql = "SELECT 1 FROM sqlite_master WHERE name = 'memories'"
    false = "0"
    search_sql = (
        "SELECT {columns}, -bm25(memory_fts) AS score FROM memory_fts"
        " JOIN memories m ON m.n = memory_fts.rowid"
        " WHERE memory_fts MATCH ? AND m.forgotten_at IS NULL AND {where}"
        " ORDER BY score DESC, m.n DESC LIMIT ?"
    )

    def __init__(self, store: SQLiteStore) -> None:
        self._store = store

    def _reading(self) -> AbstractContextManager[sqlite3.Connection]:
        return self._store._reading()

    def _place(self) -> object:
        return self._store.path

    def _match(self, parsed: Query) -> str:
        return parsed.fts5()

    def _insert(self, ident: str, new: NewMemory, at: datetime, words: str) -> None:
        with self._store._write("remember") as conn:
            self._check(conn)
            if new.key:
                conn.execute(
                    "UPDATE memories SET superseded_by = ? WHERE scope = ? AND owner = ? AND key = ?"
                    " AND superseded_by IS NULL AND forgotten_at IS NULL",
                    (ident, new.scope, new.owner, new.key),
                )
            cur = conn.execute(
                self._insert_sql(),
                new_row(ident, new, at),
            )
            conn.execute(
                "INSERT INTO memory_fts(rowid, words) VALUES (?, ?)",
                (cur.lastrowid, words),
            )

    def forget(self, memory_id: str) -> MemoryEntry:
        with self._store._write("forget a memory") as conn:
            self._check(conn)
            row = conn.execute("SELECT n FROM memories WHERE id = ?", (memory_id,)).fetchone()
            if row is None:
                raise unknown(memory_id)
            conn.execute(
                "UPDATE memories SET text = '', tags = '[]', forgotten_at = coalesce(forgotten_at, ?)"
                " WHERE n = ?",
                (self._forgotten_at(), row[0]),
            )
            conn.execute("DELETE FROM memory_fts WHERE rowid = ?", (row[0],))
        return self.get(memory_id)
