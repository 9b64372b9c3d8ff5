"""The context of each inspector page, built from the record (plain values; the templates escape).

Kept apart from :mod:`ctxline.web.app` (routing, responses) so the pages can be built
and checked without a server.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from starlette.exceptions import HTTPException

from ctxline.errors import UnknownTimeline
from ctxline.pricing import format_usd
from ctxline.record.events import RequestHeader, StoredEvent
from ctxline.record.parse import KNOWN_KINDS
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
from ctxline.web.data import SECTIONS, Rebuilt, branch_marks
from ctxline.web.headers import HeaderStep, header_step, header_steps
from ctxline.web.record import InspectorRecord, SessionRow
from ctxline.web.views import (
    blob_row,
    blob_text,
    event_json,
    guide_versions,
    segments,
    summarize,
)

__all__ = [
    "BLOBS_PER_PAGE",
    "EVENTS_PER_PAGE",
    "STEPS_PER_PAGE",
    "Located",
    "blob_row",
    "blob_text",
    "breaks",
    "breaks_page",
    "diff",
    "event",
    "file_name",
    "guide_versions",
    "header_of",
    "locate",
    "rebuild_located",
    "rebuilt_step",
    "request",
    "session_totals",
    "timeline",
]

EVENTS_PER_PAGE = 200
STEPS_PER_PAGE = 200
BLOBS_PER_PAGE = 50
BYTES_AROUND = 160
"""Bytes of each body shown on either side of the first difference."""

Reader = InspectorRecord


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


@dataclass(frozen=True, slots=True)
class Located:
    """A logged step, the steps either side of it, and the events a rebuild of it needs."""

    stored: StoredEvent
    previous: StoredEvent | None
    next: StoredEvent | None

    @property
    def header(self) -> RequestHeader:
        assert isinstance(self.stored.event, RequestHeader)
        return self.stored.event


def locate(record: Reader, session: str, timeline: str, step: int) -> Located:
    """The ``request`` event of ``step`` and its neighbours, reading three rows, not the run.

    Steps count a timeline's requests from 1, so step N is the N-th ``request`` event;
    a record numbered otherwise (an import, a forged header) is searched in full.
    """
    around = record.read(session, timeline, kind="request", offset=max(step - 2, 0), limit=3)
    at = [i for i, ev in enumerate(around) if _step(ev) == step]
    if not at:
        around = record.read(session, timeline, kind="request")
        at = [i for i, ev in enumerate(around) if _step(ev) == step]
    if not at:
        raise HTTPException(404, f"no logged request step {step} in {session}/{timeline}")
    i = at[0]
    return Located(
        around[i],
        around[i - 1] if i > 0 else None,
        around[i + 1] if i + 1 < len(around) else None,
    )


def _step(ev: StoredEvent) -> int:
    return ev.event.step if isinstance(ev.event, RequestHeader) else -1


def rebuild_located(
    record: Reader,
    session: str,
    timeline: str,
    stored: Sequence[StoredEvent],
    timelines: Sequence[TimelineInfo],
) -> list[Rebuilt]:
    """The given ``request`` events rebuilt, reading the record once up to the last and
    feeding each from the nearest fold checkpoint before it (the bytes a cold rebuild
    gives: :mod:`ctxline.web.checkpoints`)."""
    upto = 0
    for ev in stored:
        assert isinstance(ev.event, RequestHeader)
        upto = max(upto, ev.event.upto_seq)
    events = record.prefix(session, timeline, upto)
    marks = branch_marks(timelines, timeline)
    return record.checkpoints(session, timeline).rebuild(events, stored, marks)


def rebuilt_step(
    record: Reader, session: str, timeline: str, step: int, timelines: Sequence[TimelineInfo]
) -> Rebuilt:
    found = locate(record, session, timeline, step)
    return rebuild_located(record, session, timeline, [found.stored], timelines)[0]


def file_name(session: str, timeline: str, step: int) -> str:
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", f"{session}-{timeline}")[:120]
    return f"{safe}-step-{step}.json"


def _chart(session: str, timeline: str, run: Sequence[RunStep]) -> str:
    """The chart of an analyzed run (a break's note: its cause and what it re-billed)."""
    rows = []
    for r in run:
        d = r.diff
        broke = d is not None and d.broke
        note = f"{d.cause}: {d.rebilled_tokens:,} tokens re-billed, {format_usd(d.cost)}" if broke and d else ""
        rows.append((r.step, r.composition, r.budget, r.actions, broke, note))
    return _step_chart(session, timeline, rows)


def _header_chart(session: str, timeline: str, run: Sequence[HeaderStep]) -> str:
    """The chart of the steps on a page, from their headers (see :mod:`ctxline.web.headers`)."""
    rows = []
    for r in run:
        note = f"{r.section}: {r.reason} ({r.shared_tokens:,} tokens reused)" if r.broke else ""
        rows.append((r.step, r.composition, r.budget, r.actions, r.broke, note))
    return _step_chart(session, timeline, rows)


_ChartRow = tuple[int, Mapping[str, int], Mapping[str, Any], Sequence[Mapping[str, Any]], bool, str]


def _step_chart(session: str, timeline: str, rows: Sequence[_ChartRow]) -> str:
    """One chart: a break links to its diff, a step that reduced to its request."""
    steps = []
    for step, composition, budget, actions, broke, note in rows:
        href = ""
        if broke:
            href = _url("/diff", s=session, t=timeline, step=step)
        elif actions:
            href = _url("/request", s=session, t=timeline, step=step)
        steps.append(
            ChartStep(
                f"step {step}",
                composition,
                {k: float(v) for k, v in budget.items()},
                tuple(str(a.get("action")) for a in actions),
                broke,
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
    record: Reader, session: str, timeline: str, kind: str | None, page: int
) -> dict[str, Any]:
    """One page of a timeline's events, and the chart of the requests among them.

    Bounded by the page: the rows are read with a limit, the counts are the database's,
    the chart and its break marks come from the headers on the page.
    """
    timelines = record.timelines(session)
    info = next((t for t in timelines if t.name == timeline), None)
    if info is None:
        raise UnknownTimeline(session, timeline)
    total = info.head  # a timeline is gap-free from seq 1
    skip = (page - 1) * EVENTS_PER_PAGE
    shown_count: int | None
    if kind is None:
        shown_count = total
        pages = max(1, -(-total // EVENTS_PER_PAGE))
        page = min(page, pages)
        skip = (page - 1) * EVENTS_PER_PAGE
        shown = record.read(session, timeline, after_seq=skip, limit=EVENTS_PER_PAGE)
    else:  # counting one kind would read the whole timeline: page on without a total
        shown = record.read(session, timeline, kind=kind, offset=skip, limit=EVENTS_PER_PAGE + 1)
        shown_count = None
        pages = page + 1 if len(shown) > EVENTS_PER_PAGE else page
        shown = shown[:EVENTS_PER_PAGE]
    rows = []
    for ev in shown:
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
    run = header_steps(shown) if kind is None else []
    first = record.read(session, timeline, kind="request", limit=1)
    last = record.last(session, timeline, "request")
    return {
        "session": session,
        "timeline": timeline,
        "timelines": timelines,
        "kinds": KNOWN_KINDS,
        "kind": kind,
        "rows": rows,
        "page": page,
        "pages": pages,
        "shown": shown_count,
        "events": total,
        "chart": _header_chart(session, timeline, run),
        "legend": legend(SECTION_COLORS, BUDGET_LINES),
        "steps": _step(last) if last is not None else 0,
        "page_steps": len(run),
        "breaks": sum(1 for r in run if r.broke),
        "first_step": _step(first[0]) if first else None,
    }


def _part_view(part: Any, event_link: str) -> dict[str, Any]:
    """A part as the step page shows it; ``event_link``: the page's ``/event`` link without
    its seq (``url`` would put it last: one link encoded per page, not one per part)."""
    return {
        "index": part.index,
        "section": part.section,
        "role": part.role,
        "tokens": part.tokens,
        "seq": part.seq,
        "segments": segments(part.text),
        "chars": len(part.text),
        "spans": part.spans,
        "event_url": f"{event_link}&seq={int(part.seq)}" if part.seq else "",
    }


def request(
    record: Reader, session: str, timeline: str, step: int, timelines: Sequence[TimelineInfo]
) -> dict[str, Any]:
    """One step: its request rebuilt cold (and the one before, for the verdict)."""
    found = locate(record, session, timeline, step)
    wanted = [found.stored] if found.previous is None else [found.previous, found.stored]
    built = rebuild_located(record, session, timeline, wanted, timelines)
    rebuilt = built[-1]
    between = (
        record.read(
            session,
            timeline,
            after_seq=found.previous.seq,
            limit=found.stored.seq - found.previous.seq - 1,
        )
        if found.previous is not None and found.stored.seq - found.previous.seq > 1
        else []
    )
    this_diff = None
    if len(built) == 2 and built[0].parts and rebuilt.parts:
        this_diff = compare(
            built[0], rebuilt, between, base=found.previous.seq if found.previous else 0
        )
    report: dict[str, Any] = rebuilt.header.report
    budget = report.get("budget") or {}
    event_link = _url("/event", s=session, t=timeline)  # s and t always given: a query
    comp = [(s, rebuilt.composition.get(s, 0)) for s in SECTIONS]
    marks = [
        ("target", int(budget.get("target") or 0), TARGET_COLOR),
        ("pressure", int(budget.get("pressure_line") or 0), PRESSURE_COLOR),
        ("input limit", int(budget.get("input_limit") or 0), LIMIT_COLOR),
    ]
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
        "parts": [_part_view(p, event_link) for p in rebuilt.parts],
        "report": json.dumps(report, indent=2, ensure_ascii=False),
        "diff": this_diff,
        "previous": _step(found.previous) if found.previous else None,
        "next": _step(found.next) if found.next else None,
        "download": _url("/request/body", s=session, t=timeline, step=step),
    }


def _around(body: bytes, offset: int) -> tuple[str, str]:
    before = body[max(0, offset - BYTES_AROUND) : offset].decode("utf-8", "replace")
    after = body[offset : offset + BYTES_AROUND].decode("utf-8", "replace")
    return before, after


def diff(
    record: Reader, session: str, timeline: str, step: int, timelines: Sequence[TimelineInfo]
) -> dict[str, Any]:
    """Two consecutive requests rebuilt cold and compared (two rebuilds, whatever the run)."""
    found = locate(record, session, timeline, step)
    base = {"session": session, "timeline": timeline, "step": step}
    if found.previous is None:
        return {**base, "previous": None, "d": None}
    previous = _step(found.previous)
    prev, cur = rebuild_located(
        record, session, timeline, [found.previous, found.stored], timelines
    )
    gap = found.stored.seq - found.previous.seq - 1
    between = record.read(session, timeline, after_seq=found.previous.seq, limit=gap) if gap else []
    d = compare(prev, cur, between, base=found.previous.seq)
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
        "mismatches": [r.step for r in run if r.error],
        "chart": _chart(session, timeline, run),
        "legend": legend(SECTION_COLORS, BUDGET_LINES),
        "causes": CAUSES,
    }


def breaks_page(
    record: Reader,
    session: str,
    timeline: str,
    timelines: Sequence[TimelineInfo],
    page: int,
) -> dict[str, Any]:
    """The cache breaks of one page of :data:`STEPS_PER_PAGE` requests, each priced exactly.

    The headers of the page say which requests may have broken (a first difference
    that is not the tail, or a comparison with another request than the one logged
    before: a reduced step, a branch's first); only those and the requests before them
    are rebuilt (cold) and compared, so a page costs its breaks, not the run.
    """
    last = record.last(session, timeline, "request")
    total = _step(last) if last is not None else 0
    pages_n = max(1, -(-total // STEPS_PER_PAGE))
    page = min(max(page, 1), pages_n)
    skip = (page - 1) * STEPS_PER_PAGE
    window = record.read(
        session, timeline, kind="request", offset=max(skip - 1, 0), limit=STEPS_PER_PAGE + 1
    )
    before = window[0] if skip and window else None
    shown = window[1:] if skip else window[:STEPS_PER_PAGE]
    heads = [header_step(ev) for ev in shown]
    pairs: list[tuple[StoredEvent, StoredEvent]] = []
    for i, (cur, h) in enumerate(zip(shown, heads, strict=True)):
        prev = shown[i - 1] if i else before
        if prev is not None and (h.broke or h.previous_step != _step(prev)):
            pairs.append((prev, cur))
    wanted = sorted({ev.seq: ev for pair in pairs for ev in pair}.values(), key=lambda e: e.seq)
    built = {
        rb.header_seq: rb for rb in rebuild_located(record, session, timeline, wanted, timelines)
    }
    events = record.prefix(session, timeline, max((c.seq for _, c in pairs), default=0))
    run: list[RunStep] = []
    for prev, cur in pairs:
        a, b = built[prev.seq], built[cur.seq]
        d = compare(a, b, events) if a.parts and b.parts else None
        h = header_step(cur)
        run.append(
            RunStep(
                b.step, b.header_seq, dict(b.composition), b.total, h.budget, h.actions, b.error, d
            )
        )
    ctx = breaks(session, timeline, run)
    exact = {r.step: r.diff for r in run}
    steps = []
    for h in heads:
        d = exact.get(h.step)
        broke = d is not None and d.broke
        note = (
            f"{d.cause}: {d.rebilled_tokens:,} tokens re-billed, {format_usd(d.cost)}"
            if d and broke
            else ""
        )
        href = (
            _url("/diff", s=session, t=timeline, step=h.step)
            if broke
            else _url("/request", s=session, t=timeline, step=h.step)
            if h.actions
            else ""
        )
        steps.append(
            ChartStep(
                f"step {h.step}",
                h.composition,
                {k: float(v) for k, v in h.budget.items()},
                tuple(str(a.get("action")) for a in h.actions),
                broke,
                note,
                href,
            )
        )
    ctx.update(
        chart=run_chart(steps, SECTION_COLORS, BUDGET_LINES),
        steps=total,
        page=page,
        pages=pages_n,
        first_step=heads[0].step if heads else None,
        last_step=heads[-1].step if heads else None,
        mismatches=sorted({rb.step for rb in built.values() if rb.error}),
    )
    return ctx


def event(session: str, timeline: str, stored: StoredEvent, head: int) -> dict[str, Any]:
    ev = stored.event
    return {
        "session": session,
        "timeline": timeline,
        "ev": stored,
        "json": event_json(stored),
        "summary": summarize(ev),
        "has_previous": stored.seq > 1,
        "has_next": stored.seq < head,
        "request_url": _url("/request", s=session, t=timeline, step=ev.step)
        if isinstance(ev, RequestHeader)
        else "",
    }
