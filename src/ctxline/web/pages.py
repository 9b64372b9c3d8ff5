"""The context of each inspector page, built from the record (plain values; the templates escape).

Kept apart from :mod:`ctxline.web.app` (routing, responses) so the pages can be built
and checked without a server.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from starlette.exceptions import HTTPException

from ctxline.pricing import format_usd
from ctxline.record.events import RequestHeader, StoredEvent
from ctxline.record.store.base import TimelineInfo
from ctxline.web.analysis import CAUSES, RunStep, compare
from ctxline.web.charts import (
    BUDGET_LINES,
    LIMIT_COLOR,
    PRESSURE_COLOR,
    SECTION_COLORS,
    TARGET_COLOR,
    ChartStep,
    composition_bar,
    legend,
    run_chart,
)
from ctxline.web.data import SECTIONS, Rebuilt, branch_marks, rebuild_steps
from ctxline.web.readonly import SessionRow
from ctxline.web.views import (
    blob_row,
    blob_text,
    event_json,
    guide_versions,
    kind_counts,
    segments,
    summarize,
)

__all__ = [
    "BLOBS_PER_PAGE",
    "EVENTS_PER_PAGE",
    "blob_row",
    "blob_text",
    "breaks",
    "diff",
    "event",
    "file_name",
    "guide_versions",
    "header_of",
    "rebuilt_step",
    "request",
    "session_totals",
    "timeline",
]

EVENTS_PER_PAGE = 200
BLOBS_PER_PAGE = 50
BYTES_AROUND = 160
"""Bytes of each body shown on either side of the first difference."""


def _url(path: str, **params: object) -> str:
    from ctxline.web.app import url

    return url(path, **params)


def session_totals(rows: Sequence[SessionRow]) -> dict[str, int]:
    return {
        "events": sum(r.events for r in rows),
        "requests": sum(r.requests for r in rows),
        "reductions": sum(r.reductions for r in rows),
    }


def header_of(events: Sequence[StoredEvent], step: int) -> RequestHeader:
    for ev in events:
        if isinstance(ev.event, RequestHeader) and ev.event.step == step:
            return ev.event
    raise HTTPException(404, f"no logged request step {step} in this timeline")


def _steps(
    session: str,
    timeline: str,
    wanted: set[int],
    events: Sequence[StoredEvent],
    timelines: Sequence[TimelineInfo],
) -> dict[int, Rebuilt]:
    out: dict[int, Rebuilt] = {}
    for rebuilt in rebuild_steps(events, branch_marks(timelines, timeline), only=wanted):
        if rebuilt.step in wanted:
            out[rebuilt.step] = rebuilt
        if len(out) == len(wanted):
            break
    return out


def rebuilt_step(
    session: str,
    timeline: str,
    step: int,
    events: Sequence[StoredEvent],
    timelines: Sequence[TimelineInfo],
) -> Rebuilt:
    found = _steps(session, timeline, {step}, events, timelines).get(step)
    if found is None:
        raise HTTPException(404, f"no logged request step {step} in {session}/{timeline}")
    return found


def file_name(session: str, timeline: str, step: int) -> str:
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", f"{session}-{timeline}")[:120]
    return f"{safe}-step-{step}.json"


def _chart(session: str, timeline: str, run: Sequence[RunStep]) -> str:
    steps = []
    for r in run:
        d = r.diff
        note = ""
        if d is not None and d.broke:
            note = f"{d.cause}: {d.rebilled_tokens:,} tokens re-billed, {format_usd(d.cost)}"
        href = ""
        if d is not None and d.broke:
            href = _url("/diff", s=session, t=timeline, step=r.step)
        elif r.actions:
            href = _url("/request", s=session, t=timeline, step=r.step)
        steps.append(
            ChartStep(
                f"step {r.step}",
                r.composition,
                {k: float(v) for k, v in r.budget.items()},
                tuple(str(a.get("action")) for a in r.actions),
                bool(d is not None and d.broke),
                note,
                href,
            )
        )
    return run_chart(steps, SECTION_COLORS, BUDGET_LINES)


def _break_rows(session: str, timeline: str, run: Sequence[RunStep]) -> list[dict[str, Any]]:
    rows = []
    for r in run:
        d = r.diff
        if d is None or not d.broke:
            continue
        rows.append(
            {
                "step": r.step,
                "section": d.section,
                "cause": d.cause,
                "reason": CAUSES[d.cause],
                "cause_seq": d.cause_seq,
                "shared": d.shared_tokens,
                "previous": d.previous_tokens,
                "rebilled": d.rebilled_tokens,
                "cost": d.cost,
                "model": d.price.model if d.price else "",
                "diff_url": _url("/diff", s=session, t=timeline, step=r.step),
                "event_url": _url("/event", s=session, t=timeline, seq=d.cause_seq)
                if d.cause_seq
                else "",
            }
        )
    return rows


def _total_cost(rows: Sequence[dict[str, Any]]) -> Decimal | None:
    costs = [r["cost"] for r in rows]
    return None if any(c is None for c in costs) else sum(costs, Decimal(0))


def timeline(
    session: str,
    timeline: str,
    events: Sequence[StoredEvent],
    run: Sequence[RunStep],
    timelines: Sequence[TimelineInfo],
    kind: str | None,
    page: int,
) -> dict[str, Any]:
    shown = [ev for ev in events if kind is None or ev.kind == kind]
    pages = max(1, -(-len(shown) // EVENTS_PER_PAGE))
    page = min(max(page, 1), pages)
    rows = []
    for ev in shown[(page - 1) * EVENTS_PER_PAGE : page * EVENTS_PER_PAGE]:
        link = (
            _url("/request", s=session, t=timeline, step=ev.event.step)
            if isinstance(ev.event, RequestHeader)
            else _url("/event", s=session, t=timeline, seq=ev.seq)
        )
        rows.append(
            {
                "seq": ev.seq,
                "at": ev.at.isoformat(timespec="seconds"),
                "kind": ev.kind,
                "summary": summarize(ev.event),
                "link": link,
            }
        )
    breaks = _break_rows(session, timeline, run)
    return {
        "session": session,
        "timeline": timeline,
        "timelines": timelines,
        "kinds": kind_counts(events),
        "kind": kind,
        "rows": rows,
        "page": page,
        "pages": pages,
        "shown": len(shown),
        "events": len(events),
        "chart": _chart(session, timeline, run),
        "legend": legend(SECTION_COLORS, BUDGET_LINES),
        "steps": len(run),
        "breaks": breaks,
        "break_cost": _total_cost(breaks),
        "mismatches": [r.step for r in run if r.error],
        "first_step": run[0].step if run else None,
    }


def _part_view(part: Any, session: str, timeline: str) -> dict[str, Any]:
    return {
        "index": part.index,
        "section": part.section,
        "role": part.role,
        "tokens": part.tokens,
        "seq": part.seq,
        "segments": segments(part.text),
        "chars": len(part.text),
        "spans": part.spans,
        "event_url": _url("/event", s=session, t=timeline, seq=part.seq) if part.seq else "",
    }


def request(
    session: str,
    timeline: str,
    step: int,
    events: Sequence[StoredEvent],
    timelines: Sequence[TimelineInfo],
    run: Sequence[RunStep],
) -> dict[str, Any]:
    rebuilt = rebuilt_step(session, timeline, step, events, timelines)
    report: dict[str, Any] = rebuilt.header.report
    budget = report.get("budget") or {}
    comp = [(s, rebuilt.composition.get(s, 0)) for s in SECTIONS]
    marks = [
        ("target", int(budget.get("target") or 0), TARGET_COLOR),
        ("pressure", int(budget.get("pressure_line") or 0), PRESSURE_COLOR),
        ("input limit", int(budget.get("input_limit") or 0), LIMIT_COLOR),
    ]
    order = [r.step for r in run]
    at = order.index(step) if step in order else -1
    this = run[at] if at >= 0 else None
    return {
        "session": session,
        "timeline": timeline,
        "step": step,
        "rebuilt": rebuilt,
        "size": len(rebuilt.body),
        "logged": rebuilt.header.sha256,
        "composition": comp,
        "total": rebuilt.total,
        "chart": composition_bar(comp, SECTION_COLORS, [m for m in marks if m[1]]),
        "legend": legend({s: SECTION_COLORS[s] for s in SECTIONS}, markers=False),
        "budget": budget,
        "actions": report.get("actions") or [],
        "parts": [_part_view(p, session, timeline) for p in rebuilt.parts],
        "report": json.dumps(report, indent=2, ensure_ascii=False),
        "diff": this.diff if this else None,
        "previous": order[at - 1] if at > 0 else None,
        "next": order[at + 1] if 0 <= at < len(order) - 1 else None,
        "download": _url("/request/body", s=session, t=timeline, step=step),
    }


def _around(body: bytes, offset: int) -> tuple[str, str]:
    before = body[max(0, offset - BYTES_AROUND) : offset].decode("utf-8", "replace")
    after = body[offset : offset + BYTES_AROUND].decode("utf-8", "replace")
    return before, after


def diff(
    session: str,
    timeline: str,
    step: int,
    events: Sequence[StoredEvent],
    timelines: Sequence[TimelineInfo],
) -> dict[str, Any]:
    order = [ev.event.step for ev in events if isinstance(ev.event, RequestHeader)]
    if step not in order:
        raise HTTPException(404, f"no logged request step {step} in {session}/{timeline}")
    at = order.index(step)
    base = {"session": session, "timeline": timeline, "step": step}
    if at == 0:
        return {**base, "previous": None, "d": None}
    previous = order[at - 1]
    got = _steps(session, timeline, {previous, step}, events, timelines)
    prev, cur = got[previous], got[step]
    d = compare(prev, cur, events)
    old_before, old_after = _around(prev.body, d.first_byte)
    new_before, new_after = _around(cur.body, d.first_byte)
    lines = list(
        difflib.unified_diff(
            d.old_text.splitlines(),
            d.new_text.splitlines(),
            "previous",
            "this step",
            lineterm="",
            n=2,
        )
    )
    return {
        **base,
        "previous": previous,
        "d": d,
        "reason": CAUSES.get(d.cause, ""),
        "old_before": old_before,
        "old_after": old_after,
        "new_before": new_before,
        "new_after": new_after,
        "unified": lines[:400],
        "prev_size": len(prev.body),
        "size": len(cur.body),
        "errors": [r.error for r in (prev, cur) if r.error],
        "cause_url": _url("/event", s=session, t=timeline, seq=d.cause_seq) if d.cause_seq else "",
        "byte_url": _url("/event", s=session, t=timeline, seq=d.byte_seq) if d.byte_seq else "",
    }


def breaks(session: str, timeline: str, run: Sequence[RunStep]) -> dict[str, Any]:
    rows = _break_rows(session, timeline, run)
    by_cause: dict[str, int] = {}
    for r in rows:
        by_cause[r["cause"]] = by_cause.get(r["cause"], 0) + 1
    return {
        "session": session,
        "timeline": timeline,
        "rows": rows,
        "steps": len(run),
        "rebilled": sum(r["rebilled"] for r in rows),
        "cost": _total_cost(rows),
        "by_cause": by_cause,
        "chart": _chart(session, timeline, run),
        "legend": legend(SECTION_COLORS, BUDGET_LINES),
        "causes": CAUSES,
    }


def event(
    session: str, timeline: str, stored: StoredEvent, events: Sequence[StoredEvent]
) -> dict[str, Any]:
    ev = stored.event
    return {
        "session": session,
        "timeline": timeline,
        "ev": stored,
        "json": event_json(stored),
        "summary": summarize(ev),
        "has_previous": stored.seq > 1,
        "has_next": stored.seq < len(events),
        "request_url": _url("/request", s=session, t=timeline, step=ev.step)
        if isinstance(ev, RequestHeader)
        else "",
    }
