"""One self-contained HTML page for a replay: the summary figures and per-step plots.

A replay's JSON says *whether* every request fit; the page shows *how*: per step, the
tokens by section (tools, system, history, tail) stacked under the input limit, the
tokens reused from the previous request, and where the ladder acted (fold, trim,
compact) or the cache broke. Everything is inline — CSS and SVG, no script, font or
link — so the file opens offline and can be attached to an issue.

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
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["MAX_POINTS", "SECTIONS", "format_value", "render_report", "write_report"]

SECTIONS = ("tools", "system", "history", "tail")
COLORS = {"tools": "#9c755f", "system": "#4e79a7", "history": "#a0cbe8", "tail": "#f28e2b"}
ACTION_COLORS = {"compact": "#d62728", "trim": "#e8a33d", "fold": "#2ca089"}
OTHER_ACTION = "#7f7f7f"
LIMIT_COLOR, REUSED_COLOR, BREAK_COLOR = "#c0392b", "#2e7d32", "#222"
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
.sw{display:inline-block;width:12px;height:12px;vertical-align:-1px;margin-right:4px;
border-radius:2px}
.ln{display:inline-block;width:18px;height:0;border-top:2px solid;vertical-align:4px;
margin-right:4px}
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(440px,1fr));gap:14px}
.facet{border:1px solid #eee;border-radius:6px;padding:6px 8px}
.facet h3{font-size:12px;font-weight:600;margin:0;overflow:hidden;text-overflow:ellipsis;
white-space:nowrap}
.facet p{font-size:11px;color:#666;margin:0 0 2px}
svg{display:block;width:100%;height:auto}svg text{font:10px system-ui,sans-serif;fill:#555}
.note{color:#666;font-size:12px}
"""


def format_value(value: Any) -> str:
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


def _short(n: float) -> str:
    if n >= 1_000_000:
        return f"{n / 1e6:.3g}M"
    if n >= 1_000:
        return f"{n / 1e3:.3g}k"
    return f"{n:.0f}"


def _n(count: int, noun: str) -> str:
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


def _nice_step(top: float, ticks: int = 4) -> float:
    raw = max(top, 1) / ticks
    base = 10.0 ** math.floor(math.log10(raw))
    return next(m * base for m in (1.0, 2.0, 2.5, 5.0, 10.0) if m * base >= raw)


@dataclass(frozen=True, slots=True)
class _Column:
    """One drawn column: a step, or a bin of steps shown by its largest request."""

    first: int
    last: int
    step: Mapping[str, Any]
    actions: tuple[str, ...]
    breaks: int


def _tok(step: Mapping[str, Any], key: str) -> int:
    """Tokens of one section (or ``total``: as given, else the sum of the sections)."""
    tokens = step.get("tokens") or {}
    if key == "total" and tokens.get("total") is None:
        return sum(int(tokens.get(s) or 0) for s in SECTIONS)
    return int(tokens.get(key) or 0)


def _columns(steps: Sequence[Mapping[str, Any]], max_points: int) -> list[_Column]:
    size = max(1, math.ceil(len(steps) / max_points))
    out = []
    for i in range(0, len(steps), size):
        chunk = steps[i : i + size]
        peak = max(chunk, key=lambda s: _tok(s, "total"))
        actions = tuple(dict.fromkeys(str(a) for s in chunk for a in s.get("actions") or ()))
        out.append(
            _Column(i, i + len(chunk) - 1, peak, actions, sum(bool(s.get("break")) for s in chunk))
        )
    return out


def _action_color(actions: Sequence[str]) -> str:
    for kind in ("compact", "trim", "fold"):
        if kind in actions:
            return ACTION_COLORS[kind]
    return OTHER_ACTION


def _plot(
    steps: Sequence[Mapping[str, Any]],
    *,
    width: int,
    height: int,
    max_points: int = MAX_POINTS,
    separators: Sequence[int] = (),
) -> str:
    """An inline SVG: stacked sections, limit and reuse lines, action and break markers."""
    cols = _columns(steps, max_points)
    left, right, top, bottom = 44, 8, 22, 18
    pw, ph = width - left - right, height - top - bottom
    peak = max(
        [_tok(c.step, "total") for c in cols] + [int(c.step.get("limit") or 0) for c in cols]
    )
    tick = _nice_step(peak * 1.05)
    ymax = tick * math.ceil(peak * 1.05 / tick) or 1.0
    bw = pw / len(cols)

    def x(i: float) -> float:
        return left + i * bw

    def y(v: float) -> float:
        return top + ph - ph * v / ymax

    parts = [f'<svg viewBox="0 0 {width} {height}" role="img">']
    for k in range(int(ymax / tick) + 1):
        v = k * tick
        parts.append(
            f'<line x1="{left}" x2="{width - right}" y1="{y(v):.1f}" y2="{y(v):.1f}" '
            f'stroke="#eee"/><text x="{left - 4}" y="{y(v) + 3:.1f}" text-anchor="end">'
            f"{_short(v)}</text>"
        )
    for idx in separators:
        sx = x(idx / max(1, math.ceil(len(steps) / max_points)))
        parts.append(
            f'<line x1="{sx:.1f}" x2="{sx:.1f}" y1="{top}" y2="{top + ph}" stroke="#ddd"/>'
        )
    below = [0.0] * len(cols)
    for section in SECTIONS:
        upper = [b + _tok(c.step, section) for b, c in zip(below, cols, strict=True)]
        if any(u > b for u, b in zip(upper, below, strict=True)):
            fwd = " ".join(
                f"{x(i):.1f},{y(u):.1f} {x(i + 1):.1f},{y(u):.1f}" for i, u in enumerate(upper)
            )
            back = " ".join(
                f"{x(i + 1):.1f},{y(b):.1f} {x(i):.1f},{y(b):.1f}"
                for i, b in reversed(list(enumerate(below)))
            )
            parts.append(f'<polygon points="{fwd} {back}" fill="{COLORS[section]}"/>')
        below = upper

    def line(values: Sequence[float], color: str, dash: str = "") -> str:
        pts = " ".join(
            f"{x(i):.1f},{y(v):.1f} {x(i + 1):.1f},{y(v):.1f}" for i, v in enumerate(values)
        )
        extra = f' stroke-dasharray="{dash}"' if dash else ""
        return f'<polyline points="{pts}" fill="none" stroke="{color}" stroke-width="1.5"{extra}/>'

    parts.append(line([float(c.step.get("limit") or 0) for c in cols], LIMIT_COLOR, "5 3"))
    parts.append(line([float(c.step.get("reused") or 0) for c in cols], REUSED_COLOR))
    for i, c in enumerate(cols):
        cx = x(i + 0.5)
        label = f"step {c.step.get('step', c.first + 1)}"
        if c.last > c.first:
            label = f"steps {c.first + 1}–{c.last + 1} (peak {label})"
        if c.actions:
            parts.append(
                f'<path d="M{cx - 4:.1f},3 L{cx + 4:.1f},3 L{cx:.1f},10 Z" '
                f'fill="{_action_color(c.actions)}"><title>{html.escape(label)}: '
                f"{html.escape(', '.join(c.actions))}</title></path>"
            )
        if c.breaks:
            parts.append(
                f'<circle cx="{cx:.1f}" cy="15" r="2.5" fill="{BREAK_COLOR}"><title>'
                f"{html.escape(label)}: cache break{f' ×{c.breaks}' if c.breaks > 1 else ''}"
                "</title></circle>"
            )
    parts.append(
        f'<line x1="{left}" x2="{width - right}" y1="{top + ph}" y2="{top + ph}" stroke="#999"/>'
        f'<text x="{left}" y="{height - 4}">1</text>'
        f'<text x="{width - right}" y="{height - 4}" text-anchor="end">{_n(len(steps), "step")}</text>'
        "</svg>"
    )
    return "".join(parts)


def _legend() -> str:
    items = [f'<span><i class="sw" style="background:{COLORS[s]}"></i>{s}</span>' for s in SECTIONS]
    items += [
        f'<span><i class="ln" style="border-color:{LIMIT_COLOR};border-top-style:dashed"></i>'
        "input limit</span>",
        f'<span><i class="ln" style="border-color:{REUSED_COLOR}"></i>reused from previous request'
        "</span>",
    ]
    items += [
        f'<span><span style="color:{color}">▼</span> {kind}</span>'
        for kind, color in ACTION_COLORS.items()
    ]
    items.append(f'<span><span style="color:{BREAK_COLOR}">●</span> cache break</span>')
    return f'<p class="legend">{"".join(items)}</p>'


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
