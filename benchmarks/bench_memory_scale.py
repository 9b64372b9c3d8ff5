"""Memory recall as the number of memories grows: prepare with the memory source, and search.

Why: the memory source puts an overview of the newest memories in every request and the
model searches them with ``memory_search``; both must cost what they return, not what
the store holds (issue 25). For each backend (in memory, SQLite, PostgreSQL) and each
size, the store is filled with synthetic memories (words drawn from a Zipf-like
vocabulary, one in ten under a key, spread over the user, project and agent owners of
one :class:`~ctxline.memory.Memory` plus other owners' noise); then, side by side in one
loop, ``Context.prepare(log=False)`` on a small session without the memory source and
with it, and ``Memory.search`` over random one- and two-word queries. Prints JSON.

    python benchmarks/bench_memory_scale.py [--sizes 0,1000,10000,100000]
        [--backends memory,sqlite,postgres] [--steps 60] [--queries 200]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from ctxline.context import Context
from ctxline.memory import Memory
from ctxline.record.events import UserMessage
from ctxline.record.store import MemoryStore, SQLiteStore, Store
from ctxline.record.store.memories import NewMemory, memories_of

REPO = Path(__file__).resolve().parents[1]
VOCAB = 5_000
OWNERS = (("user", "mia"), ("project", "shop"), ("agent", "bot"))


def vocabulary(rng: random.Random) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    out: set[str] = set()
    while len(out) < VOCAB:
        out.add("".join(rng.choice(letters) for _ in range(rng.randint(3, 9))))
    return sorted(out)


def zipf_weights(n: int) -> list[float]:
    return [1.0 / (rank + 1) ** 1.05 for rank in range(n)]


def fill(store: Store, n: int, rng: random.Random, vocab: list[str]) -> None:
    backend = memories_of(store)
    weights = zipf_weights(len(vocab))
    noise = (("project", "other"), ("user", "sam"))
    for i in range(n):
        scope, owner = OWNERS[i % 3] if i % 10 else noise[i % 2]
        text = " ".join(rng.choices(vocab, weights, k=rng.randint(6, 18)))
        key = f"fact-{rng.randrange(max(1, n // 20))}" if i % 10 == 3 else ""
        backend.remember(NewMemory(text, scope, owner, key=key))  # type: ignore[arg-type]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 3)


def stats(values: list[float]) -> dict[str, float]:
    return {"p50_ms": round(statistics.median(values) * 1000, 3), "p95_ms": pct(values, 0.95)}


@contextmanager
def open_backend(kind: str, folder: Path) -> Iterator[Store]:
    if kind == "memory":
        yield MemoryStore()
        return
    if kind == "sqlite":
        db = folder / f"mem-{time.monotonic_ns()}.db"
        store: Store = SQLiteStore(db)
    else:
        sys.path.insert(0, str(REPO / "tests"))
        import pg_server
        from ctxline.record.store.postgres import PostgresStore

        store = PostgresStore(pg_server.fresh_dsn())
    try:
        yield store
    finally:
        store.close()


def session(store: Store, name: str, memory: Memory | None) -> Context:
    ctx = Context(store, name, sources=[memory] if memory is not None else ())
    for i in range(10):
        ctx.append(UserMessage(f"question {i}: where is the deploy script?"))
    return ctx


def measure(kind: str, size: int, steps: int, queries: int, folder: Path) -> dict[str, object]:
    rng = random.Random(size + 7)
    vocab = vocabulary(random.Random(1))
    with open_backend(kind, folder) as store:
        started = time.perf_counter()
        fill(store, size, rng, vocab)
        filled = time.perf_counter() - started
        memory = Memory(store, user="mia", project="shop", agent="bot")
        plain, recalled = session(store, "plain", None), session(store, "recall", memory)
        times: dict[str, list[float]] = {"without": [], "with": []}
        for step in range(steps + 3):
            for name, ctx in (("without", plain), ("with", recalled)):
                t0 = time.perf_counter()
                ctx.prepare(log=False)
                if step >= 3:  # the first prepares warm the caches
                    times[name].append(time.perf_counter() - t0)
        search: list[float] = []
        hits = 0
        weights = zipf_weights(len(vocab))
        for _ in range(queries):
            query = " ".join(rng.choices(vocab[20:], weights[20:], k=rng.randint(1, 2)))
            t0 = time.perf_counter()
            hits += len(memory.search(query, 10))
            search.append(time.perf_counter() - t0)
        without, with_memory = stats(times["without"]), stats(times["with"])
        return {
            "backend": kind,
            "memories": size,
            "fill_s": round(filled, 2),
            "prepare_without": without,
            "prepare_with_memory": with_memory,
            "ratio_p50": round(with_memory["p50_ms"] / without["p50_ms"], 2),
            "search": {**stats(search), "mean_hits": round(hits / max(1, queries), 1)},
        }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="0,1000,10000,100000")
    parser.add_argument("--backends", default="memory,sqlite,postgres")
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    runs: list[dict[str, object]] = []
    run: Callable[[str, int], dict[str, object]]
    with tempfile.TemporaryDirectory() as tmp:

        def run(kind: str, size: int) -> dict[str, object]:
            return measure(kind, size, args.steps, args.queries, Path(tmp))

        for kind in args.backends.split(","):
            for size in sizes:
                runs.append(run(kind, size))
                print(json.dumps(runs[-1]), file=sys.stderr, flush=True)
    print(json.dumps({"benchmark": "memory_scale", "runs": runs}, indent=1))


if __name__ == "__main__":
    main()
