"""The full model-understanding eval: every family, N instances each, three views.

Runs ``ctxline eval`` in-process (the same code path) against a model — by default the
embedded SmolLM2-135M (``ctxline[local]``), so it needs no network or key — and prints
ONE JSON object: the eval summary (accuracy per family and view with 95 % Wilson
intervals, tokens per view, the estimator's error) plus the run's timing. It takes
about an hour on 2 CPU cores for the default 6 × 50 × 3 = 900 prompts.

    .venv/bin/python benchmarks/bench_eval.py [--model local:smollm2] [--n 50] [--seed 0]
        [--base-url URL] [--report eval.html]
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

from ctxline.eval import FAMILIES, EvalConfig, run_eval
from ctxline.eval.report import html_report
from ctxline.models import make_client


def main() -> None:
    parser = argparse.ArgumentParser(description="The full model-understanding eval.")
    parser.add_argument("--model", default="local:smollm2")
    parser.add_argument("--base-url", default=None)
    parser.add_argument("--n", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--families", default=",".join(FAMILIES))
    parser.add_argument("--excerpt-tokens", type=int, default=400)
    parser.add_argument("--report", type=Path, default=None)
    args = parser.parse_args()
    config = EvalConfig(
        families=tuple(f for f in args.families.split(",") if f),
        n=args.n,
        seed=args.seed,
        excerpt_tokens=args.excerpt_tokens,
    )
    client = make_client(args.model, base_url=args.base_url, seed=args.seed)
    started = time.perf_counter()
    result = run_eval(client, config)
    seconds = time.perf_counter() - started
    if args.report is not None:
        args.report.write_text(html_report(result), encoding="utf-8")
    summary = result.summary()
    summary["bench"] = {
        "seconds": round(seconds, 1),
        "seconds_per_prompt": round(seconds / max(1, len(result.records)), 2),
        "python": platform.python_version(),
        "machine": platform.machine(),
    }
    json.dump(summary, sys.stdout, indent=2, ensure_ascii=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
