"""SQLite memory search, paired: the exhaustive FTS5 ranking against the bounded one.

Why: on a shared machine two runs of ``bench_memory_scale.py`` minutes apart see other
loads; this fills one SQLite store (as that benchmark does, same memories, same
owners) and times, query by query, the search before issue 25's bound (every match
scored by ``bm25()``, verbatim) and ``SQLiteMemories.search`` now, alternately, in
wall and CPU time, and counts the queries whose top 10 is the same. Prints JSON.

    python benchmarks/bench_memory_search.py [--size 100000] [--queries 400] [--db PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_memory_scale import OWNERS, fill, vocabulary, zipf_weights
from ctxline.record.store import SQLiteStore
from ctxline.record.store.memory_sql import M_COLUMNS, owners_clause
from ctxline.record.store.textsearch import parse_query

BEFORE = (
    f"SELECT {M_COLUMNS}, -bm25(memory_fts) AS score FROM memory_fts"
    " JOIN memories m ON m.n = memory_fts.rowid"
    " WHERE memory_fts MATCH ? AND m.forgotten_at IS NULL AND {where}"
    " ORDER BY score DESC, m.n DESC LIMIT ?"
)


def stats(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "p50_ms": round(statistics.median(ordered) * 1000, 2),
        "p95_ms": round(ordered[int(0.95 * len(ordered))] * 1000, 2),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=400)
    parser.add_argument("--db", default="", help="a store filled by an earlier run (kept)")
    args = parser.parse_args(argv)
    vocab = vocabulary(random.Random(1))
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(args.db or Path(tmp) / "mem.db")
        fresh = not db.exists()
        store = SQLiteStore(db)
        if fresh:
            fill(store, args.size, random.Random(args.size + 7), vocab)
        owners = [(scope, owner) for scope, owner in OWNERS]
        where, params = owners_clause(owners, "?", "0")  # type: ignore[arg-type]
        weights = zipf_weights(len(vocab))
        rng = random.Random(11)
        queries = [
            " ".join(rng.choices(vocab[20:], weights[20:], k=rng.randint(1, 2)))
            for _ in range(args.queries)
        ]
        times: dict[str, dict[str, list[float]]] = {
            name: {"wall": [], "cpu": []} for name in ("before", "bounded")
        }
        same = 0
        for i, query in enumerate(queries):
            parsed = parse_query(query)
            t0, c0 = time.perf_counter(), time.thread_time()
            with store._reading() as conn:
                before = conn.execute(
                    BEFORE.format(where=where), [parsed.fts5(), *params, 10]
                ).fetchall()
            t1, c1 = time.perf_counter(), time.thread_time()
            now = store.memories.search(query, owners, limit=10)  # type: ignore[arg-type]
            t2, c2 = time.perf_counter(), time.thread_time()
            if i >= 10:  # the first queries warm the caches
                times["before"]["wall"].append(t1 - t0)
                times["before"]["cpu"].append(c1 - c0)
                times["bounded"]["wall"].append(t2 - t1)
                times["bounded"]["cpu"].append(c2 - c1)
            same += [r[0] for r in before] == [h.entry.id for h in now]
        store.close()
    print(
        json.dumps(
            {
                "benchmark": "memory_search_paired",
                "memories": args.size,
                "queries": args.queries,
                "load_1min": round(os.getloadavg()[0], 2),
                **{k: {m: stats(v) for m, v in d.items()} for k, d in times.items()},
                "same_top10": same,
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
