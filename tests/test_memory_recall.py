"""SQLite's bounded memory search ranks exactly its documented candidates, with FTS5's scores.

Why: ``sqlite_recall`` scores only the owners' newest matches and the entries holding a
rare word, and scores the older ones through other FTS5 expressions than the query's
(``(rare) AND (common)``, ``(rare) NOT (common)``). Random small stores, queries, owners
and bounds (a bound of 1 to 6 makes every path run) check it against a reference built
from nothing but the documented rule and the exhaustive FTS5 ranking: the same entries,
in the same order, with the same scores. With a bound above the store's size the search
is the exhaustive ranking the store did before, row for row.

    .venv/bin/pytest tests/test_memory_recall.py -q
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from conftest import counter_ids
from ctxline.record.store import SQLiteStore
from ctxline.record.store.memories import NewMemory, Owner, memory_words
from ctxline.record.store.memory_sql import M_COLUMNS, owners_clause
from ctxline.record.store.sqlite_recall import CANDIDATES, bounded_search
from ctxline.record.store.textsearch import Query, parse_query

Row = tuple[Owner, list[str], str, bool]
"""An entry to remember: owner, words, key, and whether it is then forgotten."""
OWNERS: list[Owner] = [("user", "mia"), ("project", "shop"), ("agent", "bot")]
WORDS = ["deploy", "make", "release", "paris", "tests", "pin", "alpha", "beta"]
SKEWED = ["deploy"] * 6 + ["make"] * 4 + ["release"] * 2 + WORDS[3:]
"""Some words in most entries, some in few: so a word is common or rare for small bounds."""

entries = st.lists(
    st.tuples(
        st.sampled_from(OWNERS),
        st.lists(st.sampled_from(SKEWED), min_size=1, max_size=4),
        st.sampled_from(["", "", "deploy", "pin-code"]),
        st.booleans(),  # forgotten
    ),
    min_size=3,
    max_size=30,
)
layered = st.tuples(  # older entries with uncommon words, then many newer with "deploy"
    st.lists(
        st.tuples(
            st.sampled_from(OWNERS),
            st.lists(st.sampled_from(WORDS), min_size=1, max_size=4),
            st.sampled_from(["", "pin-code"]),
            st.booleans(),
        ),
        min_size=1,
        max_size=4,
    ),
    st.lists(
        st.tuples(
            st.sampled_from(OWNERS),
            st.lists(st.sampled_from(SKEWED), max_size=3).map(lambda w: ["deploy", *w]),
            st.sampled_from(["", "", "deploy"]),
            st.just(False),
        ),
        min_size=2,
        max_size=12,
    ),
).map(lambda layers: layers[0] + layers[1])
queries = st.tuples(st.lists(st.sampled_from(WORDS), min_size=1, max_size=3), st.booleans())
mixed = st.tuples(  # a common word and one or two others, in any order, rarely a phrase
    st.permutations(["deploy", "make"])
    .flatmap(
        lambda common: st.lists(
            st.sampled_from(WORDS[2:]), min_size=1, max_size=2, unique=True
        ).map(lambda others: [common[0], *others])
    )
    .flatmap(st.permutations),
    st.sampled_from([False, False, False, True]),
)
owner_sets = st.lists(st.sampled_from(OWNERS), unique=True, max_size=3)
some_owners = st.lists(st.sampled_from(OWNERS), unique=True, min_size=1, max_size=3)


def clock() -> datetime:
    return datetime(2026, 1, 1, tzinfo=UTC)


def filled(folder: Path, rows: list[Row]) -> SQLiteStore:
    store = SQLiteStore(folder / "m.db", clock=clock, new_id=counter_ids())
    for (scope, owner), words, key, forget in rows:
        entry = store.memories.remember(NewMemory(" ".join(words), scope, owner, key=key))
        if forget:
            store.memories.forget(entry.id)
    return store


def text_of(words: list[str], phrase: bool) -> str:
    return f'"{" ".join(words)}"' if phrase else " ".join(words)


def parsed_of(words: list[str], phrase: bool) -> Query:
    return parse_query(text_of(words, phrase))


def exhaustive(store: SQLiteStore, match: str, owners: list[Owner]) -> dict[int, float]:
    """FTS5's score of every entry of ``owners`` matching ``match`` (by ``n``)."""
    where, params = owners_clause(owners, "?", "0")
    with store._reading() as conn:
        rows = conn.execute(
            "SELECT m.n, -bm25(memory_fts) FROM memory_fts JOIN memories m"
            f" ON m.n = memory_fts.rowid WHERE memory_fts MATCH ? AND {where}",
            [match, *params],
        ).fetchall()
    return {int(n): float(s) for n, s in rows}


def reference(
    store: SQLiteStore, parsed: Query, owners: list[Owner], limit: int, bound: int
) -> list[tuple[str, float]]:
    """The documented rule, read off the entries themselves (not the index)."""
    with store._reading() as conn:
        table = conn.execute(
            "SELECT n, id, scope, owner, text, key, tags FROM memories"
            " WHERE forgotten_at IS NULL ORDER BY n DESC"
        ).fetchall()
    holds = {  # n -> the query's terms the entry holds
        n: {
            t
            for t, c in zip(parsed.terms, parsed.counts(memory_words(text, key, [])), strict=True)
            if c
        }
        for n, _, _, _, text, key, _ in table
    }
    rare = set()
    if len(parsed.terms) > 1:  # a word fewer than `bound` entries of the table hold
        rare = {t for t in parsed.terms if sum(t in h for h in holds.values()) < bound}
    matching = [n for n, _, scope, owner, *_ in table if (scope, owner) in owners and holds[n]]
    chosen = set(matching[:bound]) | {n for n in matching if holds[n] & rare}
    # FTS5 adds a score up phrase by phrase: in the order the search sends them
    order = [t for t in parsed.terms if t in rare] + [t for t in parsed.terms if t not in rare]
    scores = exhaustive(store, Query(tuple(order)).fts5(), owners)
    assert set(scores) == set(matching)  # the reference's matching is FTS5's
    ids = {n: ident for n, ident, *_ in table}
    best = sorted(chosen, key=lambda n: (-scores[n], -n))[:limit]
    event(
        "an entry older than the newest matches ranks"
        if set(best) - set(matching[:bound])
        else "the newest matches only"
    )
    return [(ids[n], round(scores[n], 6)) for n in best]


def searched(
    store: SQLiteStore, parsed: Query, owners: list[Owner], limit: int, bound: int
) -> list[tuple[str, float]]:
    where, params = owners_clause(owners, "?", "0")
    with store._reading() as conn:
        rows = bounded_search(conn, parsed, where, params, limit, bound)
    return [(str(r[0]), round(float(r[-1]), 6)) for r in rows]


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    case=st.tuples(entries, queries)
    | st.tuples(layered, mixed)
    | st.tuples(layered, mixed | queries),
    owners=some_owners,
    limit=st.integers(1, 6),
    bound=st.integers(1, 5),
)
def test_bounded_search_ranks_the_documented_candidates(
    tmp_path_factory: pytest.TempPathFactory,
    case: tuple[list[Row], tuple[list[str], bool]],
    owners: list[Owner],
    limit: int,
    bound: int,
) -> None:
    rows, query = case
    store = filled(tmp_path_factory.mktemp("recall"), rows)
    try:
        parsed = parsed_of(*query)
        assert searched(store, parsed, owners, limit, bound) == reference(
            store, parsed, owners, limit, bound
        )
    finally:
        store.close()


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(rows=entries, query=queries, owners=owner_sets, limit=st.integers(1, 30))
def test_below_the_bound_search_is_the_exhaustive_ranking(
    tmp_path_factory: pytest.TempPathFactory,
    rows: list[Row],
    query: tuple[list[str], bool],
    owners: list[Owner],
    limit: int,
) -> None:
    store = filled(tmp_path_factory.mktemp("recall"), rows)
    where, params = owners_clause(owners, "?", "0")
    parsed = parsed_of(*query)
    try:
        with store._reading() as conn:  # the store's search before the bound, verbatim
            before = conn.execute(
                f"SELECT {M_COLUMNS}, -bm25(memory_fts) AS score FROM memory_fts"
                " JOIN memories m ON m.n = memory_fts.rowid"
                f" WHERE memory_fts MATCH ? AND m.forgotten_at IS NULL AND {where}"
                " ORDER BY score DESC, m.n DESC LIMIT ?",
                [parsed.fts5(), *params, limit],
            ).fetchall()
            now = bounded_search(conn, parsed, where, params, limit, len(rows) + 1)
        assert now == [tuple(r) for r in before]
        hits = store.memories.search(text_of(*query), owners, limit=limit)  # the store's path
        assert [(h.entry.id, h.score) for h in hits] == [(r[0], round(r[-1], 6)) for r in before]
    finally:
        store.close()


def test_a_rare_word_reaches_past_the_newest_matches(tmp_path: Path) -> None:
    """Past CANDIDATES matches, a common word alone ranks only the newest of them; an old
    entry is still found by a rare word it holds, with its full score."""
    store = SQLiteStore(tmp_path / "m.db", clock=clock, new_id=counter_ids())
    mem = store.memories
    try:
        old = mem.remember(NewMemory("deploy deploy deploy zanzibar", "project", "shop"))
        for i in range(CANDIDATES):
            mem.remember(NewMemory(f"deploy note {i} with some more words here", "project", "shop"))
        shop: list[Owner] = [("project", "shop")]
        common = mem.search("deploy", shop, limit=10)
        assert len(common) == 10
        assert old.id not in {h.entry.id for h in common}
        both = mem.search("deploy zanzibar", shop, limit=10)
        assert both[0].entry.id == old.id
        full = exhaustive(store, parse_query("zanzibar deploy").fts5(), shop)
        assert both[0].score == round(max(full.values()), 6)
    finally:
        store.close()
