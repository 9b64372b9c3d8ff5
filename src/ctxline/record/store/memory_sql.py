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
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any, Protocol

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
from ctxline.record.store.textsearch import Query, check_limit, parse_query

__all__ = [
    "COLUMNS",
    "MEMORY_INDEX_SQL",
    "M_COLUMNS",
    "Conn",
    "SqlMemories",
    "Stamps",
    "entry_of",
    "memory_table_sql",
    "new_entry",
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


def new_entry(ident: str, new: NewMemory, at: Any) -> MemoryEntry:
    """The entry :meth:`remember` returns for ``new``, stored as ``ident`` at ``at``."""
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


def owners_clause(owners: Sequence[Owner], mark: str, empty: str) -> tuple[str, list[str]]:
    clause = " OR ".join(f"(m.scope = {mark} AND m.owner = {mark})" for _ in owners) or empty
    return f"({clause})", [v for o in owners for v in o]


class Stamps(Protocol):
    """What :meth:`SqlMemories.remember` asks of the store: a new id and the time."""

    _clock: Callable[[], datetime]

    def _new_id(self) -> str: ...


class SqlMemories:
    """What both SQL backends' ``memories`` share; a backend sets :attr:`mark`,
    :attr:`false` and :attr:`search_sql` (SQLite defines its own :meth:`search`:
    :mod:`.sqlite_recall`), and defines :meth:`_reading` (one read
    snapshot), :meth:`_check` (the tables exist) and :meth:`_match` (a parsed query in
    its full-text syntax)."""

    mark = "?"
    false = "0"
    """The SQL of a clause that holds for no row (an empty list of owners)."""
    search_sql = ""
    """The search's SELECT, with ``{columns}`` and ``{where}`` to fill; its parameters
    are the query text, the owners' and the limit."""

    _store: Stamps

    def _match(self, parsed: Query) -> str:
        raise NotImplementedError

    def _insert(self, ident: str, new: NewMemory, at: datetime, words: str) -> None:
        """Store ``new`` as ``ident`` (superseding the current entry of its key) with its
        index ``words``, in one transaction."""
        raise NotImplementedError

    def remember(self, new: NewMemory) -> MemoryEntry:
        new = check_new(new)
        ident = "m-" + self._store._new_id()
        at = self._store._clock()
        self._insert(ident, new, at, " ".join(memory_words(new.text, new.key, new.tags)))
        return new_entry(ident, new, at)

    def search(self, query: str, owners: Sequence[Owner], *, limit: int = 10) -> list[MemoryHit]:
        parsed = parse_query(query)
        check_limit(limit)
        where, params = owners_clause(owners, self.mark, self.false)
        with self._reading() as conn:
            self._check(conn)
            rows = conn.execute(
                self.search_sql.format(columns=M_COLUMNS, where=where),
                [self._match(parsed), *params, limit],
            ).fetchall()
        return [MemoryHit(entry_of(r[:-1]), round(float(r[-1]), 6)) for r in rows]

    def _reading(self) -> AbstractContextManager[Conn]:
        raise NotImplementedError

    tables_sql = ""
    """A query whose one row holds NULL (or no row at all) where ``memories`` is missing."""

    def _place(self) -> object:
        """The store's file or redacted address, for the error of a missing table."""
        raise NotImplementedError

    def _check(self, conn: Any) -> None:
        found = conn.execute(self.tables_sql).fetchone()
        if found is None or found[0] is None:
            raise IntegrityError(
                f"{self._place()} has no memory tables yet (a schema before version 4):"
                " open it once for writing to migrate it"
            )

    def _insert_sql(self, column: str = "", value: str = "") -> str:
        """The INSERT of a new entry's :data:`COLUMNS` (and one more ``column``)."""
        values = ", ".join([self.mark] * 9 + ["NULL", "NULL", self.mark])
        return f"INSERT INTO memories({COLUMNS}{column}) VALUES ({values}{value})"

    def _forgotten_at(self) -> str:
        return format_at(self._store._clock())

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
