"""Big catalogs: the indexed search and the cached tools array change no answer, no byte.

``Catalog.search`` goes through an inverted index and the assemblers keep the tools
array's bytes per offered set (issue 25). Here the search is compared with the plain
scan it replaced (BM25 over every tool through ``bm25_scores``, kept below as the
reference) on random catalogs and on the real MCP catalog — same tools, same order,
same scores to the bit — and the bodies with the cache are compared with bodies
rendered from scratch. Speed is measured by ``benchmarks/bench_catalog.py``.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxline.context import Context
from ctxline.discovery import Catalog, load_catalog
from ctxline.discovery.catalog import NAME_BONUS, CatalogEntry, _index, name_words
from ctxline.record.codec import canonical_json
from ctxline.record.events import AssistantMessage, UserMessage
from ctxline.record.store import MemoryStore
from ctxline.record.store.textsearch import bm25_scores, parse_query
from ctxline.render.anthropic import AnthropicAssembler, _tool
from ctxline.render.neutral import NeutralMessage, ToolSpec
from ctxline.render.openai import OpenAIAssembler
from ctxline.render.openai import _tool as openai_tool
from ctxline.view.options import PrepareOptions

CATALOG = Path(__file__).resolve().parent.parent / "benchmarks" / "data" / "mcp_catalog.json"
VOCAB = ["git", "issue", "get", "create", "time", "zone", "page", "list", "Branch", "diff"]


def reference_search(
    catalog: Catalog,
    query: str,
    limit: int = 5,
    tags: tuple[str, ...] = (),
    group: str | None = None,
) -> list[tuple[str, float]]:
    """The search before the index: every tool scored by ``bm25_scores``, all sorted."""
    parsed = parse_query(query)
    docs = [(e.name, _index(e), e) for e in catalog]
    kept = [
        (i, doc, Counter(doc))
        for i, (_, doc, e) in enumerate(docs)
        if (not tags or set(tags) & set(e.tags)) and (group is None or e.group == group)
    ]
    scored = []
    for i, score in bm25_scores(kept, parsed):
        parts = frozenset(name_words(docs[i][0]))
        cover = len(parts & parsed.words) / len(parts) if parts else 0.0
        scored.append((i, score + NAME_BONUS * cover))
    scored.sort(key=lambda s: (-s[1], docs[s[0]][0]))
    return [(docs[i][0], round(score, 6)) for i, score in scored[:limit]]


def found(catalog: Catalog, query: str, limit: int = 5, **kw: Any) -> list[tuple[str, float]]:
    return [(h.name, h.score) for h in catalog.search(query, limit, **kw)]


text = st.lists(st.sampled_from([*VOCAB, "the", "a"]), max_size=12).map(" ".join)
entry = st.builds(
    lambda n, d, tags, group, params: CatalogEntry(
        ToolSpec(n, d, {"type": "object", "properties": {p: {"type": "string"} for p in params}}),
        tuple(tags),
        group,
    ),
    st.lists(st.sampled_from(VOCAB), min_size=1, max_size=3).map("_".join),
    text,
    st.lists(st.sampled_from(["a", "b", "c"]), max_size=2),
    st.sampled_from(["", "g1", "g2"]),
    st.lists(st.sampled_from(["repo_path", "issueKey", "zone"]), max_size=2),
)


def unique(entries: list[CatalogEntry]) -> list[CatalogEntry]:
    return list({e.name: e for e in entries}.values())


@settings(max_examples=200, deadline=None)
@given(
    st.lists(entry, max_size=30).map(unique),
    st.lists(
        st.sampled_from([*VOCAB, '"get issue"', '"git diff"', "missing"]), min_size=1, max_size=4
    ),
    st.integers(1, 12),
    st.sampled_from([(), ("a",), ("b", "c"), ("zz",)]),
    st.sampled_from([None, "", "g1", "g3"]),
)
def test_search_matches_the_full_scan(
    entries: list[CatalogEntry],
    query: list[str],
    limit: int,
    tags: tuple[str, ...],
    group: str | None,
) -> None:
    catalog = Catalog(entries)
    q = " ".join(query)
    assert found(catalog, q, limit, tags=tags, group=group) == reference_search(
        catalog, q, limit, tags, group
    )
    # the words' shares kept from earlier queries give the same answers
    for again in (" ".join(reversed(query)), q, query[0]):
        assert found(catalog, again, limit) == reference_search(catalog, again, limit)


def big_real_catalog(n: int) -> Catalog:
    real = list(load_catalog(CATALOG))
    out = list(real)
    for i in range(len(real), n):
        e, k = real[i % len(real)], i // len(real)
        spec = ToolSpec(f"{e.name[:58]}_{k}", e.spec.description, e.spec.parameters)
        out.append(CatalogEntry(spec, (f"{e.group}_{k}",), f"{e.group}_{k}", e.server))
    return Catalog(out)


@pytest.mark.parametrize(
    "query",
    [
        "show unstaged changes in the git working tree",
        "create a jira issue",
        '"working tree" status',
        "current time in a timezone",
        "confluence page comment",
        "issue issue issue",
    ],
)
def test_real_catalog_search_matches_the_full_scan(query: str) -> None:
    catalog = big_real_catalog(500)
    assert found(catalog, query, 20) == reference_search(catalog, query, 20)
    narrowed = {"group": "atlassian_2"}
    assert found(catalog, query, 20, **narrowed) == reference_search(
        catalog, query, 20, group="atlassian_2"
    )
    assert found(catalog, query, 20, tags=("git", "time_1")) == reference_search(
        catalog, query, 20, ("git", "time_1")
    )
    assert found(catalog, query)  # every query names something in this catalog


SPECS = tuple(e.spec for e in load_catalog(CATALOG))
MESSAGES = (NeutralMessage("user", "hello"),)


def anthropic_reference(system: str, tools: tuple[ToolSpec, ...], cache: bool) -> bytes:
    """The Anthropic body rendered from scratch, as before the tools cache."""
    body: dict[str, Any] = {"model": "m", "max_tokens": 100}
    if system:
        body["system"] = [{"type": "text", "text": system}]
    if tools:
        body["tools"] = [_tool(s) for s in tools]
    if cache:
        prefix = body.get("system") or body.get("tools")
        if prefix:
            prefix[-1] = {**prefix[-1], "cache_control": {"type": "ephemeral"}}
    block: dict[str, Any] = {"type": "text", "text": "hello"}
    if cache:  # the end of history carries the other breakpoint
        block["cache_control"] = {"type": "ephemeral"}
    body["messages"] = [{"role": "user", "content": [block]}]
    return canonical_json(body)


@pytest.mark.parametrize("cache", [True, False])
def test_anthropic_tools_bytes_equal_a_fresh_render(cache: bool) -> None:
    assembler = AnthropicAssembler()
    # cached, changed, an equal copy, none; the breakpoint moving between tools and system
    steps = [
        (system, tools)
        for system in ("", "be brief", "")
        for tools in (SPECS, SPECS, SPECS[:5], tuple(SPECS), ())
    ]
    for system, tools in steps:
        parts = assembler.assemble(
            system=system, tools=tools, frozen=(), live=MESSAGES, history_end=1,
            model="m", max_tokens=100, cache=cache,
        )  # fmt: skip
        assert parts.join() == anthropic_reference(system, tools, cache), (system, len(tools))


def test_openai_tools_bytes_equal_a_fresh_render() -> None:
    assembler = OpenAIAssembler()
    for tools, extra in ((SPECS, {}), (SPECS, {"temperature": 0}), (SPECS[:3], {}), ((), {})):
        parts = assembler.assemble(
            system="", tools=tools, frozen=(), live=MESSAGES, model="m", extra=extra
        )
        body: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "hello"}]}
        if tools:
            body["tools"] = [openai_tool(s) for s in tools]
        assert parts.join() == canonical_json({**body, **extra})


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_a_long_lived_context_sends_what_a_fresh_one_does(provider: str) -> None:
    """Steps with the cache warm give the bytes a Context opened on the record gives."""
    options = PrepareOptions(
        provider=provider,  # type: ignore[arg-type]
        model="claude-sonnet-4-5" if provider == "anthropic" else "gpt-4.1",
        context_window=1_000_000,
        max_output=8_000,
        tokenizer="o200k_base",
    )
    store = MemoryStore()
    ctx = Context(store, "t", options=options)
    for k, tools in enumerate((SPECS, SPECS, SPECS[10:40], SPECS[10:40])):
        ctx.set_tools(list(tools))
        ctx.append(UserMessage(f"question {k}"))
        warm = ctx.prepare()
        body = json.loads(warm.body_bytes)
        assert [t.get("name") or t["function"]["name"] for t in body["tools"]][: len(tools)] == [
            s.name for s in tools
        ]
        fresh = Context(store, "t", options=options)
        fresh.set_tools(list(tools))
        assert fresh.prepare().body_bytes == warm.body_bytes
        ctx.append(AssistantMessage(f"answer {k}"))
