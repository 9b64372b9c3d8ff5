"""The memories of both SQL stores: one table, one set of queries, two dialects.

Why: SQLite and PostgreSQL keep the same ``memories`` table (see
:mod:`.sqlite_memory` and :mod:`.pg_memory`); reading an entry, a key's current entry and
the newest entries of some owners are the same SQL but for the parameter mark, so they
live here once (:class:`SqlMemories`), and each backend adds what its engine does
differently: the transaction, the full-text index (FTS5, ``tsvector``) and how a key is
superseded under concurrent writers.

    class SQLiteMemories(SqlMemories): mark = "?"; ...
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from ctxline.record.codec import format_at, parse_at
from ctxline.record.store.memories import (
    MemoryEntry,
    NewMemory,
    Owner,
    Scope,
    newest_sql,
    unknown,
)

__all__ = [
    "COLUMNS",
    "MEMORY_INDEX_SQL",
    "M_COLUMNS",
    "Conn",
    "SqlMemories",
    "entry_of",
    "memory_table_sql",
    "new_row",
    "owners_clause",
]

COLUMNS = "id, scope, owner, text, key, tags, author, session, created_at, superseded_by, forgotten_at, meta"
M_COLUMNS = ", ".join(f"m.{c.strip()}" for c in COLUMNS.split(","))


class Conn(Protocol):
    def execute(self, sql: Any, params: Any = ..., /) -> Any: ...


_TABLE_COLUMNS = (
    "id {t} NOT NULL UNIQUE",
    *(f"{c} {{t}} NOT NULL" for c in ("scope", "owner", "key", "text", "tags", "author")),
    *(f"{c} {{t}} NOT NULL" for c in ("session", "meta", "created_at")),
    "superseded_by {t}",
    "forgotten_at {t}",
)


def memory_table_sql(serial: str, text: str, extra: Sequence[str], search: str) -> str:
    """Migration 4 in a dialect: the ``memories`` table (``serial``: its key column's type,
    ``text``: the text type, ``extra``: more columns), its two indexes and ``search``
    (the full-text index)."""
    columns = [f"n {serial} PRIMARY KEY", *(c.format(t=text) for c in _TABLE_COLUMNS), *extra]
    body = ",\n    ".join(columns)
    return (
        f"\nCREATE TABLE memories (\n    {body}\n);\n"
        "CREATE UNIQUE INDEX memories_current_key ON memories(scope, owner, key)\n"
        "    WHERE key <> '' AND superseded_by IS NULL AND forgotten_at IS NULL;\n"
        "CREATE INDEX memories_owner ON memories(scope, owner, n);\n"
        f"{search}\n"
    )


MEMORY_INDEX_SQL = """
CREATE INDEX memories_current ON memories(scope, owner, n)
    WHERE superseded_by IS NULL AND forgotten_at IS NULL
"""
"""Migration 5, ``memory_index``, in both dialects: the newest current entries of an owner
are the first rows of a partial index, so the overview reads what it shows (with
superseded ones, ``memories_owner`` serves, skipping only the forgotten)."""


def entry_of(row: Sequence[Any]) -> MemoryEntry:
    """The entry of a row of :data:`COLUMNS`."""
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


def new_row(ident: str, new: NewMemory, at: Any) -> tuple[object, ...]:
    """The values of :data:`COLUMNS` for a new entry, but for the two NULL ones."""
    return (
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
    )


def owners_clause(owners: Sequence[Owner], mark: str, empty: str) -> tuple[str, list[str]]:
    clause = " OR ".join(f"(m.scope = {mark} AND m.owner = {mark})" for _ in owners) or empty
    return f"({clause})", [v for o in owners for v in o]


class SqlMemories:
    """What both SQL backends' ``memories`` share; a backend sets :attr:`mark` and
    defines :meth:`_reading` (one read snapshot) and :meth:`_check` (the tables exist)."""

    mark = "?"

    def _reading(self) -> AbstractContextManager[Conn]:
        raise NotImplementedError

    def _check(self, conn: Any) -> None:
        raise NotImplementedError

    def _one(self, sql: str, params: Sequence[object]) -> MemoryEntry | None:
        with self._reading() as conn:
            self._check(conn)
            row = conn.execute(sql.replace("?", self.mark), params).fetchone()
        return entry_of(row) if row is not None else None

    def get(self, memory_id: str) -> MemoryEntry:
        found = self._one(f"SELECT {COLUMNS} FROM memories WHERE id = ?", (memory_id,))
        if found is None:
            raise unknown(memory_id)
        return found

    def by_key(self, scope: Scope, owner: str, key: str) -> MemoryEntry | None:
        return self._one(
            f"SELECT {COLUMNS} FROM memories WHERE scope = ? AND owner = ? AND key = ?"
            " AND superseded_by IS NULL AND forgotten_at IS NULL",
            (scope, owner, key),
        )

    def entries(
        self, owners: Sequence[Owner] | None, *, include_superseded: bool = False, limit: int = 100
    ) -> list[MemoryEntry]:
        """The newest entries of ``owners`` (``None``: of every owner, for ``memory list``)."""
        limit = max(0, int(limit))
        if (owners is not None and not owners) or not limit:
            return []
        current = "forgotten_at IS NULL"
        if not include_superseded:
            current = "superseded_by IS NULL AND forgotten_at IS NULL"
        params: list[object] = []
        if owners is None:  # newest first along the primary key: reads about `limit` rows
            where = current
        else:
            newest, params = newest_sql(owners, current, self.mark, limit)
            where = f"n IN ({newest})"
        with self._reading() as conn:
            self._check(conn)
            rows = conn.execute(
                f"SELECT {COLUMNS} FROM memories WHERE {where} ORDER BY n DESC LIMIT {self.mark}",
                [*params, limit],
            ).fetchall()
        return [entry_of(r) for r in rows]
