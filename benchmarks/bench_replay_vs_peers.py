"""ctxline's replay figures beside the peer reducers', on the same sessions and settings.

Runs ``ctxline replay``'s code on the three peer-harness datasets with the harness's
windows (tau-bench 8k with 1k reserved output, mini-swe-agent 32k with 4k, Claude Code
200k with 32k) and prints ONE JSON object with ctxline's figures and, for each dataset,
the peers' from a result file of ``../shared/peers/bench_peers.py`` (default
``benchmarks/peers_results.json``, produced with ``--n-tau 100 --n-mini 31 --n-claude 5
--tau-limit 7000``). The best peer is the one with the lowest billed input tokens per
step among those that never went over the limit.

    python benchmarks/bench_replay_vs_peers.py [--data ../shared/data] [--peers FILE]
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from ctxline.importers import load_tree
from ctxline.record.store import MemoryStore
from ctxline.replay import ReplayStats, replay_session
from ctxline.tokens.counters import get_counter
from ctxline.view.prepare import PrepareOptions

REPO = Path(__file__).resolve().parents[1]
DATASETS = {
    # name: (folder, glob, window, max output, files kept as the harness keeps them)
    "tau-bench": ("tau-bench", 8_000, 1_000, None),
    "mini-swe-agent": ("mini-swe-agent", 32_000, 4_000, None),
    "claude-code": ("claude-code", 200_000, 32_000, 5),
}


def ctxline_figures(data: Path, name: str) -> dict[str, Any]:
    folder, window, max_output, first_files = DATASETS[name]
    options = PrepareOptions(context_window=window, max_output=max_output)
    sessions = load_tree(data / folder, "auto")
    if first_files is not None:  # the harness takes the first N main files, no sub-agents
        mains = sorted({str(s.meta.get("file", "")) for s in sessions if "parent" not in s.meta})
        keep = set(mains[:first_files])
        sessions = [s for s in sessions if str(s.meta.get("file", "")) in keep and "parent" not in s.meta]
    stats = ReplayStats()
    counter = get_counter("o200k")
    for session in sessions:
        stats.trajectories += 1
        for step in replay_session(MemoryStore(), session, options=options, counter=counter):
            stats.add(step)
    return stats.summary()


def peer_rows(peers: dict[str, Any], name: str) -> list[dict[str, Any]]:
    rows = []
    for run in peers.get("runs", []):
        if run.get("dataset") != name:
            continue
        rows.append(
            {
                "peer": run["peer"],
                "over_limit_steps": run["over_limit_steps"],
                "pairing_errors": run["pairing_errors"],
                "task_kept": run["task_kept_share"],
                "prefix_reuse": run["prefix_reuse"],
                "cache_breaks_per_100_steps": run["cache_breaks_per_100_steps"],
                "billed_input": run["billed_input"],
                "mean_request_tokens": run["mean_view_tokens"],
                "billed_input_tokens_per_step": round(run["billed_input"] * run["mean_view_tokens"]),
                "ms_p50": run["ms_p50"],
                "ms_p95": run["ms_p95"],
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    default_data = os.environ.get("CTXLINE_SHARED_DATA", str(REPO.parent / "shared" / "data"))
    parser.add_argument("--data", default=default_data)
    parser.add_argument("--peers", default=str(REPO / "benchmarks" / "peers_results.json"))
    args = parser.parse_args()
    peers = json.loads(Path(args.peers).read_text()) if Path(args.peers).exists() else {}
    out: dict[str, Any] = {"benchmark": "replay_vs_peers", "datasets": {}}
    for name in DATASETS:
        ours = ctxline_figures(Path(args.data), name)
        rows = peer_rows(peers, name)
        valid = [r for r in rows if r["over_limit_steps"] == 0 and r["pairing_errors"] == 0]
        best = min(valid, key=lambda r: r["billed_input_tokens_per_step"], default=None)
        out["datasets"][name] = {"ctxline": ours, "best_valid_peer": best, "peers": rows}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
