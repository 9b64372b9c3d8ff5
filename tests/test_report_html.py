"""The replay HTML report: one valid, self-contained page whose figures are the summary's.

The real case replays mini-swe-agent trajectories from ../shared/data at a 32k window
(so compactions and cache breaks appear); the synthetic one has 2,400 steps in one
session to check that long runs are binned, not drawn step by step.
"""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from conftest import shared_data
from ctxline.importers import load
from ctxline.record.store import MemoryStore
from ctxline.replay import ReplayStats, replay_session
from ctxline.view.options import PrepareOptions
from ctxline.web.report_html import MAX_POINTS, format_value, render_report, write_report

VOID = {"meta", "br", "hr", "img", "input", "link", "col", "area", "base", "wbr", "source"}
SVG_LEAVES = {"line", "polygon", "polyline", "path", "circle", "rect"}


class Checker(HTMLParser):
    """Checks nesting, and collects the summary cells and what the page refers to."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.errors: list[str] = []
        self.cells: dict[str, tuple[Any, str]] = {}
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str]] = []
        self._cell: tuple[str, Any] | None = None
        self._text: list[str] = []
        self.doctype = False

    def handle_decl(self, decl: str) -> None:
        self.doctype = decl.lower() == "doctype html"

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attrs += [(k, v or "") for k, v in attrs]
        a = dict(attrs)
        if tag == "td" and a.get("data-key") is not None:
            self._cell = (str(a["data-key"]), json.loads(a["data-value"] or "null"))
            self._text = []
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attrs += [(k, v or "") for k, v in attrs]
        if tag not in VOID | SVG_LEAVES:
            self.errors.append(f"self-closing <{tag}/>")

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes <{self.stack[-1] if self.stack else None}>")
            return
        self.stack.pop()
        if tag == "td" and self._cell is not None:
            key, value = self._cell
            self.cells[key] = (value, "".join(self._text))
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._text.append(data)


def check_page(page: str, summary: dict[str, Any]) -> Checker:
    checker = Checker()
    checker.feed(page)
    checker.close()
    assert checker.doctype
    assert not checker.errors, checker.errors[:5]
    assert checker.stack == [], checker.stack
    # self-contained: no URL of any scheme, no script, link, image, font or import
    assert not re.search(r"https?:|//[a-z0-9]|url\(|@import|@font-face", page, re.I)
    assert not {"script", "link", "img", "iframe", "object", "embed"} & set(checker.tags)
    assert not [a for a in checker.attrs if a[0] in ("src", "href", "xlink:href")]
    # the figures shown are the summary's, every one of them, formatted
    assert set(checker.cells) == set(summary)
    for key, (value, text) in checker.cells.items():
        assert value == summary[key], key
        assert text == format_value(summary[key]), key
    return checker


@pytest.fixture(scope="module")
def replayed() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    folder = shared_data() / "mini-swe-agent"
    store = MemoryStore()
    stats = ReplayStats(keep_steps=True)
    options = PrepareOptions(context_window=32_000, max_output=4_000)
    for path in (
        "django__django-11138.traj.json",
        "psf__requests-1142.traj.json",
        "astropy__astropy-14369.traj.json",
    ):
        for session in load(folder / path):
            stats.trajectories += 1
            for step in replay_session(store, session, options=options):
                stats.add(step)
    return stats.summary(), stats.per_step


def test_real_replay_report(
    tmp_path: Path, replayed: tuple[dict[str, Any], list[dict[str, Any]]]
) -> None:
    summary, per_step = replayed
    assert summary["compactions"] > 0
    assert any(s["break"] for s in per_step)
    out = tmp_path / "replay.html"
    write_report(out, summary=summary, per_step=per_step, title="mini-swe-agent <32k>")
    page = out.read_text("utf-8")
    check_page(page, summary)
    assert "<title>mini-swe-agent &lt;32k&gt;</title>" in page
    sessions = {s["session"] for s in per_step}
    assert page.count('class="facet"') == len(sessions) == 3
    # one action marker per step with actions, and one break marker per cache break,
    # in the facets (steps are not binned there) and in the overview
    acting = sum(bool(s["actions"]) for s in per_step)
    breaks = sum(s["break"] for s in per_step)
    assert page.count('class="mark-action"') == 2 * acting
    assert page.count('class="mark-break"') == 2 * breaks
    # four stacked sections at most, a limit and a reuse line per plot
    plots = page.count('<svg class="chart"')
    assert plots == 1 + len(sessions)
    assert page.count("<polyline ") == 2 * plots
    assert not list(tmp_path.glob(".*.tmp"))


def synthetic(n: int, session: str = "long") -> list[dict[str, Any]]:
    steps = []
    for i in range(n):
        history = 500 + (i % 300) * 80
        total = 1200 + 400 + history + 20
        steps.append(
            {
                "session": session,
                "step": i + 1,
                "tokens": {
                    "tools": 1200,
                    "system": 400,
                    "history": history,
                    "tail": 20,
                    "total": total,
                },
                "limit": 28_000,
                "reused": 0 if i % 300 == 0 else total - 200,
                "break": i % 300 == 0 and i > 0,
                "actions": ["compact"] if i % 300 == 0 and i > 0 else [],
            }
        )
    return steps


def test_long_run_is_binned_and_small() -> None:
    per_step = synthetic(2_400)
    summary = {
        "steps": 2_400,
        "peak_tokens": max(s["tokens"]["total"] for s in per_step),
        "prefix_reuse": 0.9123,
        "actions": {"compact": 7},
        "prepare_ms_p50": None,
    }
    page = render_report(summary=summary, per_step=per_step, title="long")
    check_page(page, summary)
    assert len(page) < 600_000
    overview = page.split('<svg class="chart"', 2)[1]
    # a staircase polyline has two points per drawn column
    limit_line = re.search(r'<polyline points="([^"]*)"', overview)
    assert limit_line is not None
    assert len(limit_line.group(1).split()) == 2 * MAX_POINTS
    assert overview.count('class="mark-action"') == 7  # every compaction still has its marker
    assert "steps 301–304 (peak step 302)" not in overview  # bins of 4, peaks shown
    assert re.search(r"steps \d+–\d+ \(peak step \d+\): compact", overview)


def test_many_sessions_and_odd_input() -> None:
    per_step = [s for k in range(250) for s in synthetic(3, f"s{k}")]
    per_step.append({"session": "<script>alert(1)</script>", "tokens": {"history": 9e4}})
    summary = {"trajectories": 251, "flag": True, "name": "x & <y>", "ratio": 0.5}
    page = render_report(summary=summary, per_step=per_step, title="many")
    check_page(page, summary)
    assert "<script>" not in page
    assert "&lt;script&gt;" in page
    assert page.count('class="facet"') == 200
    assert "51 smaller sessions are not drawn" in page
    assert "grey lines separate sessions" not in page


def test_empty_replay() -> None:
    page = render_report(summary={"steps": 0}, per_step=[], title="nothing")
    check_page(page, {"steps": 0})
    assert "<svg" not in page
