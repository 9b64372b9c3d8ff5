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

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from psycopg import errors as pg_errors

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

    mark = "%s"

    def __init__(self, store: PostgresStore) -> None:
        self._store = store

    def _reading(self) -> AbstractContextManager[Any]:
        return self._store._snapshot()

    def _check(self, conn: Any) -> None:
        found = conn.execute("SELECT to_regclass('memories')").fetchone()
        if found is None or found[0] is None:
            raise IntegrityError(
                f"{self._store._where} has no memory tables yet (a schema before version 4):"
                " open it once for writing to migrate it"
            )

    def remember(self, new: NewMemory) -> MemoryEntry:
        new = check_new(new)
        ident = "m-" + self._store._new_id()
        at = self._store._clock()
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
                        f"INSERT INTO memories({COLUMNS}, tsv) VALUES (%s, %s, %s, %s, %s, %s, %s,"
                        " %s, %s, NULL, NULL, %s, to_tsvector('simple', %s))",
                        (
                            *new_row(ident, new, at),
                            " ".join(memory_words(new.text, new.key, new.tags)),
                        ),
                    )
                break
            except pg_errors.UniqueViolation:
                if attempt == 2:
                    raise
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
        where, params = owners_clause(owners, "%s", "false")
        with self._store._snapshot() as conn:
            self._check(conn)
            rows = conn.execute(
                f"SELECT {M_COLUMNS}, ts_rank(m.tsv, q) AS score"
                " FROM memories m, websearch_to_tsquery('simple', %s) q"
                f" WHERE m.tsv @@ q AND m.forgotten_at IS NULL AND {where}"
                " ORDER BY score DESC, m.n DESC LIMIT %s",
                [parsed.websearch(), *params, limit],
            ).fetchall()
        return [MemoryHit(entry_of(r[:-1]), round(float(r[-1]), 6)) for r in rows]

    def forget(self, memory_id: str) -> MemoryEntry:
        self._store._writable("forget a memory")
        with self._store._guard("forget a memory"), self._store._tx() as conn:
            self._check(conn)
            done = conn.execute(
                "UPDATE memories SET text = '', tags = '[]', tsv = ''::tsvector,"
                " forgotten_at = coalesce(forgotten_at, %s) WHERE id = %s RETURNING n",
                (format_at(self._store._clock()), memory_id),
            ).fetchone()
            if done is None:
                raise unknown(memory_id)
        return self.get(memory_id)
