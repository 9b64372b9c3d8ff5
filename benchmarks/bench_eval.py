"""The full model-understanding eval: every family, N instances each, three views.

Runs ``ctxline eval`` in-process (the same code path) against a model — by default the
embedded SmolLM2-135M (``ctxline[local]``), so it needs no network or key — and prints
ONE JSON object: the eval summary (accuracy per family and view with 95 % Wilson
intervals, tokens per view, the estimator's error) plus the run's timing. It takes
about an hour on 2 CPU cores for the default 6 × 50 × 3 = 900 prompts.

``--variant`` renders ctxline's rule and notification blocks another way
(``eval_variants.py``; ``shipped`` is ctxline's own rendering), ``--views ctxline`` sends
only ctxline's view (the baselines do not change with a variant), ``--records FILE``
writes one JSON line per prompt (instance, view, answer, reply, extracted, correct), and
the summary's ``bench`` part has the wall time and the load average before and after.

    .venv/bin/python benchmarks/bench_eval.py [--model local:smollm2] [--n 50] [--seed 0]
        [--base-url URL] [--families rules,notification] [--views ctxline]
        [--variant shipped] [--records out.jsonl] [--report eval.html]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

from ctxline.eval import FAMILIES, VIEWS, EvalConfig, Record, run_eval
from ctxline.eval.report import html_report
from ctxline.models import make_client
from ctxline.record.events import JsonValue
from ctxline.record.jsonvalue import dig
from eval_variants import VARIANTS, apply_variant


def record_row(record: Record, variant: str, seconds: float) -> dict[str, object]:
    inst = record.prompt.instance
    return {
        "variant": variant,
        "id": inst.id,
        "view": record.prompt.view,
        "answer": inst.answer,
        "reply": record.reply,
        "extracted": record.extracted,
        "correct": record.correct,
        "error": record.error,
        "input_tokens": dig(record.usage, "usage", "input"),
        "seconds": round(seconds, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description="The full model-understanding eval.")
    parser.add_argument("--model", default="local:smollm2")
    parser.add_argument("--base-url", default=None)
    parser.add_argument("--n", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--families", default=",".join(FAMILIES))
    parser.add_argument("--views", default=",".join(VIEWS))
    parser.add_argument(
        "--variant",
        default="shipped",
        help=f"comma-separated, run one after another on one client: {', '.join(VARIANTS)}",
    )
    parser.add_argument("--excerpt-tokens", type=int, default=400)
    parser.add_argument("--report", type=Path, default=None, help="(the last variant's)")
    parser.add_argument("--records", type=Path, default=None, help="JSON lines, appended")
    args = parser.parse_args()
    variants = [v for v in args.variant.split(",") if v]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown or not variants:
        parser.error(f"unknown variant {', '.join(unknown)} (known: {', '.join(VARIANTS)})")
    config = EvalConfig(
        families=tuple(f for f in args.families.split(",") if f),
        views=tuple(v for v in args.views.split(",") if v),
        n=args.n,
        seed=args.seed,
        excerpt_tokens=args.excerpt_tokens,
    )
    client = make_client(args.model, base_url=args.base_url, seed=args.seed)
    runs: list[dict[str, JsonValue]] = []
    records = args.records.open("a", encoding="utf-8") if args.records is not None else None
    for variant in variants:
        load_before = os.getloadavg()
        started = last = time.perf_counter()

        def keep(record: Record, variant: str = variant) -> None:
            nonlocal last
            now = time.perf_counter()
            if records is not None:
                row = record_row(record, variant, now - last)
                records.write(json.dumps(row, ensure_ascii=False) + "\n")
                records.flush()
            last = now

        with apply_variant(variant):
            result = run_eval(client, config, on_record=keep)
        seconds = time.perf_counter() - started
        if args.report is not None:
            args.report.write_text(html_report(result), encoding="utf-8")
        summary = result.summary()
        summary["bench"] = {
            "variant": variant,
            "variant_about": VARIANTS[variant].about,
            "threads": os.environ.get("CTXLINE_LOCAL_THREADS", ""),
            "load_before": [round(x, 2) for x in load_before],
            "load_after": [round(x, 2) for x in os.getloadavg()],
            "cpus": os.cpu_count(),
            "seconds": round(seconds, 1),
            "seconds_per_prompt": round(seconds / max(1, len(result.records)), 2),
            "python": platform.python_version(),
            "machine": platform.machine(),
        }
        runs.append(summary)
    if records is not None:
        records.close()
    out: JsonValue = runs[0] if len(runs) == 1 else {"runs": list[JsonValue](runs)}
    json.dump(out, sys.stdout, indent=2, ensure_ascii=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
