"""``ctxline doctor --cache``: another agent's prompt cache, call by call (Claude Code first).

Why: the problem users of other agents report most is a broken prompt cache and no way
to see why (a timestamp or an unordered tool list dropping hit rates from ~94 % to
15 % or below 1 %: REFERENCES.md). Claude Code transcripts record each call's usage;
this package lists every call's cache read / write / uncached tokens, every miss with
its likely cause (:data:`~ctxline.cachecheck.analyze.CAUSES`) and its cost from
:mod:`ctxline.pricing`, as text, JSON or an HTML page with the inspector's charts.

    report = check_path(Path("~/.claude/projects/x/session.jsonl").expanduser())
    print("\\n".join(report_lines(report)))
"""

from __future__ import annotations

from pathlib import Path

from ctxline.cachecheck.analyze import CAUSES, CacheReport, CallRow, check_calls, check_file
from ctxline.errors import ValidationError
from ctxline.pricing import PriceTable, format_usd

__all__ = [
    "CAUSES",
    "CacheReport",
    "CallRow",
    "check_calls",
    "check_file",
    "check_path",
    "report_lines",
]


def check_path(path: Path, table: PriceTable | None = None) -> list[CacheReport]:
    """One report per transcript: a ``.jsonl`` file, or every ``*.jsonl`` under a folder."""
    if path.is_dir():
        files = sorted(path.rglob("*.jsonl"))
        if not files:
            raise ValidationError("no .jsonl transcripts in this folder", source=str(path))
        return [check_file(f, table) for f in files]
    if not path.is_file():
        raise ValidationError("no such file or folder", source=str(path))
    return [check_file(path, table)]


def report_lines(report: CacheReport) -> list[str]:
    """The report for a terminal: a summary, then one line per miss (and the cold start)."""
    misses = report.misses
    out = [
        f"ctxline doctor --cache: {report.source}",
        f"{len(report.rows):,} calls · cache hit rate {report.hit_rate:.1%} of input tokens · "
        f"{sum(1 for r in misses if r.status == 'miss'):,} misses · cost {format_usd(report.total('cost'))}"
        f" · misses cost {format_usd(report.total('miss_cost'))}",
    ]
    if report.unpriced:
        out.append(
            f"no price for {', '.join(report.unpriced)} (ctxline/data/pricing.json; --prices FILE to add one)"
        )
    out.append(
        f"{'call':>5} {'line':>6} {'read':>9} {'write':>9} {'uncached':>8} {'lost':>9} {'cost':>9}  cause"
    )
    for r in misses:
        detail = f" — {r.first_difference}" if r.first_difference else ""
        out.append(
            f"{r.call:>5} {r.line:>6} {r.cache_read:>9,} {r.cache_write + r.cache_write_1h:>9,} {r.uncached:>8,}"
            f" {r.lost:>9,} {format_usd(r.miss_cost):>9}  {r.cause}: {CAUSES[r.cause]}{detail}"
        )
    return out
