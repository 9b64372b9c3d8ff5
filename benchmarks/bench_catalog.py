"""Big catalogs: an all-tools prepare and a catalog search at 50, 500 and 2,000 tools.

Why: issue 25 measured 0.57 s a step with 2,000 tools in every request (every schema
rendered again each step) and a catalog search 270x slower for 40x the tools (17 ms p50
at 2,000). The catalog is the real one (``benchmarks/data/mcp_catalog.json``: 113 tools
of four MCP servers) copied with numbered names and groups up to the count (copy ``k``
of ``jira_get_issue`` is ``jira_get_issue_k`` in group ``atlassian_k``).

Prints one JSON object; per count:

* ``prepare_ms``: ``Context.prepare`` with every tool in the request, one user and one
  assistant message a step (the record stays short, so the tools are the cost), for
  Anthropic and OpenAI — side by side with the peers, per step: ``json_dumps_loop``
  (the OpenAI tools array built and ``json.dumps``-ed from the specs, what a request
  made from scratch costs before any message) and ``langchain`` (``convert_to_openai_tool``
  over the same specs, when langchain-core is installed);
* ``search_ms``: ``Catalog.search`` over realistic queries, side by side with
  ``full_scan``: the previous implementation (BM25 over every tool, then sorted), whose
  results the test suite checks are the same.

``body_sha256_ms`` is hashing bytes the size of the tools array: every prepare hashes
its exact body (the logged request's ``sha256``), and the tools come after the messages
in canonical JSON, so this is the floor of an all-tools prepare.

    .venv/bin/python benchmarks/bench_catalog.py [--steps 40] [--rounds 20]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import statistics
import time
from collections import Counter
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from ctxline.context import Context
from ctxline.discovery import Catalog, load_catalog
from ctxline.discovery.catalog import NAME_BONUS, CatalogEntry, name_words
from ctxline.record.events import AssistantMessage, UserMessage
from ctxline.record.store import MemoryStore
from ctxline.record.store.textsearch import bm25_scores, parse_query
from ctxline.render.neutral import ToolSpec
from ctxline.view.options import PrepareOptions

HERE = Path(__file__).resolve().parent
CATALOG = HERE / "data" / "mcp_catalog.json"
COUNTS = (50, 500, 2000)
QUERIES = (
    "show unstaged changes in the git working tree",
    "create a jira issue",
    "current time in a timezone",
    "fetch a url as markdown",
    "search confluence pages",
    "add a comment to an issue",
    "list branches",
    "commit staged changes",
    '"working tree" status',
    "convert time between zones",
    "get sprint issues",
    "update page content",
)
MODELS = {"anthropic": "claude-sonnet-4-5", "openai": "gpt-4.1"}


def entries(n: int) -> list[CatalogEntry]:
    """``n`` tools: the real catalog, copied with numbered names and groups."""
    real = list(load_catalog(CATALOG))
    out = []
    for i in range(n):
        e, k = real[i % len(real)], i // len(real)
        if k == 0:
            out.append(e)
            continue
        spec = ToolSpec(f"{e.name[:58]}_{k}", e.spec.description, e.spec.parameters)
        group = f"{e.group}_{k}"
        out.append(CatalogEntry(spec, (group,), group, e.server))
    return out


def quantiles(ms: list[float]) -> dict[str, float]:
    ms = sorted(ms)
    return {
        "p50": round(statistics.median(ms), 3),
        "p95": round(ms[min(len(ms) - 1, int(len(ms) * 0.95))], 3),
    }


def timed(fn: Callable[[], Any], times: int) -> list[float]:
    out = []
    for _ in range(times):
        started = time.perf_counter()
        fn()
        out.append((time.perf_counter() - started) * 1000)
    return out


def prepare_ms(specs: list[ToolSpec], provider: str, steps: int) -> dict[str, float]:
    """Wall-clock p50/p95, and the thread's CPU time (a shared machine preempts the
    process for whole time slices: wall outliers of ~8 ms with the CPU time flat)."""
    options = PrepareOptions(
        provider=provider,  # type: ignore[arg-type]
        model=MODELS[provider],
        context_window=2_000_000,  # 2,000 real schemas are ~400k tokens
        max_output=8_000,
        tokenizer="o200k_base",
    )
    ctx = Context(MemoryStore(), f"bench-{provider}", options=options)
    ctx.set_tools(specs)
    ms, cpu = [], []
    for k in range(steps + 1):
        ctx.append(UserMessage(f"question {k}"))
        started, started_cpu = time.perf_counter(), time.thread_time()
        ctx.prepare()
        if k:  # the first prepare counts every schema's tokens once
            ms.append((time.perf_counter() - started) * 1000)
            cpu.append((time.thread_time() - started_cpu) * 1000)
        ctx.append(AssistantMessage(f"answer {k}"))
    return {**quantiles(ms), "cpu_p50": quantiles(cpu)["p50"], "cpu_p95": quantiles(cpu)["p95"]}


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def dumps_loop(specs: list[ToolSpec]) -> bytes:
    tools = [
        {
            "type": "function",
            "function": {"name": s.name, "description": s.description, "parameters": s.parameters},
        }
        for s in specs
    ]
    return json.dumps(tools).encode()


def peer_convert(convert: Callable[[Any], Any], tools: list[dict[str, Any]]) -> list[Any]:
    return [convert(t) for t in tools]


def full_scan(catalog: Catalog, docs: list[tuple[str, list[str]]], query: str) -> list[str]:
    """The previous ``Catalog.search``: BM25 over every tool, then all sorted."""
    parsed = parse_query(query)
    counted = [(i, doc, Counter(doc)) for i, (_, doc) in enumerate(docs)]
    parts = [frozenset(name_words(name)) for name, _ in docs]
    wanted = parsed.words
    scored = [
        (i, s + NAME_BONUS * (len(parts[i] & wanted) / len(parts[i]) if parts[i] else 0.0))
        for i, s in bm25_scores(counted, parsed)
    ]
    scored.sort(key=lambda s: (-s[1], docs[s[0]][0]))
    return [docs[i][0] for i, _ in scored[:5]]


def search_ms(catalog: Catalog, rounds: int) -> dict[str, dict[str, float]]:
    from ctxline.discovery.catalog import _index  # the documents the old search scanned

    docs = [(e.name, _index(e)) for e in catalog]
    for q in QUERIES:  # same answers, or the comparison means nothing
        assert [h.name for h in catalog.search(q)] == full_scan(catalog, docs, q), q
    ours: list[float] = []
    old: list[float] = []
    for _ in range(rounds):
        for q in QUERIES:
            ours += timed(partial(catalog.search, q), 1)
            old += timed(partial(full_scan, catalog, docs, q), 1)
    return {"ctxline": quantiles(ours), "full_scan": quantiles(old)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    convert_to_openai_tool: Callable[[Any], Any] | None
    try:
        from langchain_core.utils import function_calling
    except ImportError:  # the peer is optional
        convert_to_openai_tool = None
    else:
        convert_to_openai_tool = function_calling.convert_to_openai_tool
    out: dict[str, Any] = {
        "benchmark": "bench_catalog",
        "catalog": str(CATALOG.relative_to(HERE.parent)),
        "python": platform.python_version(),
        "steps": args.steps,
        "search_queries": len(QUERIES) * args.rounds,
        "counts": {},
    }
    for n in COUNTS:
        made = entries(n)
        specs = [e.spec for e in made]
        catalog = Catalog(made)
        body = dumps_loop(specs)  # about the size of a body: what hashing it costs a step
        row: dict[str, Any] = {
            "tools_json_bytes": len(body),
            "prepare_ms": {p: prepare_ms(specs, p, args.steps) for p in MODELS},
            "peer_per_step_ms": {
                "json_dumps_loop": quantiles(timed(partial(dumps_loop, specs), args.steps))
            },
            "body_sha256_ms": quantiles(timed(partial(sha256, body), args.steps)),
            "search_ms": search_ms(catalog, args.rounds),
        }
        if convert_to_openai_tool is not None:
            lc_tools = [
                {"name": s.name, "description": s.description, "parameters": s.parameters}
                for s in specs
            ]
            row["peer_per_step_ms"]["langchain"] = quantiles(
                timed(partial(peer_convert, convert_to_openai_tool, lc_tools), args.steps)
            )
        out["counts"][str(n)] = row
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
