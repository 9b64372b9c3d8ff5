"""The PostgreSQL store's memories: schema version 4, full-text search, supersede under a lock.

The same table as SQLite's (:mod:`ctxline.record.store.sqlite_memory`) with a
``tsvector`` (``to_tsvector('simple', …)`` over the normalized words, GIN-indexed) and
``ts_rank``; a partial unique index allows one current entry per (scope, owner, key).
Remembering under a key locks the current row (``FOR UPDATE``) and supersedes it in the
same transaction; two writers racing on a key that has no current entry yet meet at the
unique index, and the loser goes again and supersedes the winner's entry.

    store.memories.search("deploy", [("project", "shop")])
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from datetime import datetime
from typing import TYPE_CHECKING, Any

from psycopg import errors as pg_errors

from ctxline.record.store.memories import MemoryEntry, NewMemory, unknown
from ctxline.record.store.memory_sql import (
    MEMORY_INDEX_SQL,
    SqlMemories,
    memory_table_sql,
    new_row,
)
from ctxline.record.store.textsearch import Query

if TYPE_CHECKING:
    from ctxline.record.store.postgres import PostgresStore

__all__ = ["PG_MEMORY_INDEX_SQL", "PG_MEMORY_SQL", "PgMemories"]

PG_MEMORY_SQL = memory_table_sql(
    "bigserial",
    "text",
    ("tsv tsvector NOT NULL",),
    "CREATE INDEX memories_tsv ON memories USING gin (tsv)",
)
"""Migration 4, ``memory`` (see :data:`~ctxline.record.store.pg_migrations.PG_MIGRATIONS`)."""

PG_MEMORY_INDEX_SQL = MEMORY_INDEX_SQL
"""Migration 5, ``memory_index``, as SQLite's (:data:`.memory_sql.MEMORY_INDEX_SQL`)."""


class PgMemories(SqlMemories):
    """``PostgresStore.memories`` (the :class:`~.memories.MemoryBackend` Protocol)."""

    _store: PostgresStore
    mark = "%s"
    tables_sql = "SELECT to_regclass('memories')"
    false = "false"
    search_sql = (
        "SELECT {columns}, ts_rank(m.tsv, q) AS score"
        " FROM memories m, websearch_to_tsquery('simple', %s) q"
        " WHERE m.tsv @@ q AND m.forgotten_at IS NULL AND {where}"
        " ORDER BY score DESC, m.n DESC LIMIT %s"
    )

    def __init__(self, store: PostgresStore) -> None:
        self._store = store

    def _reading(self) -> AbstractContextManager[Any]:
        return self._store._snapshot()

    def _place(self) -> object:
        return self._store._where

    def _match(self, parsed: Query) -> str:
        return parsed.websearch()

    def _insert(self, ident: str, new: NewMemory, at: datetime, words: str) -> None:
        self._store._writable("remember")
        for attempt in range(3):
            try:
                with self._store._guard("remember"), self._store._tx() as conn:
                    self._check(conn)
                    if new.key:
                        conn.execute(
                            "UPDATE memories SET superseded_by = %s WHERE n IN (SELECT n FROM"
                            " memories WHERE scope = %s AND owner = %s AND key = %s AND"
                            " superseded_by IS NULL AND forgotten_at IS NULL FOR UPDATE)",
                            (ident, new.scope, new.owner, new.key),
                        )
                    conn.execute(
                        self._insert_sql(", tsv", ", to_tsvector('simple', %s)"),
                        (*new_row(ident, new, at), words),
                    )
                break
            except pg_errors.UniqueViolation:
                if attempt == 2:
                    raise

    def forget(self, memory_id: str) -> MemoryEntry:
        self._store._writable("forget a memory")
        with self._store._guard("forget a memory"), self._store._tx() as conn:
            self._check(conn)
            done = conn.execute(
                "UPDATE memories SET text = '', tags = '[]', tsv = ''::tsvector,"
                " forgotten_at = coalesce(forgotten_at, %s) WHERE id = %s RETURNING n",
                (self._forgotten_at(), memory_id),
            ).fetchone()
            if done is None:
                raise unknown(memory_id)
        return self.get(memory_id)
