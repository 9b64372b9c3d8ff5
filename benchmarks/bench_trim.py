"""ctxline's prepare per step against LangChain's ``trim_messages``, on the same histories.

LangChain's ``trim_messages(strategy="last")`` is what many agents use to stay under a
window; it is stateless, so every call re-counts the history (REFERENCES.md reports
0.4 s at 2,000 messages with an exact counter). ctxline counts each event once and
prepares incrementally. This benchmark measures both in one run, on histories of
500 / 2,000 / 8,000 messages cycled from real mini-swe-agent trajectories
(../shared/data, or the bundled examples), with a 32k window and 4k reserved output:

- ctxline: a :class:`Context` on a :class:`MemoryStore` with
  ``PrepareOptions(context_window=32000, max_output=4000)``; each step appends the next
  recorded turn (assistant message, its results) and prepares — reductions included
  whenever the request crosses the pressure line;
- LangChain: the same turns appended to a message list, then
  ``trim_messages(max_tokens=28000, strategy="last", include_system=True,
  start_on="human")`` with its approximate counter, and with an exact o200k counter
  written as a user writes it (count every message, no memo).

Only the reducer call is timed. Needs ``pip install 'ctxline[bench]'`` for the
LangChain side (reported as "not installed" otherwise). Prints one JSON object.

    python benchmarks/bench_trim.py [--steps 200] [--lc-steps 100] [--lc-exact-steps 30]
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import statistics
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from ctxline.context import Context
from ctxline.importers import load
from ctxline.record.codec import canonical_json
from ctxline.record.events import (
    AssistantMessage,
    Event,
    Pending,
    SystemMessage,
    ToolCall,
    ToolResult,
    UserMessage,
)
from ctxline.record.store import MemoryStore
from ctxline.tokens.counters import get_counter
from ctxline.view.options import PrepareOptions

REPO = Path(__file__).resolve().parents[1]
WINDOW, MAX_OUTPUT = 32_000, 4_000
LIMIT = WINDOW - MAX_OUTPUT
PER_MESSAGE = 4
"""Framing tokens per message in the exact LangChain counter (as the peer harness counts)."""
WARMUP = 5

Turn = list[Event]


def load_pool(trajectories: int) -> tuple[SystemMessage, UserMessage, list[Turn]]:
    """The system prompt and task of the first trajectory, and every recorded turn."""
    root = Path(os.environ.get("CTXLINE_SHARED_DATA", REPO.parent / "shared" / "data"))
    folder = root / "mini-swe-agent" if root.is_dir() else REPO / "examples/data/mini-swe-agent"
    system: SystemMessage | None = None
    task: UserMessage | None = None
    turns: list[Turn] = []
    for path in sorted(folder.glob("*.traj.json"))[:trajectories]:
        for session in load(path):
            current: Turn | None = None
            for p in session.events:
                ev = p.event
                if isinstance(ev, SystemMessage):
                    system = system or ev
                elif isinstance(ev, UserMessage) and current is None:
                    task = task or ev
                elif isinstance(ev, AssistantMessage):
                    current = [ev]
                    turns.append(current)
                elif current is not None:
                    current.append(ev)
    if system is None or task is None or not turns:
        raise SystemExit(f"no mini-swe-agent trajectories in {folder}")
    return system, task, turns


def relabel(turn: Turn, cycle: int) -> Turn:
    """The turn with call ids made unique for this pass over the pool."""
    out: Turn = []
    for ev in turn:
        if isinstance(ev, AssistantMessage):
            calls = tuple(ToolCall(f"{c.id}~{cycle}", c.name, c.arguments) for c in ev.tool_calls)
            ev = AssistantMessage(ev.text, calls)
        elif isinstance(ev, ToolResult):
            ev = ToolResult(f"{ev.call_id}~{cycle}", ev.content, ev.name, ev.is_error)
        out.append(ev)
    return out


class TurnStream:
    """Recorded turns, cycled forever, with fresh call ids on every cycle."""

    def __init__(self, turns: list[Turn]) -> None:
        self.turns, self.i = turns, 0

    def next(self) -> Turn:
        turn = relabel(self.turns[self.i % len(self.turns)], self.i // len(self.turns))
        self.i += 1
        return turn


def build(size: int, turns: list[Turn]) -> tuple[list[Turn], TurnStream]:
    """Whole turns filling ``size`` messages with the system prompt and task; then the stream."""
    stream = TurnStream(turns)
    history: list[Turn] = []
    count = 2
    while True:
        turn = stream.next()
        if count + len(turn) > size:
            stream.i -= 1
            return history, stream
        history.append(turn)
        count += len(turn)


def percentiles(times: Sequence[float]) -> dict[str, float]:
    ordered = sorted(times)
    return {
        "p50_ms": round(statistics.median(ordered), 4),
        "p95_ms": round(ordered[max(0, int(len(ordered) * 0.95) - 1)], 4),
        "mean_ms": round(statistics.fmean(ordered), 4),
    }


def run_ctxline(
    system: SystemMessage, task: UserMessage, history: list[Turn], stream: TurnStream, steps: int
) -> dict[str, Any]:
    options = PrepareOptions(context_window=WINDOW, max_output=MAX_OUTPUT)
    ctx = Context(MemoryStore(), "bench", options=options)
    ctx.append(system, task, *(Pending(e) for turn in history for e in turn))
    now = datetime(2026, 11, 30, tzinfo=UTC)
    start = time.perf_counter()
    ctx.prepare(now=now)
    cold = (time.perf_counter() - start) * 1000
    prepare_ms, step_ms, tokens = [], [], []
    plain: list[float] = []
    reducing: list[float] = []
    for i in range(WARMUP + steps):
        t0 = time.perf_counter()
        ctx.append(*stream.next())
        t1 = time.perf_counter()
        prep = ctx.prepare(now=now + timedelta(seconds=i + 1))
        t2 = time.perf_counter()
        if i >= WARMUP:
            prepare_ms.append((t2 - t1) * 1000)
            step_ms.append((t2 - t0) * 1000)
            tokens.append(prep.report.tokens.total)
            (reducing if prep.report["actions"] else plain).append((t2 - t1) * 1000)
    return {
        "steps": steps,
        "cold_first_prepare_ms": round(cold, 2),
        "prepare": percentiles(prepare_ms),
        "append_and_prepare": percentiles(step_ms),
        "steps_with_reductions": len(reducing),
        "prepare_without_reductions": percentiles(plain) if plain else None,
        "prepare_with_reductions": percentiles(reducing) if reducing else None,
        "peak_request_tokens": max(tokens),
        "over_limit_steps": sum(t > LIMIT for t in tokens),
    }


def to_langchain(messages: Any, events: Sequence[Event]) -> list[Any]:
    out: list[Any] = []
    for ev in events:
        if isinstance(ev, SystemMessage):
            out.append(messages.SystemMessage(ev.text))
        elif isinstance(ev, UserMessage):
            out.append(messages.HumanMessage(ev.text))
        elif isinstance(ev, AssistantMessage):
            calls = [{"name": c.name, "args": c.arguments, "id": c.id} for c in ev.tool_calls]
            out.append(messages.AIMessage(ev.text, tool_calls=calls))
        elif isinstance(ev, ToolResult):
            out.append(messages.ToolMessage(ev.content, tool_call_id=ev.call_id))
    return out


def exact_counter() -> Callable[[list[Any]], int]:
    """An exact o200k counter over LangChain messages, as a user writes it (no memo)."""
    counter = get_counter("o200k")

    def count(msgs: list[Any]) -> int:
        n = 0
        for m in msgs:
            content = m.content if isinstance(m.content, str) else json.dumps(m.content)
            n += PER_MESSAGE + counter.count(content)
            for call in getattr(m, "tool_calls", None) or ():
                n += counter.count(call["name"]) + counter.count(
                    canonical_json(call["args"]).decode()
                )
        return n

    return count


def run_langchain(
    lc: Any,
    system: SystemMessage,
    task: UserMessage,
    history: list[Turn],
    stream: TurnStream,
    steps: int,
    counter: Any,
) -> dict[str, Any]:
    msgs = to_langchain(lc, [system, task, *(e for turn in history for e in turn)])
    times, kept = [], []
    for i in range(min(WARMUP, 2) + steps):
        msgs.extend(to_langchain(lc, stream.next()))
        t = time.perf_counter()
        out = lc.trim_messages(
            msgs,
            max_tokens=LIMIT,
            strategy="last",
            include_system=True,
            start_on="human",
            token_counter=counter,
        )
        if i >= min(WARMUP, 2):
            times.append((time.perf_counter() - t) * 1000)
            kept.append(len(out))
    return {
        "steps": steps,
        "trim": percentiles(times),
        "messages_kept_median": statistics.median(kept),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="500,2000,8000")
    parser.add_argument("--steps", type=int, default=200, help="measured ctxline steps per size")
    parser.add_argument("--lc-steps", type=int, default=100, help="LangChain approximate steps")
    parser.add_argument("--lc-exact-steps", type=int, default=30, help="LangChain exact steps")
    parser.add_argument("--trajectories", type=int, default=8)
    args = parser.parse_args()
    system, task, turns = load_pool(args.trajectories)
    try:
        lc: Any = importlib.import_module("langchain_core.messages")
        lc_version = importlib.import_module("langchain_core").__version__
    except ImportError:
        lc, lc_version = None, None
    result: dict[str, Any] = {
        "benchmark": "prepare_vs_langchain_trim_messages",
        "window": WINDOW,
        "max_output": MAX_OUTPUT,
        "input_limit": LIMIT,
        "tokenizer": "o200k_base",
        "langchain_core": lc_version or "not installed",
        "sizes": {},
    }
    for size in (int(s) for s in args.sizes.split(",")):
        history, _ = build(size, turns)
        messages = 2 + sum(map(len, history))
        row: dict[str, Any] = {"messages": messages}
        row["ctxline"] = run_ctxline(system, task, history, build(size, turns)[1], args.steps)
        if lc is None:
            row["langchain"] = "not installed"
        else:
            utils = importlib.import_module("langchain_core.messages.utils")
            approx = run_langchain(
                lc,
                system,
                task,
                history,
                build(size, turns)[1],
                args.lc_steps,
                utils.count_tokens_approximately,
            )
            exact = run_langchain(
                lc,
                system,
                task,
                history,
                build(size, turns)[1],
                args.lc_exact_steps,
                exact_counter(),
            )
            ours = row["ctxline"]["prepare"]
            row["langchain"] = {"approximate": approx, "exact_o200k": exact}
            row["speedup"] = {
                f"{name}_p50": round(lc_run["trim"]["p50_ms"] / ours["p50_ms"], 1)
                for name, lc_run in (("vs_approximate", approx), ("vs_exact", exact))
            } | {
                f"{name}_p95": round(lc_run["trim"]["p95_ms"] / ours["p95_ms"], 1)
                for name, lc_run in (("vs_approximate", approx), ("vs_exact", exact))
            }
        result["sizes"][str(size)] = row
    at2k = result["sizes"].get("2000")
    if at2k is not None:
        ours = at2k["ctxline"]["prepare"]
        result["targets_at_2000"] = {
            "p50_le_0.5ms": ours["p50_ms"] <= 0.5,
            "p95_le_2ms": ours["p95_ms"] <= 2.0,
            "ge_10x_vs_exact": (
                None if "speedup" not in at2k else at2k["speedup"]["vs_exact_p50"] >= 10
            ),
        }
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
