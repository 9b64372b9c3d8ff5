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

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from psycopg import errors as pg_errors

from ctxline.errors import IntegrityError
from ctxline.record.codec import format_at, parse_at
from ctxline.record.store.memories import (
    MemoryEntry,
    MemoryHit,
    NewMemory,
    Owner,
    Scope,
    check_new,
    memory_words,
    newest_sql,
    unknown,
)
from ctxline.record.store.textsearch import check_limit, parse_query

if TYPE_CHECKING:
    from ctxline.record.store.postgres import PostgresStore

__all__ = ["PG_MEMORY_INDEX_SQL", "PG_MEMORY_SQL", "PgMemories"]

PG_MEMORY_SQL = """
CREATE TABLE memories (
    n bigserial PRIMARY KEY,
    id text NOT NULL UNIQUE,
    scope text NOT NULL,
    owner text NOT NULL,
    key text NOT NULL,
    text text NOT NULL,
    tags text NOT NULL,
    author text NOT NULL,
    session text NOT NULL,
    meta text NOT NULL,
    created_at text NOT NULL,
    superseded_by text,
    forgotten_at text,
    tsv tsvector NOT NULL
);
CREATE UNIQUE INDEX memories_current_key ON memories(scope, owner, key)
    WHERE key <> '' AND superseded_by IS NULL AND forgotten_at IS NULL;
CREATE INDEX memories_owner ON memories(scope, owner, n);
CREATE INDEX memories_tsv ON memories USING gin (tsv)
"""
"""Migration 4, ``memory`` (see :data:`~ctxline.record.store.pg_migrations.PG_MIGRATIONS`)."""

PG_MEMORY_INDEX_SQL = """
CREATE INDEX memories_current ON memories(scope, owner, n)
    WHERE superseded_by IS NULL AND forgotten_at IS NULL
"""
"""Migration 5, ``memory_index``, as SQLite's (:data:`.sqlite_memory.MEMORY_INDEX_SQL`)."""

_COLUMNS = "id, scope, owner, text, key, tags, author, session, created_at, superseded_by, forgotten_at, meta"
_M_COLUMNS = ", ".join(f"m.{c.strip()}" for c in _COLUMNS.split(","))


def _entry(row: Sequence[Any]) -> MemoryEntry:
    (ident, scope, owner, text, key, tags, author, session, at, by, gone, meta) = row
    return MemoryEntry(
        ident,
        scope,
        owner,
        text,
        key,
        tuple(json.loads(tags)),
        author,
        session,
        parse_at(at),
        by or "",
        gone is not None,
        json.loads(meta),
    )


def _owners(owners: Sequence[Owner]) -> tuple[str, list[str]]:
    clause = " OR ".join("(m.scope = %s AND m.owner = %s)" for _ in owners) or "false"
    return f"({clause})", [v for o in owners for v in o]


class PgMemories:
    """``PostgresStore.memories`` (the :class:`~.memories.MemoryBackend` Protocol)."""

    def __init__(self, store: PostgresStore) -> None:
        self._store = store

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
                        f"INSERT INTO memories({_COLUMNS}, tsv) VALUES (%s, %s, %s, %s, %s, %s, %s,"
                        " %s, %s, NULL, NULL, %s, to_tsvector('simple', %s))",
                        (
                            ident,
                            new.scope,
                            new.owner,
                            new.text,
                            new.key,
                            json.dumps(list(new.tags)),
                            new.author,
                            new.session,
                            format_at(at),
                            json.dumps(new.meta),
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

    def _one(self, sql: str, params: Sequence[Any]) -> MemoryEntry | None:
        with self._store._snapshot() as conn:
            self._check(conn)
            row = conn.execute(sql, params).fetchone()
        return _entry(row) if row is not None else None

    def get(self, memory_id: str) -> MemoryEntry:
        found = self._one(f"SELECT {_COLUMNS} FROM memories WHERE id = %s", (memory_id,))
        if found is None:
            raise unknown(memory_id)
        return found

    def by_key(self, scope: Scope, owner: str, key: str) -> MemoryEntry | None:
        return self._one(
            f"SELECT {_COLUMNS} FROM memories WHERE scope = %s AND owner = %s AND key = %s"
            " AND superseded_by IS NULL AND forgotten_at IS NULL",
            (scope, owner, key),
        )

    def search(self, query: str, owners: Sequence[Owner], *, limit: int = 10) -> list[MemoryHit]:
        parsed = parse_query(query)
        check_limit(limit)
        where, params = _owners(owners)
        with self._store._snapshot() as conn:
            self._check(conn)
            rows = conn.execute(
                f"SELECT {_M_COLUMNS}, ts_rank(m.tsv, q) AS score"
                " FROM memories m, websearch_to_tsquery('simple', %s) q"
                f" WHERE m.tsv @@ q AND m.forgotten_at IS NULL AND {where}"
                " ORDER BY score DESC, m.n DESC LIMIT %s",
                [parsed.websearch(), *params, limit],
            ).fetchall()
        return [MemoryHit(_entry(r[:-1]), round(float(r[-1]), 6)) for r in rows]

    def entries(
        self, owners: Sequence[Owner], *, include_superseded: bool = False, limit: int = 100
    ) -> list[MemoryEntry]:
        limit = max(0, int(limit))
        if not owners or not limit:
            return []
        current = "forgotten_at IS NULL"
        if not include_superseded:
            current = "superseded_by IS NULL AND forgotten_at IS NULL"
        newest, params = newest_sql(owners, current, "%s", limit)
        with self._store._snapshot() as conn:
            self._check(conn)
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM memories WHERE n IN ({newest}) ORDER BY n DESC LIMIT %s",
                [*params, limit],
            ).fetchall()
        return [_entry(r) for r in rows]

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
