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

import json
import sqlite3
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

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
    from ctxline.record.store.sqlite import SQLiteStore

__all__ = ["MEMORY_INDEX_SQL", "MEMORY_SQL", "SQLiteMemories"]

MEMORY_SQL = """
CREATE TABLE memories (
    n INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    scope TEXT NOT NULL,
    owner TEXT NOT NULL,
    key TEXT NOT NULL,
    text TEXT NOT NULL,
    tags TEXT NOT NULL,
    author TEXT NOT NULL,
    session TEXT NOT NULL,
    meta TEXT NOT NULL,
    created_at TEXT NOT NULL,
    superseded_by TEXT,
    forgotten_at TEXT
);
CREATE UNIQUE INDEX memories_current_key ON memories(scope, owner, key)
    WHERE key <> '' AND superseded_by IS NULL AND forgotten_at IS NULL;
CREATE INDEX memories_owner ON memories(scope, owner, n);
CREATE VIRTUAL TABLE memory_fts USING fts5(words, tokenize='ascii')
"""
"""Migration 4, ``memory`` (see :data:`~ctxline.record.store.migrations.SQLITE_MIGRATIONS`)."""

MEMORY_INDEX_SQL = """
CREATE INDEX memories_current ON memories(scope, owner, n)
    WHERE superseded_by IS NULL AND forgotten_at IS NULL
"""
"""Migration 5, ``memory_index``: the newest current entries of an owner are the first rows
of a partial index, so the overview reads what it shows (with superseded ones,
``memories_owner`` serves, skipping only the forgotten)."""

_COLUMNS = "id, scope, owner, text, key, tags, author, session, created_at, superseded_by, forgotten_at, meta"


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
    clause = " OR ".join("(m.scope = ? AND m.owner = ?)" for _ in owners) or "0"
    return f"({clause})", [v for o in owners for v in o]


class SQLiteMemories:
    """``SQLiteStore.memories`` (the :class:`~.memories.MemoryBackend` Protocol)."""

    def __init__(self, store: SQLiteStore) -> None:
        self._store = store

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
                f"INSERT INTO memories({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, NULL, ?)",
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
                ),
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

    def get(self, memory_id: str) -> MemoryEntry:
        with self._store._reading() as conn:
            self._check(conn)
            row = conn.execute(
                f"SELECT {_COLUMNS} FROM memories WHERE id = ?", (memory_id,)
            ).fetchone()
        if row is None:
            raise unknown(memory_id)
        return _entry(row)

    def by_key(self, scope: Scope, owner: str, key: str) -> MemoryEntry | None:
        with self._store._reading() as conn:
            self._check(conn)
            row = conn.execute(
                f"SELECT {_COLUMNS} FROM memories WHERE scope = ? AND owner = ? AND key = ?"
                " AND superseded_by IS NULL AND forgotten_at IS NULL",
                (scope, owner, key),
            ).fetchone()
        return _entry(row) if row is not None else None

    def search(self, query: str, owners: Sequence[Owner], *, limit: int = 10) -> list[MemoryHit]:
        parsed = parse_query(query)
        check_limit(limit)
        where, params = _owners(owners)
        cols = ", ".join(f"m.{c.strip()}" for c in _COLUMNS.split(","))
        with self._store._reading() as conn:
            self._check(conn)
            rows = conn.execute(
                f"SELECT {cols}, -bm25(memory_fts) AS score FROM memory_fts"
                " JOIN memories m ON m.n = memory_fts.rowid"
                f" WHERE memory_fts MATCH ? AND m.forgotten_at IS NULL AND {where}"
                " ORDER BY score DESC, m.n DESC LIMIT ?",
                [parsed.fts5(), *params, limit],
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
        newest, params = newest_sql(owners, current, "?", limit)
        with self._store._reading() as conn:
            self._check(conn)
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM memories WHERE n IN ({newest}) ORDER BY n DESC LIMIT ?",
                [*params, limit],
            ).fetchall()
        return [_entry(r) for r in rows]

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
