"""The SQLite store's memory search: BM25 over a bounded set of candidates.

Why: FTS5 computes ``bm25()`` for every row a query matches before it can sort, so a
common word over 100,000 memories scored thousands of rows per search (p95 31 ms on a
quiet machine, issue 25). Walking a query's matches newest first is cheap; scoring them
is not. So a search ranks only

* the owners' newest :data:`CANDIDATES` entries matching the query, and
* the owners' older entries holding a *rare* word of a query of several words: one
  that fewer than :data:`CANDIDATES` entries of the table hold (every owner's, superseded
  ones too; the count reads the index alone).

A rare word always finds all its entries; a common word alone reaches back only as far
as the newest :data:`CANDIDATES` matches (the newer of two equally good matches was
already preferred). Where the owners' matches are fewer than that, every match is
ranked, as before. Each candidate gets its full BM25 score, FTS5's over the whole
table, however it was selected: FTS5 adds BM25 up phrase by phrase, each phrase weighed
by its own frequency in the table, so the older candidates are scored by ``(rare) AND
(common)`` and ``(rare) NOT (common)``: the phrases of the whole query, in one order
(rare first) in every statement. The work is bounded by the candidates (about a
thousand rows per word), not by how many entries hold the words.

    rows = bounded_search(conn, parse_query("deploy staging"), where, params, limit=10)
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from ctxline.record.store.memory_sql import M_COLUMNS
from ctxline.record.store.textsearch import Query

__all__ = ["CANDIDATES", "bounded_search"]

CANDIDATES = 1_000
"""How many of the owners' newest matches a search ranks, and how many entries of the
table make a word common."""

_FROM = (
    " FROM memory_fts JOIN memories m ON m.n = memory_fts.rowid"
    " WHERE memory_fts MATCH ? AND m.forgotten_at IS NULL AND {where}"
)
_NEWEST = (  # FTS5 walks its rowids backwards and stops: bm25 only for the rows kept
    "SELECT m.n, -bm25(memory_fts)" + _FROM + " ORDER BY memory_fts.rowid DESC LIMIT ?"
)
_OLDER = (
    "SELECT m.n, -bm25(memory_fts) AS score" + _FROM + " AND memory_fts.rowid < ?"
    " ORDER BY score DESC, m.n DESC LIMIT ?"
)


def _fts5(terms: Sequence[tuple[str, ...]]) -> str:
    return Query(tuple(terms)).fts5()


def _is_rare(conn: sqlite3.Connection, term: tuple[str, ...], n: int) -> bool:
    """Fewer than ``n`` entries of the table hold ``term`` (counted in the index alone)."""
    held = conn.execute(
        "SELECT count(*) FROM (SELECT 1 FROM memory_fts WHERE memory_fts MATCH ? LIMIT ?)",
        [_fts5([term]), n],
    ).fetchone()[0]
    return bool(held < n)


def bounded_search(
    conn: sqlite3.Connection,
    parsed: Query,
    where: str,
    params: list[str],
    limit: int,
    candidates: int = CANDIDATES,
) -> list[tuple[Any, ...]]:
    """The best ``limit`` candidates (see the module docstring) of the owners ``where``
    selects (its marks filled by ``params``), as rows of :data:`.memory_sql.COLUMNS` and
    the score, best first (then the newest)."""
    rare: list[tuple[str, ...]] = []
    if len(parsed.terms) > 1:
        rare = [t for t in parsed.terms if _is_rare(conn, t, candidates)]
    common = [t for t in parsed.terms if t not in rare]
    # one order of phrases in every query, so each score is added up as the whole query's
    everything = _fts5(rare + common)
    newest_sql = _NEWEST.format(where=where)
    scored: list[tuple[int, float]] = conn.execute(
        newest_sql, [everything, *params, candidates]
    ).fetchall()
    if len(scored) == candidates and rare:  # older entries holding a rare word
        cutoff = scored[-1][0]
        older_sql = _OLDER.format(where=where)
        for match in (
            [f"({_fts5(rare)}) AND ({_fts5(common)})", f"({_fts5(rare)}) NOT ({_fts5(common)})"]
            if common
            else [everything]
        ):
            scored += conn.execute(older_sql, [match, *params, cutoff, limit]).fetchall()
    best = sorted(scored, key=lambda s: (-s[1], -s[0]))[:limit]
    if not best:
        return []
    marks = ", ".join("?" * len(best))
    found = {
        r[0]: r[1:]
        for r in conn.execute(
            f"SELECT m.n, {M_COLUMNS} FROM memories m WHERE m.n IN ({marks})", [n for n, _ in best]
        )
    }
    return [(*found[n], score) for n, score in best]
