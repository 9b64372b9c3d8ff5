"""ctxline beside the peer reducers, from one run of the peer harness (ctxline among the peers).

``../shared/peers/bench_peers.py`` drives every reducer — ctxline included (peer key
``ctxline``: ``Context.prepare`` as ``ctxline replay`` drives it) — over the same
sessions with one metric implementation. This script reads its result file (default
``benchmarks/peers_results.json``) and prints ONE JSON object: for each dataset and input
limit, ctxline's row, the best zero-failure peer (no step over the limit, no pairing
error, the task kept at every step, never a system-only view; the lowest billed input
per step, in each pricing style) and the ratios the issue's acceptance asks about.
``--markdown`` prints the README's table instead: ctxline, every zero-failure peer, and no
reduction at all for reference (the others are in the result file).

A harness that reports only the OpenAI style (cache writes at 1.0) gets the Anthropic
style (writes at 1.25) from its own figures: per step, ``mean_view_tokens × (α ×
prefix_reuse + 1.25 × (1 − prefix_reuse))`` — its cached and uncached tokens, priced
again (within a token of the exact sum: the two figures are rounded).

    python benchmarks/bench_replay_vs_peers.py [--peers benchmarks/peers_results.json] [--markdown]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
STYLES = {"openai": "billed_input_tokens_per_step", "anthropic": "billed_input_tokens_per_step_anthropic"}
NAMES = {
    "naive": "no reduction",
    "lc_trim_exact": "LangChain trim_messages (exact)",
    "ph_clear": "Harness ClearToolResults",
    "ph_window": "Harness SlidingWindow",
    "ph_spill": "Harness spill",
    "ph_tiered": "Harness Tiered",
    "ph_spill_tiered": "Harness spill + Tiered",
    "oh0_recent": "OpenHands V0 RecentEvents",
    "oh0_mask": "OpenHands V0 ObservationMasking",
    "oh0_amortized": "OpenHands V0 AmortizedForgetting",
    "oh0_amortized_keep2": "OpenHands V0 AmortizedForgetting keep 2",
    "ctxline": "**ctxline**",
}


ANTHROPIC_WRITE = 1.25


def with_anthropic_style(results: dict[str, Any]) -> dict[str, Any]:
    """``results`` with the Anthropic-style billed input filled in where the harness left it out."""
    alpha = float(results.get("meta", {}).get("alpha", 0.1))
    for run in results.get("runs", []):
        if run.get("billed_input_tokens_per_step_anthropic") is None and run.get("steps"):
            reuse, mean = run["prefix_reuse"], run["mean_view_tokens"]
            run["billed_input_tokens_per_step_anthropic"] = round(mean * (alpha * reuse + ANTHROPIC_WRITE * (1 - reuse)))
            run["billed_input_anthropic_derived"] = True
    return results


def valid(run: dict[str, Any]) -> bool:
    """Zero failures: never over the limit, no pairing error, the task always kept."""
    return (
        run.get("error") is None
        and run.get("steps", 0) > 0
        and run["over_limit_steps"] == 0
        and run["pairing_errors"] == 0
        and run["task_kept_share"] == 1.0
        and run["system_only_views"] == 0
        and run.get("refused_steps", 0) == 0
    )


def compare(results: dict[str, Any]) -> dict[str, Any]:
    groups: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for run in results.get("runs", []):
        if "dataset" in run:
            groups.setdefault((run["dataset"], run["input_limit"]), []).append(run)
    out: dict[str, Any] = {}
    for (dataset, limit), runs in groups.items():
        ours = next((r for r in runs if r["peer"] == "ctxline"), None)
        peers = [r for r in runs if r["peer"] not in ("ctxline", "naive")]
        entry: dict[str, Any] = {"ctxline": _row(ours) if ours else None, "best_zero_failure_peer": {}}
        for style, key in STYLES.items():
            ok = [r for r in peers if valid(r) and key in r]
            best = min(ok, key=lambda r: r[key], default=None)
            entry["best_zero_failure_peer"][style] = None if best is None else {"peer": best["peer"], key: best[key], "cache_breaks_per_100_steps": best["cache_breaks_per_100_steps"]}
            if ours is not None and best is not None:
                entry[f"ratio_{style}"] = round(ours[key] / best[key], 3)
        entry["ctxline_zero_failures"] = ours is not None and valid(ours)
        out[f"{dataset} ({limit:,})"] = entry
    return out


def _row(run: dict[str, Any]) -> dict[str, Any]:
    keys = (
        "steps", "over_limit_steps", "pairing_errors", "task_kept_share", "latest_kept_share",
        "prefix_reuse", "cache_breaks_per_100_steps", "billed_input_tokens_per_step",
        "billed_input_tokens_per_step_anthropic", "mean_view_tokens", "ms_p50", "ms_p95",
    )  # fmt: skip
    row = {k: run.get(k) for k in keys}
    own = (run.get("ctxline") or {}).get("own_replay_metrics") or {}
    row["own"] = {k: own.get(k) for k in ("latest_kept", "latest_kept_within_fresh_limit", "billed_input_tokens_per_step", "billed_input_tokens_per_step_anthropic", "cache_breaks_per_100_steps")}
    return row


def markdown(results: dict[str, Any]) -> str:
    lines = [
        "| dataset (input limit) | reducer | over limit | task kept | newest kept | cache breaks / 100 steps | billed / step (OpenAI style) | billed / step (Anthropic style) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    groups: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for run in results.get("runs", []):
        if "dataset" in run and run.get("steps"):
            groups.setdefault((run["dataset"], run["input_limit"]), []).append(run)
    for (dataset, limit), runs in groups.items():
        shown = [r for r in runs if r["peer"] in ("ctxline", "naive") or valid(r)]
        shown.sort(key=lambda r: (r["peer"] != "ctxline", r["peer"] == "naive", r["billed_input_tokens_per_step"]))
        for i, r in enumerate(shown):
            label = f"{dataset} ({limit:,})" if i == 0 else ""
            name = NAMES.get(r["peer"], r["peer"])
            over = f"{r['over_limit_steps']}" + ("" if r["pairing_errors"] == 0 else f", {r['pairing_errors']} pairing errors")
            lines.append(
                f"| {label} | {name} | {over} | {r['task_kept_share']:.3f} | {r['latest_kept_share']:.3f} | "
                f"{r['cache_breaks_per_100_steps']:.2f} | {r['billed_input_tokens_per_step']:,} | "
                f"{r['billed_input_tokens_per_step_anthropic']:,} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--peers", default=str(REPO / "benchmarks" / "peers_results.json"))
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    results = with_anthropic_style(json.loads(Path(args.peers).read_text()))
    if args.markdown:
        print(markdown(results))
        return
    print(json.dumps({"benchmark": "replay_vs_peers", "meta": results.get("meta", {}) and {k: v for k, v in results["meta"].items() if k != "datasets"}, "datasets": compare(results)}, indent=1))


if __name__ == "__main__":
    main()
