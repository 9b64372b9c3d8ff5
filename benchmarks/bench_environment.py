"""The environment's cost in tokens and cache: placements, staged exposure, tau-bench replays.

Prints ONE JSON object (docs/environment.md explains every figure):

- ``placement``: 200 steps of a tool call and a ~250-token result, resident slots changing
  every 2 steps or every 40; the ``<ctx-env>`` block in the tail, appended on change, placed
  by the cost model, or in the system prompt (the naive baseline): cache breaks per 100
  steps outside the tail, block tokens, and the billed input at each provider's prices;
- ``exposure``: two actions unlocking at steps 20 and 40 — locked ones refused with every
  schema offered, only unlocked schemas offered, or OpenAI's ``allowed_tools``;
- ``tau_bench``: the bundled tau-bench sessions replayed with slots derived from their tool
  results, against the same replay without an environment.

    .venv/bin/python benchmarks/bench_environment.py [--data ../shared/data] [--steps 200]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from ctxline import Context
from ctxline.cost import PROVIDER_PRICING
from ctxline.environment import ActionSpec, Check, Environment, EnvironmentSource, SlotSpec
from ctxline.environment.source import EnvFold, environment_meta
from ctxline.errors import CompactionError, ContextOverflow
from ctxline.importers import load_tree
from ctxline.record.events import (
    AssistantMessage,
    Pending,
    RequestHeader,
    ToolCall,
    ToolResult,
    UserMessage,
)
from ctxline.record.jsonvalue import as_object
from ctxline.record.store import MemoryStore
from ctxline.replay import model_calls
from ctxline.sources.base import SourceStep, StepContext
from ctxline.tokens.counters import get_counter
from ctxline.tools.base import Tool
from ctxline.view.options import PrepareOptions
from ctxline.view.prepare import Preparation

__all__ = ["HidingSource", "Meter", "SystemPlacement", "derive_slots", "main", "placement_run"]

REPO = Path(__file__).resolve().parents[1]
T0 = datetime(2026, 4, 1, 9, 0, tzinfo=UTC)
PLAN = 8
"""Steps in the plan (``todo_steps``) of the placement runs."""
WORDS = [
    "the",
    "build",
    "log",
    "shows",
    "a",
    "passing",
    "test",
    "suite",
    "with",
    "one",
    "flaky",
    "network",
    "check",
    "retried",
    "twice",
]


def _output(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(190))


class SystemPlacement(EnvironmentSource):
    """The naive baseline: the block in the system prompt (every change breaks the cache)."""

    def step(self, fold: EnvFold, ctx: StepContext) -> SourceStep:
        part = super().step(fold, ctx)
        main = [t for t in part.tail if t.id == self.name]
        rest = tuple(t for t in part.tail if t.id != self.name)
        return replace(part, tail=rest, system="".join(t.text for t in main))


class HidingSource(EnvironmentSource):
    """Staged exposure by hiding: only the unlocked actions' schemas are offered."""

    def __init__(self, env: Environment, shown: Callable[[str], bool]) -> None:
        super().__init__(env)
        self.shown = shown

    def tools(self) -> Sequence[Tool]:
        return [t for t in self.env.tools() if self.shown(t.name)]


class Meter:
    """Breaks and billed input tokens from the preparation reports, per provider."""

    def __init__(self) -> None:
        self.steps = self.breaks = self.tail_changes = 0
        self.block: list[int] = []
        self.ms: list[float] = []
        self.billed = dict.fromkeys(("openai", "anthropic"), 0.0)
        self.total = 0

    def add(self, prep: Preparation, block_tokens: int, ms: float = 0.0) -> None:
        report = prep.report
        self.ms.append(ms)
        self.steps += 1
        self.total += report.tokens.total
        self.block.append(block_tokens)
        diff = report.prefix.first_difference
        if report.prefix.previous_step is not None and diff is not None:
            if diff.section == "tail":
                self.tail_changes += 1
            else:
                self.breaks += 1
        shared = report.prefix.shared_tokens if report.prefix.previous_step is not None else 0
        fresh = report.tokens.total - shared
        fresh_tail = min(report.tokens.tail, fresh)
        for provider in self.billed:
            price = PROVIDER_PRICING[provider]
            written = price.write_premium * (fresh - fresh_tail)
            self.billed[provider] += price.alpha * shared + written + fresh_tail

    def summary(self) -> dict[str, Any]:
        steps = self.steps or 1
        return {
            "steps": self.steps,
            "cache_breaks_per_100_steps": round(100 * self.breaks / steps, 2),
            "tail_replacements": self.tail_changes,
            "block_tokens_mean": round(statistics.mean(self.block), 1) if self.block else 0,
            "block_tokens_max": max(self.block, default=0),
            "mean_request_tokens": round(self.total / steps),
            "billed_input_tokens": {p: round(v) for p, v in self.billed.items()},
            "prepare_ms_p50": round(statistics.median(self.ms), 3) if self.ms else None,
        }


def _env(placement: str, provider_steps: int) -> Environment:
    slots = [
        SlotSpec("progress", {"type": "object"}, description="where the work stands"),
        SlotSpec("last_check", {"type": "string"}, tier="discardable"),
    ]
    return Environment(slots, placement=placement, expected_steps=provider_steps)  # type: ignore[arg-type]


def placement_run(placement: str, every: int, steps: int, provider: str) -> dict[str, Any]:
    clock = [T0]
    env = _env("tail" if placement == "system" else placement, steps)
    source = SystemPlacement(env) if placement == "system" else env.source
    store = MemoryStore(clock=lambda: clock[0])
    options = PrepareOptions(provider=provider, context_window=400_000, max_output=8_000)  # type: ignore[arg-type]
    ctx = Context(store, "bench", sources=[source], options=options, clock=lambda: clock[0])
    ctx.append(UserMessage("Fix the failing build and keep the team posted."))
    env.set(ctx, "goal", "Make the build pass")
    env.set(ctx, "todo_steps", [f"step {i}" for i in range(PLAN)])
    rng = random.Random(7)
    meter = Meter()
    decisions: list[dict[str, Any]] = []
    for n in range(steps):
        clock[0] += timedelta(seconds=20)
        if n and n % every == 0:
            env.set(
                ctx, "progress", {"done": n // every, "status": f"checked {n} files", "at_step": n}
            )
            if n // every <= PLAN:  # the plan's steps are done one by one, then only progress moves
                env.apply(ctx, "mark_step_done", {"step": f"step {n // every - 1}"})
        env.set(ctx, "last_check", f"check {n}: ok")
        started = time.perf_counter()
        prep = ctx.prepare()
        ms = (time.perf_counter() - started) * 1000
        meta = environment_meta(prep.header)
        if meta.get("decided_now"):
            decisions.append({"step": n + 1, **meta["decision"]})
        meter.add(prep, int(meta["budget"]["tokens"]), ms)
        call = ToolCall(f"c{n}", "run_checks", {"path": f"src/part_{n % 9}"})
        ctx.append(AssistantMessage("", (call,)), ToolResult(call.id, _output(rng), "run_checks"))
    out = meter.summary()
    if placement == "auto":
        chosen = [e.event for e in ctx.events if isinstance(e.event, RequestHeader)]
        out["placements"] = _count(str(environment_meta(h)["placement"]) for h in chosen)
        out["decisions"] = decisions[-1:] and [decisions[0], decisions[-1]]
    return out


def _count(items: Iterable[str]) -> dict[str, int]:
    return dict(sorted(Counter(items).items()))


def exposure_run(mode: str, steps: int = 60) -> dict[str, Any]:
    """Staged exposure: two actions unlock at steps 20 and 40 (``phase`` slot)."""

    def noop(tx: Any, args: Any) -> str:
        return "ok"

    phase = [0]

    def reached(k: int) -> Callable[[Any, Any], str | None]:
        return lambda state, args: None if phase[0] >= k else "not yet"

    unlocks = {k: Check(f"phase-{k}", reached(k), f"phase {k}") for k in (1, 2)}
    actions = [ActionSpec(f"act_{k}", f"Phase {k}.", noop, unlock=c) for k, c in unlocks.items()]
    env = Environment(actions=actions, builtins=("update_goal", "read_slot"), placement="tail")

    def shown(name: str) -> bool:
        return mode != "hide" or not name.startswith("act_") or phase[0] >= int(name[-1])

    clock = [T0]
    store = MemoryStore(clock=lambda: clock[0])
    options = PrepareOptions(provider="openai", context_window=200_000, max_output=4_000)
    source = HidingSource(env, shown)
    ctx = Context(store, "x", sources=[source], options=options, clock=lambda: clock[0])
    ctx.append(UserMessage("Work through the phases."))
    rng = random.Random(3)
    meter = Meter()
    reread = 0
    previous_choice: list[str] | None = None
    for n in range(steps):
        clock[0] += timedelta(seconds=10)
        phase[0] = n // 20
        unlocked = {a.name for a in actions if phase[0] >= int(a.name[-1])}
        prep = ctx.prepare()
        choice = sorted(unlocked) if mode == "allowed_tools" else None
        meter.add(prep, 0)
        if mode == "allowed_tools" and previous_choice is not None and choice != previous_choice:
            # OpenAI keeps the prefix (tools unchanged); Anthropic's message cache breaks
            reread += prep.report.tokens.history
        previous_choice = choice
        call = ToolCall(f"c{n}", "run_checks", {"n": n})
        ctx.append(
            AssistantMessage("", (call,)), ToolResult(call.id, _output(rng)[:600], "run_checks")
        )
    out = meter.summary()
    out.pop("block_tokens_mean"), out.pop("block_tokens_max")
    out["tools_events"] = sum(1 for e in ctx.events if e.event.kind == "tools")
    if mode == "allowed_tools":
        out["anthropic_message_cache_reread_tokens"] = reread
        out["note"] = (
            "OpenAI: tools identical, so the prefix holds; Anthropic has no allowed-tools and a tool_choice change breaks its message cache"
        )
    return out


# --- tau-bench ------------------------------------------------------------------------

RESERVATION_TOOLS = {
    "get_reservation_details", "book_reservation", "cancel_reservation",
    "update_reservation_flights", "update_reservation_baggages", "update_reservation_passengers",
}  # fmt: skip


def _reservation(data: dict[str, Any]) -> dict[str, Any]:
    flights = [
        f"{f.get('origin')}-{f.get('destination')} {f.get('flight_number')} {f.get('date')}"
        for f in data.get("flights", [])
    ]
    return {
        "status": data.get("status") or "confirmed", "cabin": data.get("cabin"),
        "trip": data.get("flight_type"), "flights": flights,
        "passengers": len(data.get("passengers", [])), "insurance": data.get("insurance"),
        "bags": data.get("total_baggages"), "created": data.get("created_at"),
    }  # fmt: skip


def derive_slots(env: Environment, ctx: Context, results: Iterable[ToolResult]) -> int:
    """Slot changes derived from tau-bench tool results (app writes); how many were made."""
    made = 0
    for result in results:
        try:
            data = json.loads(result.content)
        except ValueError:
            data = None
        if not isinstance(data, dict):
            continue
        if result.name == "get_user_details":
            user = {"name": data.get("name"), "membership": data.get("membership"),
                    "reservations": data.get("reservations"), "payment_methods": sorted(data.get("payment_methods") or {})}  # fmt: skip
            env.set(ctx, "user", user)
            made += 1
        elif result.name in RESERVATION_TOOLS and "reservation_id" in data:
            current = dict(as_object(env.state(ctx)["reservations"] or {}))
            current[str(data["reservation_id"])] = _reservation(data)
            env.set(ctx, "reservations", current)
            made += 1
    return made


def tau_env() -> Environment:
    slots = [
        SlotSpec("user", {"type": "object"}, tier="on-demand", description="the user's profile"),
        SlotSpec("reservations", {"type": "object"}, default={}, max_chars=1_500),
    ]
    return Environment(slots, builtins=("read_slot",))


def tau_replay(data: Path, with_env: bool) -> dict[str, Any]:
    sessions = load_tree(data / "tau-bench", "auto")
    counter = get_counter("o200k")
    options = PrepareOptions(context_window=8_000, max_output=1_000)
    meter = Meter()
    slot_events = 0
    placements: Counter[str] = Counter()
    overflows = 0
    for session in sessions:
        env = tau_env()
        store = MemoryStore()
        ctx = Context(
            store,
            session.id,
            options=options,
            counter=counter,
            sources=[env.source] if with_env else (),
        )
        calls = set(model_calls(session.events))
        batch: list[Pending] = []
        events: list[Pending | None] = [*session.events, None]
        for index, pending in enumerate(events):
            if pending is None or index in calls:
                if batch:
                    ctx.append(*batch)
                    if with_env:
                        slot_events += derive_slots(
                            env, ctx, (p.event for p in batch if isinstance(p.event, ToolResult))
                        )
                    batch = []
                if pending is None:
                    break
                now = ctx.events[-1].at
                started = time.perf_counter()
                try:
                    prep = ctx.prepare(now=now)
                except (ContextOverflow, CompactionError):  # counted, as the replay does
                    overflows += 1
                    continue
                ms = (time.perf_counter() - started) * 1000
                meta = environment_meta(prep.header)
                meter.add(prep, int(meta.get("budget", {}).get("tokens", 0)), ms)
                placements.update([meta["placement"]] if meta else [])
            batch.append(Pending(pending.event, None, pending.at))
    out = meter.summary()
    out.update(sessions=len(sessions), overflows=overflows)
    if with_env:
        out.update(slot_events=slot_events, placements=dict(sorted(placements.items())))
    else:
        out.pop("block_tokens_mean"), out.pop("block_tokens_max")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    default = os.environ.get("CTXLINE_SHARED_DATA", str(REPO.parent / "shared" / "data"))
    parser.add_argument(
        "--data", default=default if Path(default).exists() else str(REPO / "tests" / "data")
    )
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args()
    out: dict[str, Any] = {"benchmark": "environment", "steps": args.steps, "placement": {}}
    for label, every in (("frequent", 2), ("rare", 40)):
        runs: dict[str, Any] = {"slot_change_every_steps": every}
        for placement in ("tail", "append", "system"):
            runs[placement] = placement_run(placement, every, args.steps, "openai")
        for provider in ("anthropic", "openai"):
            auto = placement_run("auto", every, args.steps, provider)
            billed = {p: runs[p]["billed_input_tokens"][provider] for p in ("tail", "append")}
            cheapest = min(billed, key=lambda p: billed[p])
            auto["cheapest_measured"] = cheapest
            auto["auto_within_pct_of_cheapest"] = round(
                100 * (auto["billed_input_tokens"][provider] / billed[cheapest] - 1), 2
            )
            auto["measured_tail_minus_append"] = billed["tail"] - billed["append"]
            if auto.get("decisions"):
                last = auto["decisions"][-1]
                auto["predicted_tail_minus_append"] = round(last["c_tail"] - last["c_append"])
            runs[f"auto_{provider}"] = auto
        out["placement"][label] = runs
    out["exposure"] = {mode: exposure_run(mode) for mode in ("refuse", "hide", "allowed_tools")}
    data = Path(args.data)
    out["tau_bench"] = {
        "data": str(data),
        "without_environment": tau_replay(data, False),
        "with_environment": tau_replay(data, True),
    }
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
