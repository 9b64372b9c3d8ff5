"""One self-contained HTML page for a replay: the summary figures and per-step plots.

A replay's JSON says *whether* every request fit; the page shows *how*: per step, the
tokens by section (tools, system, history, tail) stacked under the input limit, the
tokens reused from the previous request, and where the ladder acted (fold, trim,
compact) or the cache broke. The plots are the inspector's (:mod:`ctxline.web.charts`,
the same drawing as ``ctxline serve``), inline — CSS and SVG, no script, font or link —
so the file opens offline and can be attached to an issue.

Long runs stay readable: the overview draws at most :data:`MAX_POINTS` columns (a
column shows its largest request), and each session gets its own small plot.

    stats = ReplayStats(keep_steps=True)
    ...
    write_report("replay.html", summary=stats.summary(), per_step=stats.per_step,
                 title="mini-swe-agent, 32k window")
"""

from __future__ import annotations

import html
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ctxline.web.charts import (
    LIMIT_COLOR,
    REUSED_COLOR,
    SECTION_COLORS,
    ChartStep,
    Line,
    legend,
    run_chart,
)

__all__ = ["MAX_POINTS", "SECTIONS", "format_value", "render_report", "write_report"]

SECTIONS = ("tools", "system", "history", "tail")
COLORS = {s: SECTION_COLORS[s] for s in SECTIONS}
LINES = (
    Line("limit", "input limit", LIMIT_COLOR, "5 3"),
    Line("reused", "reused from previous request", REUSED_COLOR),
)
MAX_POINTS = 600
"""The most columns one plot draws; longer runs are binned (each bin shows its peak step)."""
MAX_SEPARATORS = 100
"""Session separators in the overview are drawn only up to this many sessions."""
MAX_FACETS = 200
"""The most per-session plots; beyond that the sessions with the highest peaks are drawn."""

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px;color:#222;
background:#fff;max-width:1400px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px}
.sub{color:#666;margin:0 0 16px}
table.summary{border-collapse:collapse;font-variant-numeric:tabular-nums;max-width:760px}
table.summary td,table.summary th{border-bottom:1px solid #e5e5e5;padding:3px 14px 3px 0;
text-align:left;vertical-align:top}
table.summary td.v{text-align:right;font-weight:600}
table.summary td.map{text-align:left;font-weight:400;font-size:13px}
.legend span{display:inline-block;margin-right:16px;white-space:nowrap}
.legend svg{display:inline-block;width:12px;height:12px;vertical-align:-1px;margin-right:4px}
.legend svg.ln{width:18px;height:4px;vertical-align:3px}
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(440px,1fr));gap:14px}
.facet{border:1px solid #eee;border-radius:6px;padding:6px 8px}
.facet h3{font-size:12px;font-weight:600;margin:0;overflow:hidden;text-overflow:ellipsis;
white-space:nowrap}
.facet p{font-size:11px;color:#666;margin:0 0 2px}
svg.chart{display:block;width:100%;height:auto}svg text{font:10px system-ui,sans-serif;fill:#555}
.note{color:#666;font-size:12px}
"""


def format_value(value: object) -> str:
    """A summary figure as the page shows it (integers grouped, ratios as given)."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, Mapping):
        return ", ".join(f"{k} {format_value(v)}" for k, v in value.items()) or "none"
    return str(value)


def _n(count: int, noun: str) -> str:
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


def _tok(step: Mapping[str, Any], key: str) -> int:
    """Tokens of one section (or ``total``: as given, else the sum of the sections)."""
    tokens = step.get("tokens") or {}
    if key == "total" and tokens.get("total") is None:
        return sum(int(tokens.get(s) or 0) for s in SECTIONS)
    return int(tokens.get(key) or 0)


def _chart_step(i: int, step: Mapping[str, Any]) -> ChartStep:
    return ChartStep(
        label=f"step {step.get('step', i + 1)}",
        values={s: _tok(step, s) for s in SECTIONS},
        lines={"limit": float(step.get("limit") or 0), "reused": float(step.get("reused") or 0)},
        actions=tuple(str(a) for a in step.get("actions") or ()),
        broke=bool(step.get("break")),
    )


def _plot(
    steps: Sequence[Mapping[str, Any]],
    *,
    width: int,
    height: int,
    max_points: int = MAX_POINTS,
    separators: Sequence[int] = (),
) -> str:
    chart = [_chart_step(i, s) for i, s in enumerate(steps)]
    return run_chart(
        chart,
        COLORS,
        LINES,
        width=width,
        height=height,
        max_points=max_points,
        separators=separators,
    )


def _legend() -> str:
    return legend(COLORS, LINES)


def _summary_table(summary: Mapping[str, Any]) -> str:
    rows = [
        f'<tr><th>{html.escape(str(k))}</th><td class="v{" map" if isinstance(v, Mapping) else ""}"'
        f' data-key="{html.escape(str(k))}" '
        f'data-value="{html.escape(json.dumps(v, sort_keys=True))}">'
        f"{html.escape(format_value(v))}</td></tr>"
        for k, v in summary.items()
    ]
    return f'<table class="summary">{"".join(rows)}</table>'


def _facet(name: str, steps: Sequence[Mapping[str, Any]]) -> str:
    peak = max(_tok(s, "total") for s in steps)
    total = sum(_tok(s, "total") for s in steps)
    reused = sum(int(s.get("reused") or 0) for s in steps)
    breaks = sum(bool(s.get("break")) for s in steps)
    acts = sum(len(s.get("actions") or ()) for s in steps)
    stats = (
        f"{_n(len(steps), 'step')} · peak {peak:,} · reuse {reused / (total or 1):.3f}"
        f" · {_n(breaks, 'cache break')} · {_n(acts, 'action')}"
    )
    return (
        f'<div class="facet"><h3 title="{html.escape(name)}">{html.escape(name)}</h3>'
        f"<p>{stats}</p>{_plot(steps, width=440, height=150, max_points=220)}</div>"
    )


def render_report(
    *, summary: Mapping[str, Any], per_step: Sequence[Mapping[str, Any]], title: str
) -> str:
    """The page as a string (see :func:`write_report`)."""
    sessions: dict[str, list[Mapping[str, Any]]] = {}
    for s in per_step:
        sessions.setdefault(str(s.get("session", "")), []).append(s)
    body = [
        f"<h1>{html.escape(title)}</h1>",
        f'<p class="sub">ctxline replay report · {_n(len(per_step), "request")} in '
        f"{_n(len(sessions), 'session')}</p>",
        "<h2>Summary</h2>",
        _summary_table(summary),
    ]
    if per_step:
        separators, n = [], 0
        for steps in sessions.values():
            if n:
                separators.append(n)
            n += len(steps)
        separators_shown = 1 < len(sessions) <= MAX_SEPARATORS
        body += [
            "<h2>All requests, in replay order</h2>",
            _legend(),
            _plot(
                per_step,
                width=1360,
                height=260,
                separators=separators if separators_shown else (),
            ),
            '<p class="note">Each column is one request (or, in long runs, the largest request '
            f"of a bin){'; grey lines separate sessions' if separators_shown else ''}. Markers "
            "above the plot: reductions and cache breaks (hover for the step).</p>",
        ]
        drawn = list(sessions.items())
        note = ""
        if len(drawn) > MAX_FACETS:
            keep = sorted(drawn, key=lambda kv: -max(_tok(s, "total") for s in kv[1]))
            names = {k for k, _ in keep[:MAX_FACETS]}
            drawn = [kv for kv in drawn if kv[0] in names]
            note = (
                f'<p class="note">{len(sessions) - MAX_FACETS:,} smaller sessions are not drawn '
                "here; they are in the plot above and the summary.</p>"
            )
        body += ["<h2>Per session</h2>", note, '<div class="grid">']
        body += [_facet(name, steps) for name, steps in drawn]
        body.append("</div>")
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>{html.escape(title)}</title><style>{CSS}</style></head>"
        f"<body>{''.join(body)}</body></html>\n"
    )


def write_report(
    path: str | os.PathLike[str],
    *,
    summary: Mapping[str, Any],
    per_step: Sequence[Mapping[str, Any]],
    title: str,
) -> None:
    """Write the page to ``path`` (atomically: a half-written page never replaces a good one).

    ``summary`` is :meth:`ReplayStats.summary`; ``per_step`` its ``per_step`` dicts
    (session, step, tokens by section, limit, reused, break, actions).
    """
    target = Path(path)
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.write_text(render_report(summary=summary, per_step=per_step, title=title), "utf-8")
    os.replace(tmp, target)
