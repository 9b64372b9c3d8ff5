"""The inspector's charts as inline SVG: one drawing code for the web app, the replay
report and ``doctor --cache --html``.

Why SVG strings and no chart library: the pages must work offline with nothing fetched
and no build step, the replay report must stay one self-contained file, and every
label is data from a record (escaped here, always). Two charts:

* :func:`run_chart` — one column per request (long runs binned: a column shows its
  largest request), the sections stacked, lines for the budget (input limit, pressure,
  target) or reuse, and markers above: reductions (▼) and cache breaks (●), each with a
  tooltip and, in the app, a link.
* :func:`composition_bar` — one request as a horizontal stacked bar with its budget lines.

    svg = run_chart(steps, SECTION_COLORS, [Line("input_limit", "input limit", LIMIT_COLOR, "5 3")])
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from html import escape

__all__ = [
    "ACTION_COLORS",
    "BREAK_COLOR",
    "LIMIT_COLOR",
    "REUSED_COLOR",
    "SECTION_COLORS",
    "ChartStep",
    "Line",
    "composition_bar",
    "legend",
    "run_chart",
    "short",
]

SECTION_COLORS: dict[str, str] = {
    "tools": "#9c755f",
    "system": "#4e79a7",
    "guide": "#76b7b2",
    "history": "#a0cbe8",
    "summaries": "#b07aa1",
    "tail": "#f28e2b",
}
ACTION_COLORS = {"compact": "#d62728", "trim": "#e8a33d", "fold": "#2ca089"}
OTHER_ACTION = "#7f7f7f"
LIMIT_COLOR, PRESSURE_COLOR, TARGET_COLOR = "#c0392b", "#e67e22", "#7f8c8d"
REUSED_COLOR, BREAK_COLOR = "#2e7d32", "#222"


@dataclass(frozen=True, slots=True)
class Line:
    key: str
    label: str
    color: str
    dash: str = ""


BUDGET_LINES = (
    Line("input_limit", "input limit", LIMIT_COLOR, "5 3"),
    Line("pressure_line", "pressure line", PRESSURE_COLOR, "2 2"),
    Line("target", "target", TARGET_COLOR, "6 2 1 2"),
)


@dataclass(frozen=True, slots=True)
class ChartStep:
    """One column: tokens by section, line values, and what to mark above it."""

    label: str
    values: Mapping[str, int]
    lines: Mapping[str, float] = field(default_factory=dict)
    actions: tuple[str, ...] = ()
    broke: bool = False
    note: str = ""
    """Tooltip text after the label (a break's cost, say)."""
    href: str = ""
    """Where a marker links to (the app: the step's diff); '' for none."""


def short(n: float) -> str:
    """``12.3k``, ``1.5M``: a token count for an axis."""
    if n >= 1_000_000:
        return f"{n / 1e6:.3g}M"
    if n >= 1_000:
        return f"{n / 1e3:.3g}k"
    return f"{n:.0f}"


def _nice_step(top: float, ticks: int = 4) -> float:
    raw = max(top, 1) / ticks
    base = 10.0 ** math.floor(math.log10(raw))
    return next(m * base for m in (1.0, 2.0, 2.5, 5.0, 10.0) if m * base >= raw)


@dataclass(frozen=True, slots=True)
class _Column:
    first: int
    last: int
    step: ChartStep
    actions: tuple[str, ...]
    breaks: int
    notes: tuple[str, ...]
    href: str


def _total(step: ChartStep) -> int:
    return sum(int(v) for v in step.values.values())


def _columns(steps: Sequence[ChartStep], max_points: int) -> list[_Column]:
    size = max(1, math.ceil(len(steps) / max_points))
    out = []
    for i in range(0, len(steps), size):
        chunk = steps[i : i + size]
        peak = max(chunk, key=_total)
        actions = tuple(dict.fromkeys(a for s in chunk for a in s.actions))
        broken = [s for s in chunk if s.broke]
        notes = tuple(s.note for s in broken if s.note)
        href = next((s.href for s in broken if s.href), "") or next(
            (s.href for s in chunk if s.actions and s.href), ""
        )
        out.append(_Column(i, i + len(chunk) - 1, peak, actions, len(broken), notes, href))
    return out


def _action_color(actions: Sequence[str]) -> str:
    return next(
        (ACTION_COLORS[k] for k in ("compact", "trim", "fold") if k in actions), OTHER_ACTION
    )


def _linked(markup: str, href: str) -> str:
    return f'<a href="{escape(href)}">{markup}</a>' if href else markup


def run_chart(
    steps: Sequence[ChartStep],
    colors: Mapping[str, str],
    lines: Sequence[Line] = BUDGET_LINES,
    *,
    width: int = 1360,
    height: int = 260,
    max_points: int = 600,
    separators: Sequence[int] = (),
    unit: str = "step",
) -> str:
    """Stacked sections per step, with lines and markers (see the module doc); '' for no steps."""
    if not steps:
        return ""
    cols = _columns(steps, max_points)
    bin_size = max(1, math.ceil(len(steps) / max_points))
    left, right, top, bottom = 44, 8, 22, 18
    pw, ph = width - left - right, height - top - bottom
    peak = max(
        [_total(c.step) for c in cols]
        + [float(c.step.lines.get(ln.key) or 0) for c in cols for ln in lines]
    )
    tick = _nice_step(peak * 1.05)
    ymax = tick * math.ceil(peak * 1.05 / tick) or 1.0
    bw = pw / len(cols)

    def x(i: float) -> float:
        return left + i * bw

    def y(v: float) -> float:
        return top + ph - ph * v / ymax

    parts = [f'<svg class="chart" viewBox="0 0 {width} {height}" role="img">']
    for k in range(int(ymax / tick) + 1):
        v = k * tick
        parts.append(
            f'<line x1="{left}" x2="{width - right}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#eee"/>'
            f'<text x="{left - 4}" y="{y(v) + 3:.1f}" text-anchor="end">{short(v)}</text>'
        )
    for idx in separators:
        sx = x(idx / bin_size)
        parts.append(
            f'<line x1="{sx:.1f}" x2="{sx:.1f}" y1="{top}" y2="{top + ph}" stroke="#ddd"/>'
        )
    below = [0.0] * len(cols)
    for section, color in colors.items():
        upper = [b + int(c.step.values.get(section) or 0) for b, c in zip(below, cols, strict=True)]
        if any(u > b for u, b in zip(upper, below, strict=True)):
            fwd = " ".join(
                f"{x(i):.1f},{y(u):.1f} {x(i + 1):.1f},{y(u):.1f}" for i, u in enumerate(upper)
            )
            back = " ".join(
                f"{x(i + 1):.1f},{y(b):.1f} {x(i):.1f},{y(b):.1f}"
                for i, b in reversed(list(enumerate(below)))
            )
            parts.append(
                f'<polygon points="{fwd} {back}" fill="{escape(color)}"><title>{escape(section)}</title></polygon>'
            )
        below = upper
    for ln in lines:
        pts = " ".join(
            f"{x(i):.1f},{y(v):.1f} {x(i + 1):.1f},{y(v):.1f}"
            for i, v in enumerate(float(c.step.lines.get(ln.key) or 0) for c in cols)
        )
        dash = f' stroke-dasharray="{ln.dash}"' if ln.dash else ""
        parts.append(
            f'<polyline points="{pts}" fill="none" stroke="{ln.color}" stroke-width="1.5"{dash}>'
            f"<title>{escape(ln.label)}</title></polyline>"
        )
    for i, c in enumerate(cols):
        cx = x(i + 0.5)
        label = c.step.label
        if c.last > c.first:
            label = f"{unit}s {c.first + 1}–{c.last + 1} (peak {label})"
        if c.actions:
            parts.append(
                _linked(
                    f'<path class="mark-action" d="M{cx - 4:.1f},3 L{cx + 4:.1f},3 L{cx:.1f},10 Z" '
                    f'fill="{_action_color(c.actions)}"><title>{escape(label)}: '
                    f"{escape(', '.join(c.actions))}</title></path>",
                    c.href,
                )
            )
        if c.breaks:
            many = f" ×{c.breaks}" if c.breaks > 1 else ""
            note = f" — {'; '.join(c.notes)}" if c.notes else ""
            parts.append(
                _linked(
                    f'<circle class="mark-break" cx="{cx:.1f}" cy="15" r="3" fill="{BREAK_COLOR}"><title>'
                    f"{escape(label)}: cache break{many}{escape(note)}</title></circle>",
                    c.href,
                )
            )
    n = len(steps)
    parts.append(
        f'<line x1="{left}" x2="{width - right}" y1="{top + ph}" y2="{top + ph}" stroke="#999"/>'
        f'<text x="{left}" y="{height - 4}">1</text>'
        f'<text x="{width - right}" y="{height - 4}" text-anchor="end">{n:,} {unit}{"" if n == 1 else "s"}</text>'
        "</svg>"
    )
    return "".join(parts)


def composition_bar(
    values: Sequence[tuple[str, int]],
    colors: Mapping[str, str],
    marks: Sequence[tuple[str, int, str]] = (),
    *,
    width: int = 900,
    height: int = 74,
) -> str:
    """One request: sections as a stacked bar, labelled; ``marks`` (label, tokens, color) as ticks."""
    total = sum(v for _, v in values)
    scale_max = max([total, *(m[1] for m in marks)]) or 1
    left, right, bar_y, bar_h = 4, 4, 22, 26
    pw = width - left - right

    def x(v: float) -> float:
        return left + pw * v / scale_max

    parts = [f'<svg class="chart composition" viewBox="0 0 {width} {height}" role="img">']
    pos = 0
    for section, tokens in values:
        if tokens <= 0:
            continue
        x0, x1 = x(pos), x(pos + tokens)
        share = 100 * tokens / total if total else 0
        parts.append(
            f'<rect class="seg" data-section="{escape(section)}" x="{x0:.1f}" y="{bar_y}" width="{max(x1 - x0, 0.5):.1f}" '
            f'height="{bar_h}" fill="{escape(colors.get(section, OTHER_ACTION))}"><title>{escape(section)}: '
            f"{tokens:,} tokens ({share:.1f} %)</title></rect>"
        )
        if x1 - x0 > 60:
            parts.append(
                f'<text x="{(x0 + x1) / 2:.1f}" y="{bar_y + 17}" text-anchor="middle" class="on-bar">'
                f"{escape(section)} {short(tokens)}</text>"
            )
        pos += tokens
    for label, tokens, color in marks:
        mx = x(tokens)
        anchor = "end" if mx > width - 60 else "start" if mx < 60 else "middle"
        parts.append(
            f'<line x1="{mx:.1f}" x2="{mx:.1f}" y1="{bar_y - 8}" y2="{bar_y + bar_h + 6}" stroke="{escape(color)}" '
            f'stroke-width="2"><title>{escape(label)}: {tokens:,}</title></line>'
            f'<text x="{mx:.1f}" y="{bar_y - 11}" text-anchor="{anchor}">'
            f"{escape(label)} {short(tokens)}</text>"
        )
    parts.append(
        f'<text x="{left}" y="{height - 4}">0</text>'
        f'<text x="{width - right}" y="{height - 4}" text-anchor="end">{short(scale_max)} tokens</text></svg>'
    )
    return "".join(parts)


def _swatch(color: str) -> str:
    return f'<svg class="sw" viewBox="0 0 12 12"><rect width="12" height="12" rx="2" fill="{escape(color)}"/></svg>'


def legend(colors: Mapping[str, str], lines: Sequence[Line] = (), *, markers: bool = True) -> str:
    """The key of a chart as HTML (swatches, line styles, markers); no style attributes, so a
    strict Content-Security-Policy allows it."""
    items = [f"<span>{_swatch(c)}{escape(s)}</span>" for s, c in colors.items()]
    for ln in lines:
        dash = f' stroke-dasharray="{ln.dash}"' if ln.dash else ""
        items.append(
            f'<span><svg class="ln" viewBox="0 0 18 4"><line x1="0" x2="18" y1="2" y2="2" stroke="{ln.color}"'
            f' stroke-width="2"{dash}/></svg>{escape(ln.label)}</span>'
        )
    if markers:
        for kind, color in ACTION_COLORS.items():
            items.append(
                f'<span><svg class="sw" viewBox="0 0 12 12"><path d="M2,2 L10,2 L6,10 Z" fill="{color}"/></svg>{kind}</span>'
            )
        items.append(
            f'<span><svg class="sw" viewBox="0 0 12 12"><circle cx="6" cy="6" r="4" fill="{BREAK_COLOR}"/></svg>'
            "cache break</span>"
        )
    return f'<p class="legend">{"".join(items)}</p>'
