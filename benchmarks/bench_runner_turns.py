"""The runner's marginal turn cost against history length (issue 25 item 4).

One ``Agent`` on a SQLite store runs ``--turns`` turns of a :class:`ScriptedModel`
(each reply one tool call with new arguments, its ``usage`` given so the script counts
nothing), and the wall clock is read after every step. The marginal turn cost between
two marks is ``(t[b] - t[a]) / (b - a)``; the goal is the cost from 200 to 1,000 turns
within 1.3x of that from 10 to 200. ``runner_marginal_ms`` leaves out the time spent
inside the model's ``complete`` (the scripted model counts the request's assistant
messages to pick its reply: O(history) a call, which a real model's latency replaces). ``--body parse`` runs the same loop with the old
path (``json.loads`` of the whole body per call) side by side, for the comparison.

    python benchmarks/bench_runner_turns.py --turns 1000 --marks 10,200,1000 --out r.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ctxline.models.scripted import ScriptedModel
from ctxline.record.store import open_store
from ctxline.runner import Agent, Limits, model_call, tool
from ctxline.view.options import PrepareOptions


@tool
def lookup(n: int) -> str:
    """Look up record n."""
    return f"record {n}: status active, owner team-{n % 7}, updated 2026-11-0{n % 9 + 1}"


def _script(turns: int) -> list[dict[str, Any]]:
    usage = {"input": 1_000, "cache_read": 900, "cache_write": 0, "output": 20}
    replies: list[dict[str, Any]] = [
        {
            "text": "",
            "tool_calls": [{"id": f"c{i}", "name": "lookup", "arguments": {"n": i}}],
            "usage": usage,
        }
        for i in range(turns)
    ]
    replies.append({"text": "done", "usage": usage})
    return replies


class _Timed(ScriptedModel):
    """The scripted model, with the time spent inside it (its reply is picked by counting
    the request's assistant messages: O(history) a call, the model's cost, not the runner's)."""

    def __init__(self, replies: list[dict[str, Any]]) -> None:
        super().__init__(replies)
        self.seconds = 0.0

    def complete(self, body: Any, *, provider: Any = "openai") -> Any:
        started = time.perf_counter()
        try:
            return super().complete(body, provider=provider)
        finally:
            self.seconds += time.perf_counter() - started


class _ParseBody(model_call.BodyDecoder):
    """The old path: the whole body parsed from its bytes on every call."""

    def body(self, prep: Any) -> dict[str, Any]:
        return dict(prep.body)


def run(turns: int, marks: list[int], body: str, window: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(str(Path(tmp) / "bench.db"))
        model = _Timed(_script(turns))
        agent = Agent(
            model,
            [lookup],
            store=store,
            session="bench",
            options=PrepareOptions(context_window=window, max_output=4_096),
            limits=Limits(max_turns=turns + 1, repeat_limit=0),
        )
        if body == "parse":
            agent._bodies = _ParseBody()  # the benchmark's side-by-side baseline
        agent.start("look up every record")
        times, inside = [time.perf_counter()], [0.0]
        while True:
            step = agent.step()
            times.append(time.perf_counter())
            inside.append(model.seconds)
            if step.done:
                break
        result = agent.result()
        store.close()
    done = len(times) - 1
    marginal: dict[str, float] = {}
    runner: dict[str, float] = {}
    for a, b in itertools.pairwise(marks):
        if b <= done:
            wall, spent = times[b] - times[a], inside[b] - inside[a]
            marginal[f"{a}-{b}"] = round(wall / (b - a) * 1000, 3)
            runner[f"{a}-{b}"] = round((wall - spent) / (b - a) * 1000, 3)

    def ratio(values: list[float]) -> float | None:
        return round(values[-1] / values[0], 3) if len(values) >= 2 else None

    return {
        "body": body,
        "turns": result.turns,
        "stop_reason": result.stop_reason,
        "total_s": round(times[-1] - times[0], 3),
        "model_s": round(inside[-1], 3),
        "marginal_ms": marginal,
        "ratio_last_first": ratio(list(marginal.values())),
        "runner_marginal_ms": runner,
        "runner_ratio_last_first": ratio(list(runner.values())),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=1_000)
    parser.add_argument("--marks", default="10,200,1000", help="comma-separated turn numbers")
    parser.add_argument("--body", choices=["decode", "parse", "both"], default="both")
    parser.add_argument("--window", type=int, default=1_000_000, help="context window (tokens)")
    parser.add_argument("--repeat", type=int, default=1, help="runs per mode, interleaved")
    parser.add_argument("--out", default=None, help="write the JSON here too")
    args = parser.parse_args(argv)
    marks = sorted({int(m) for m in args.marks.split(",")})
    modes = ["decode", "parse"] if args.body == "both" else [args.body]
    report: dict[str, Any] = {
        "benchmark": "runner_turns",
        "store": "sqlite",
        "model": "ScriptedModel (usage given)",
        "python": platform.python_version(),
        "turns": args.turns,
        "marks": marks,
        "goal": "marginal turn cost of the last span within 1.3x of the first",
        "runs": [
            run(args.turns, marks, mode, args.window)
            for _ in range(args.repeat)
            for mode in modes  # interleaved, so both modes see the same load
        ],
    }
    report["median"] = {
        mode: {
            key: statistics.median(r[key] for r in report["runs"] if r["body"] == mode)
            for key in ("ratio_last_first", "runner_ratio_last_first")
        }
        for mode in modes
    }
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
