"""The SQLite store's memories: schema version 4, FTS5 search, supersede in one transaction.

``memories`` holds every entry (current, superseded, forgotten) in insertion order; a
partial unique index allows one current entry per (scope, owner, key), so a second
writer can never leave two current facts under one key. ``memory_fts`` is an FTS5 table
(``ascii`` tokenizer) over the normalized words of :func:`~.memories.memory_words`,
keyed by the entry's rowid; forgetting an entry deletes its row there and erases its
text. Search ranks a bounded set of candidates by BM25 (:mod:`.sqlite_recall`: the
owners' newest 1,000 matches and every entry holding a rare word), so it costs what it
returns, not what the store holds. See :mod:`ctxline.record.store.memories` for the
semantics.

    store.memories.remember(NewMemory("tests run with make check", "project", "shop"))
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import TYPE_CHECKING

from ctxline.record.store.memories import MemoryEntry, MemoryHit, NewMemory, Owner, unknown
from ctxline.record.store.memory_sql import (
    MEMORY_INDEX_SQL,
    SqlMemories,
    entry_of,
    memory_table_sql,
    new_row,
    owners_clause,
)
from ctxline.record.store.sqlite_recall import bounded_search
from ctxline.record.store.textsearch import Query, check_limit, parse_query

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

    def __init__(self, store: SQLiteStore) -> None:
        self._store = store

    def _reading(self) -> AbstractContextManager[sqlite3.Connection]:
        return self._store._reading()

    def _place(self) -> object:
        return self._store.path

    def _match(self, parsed: Query) -> str:
        return parsed.fts5()

    def search(self, query: str, owners: Sequence[Owner], *, limit: int = 10) -> list[MemoryHit]:
        """BM25 over a bounded set of candidates (:mod:`.sqlite_recall`): the owners'
        newest matches and every entry holding a rare word."""
        parsed = parse_query(query)
        check_limit(limit)
        where, params = owners_clause(owners, self.mark, self.false)
        with self._reading() as conn:
            self._check(conn)
            rows = bounded_search(conn, parsed, where, params, limit)
        return [MemoryHit(entry_of(r[:-1]), round(float(r[-1]), 6)) for r in rows]

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
