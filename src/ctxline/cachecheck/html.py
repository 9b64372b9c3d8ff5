"""``doctor --cache --html``: the cache report as one self-contained page (the inspector's charts).

Per call, the input tokens stacked as cache read / cache write / uncached, the line of
what the call expected to read from the cache, and a marker (●) on every miss with its
cause and cost; then the table of misses. Inline CSS and SVG, no script or link.

    write_cache_html(Path("cache.html"), reports)
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from html import escape
from pathlib import Path

from ctxline.cachecheck.analyze import CAUSES, CacheReport
from ctxline.pricing import format_usd
from ctxline.web.charts import ChartStep, Line, legend, run_chart
from ctxline.web.report_html import CSS

__all__ = ["CACHE_COLORS", "render_cache_html", "write_cache_html"]

CACHE_COLORS = {"cache read": "#59a14f", "cache write": "#edc948", "uncached": "#e15759"}
EXPECTED = Line("expected", "expected cache read (what the call before left cached)", "#222", "4 2")
EXTRA_CSS = ".at{white-space:nowrap}table.misses{border-collapse:collapse;font-size:13px}table.misses td,table.misses th{border-bottom:1px solid #e5e5e5;padding:3px 10px 3px 0;text-align:left;vertical-align:top}table.misses td.n{text-align:right;font-variant-numeric:tabular-nums}"


def _chart(report: CacheReport) -> str:
    steps = [
        ChartStep(
            f"call {r.call} (line {r.line})",
            {
                "cache read": r.cache_read,
                "cache write": r.cache_write + r.cache_write_1h,
                "uncached": r.uncached,
            },
            {"expected": float(r.expected_read)},
            broke=r.status == "miss",
            note=f"{r.cause}: {r.lost:,} tokens written again, {format_usd(r.miss_cost)}"
            if r.status == "miss"
            else "",
        )
        for r in report.rows
    ]
    return run_chart(steps, CACHE_COLORS, [EXPECTED], width=1360, height=240, unit="call")


def _section(report: CacheReport) -> str:
    rows = "".join(
        f'<tr class="{escape(r.status)}"><td class="n">{r.call}</td><td class="n">{r.line}</td><td class="at">{escape(r.at)}</td>'
        f'<td class="n">{r.cache_read:,}</td><td class="n">{r.cache_write + r.cache_write_1h:,}</td>'
        f'<td class="n">{r.uncached:,}</td><td class="n">{r.lost:,}</td><td class="n">{escape(format_usd(r.miss_cost))}</td>'
        f"<td><b>{escape(r.cause)}</b>: {escape(CAUSES[r.cause])}"
        f"{'<br><span class=note>' + escape(r.first_difference) + '</span>' if r.first_difference else ''}</td></tr>"
        for r in report.misses
    )
    misses = sum(1 for r in report.rows if r.status == "miss")
    unpriced = (
        f'<p class="note">No price for {escape(", ".join(report.unpriced))}.</p>'
        if report.unpriced
        else ""
    )
    return (
        f"<h2>{escape(report.source)}</h2>"
        f'<p class="sub">{len(report.rows):,} calls · cache hit rate {report.hit_rate:.1%} · {misses:,} misses · '
        f"cost {escape(format_usd(report.total('cost')))} · misses cost {escape(format_usd(report.total('miss_cost')))}</p>"
        f"{unpriced}{_chart(report)}"
        '<table class="misses"><thead><tr><th>call</th><th>line</th><th>at</th><th>read</th><th>write</th>'
        f"<th>uncached</th><th>lost</th><th>cost</th><th>cause</th></tr></thead><tbody>{rows}</tbody></table>"
    )


def render_cache_html(reports: Sequence[CacheReport], title: str = "ctxline doctor --cache") -> str:
    body = "".join(_section(r) for r in reports)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(title)}</title><style>{CSS}{EXTRA_CSS}</style></head><body>"
        f"<h1>{escape(title)}</h1>{legend(CACHE_COLORS, [EXPECTED], markers=False)}"
        '<p class="note">● a miss (hover: cause and cost). A call expects to read what the call before it '
        "left in the cache; reading less is a miss, and the lost tokens are written again.</p>"
        f"{body}</body></html>\n"
    )


def write_cache_html(path: Path, reports: Sequence[CacheReport]) -> None:
    """Write the page atomically (a half-written page never replaces a good one)."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(render_cache_html(reports), "utf-8")
    os.replace(tmp, path)
