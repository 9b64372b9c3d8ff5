"""Tool discovery on a real catalog over a replayed coding session; prints one JSON object.

Why: issue 14's acceptance is measured, not argued. The catalog is the ``tools/list``
of real MCP servers (``benchmarks/data/mcp_catalog.json``, 113 tools); the session is a
real Claude Code coding session from ``tests/data`` (152 model calls of Bash, Read,
Edit, Write, Grep…). Its own tools are the core tools (schemas derived from the
arguments the recorded calls used). The session is replayed request by request three
times, on the Anthropic layout (tools first, as the prompt cache sees them):

* ``all_tools``: every catalog tool in every request;
* ``native``: discovery, revealed schemas joining the tools array;
* ``cache_stable``: discovery, the tools array fixed, schemas in the search result,
  calls through ``call_tool``.

At a quarter, half and three quarters of the session the agent needs a catalog tool
(unstaged git changes, a Jira issue, the time in a zone): with discovery it searches
first (one more request), then calls the tool it found; with all tools it calls it at
once. Per mode: requests; **tool tokens per request** — the tools array plus, with
discovery, the search results in the view (where cache-stable's schemas live); cache
breaks by section of the prefix report (``tools`` is what discovery can cause); the
input cost in units of one uncached token, Anthropic's multipliers (cache read 0.1,
cache write 1.25: the prefix shared with the previous request is read, the rest
written); and ``Context.prepare`` time.

    .venv/bin/python benchmarks/bench_discovery.py
"""

from __future__ import annotations

import json
import statistics
import time
from collections import Counter
from pathlib import Path
from typing import Any

from ctxline.context import Context
from ctxline.discovery import (
    CALL_TOOL,
    SEARCH_TOOLS,
    Catalog,
    Discovery,
    load_catalog,
)
from ctxline.importers import load_tree
from ctxline.record.events import AssistantMessage, Event, JsonValue, ToolCall, ToolResult
from ctxline.record.jsonvalue import (
    as_array,
    as_number,
    as_object,
    as_str,
    dig,
    get_array,
    get_object,
    get_str,
)
from ctxline.record.store import MemoryStore
from ctxline.render.neutral import ToolSpec
from ctxline.tokens.counters import get_counter
from ctxline.view.options import PrepareOptions
from ctxline.view.prepare import Preparation

HERE = Path(__file__).resolve().parent
CATALOG = HERE / "data" / "mcp_catalog.json"
SESSION = (
    HERE.parent / "tests" / "data" / "claude-code" / "258c7280-ae70-4798-800f-63464d01a85d.jsonl"
)
NEEDS = (
    ("show unstaged changes in the git working tree", "git_diff_unstaged"),
    ("create a jira issue", "jira_create_issue"),
    ("current time in a timezone", "get_current_time"),
)
OPTIONS = PrepareOptions(
    provider="anthropic",
    model="claude-sonnet-4-5",
    context_window=200_000,
    max_output=8_000,
    tokenizer="o200k_base",
)
CACHE_READ, CACHE_WRITE = 0.1, 1.25


def session_events() -> list[Event]:
    sessions = [s for s in load_tree(SESSION, "claude-code") if len(s.events) > 100]
    events = [p.event for p in sessions[0].events]
    return events


def core_tools(events: list[Event]) -> list[ToolSpec]:
    """The session's own tools, with the parameters its calls used (all strings)."""
    seen: dict[str, set[str]] = {}
    for event in events:
        for call in getattr(event, "tool_calls", ()):
            keys = call.arguments.keys() if isinstance(call.arguments, dict) else ()
            seen.setdefault(call.name, set()).update(keys)
    return [
        ToolSpec(
            name,
            f"The {name} tool of the recorded coding agent.",
            {"type": "object", "properties": {k: {"type": "string"} for k in sorted(keys)}},
        )
        for name, keys in seen.items()
    ]


def arguments_for(spec: ToolSpec) -> dict[str, JsonValue]:
    """Arguments that fit a schema's required fields (what the agent would send)."""
    props = get_object(spec.parameters, "properties")
    out: dict[str, JsonValue] = {}
    fits: dict[str, JsonValue] = {"integer": 1, "number": 1, "boolean": False, "array": [], "object": {}}
    for name in map(as_str, get_array(spec.parameters, "required")):
        kind = get_str(get_object(props, name), "type", "string")
        out[name] = fits.get(kind, "demo")
    return out


class Run:
    def __init__(self, mode: str, catalog: Catalog, core: list[ToolSpec]) -> None:
        self.mode = mode
        self.core = core
        self.catalog = catalog
        handlers = {tool: (lambda args, t=tool: f"{t}: done") for _, tool in NEEDS}
        self.discovery = (
            Discovery(catalog, mode=mode.replace("_", "-"), handlers=handlers)  # type: ignore[arg-type]
            if mode != "all_tools"
            else None
        )
        sources = [self.discovery] if self.discovery is not None else []
        self.ctx = Context(MemoryStore(), f"bench-{mode}", options=OPTIONS, sources=sources)
        self.preps: list[Preparation] = []
        self.ms: list[float] = []
        self.search_hits: list[JsonValue] = []
        self.n = 0

    def offer(self) -> None:
        if self.discovery is None:
            self.ctx.set_tools([*self.core, *(e.spec for e in self.catalog)])
            return
        self.discovery.offer(self.ctx, self.core)

    def prepare(self) -> None:
        self.offer()
        started = time.perf_counter()
        prep = self.ctx.prepare()
        self.ms.append((time.perf_counter() - started) * 1000)
        self.preps.append(prep)

    def call(self, name: str, arguments: dict[str, JsonValue]) -> ToolResult:
        """The model makes one call (after a request); its result is recorded."""
        self.prepare()
        self.n += 1
        call = ToolCall(f"bench-{self.n}", name, arguments)
        self.ctx.append(AssistantMessage("", (call,)))
        outcome = self.ctx.call_tool(call)
        if outcome is not None:  # ctxline's own tools: search_tools, call_tool
            result = self.ctx.record_outcome(call, outcome)[0].event
        else:  # the app runs its tool (native and all-tools mode)
            result = self.ctx.append(ToolResult(call.id, f"{name}: done", name))[0].event
        assert isinstance(result, ToolResult)
        return result

    def need(self, query: str, tool: str) -> None:
        spec = self.catalog.get(tool)
        assert spec is not None
        args = arguments_for(spec.spec)
        if self.discovery is None:
            self.call(tool, args)
            return
        found = self.call(SEARCH_TOOLS, {"query": query})
        revealed = as_array(dig(found.meta, "discovery", "revealed"))
        self.search_hits.append(revealed)
        assert tool in revealed, (query, revealed)
        if self.mode == "native":
            result = self.call(tool, args)
        else:
            result = self.call(CALL_TOOL, {"name": tool, "arguments": args})
        assert result.content == f"{tool}: done", result.content

    def replay(self, events: list[Event]) -> None:
        replies = [i for i, e in enumerate(events) if isinstance(e, AssistantMessage)]
        at = {replies[len(replies) * k // 4]: NEEDS[k - 1] for k in (1, 2, 3)}
        for i, event in enumerate(events):
            if i in at:
                self.need(*at[i])
            if isinstance(event, AssistantMessage):
                self.prepare()
            self.ctx.append(event)

    def figures(self, counter: Any, baseline: float | None) -> dict[str, JsonValue]:
        search_tokens, cost = 0, 0.0
        tool_tokens: list[int] = []
        breaks: Counter[str] = Counter()
        results: dict[str, int] = {}
        for prep in self.preps:
            for e in self.ctx.events:
                if e.seq > prep.header.upto_seq:
                    break
                if (
                    isinstance(e.event, ToolResult)
                    and e.event.name == SEARCH_TOOLS
                    and e.id not in results
                ):
                    results[e.id] = counter.count(e.event.content)
            search_tokens = sum(results.values())
            tool_tokens.append(prep.report.tokens.tools + search_tokens)
            report = prep.report
            shared = min(report.prefix.shared_tokens, report.tokens.total)
            cost += CACHE_READ * shared + CACHE_WRITE * (report.tokens.total - shared)
            first = report.prefix.first_difference
            if first is not None:
                breaks[first.section] += 1
        per_request = statistics.mean(tool_tokens)
        ms = sorted(self.ms)
        out: dict[str, JsonValue] = {
            "requests": len(self.preps),
            "tool_tokens_per_request": round(per_request, 1),
            "tools_array_tokens_last": self.preps[-1].report.tokens.tools,
            "cache_breaks": dict(sorted(breaks.items())),
            "input_cost_units": round(cost),
            "input_tokens": sum(p.report.tokens.total for p in self.preps),
            "prepare_ms": {
                "p50": round(ms[len(ms) // 2], 2),
                "p95": round(ms[int(len(ms) * 0.95)], 2),
                "mean": round(statistics.mean(ms), 2),
            },
        }
        if baseline is not None:
            out["share_of_all_tools"] = round(per_request / baseline, 4)
            out["reveals"] = len(self.search_hits)
            out["tools_breaks_per_reveal"] = round(breaks["tools"] / len(self.search_hits), 2)
            out["search_hits"] = self.search_hits
        return out


def main() -> int:
    catalog = load_catalog(CATALOG)
    events = session_events()
    core = core_tools(events)
    counter = get_counter(OPTIONS.tokenizer)
    runs = {mode: Run(mode, catalog, core) for mode in ("all_tools", "native", "cache_stable")}
    for run in runs.values():
        run.replay(events)
    base = runs["all_tools"].figures(counter, None)
    baseline = as_number(base["tool_tokens_per_request"])
    modes = {"all_tools": base} | {
        m: runs[m].figures(counter, baseline) for m in ("native", "cache_stable")
    }
    native, stable = modes["native"], modes["cache_stable"]
    best = min(("native", "cache_stable"), key=lambda m: as_number(modes[m]["input_cost_units"]))
    print(
        json.dumps(
            {
                "benchmark": "discovery",
                "catalog": {"file": str(CATALOG.relative_to(HERE.parent)), "tools": len(catalog)},
                "session": {
                    "file": str(SESSION.relative_to(HERE.parent)),
                    "events": len(events),
                    "model_calls": sum(isinstance(e, AssistantMessage) for e in events),
                    "core_tools": [t.name for t in core],
                },
                "layout": f"{OPTIONS.provider}, {OPTIONS.tokenizer}",
                "modes": modes,
                "acceptance": {
                    "native_share_le_15pct": as_number(native["share_of_all_tools"]) <= 0.15,
                    "cache_stable_share_le_15pct": as_number(stable["share_of_all_tools"]) <= 0.15,
                    "cache_stable_tools_breaks": as_object(stable["cache_breaks"]).get("tools", 0),
                    "native_tools_breaks_per_reveal_le_1": as_number(native["tools_breaks_per_reveal"]) <= 1,
                },
                "cheapest_mode": best.replace("_", "-"),
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
