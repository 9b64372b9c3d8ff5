"""An agent benchmark with a real model: ctxline's runner, a plain loop, the Agents SDK.

Every loop runs the same tasks (``agent_real.tasks``: small multi-step tool tasks whose
end state a checker verifies; with ``--bfcl N``, N entries per BFCL v4 multi-turn
category through bfcl-eval's own environments and checker) on the same GGUF through one
in-process server (``agent_real.server``: Qwen's ChatML, the same stop tokens and
``<tool_call>`` parse, temperature 0, each loop on its own llama.cpp instance so its
prefix cache is its own), with the same tools, turn cap and output cap. Per loop: task
success with its Wilson 95 % interval, valid tool calls (calls that reached the tool
with valid arguments, over calls the model emitted), billed input (prompt tokens summed
over requests), tokens llama.cpp evaluated (the rest reused from its prefix cache) per
step, wall time. Tasks run in turn across the loops (the loop order rotating), so a
run cut short by ``--deadline`` still compares the loops on the same tasks.

    python benchmarks/bench_agent_real.py --model ~/.cache/ctxline-models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf \
        --threads 2 --max-turns 6 --out benchmarks/agent_real.json

A run cut short by ``--deadline`` goes on with ``--resume REPORT --out NEW``: the
report's rows are kept and its tasks are not run again (same model and loops).

BFCL needs ``pip install --no-deps --target /tmp/bfcl-site bfcl-eval`` and
``--bfcl-site /tmp/bfcl-site`` (it is not a dependency of ctxline).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from agent_real.loops import LOOPS, SYSTEM, timed
from agent_real.server import ModelServer, RequestLog
from agent_real.tasks import TASKS, Toolbox
from ctxline.eval.scoring import wilson


def _load() -> float:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return -1.0


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(rows)
    ok = sum(1 for r in rows if r["success"])
    lo, hi = wilson(ok, n) if n else (0.0, 0.0)
    emitted = sum(r["calls_emitted"] for r in rows)
    valid = sum(r["calls_valid"] for r in rows)
    steps = [s for r in rows for s in r["steps"]]
    prompt = sum(s["prompt_tokens"] for s in steps)
    evaluated = sum(s["evaluated"] for s in steps)
    return {
        "tasks": n,
        "success": ok,
        "success_rate": round(ok / n, 3) if n else None,
        "wilson95": [round(lo, 3), round(hi, 3)],
        "calls_emitted": emitted,
        "calls_valid": valid,
        "valid_rate": round(valid / emitted, 3) if emitted else None,
        "requests": len(steps),
        "billed_input": prompt,
        "evaluated": evaluated,
        "reused_share": round(1 - evaluated / prompt, 3) if prompt else None,
        "output": sum(s["completion_tokens"] for s in steps),
        "wall_s": round(sum(r["wall_s"] for r in rows), 1),
        "model_s": round(sum(s["seconds"] for s in steps), 1),
    }


def _steps(log: list[RequestLog]) -> list[dict[str, Any]]:
    return [
        {
            "prompt_tokens": r.prompt_tokens,
            "evaluated": r.evaluated,
            "completion_tokens": r.completion_tokens,
            "tool_calls": r.tool_calls,
            "seconds": r.seconds,
            "text": r.text,
        }
        for r in log
    ]


def table(report: dict[str, Any], part: str = "tasks") -> str:
    """The README's table (markdown) of a report's ``part`` (``tasks``, ``bfcl`` or ``all``)."""
    lines = [
        "| loop | success | Wilson 95 % | valid calls | requests | billed input | evaluated "
        "(reused) | output | wall s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, parts in report["summary"].items():
        s = parts[part]
        if not s["tasks"]:
            continue
        lo, hi = s["wilson95"]
        valid = f"{s['calls_valid']}/{s['calls_emitted']}"
        lines.append(
            f"| {name} | {s['success']}/{s['tasks']} | {lo:.2f}–{hi:.2f} | {valid} | "
            f"{s['requests']} | {s['billed_input']:,} | {s['evaluated']:,} "
            f"({s['reused_share']:.0%}) | {s['output']:,} | {s['wall_s']:,.0f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument(
        "--model",
        default=str(Path.home() / ".cache/ctxline-models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"),
    )
    parser.add_argument("--threads", type=int, default=int(os.environ.get("BENCH_THREADS", "2")))
    parser.add_argument("--max-turns", type=int, default=6)
    parser.add_argument("--max-output", type=int, default=200)
    parser.add_argument("--loops", default="ctxline,plain,sdk")
    parser.add_argument("--tasks", default="", help="comma-separated task ids (default: all)")
    parser.add_argument("--bfcl", type=int, default=0, help="BFCL entries per category")
    parser.add_argument("--bfcl-site", default="/tmp/bfcl-site")
    parser.add_argument(
        "--deadline", type=float, default=0, help="seconds; start no task after it (0: none)"
    )
    parser.add_argument(
        "--resume",
        default="",
        help="a report of an earlier run cut short: its rows are kept, its tasks not run again",
    )
    parser.add_argument("--out", default="")
    parser.add_argument("--table", default="", help="print the markdown table of a JSON report")
    args = parser.parse_args(argv)
    if args.table:
        print(table(json.loads(Path(args.table).read_text())))
        return 0
    loops = [name for name in args.loops.split(",") if name]
    for name in loops:
        if name not in LOOPS:
            parser.error(f"--loops: unknown loop {name!r}; expected {', '.join(LOOPS)}")
    wanted = {t for t in args.tasks.split(",") if t}
    unknown = wanted - {t.id for t in TASKS}
    if unknown:
        parser.error(f"--tasks: unknown task ids {sorted(unknown)}")
    chosen = [t for t in TASKS if not wanted or t.id in wanted]
    # spread the kinds (files, arithmetic, notes, background) over the run, so a run cut
    # short by --deadline still has some of each
    tasks = [t for start in range(5) for t in chosen[start::5]]
    os.environ.setdefault("OPENAI_API_KEY", "sk-local-bench")

    items: list[tuple[str, Any]] = [("task", t) for t in tasks]
    if args.bfcl:
        sys.path.insert(0, args.bfcl_site)
        from agent_real import bfcl

        items += [("bfcl", e) for e in bfcl.entries(args.bfcl)]

    earlier: dict[str, Any] = json.loads(Path(args.resume).read_text()) if args.resume else {}
    if earlier:
        if earlier["model"] != Path(args.model).name or sorted(earlier["runs"]) != sorted(loops):
            parser.error("--resume: the report is of another model or other loops")
        done = {r["id"] for r in earlier["runs"][loops[0]]}
        items = [(k, i) for k, i in items if (i.id if k == "task" else i["id"]) not in done]
    began = time.perf_counter()
    started = began - (earlier["total_s"] if earlier else 0.0)  # total_s spans both runs
    server = ModelServer(args.model, loops, threads=args.threads, max_tokens=args.max_output)
    base_url = server.start()
    rows: dict[str, list[dict[str, Any]]] = {
        name: list(earlier["runs"][name]) if earlier else [] for name in loops
    }
    stopped_early = False
    try:
        for index, (kind, item) in enumerate(items):
            if args.deadline and time.perf_counter() - began > args.deadline:
                stopped_early = True
                break
            order = loops[index % len(loops) :] + loops[: index % len(loops)]
            for name in order:
                mark = len(server.log)
                load = _load()
                if kind == "task":
                    with tempfile.TemporaryDirectory() as tmp:
                        box = Toolbox(Path(tmp))
                        item.setup(box.root)
                        outcome, wall = timed(
                            LOOPS[name],
                            base_url,
                            box,
                            item.prompt,
                            SYSTEM,
                            args.max_turns,
                            args.max_output,
                        )
                        for t in box.threads:
                            t.join()
                        success = item.check(box, outcome.final)
                        valid = len(box.calls)
                    row_id = item.id
                else:
                    outcome, wall, success, valid = bfcl.run_entry(
                        LOOPS[name], base_url, item, args.max_turns, args.max_output
                    )
                    row_id = item["id"]
                steps = _steps(server.log[mark:])
                row = {
                    "id": row_id,
                    "kind": kind,
                    "success": bool(success),
                    "final": outcome.final[:300],
                    "stop_reason": outcome.stop_reason,
                    "error": outcome.error[:300],
                    "turns": outcome.turns,
                    "calls_emitted": sum(s["tool_calls"] for s in steps),
                    "calls_valid": valid,
                    "wall_s": round(wall, 2),
                    "load_at_start": load,
                    "steps": steps,
                }
                rows[name].append(row)
                print(
                    f"{name:8} {row_id:22} {'ok ' if success else 'FAIL'} turns {outcome.turns} "
                    f"in {sum(s['prompt_tokens'] for s in steps):6} eval "
                    f"{sum(s['evaluated'] for s in steps):6} {wall:7.1f} s load {load}",
                    file=sys.stderr,
                    flush=True,
                )
    finally:
        server.stop()
    report = {
        "benchmark": "agent_real",
        "model": Path(args.model).name,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "threads": args.threads,
        "max_turns": args.max_turns,
        "max_output": args.max_output,
        "temperature": 0,
        "stopped_at_deadline": stopped_early,
        "total_s": round(time.perf_counter() - started, 1),
        "summary": {
            name: {
                "all": _summary(rs),
                "tasks": _summary([r for r in rs if r["kind"] == "task"]),
                "bfcl": _summary([r for r in rs if r["kind"] == "bfcl"]),
            }
            for name, rs in rows.items()
        },
        "runs": rows,
    }
    text = json.dumps(report)
    if args.out:
        Path(args.out).write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
