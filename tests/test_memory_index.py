"""The memory indexes change no result: every backend against the unindexed reference.

Why: issue 25 indexed the memory overview and search (SQLite and PostgreSQL partial
indexes read per owner, an inverted index in memory) so a call costs what it returns.
An index must never change *what* is returned. Random sequences of remember (with and
without keys, several owners), forget, search and entries run on each backend and on
:class:`Linear`, the in-memory backend as it was before the index (every call a scan of
all entries): the overview (order, content) is the same everywhere, search matches the
same entries everywhere, and in memory it scores and orders them exactly as before.

    .venv/bin/pytest tests/test_memory_index.py -q
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pg_server
from conftest import BACKENDS, counter_ids
from ctxline.record.store import MemoryStore, SQLiteStore, Store
from ctxline.record.store.memories import (
    MemoryEntry,
    MemoryHit,
    NewMemory,
    Owner,
    Scope,
    check_new,
    memories_of,
    memory_words,
)
from ctxline.record.store.textsearch import bm25_scores, parse_query

OWNERS: list[Owner] = [("user", "mia"), ("project", "shop"), ("agent", "bot"), ("project", "x")]
WORDS = ["deploy", "make", "release", "office", "paris", "tests", "pin", "alpha", "beta"]


class Linear:
    """The in-memory backend before the index (PR history: memories.py), kept as the model."""

    def __init__(self, clock: Callable[[], datetime], new_id: Callable[[], str]) -> None:
        self._clock, self._new_id = clock, new_id
        self._entries: dict[str, MemoryEntry] = {}
        self._words: dict[str, tuple[list[str], Counter[str]]] = {}

    def remember(self, new: NewMemory) -> MemoryEntry:
        new = check_new(new)
        entry = MemoryEntry(
            "m-" + self._new_id(),
            new.scope,
            new.owner,
            new.text,
            new.key,
            new.tags,
            new.author,
            new.session,
            self._clock(),
            meta=dict(new.meta),
        )
        old = self.by_key(new.scope, new.owner, new.key) if new.key else None
        if old is not None:
            self._entries[old.id] = replace(old, superseded_by=entry.id)
        self._entries[entry.id] = entry
        found = memory_words(new.text, new.key, new.tags)
        self._words[entry.id] = (found, Counter(found))
        return entry

    def by_key(self, scope: Scope, owner: str, key: str) -> MemoryEntry | None:
        return next(
            (
                e
                for e in self._entries.values()
                if e.current and e.key == key and e.scope == scope and e.owner == owner
            ),
            None,
        )

    def search(self, query: str, owners: Sequence[Owner], *, limit: int = 10) -> list[MemoryHit]:
        parsed = parse_query(query)
        wanted = set(owners)
        live = [
            e for e in self._entries.values() if not e.forgotten and (e.scope, e.owner) in wanted
        ]
        docs = [(i, *self._words[e.id]) for i, e in enumerate(live)]
        scored = bm25_scores(docs, parsed)
        scored.sort(key=lambda s: (-s[1], -s[0]))
        return [MemoryHit(live[i], round(score, 6)) for i, score in scored[:limit]]

    def entries(
        self, owners: Sequence[Owner], *, include_superseded: bool = False, limit: int = 100
    ) -> list[MemoryEntry]:
        wanted = set(owners)
        found = [
            e
            for e in self._entries.values()
            if (e.scope, e.owner) in wanted
            and not e.forgotten
            and (include_superseded or e.current)
        ]
        return list(reversed(found))[:limit]

    def forget(self, memory_id: str) -> MemoryEntry:
        entry = self._entries[memory_id]
        tomb = replace(entry, text="", tags=(), forgotten=True)
        self._entries[memory_id] = tomb
        self._words[memory_id] = ([], Counter())
        return tomb


AT = datetime(2026, 11, 2, 23, 59, 0, tzinfo=UTC)


def clock() -> datetime:
    return AT


def make(kind: str, folder: Path) -> Store:
    """A store whose ids follow the model's and whose clock stands still (forget reads it
    on some backends only)."""
    if kind == "memory":
        return MemoryStore(clock=clock, new_id=counter_ids())
    if kind == "sqlite":
        return SQLiteStore(folder / "m.db", clock=clock, new_id=counter_ids())
    pg_server.require_psycopg()
    from ctxline.record.store.postgres import PostgresStore

    return PostgresStore(pg_server.fresh_dsn(), clock=clock, new_id=counter_ids())


owner_sets = st.lists(st.sampled_from(OWNERS), min_size=0, max_size=4)
ops = st.lists(
    st.one_of(
        st.tuples(
            st.just("remember"),
            st.sampled_from(OWNERS),
            st.lists(st.sampled_from(WORDS), min_size=1, max_size=6),
            st.sampled_from(["", "", "deploy", "office", "pin"]),
        ),
        st.tuples(st.just("forget"), st.integers(0, 40)),
        st.tuples(
            st.just("search"),
            owner_sets,
            st.lists(st.sampled_from(WORDS), min_size=1, max_size=3),
            st.booleans(),
        ),
        st.tuples(st.just("entries"), owner_sets, st.booleans(), st.integers(0, 8)),
        st.tuples(st.just("by_key"), st.sampled_from(OWNERS), st.sampled_from(["deploy", "pin"])),
    ),
    max_size=40,
)


@pytest.mark.parametrize("kind", BACKENDS)
@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=ops)
def test_indexed_memories_return_what_the_scan_returned(
    tmp_path_factory: pytest.TempPathFactory, kind: str, steps: list[tuple[object, ...]]
) -> None:
    store = make(kind, tmp_path_factory.mktemp("mem"))
    mem = memories_of(store)
    model = Linear(clock, counter_ids())
    ids: list[str] = []
    try:
        for op in steps:
            match op:
                case ("remember", (scope, owner), words, key):
                    text = " ".join(words)  # type: ignore[arg-type]
                    new = NewMemory(text, scope, owner, key=key)  # type: ignore[arg-type]
                    got, want = mem.remember(new), model.remember(new)
                    assert got == want
                    ids.append(got.id)
                case ("forget", int(i)) if ids:
                    target = ids[i % len(ids)]
                    assert mem.forget(target) == model.forget(target)
                case ("search", owners, words, phrase):
                    query = " ".join(words)  # type: ignore[arg-type]
                    query = f'"{query}"' if phrase else query
                    got_hits = mem.search(query, owners, limit=100)  # type: ignore[arg-type]
                    want_hits = model.search(query, owners, limit=100)  # type: ignore[arg-type]
                    if kind == "memory":  # same scores, same order
                        assert got_hits == want_hits
                    else:  # the same entries match; scores are the engine's
                        got_by_id = {h.entry.id: h.entry for h in got_hits}
                        assert got_by_id == {h.entry.id: h.entry for h in want_hits}
                case ("entries", owners, superseded, int(limit)):
                    got_list = mem.entries(owners, include_superseded=superseded, limit=limit)  # type: ignore[arg-type]
                    want_list = model.entries(owners, include_superseded=superseded, limit=limit)  # type: ignore[arg-type]
                    assert got_list == want_list
                case ("by_key", (scope, owner), key):
                    assert mem.by_key(scope, owner, key) == model.by_key(scope, owner, key)  # type: ignore[arg-type]
                case _:
                    pass
    finally:
        store.close()


def test_the_overview_reads_an_index_on_sqlite(tmp_path: Path) -> None:
    """The overview query is answered from the partial index, owner by owner."""
    from ctxline.record.store.memories import newest_sql

    store = SQLiteStore(tmp_path / "plan.db")
    sql, params = newest_sql(OWNERS[:3], "superseded_by IS NULL AND forgotten_at IS NULL", "?", 5)
    with store._reading() as conn:
        plan = [r[-1] for r in conn.execute(f"EXPLAIN QUERY PLAN {sql}", params)]
    store.close()
    assert sum("USING INDEX memories_current" in p for p in plan) == 3, plan
    assert not any(p.startswith("SCAN memories") or "TEMP B-TREE" in p for p in plan), plan
