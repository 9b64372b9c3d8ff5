"""The inspector in a real browser (Debian's chromium driven by Playwright), on SQLite and
PostgreSQL records made by replaying the bundled sessions.

Every page must load without a console error, a failed request or a dialog (an
``alert`` would mean a forged ``<script>`` ran). Screenshots go to
``$CTXLINE_SCREENSHOTS`` (default ``tests/out/screenshots``); the README's are from there.
The last test checks that serving changed nothing: the SQLite file's hash and its side
files, or every row of the PostgreSQL schema.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from ctxline import rebuild_request
from ctxline.pricing import MILLION, format_usd
from ctxline.record.events import Reduction, RequestHeader
from ctxline.record.store import SQLiteStore, Store
from ctxline.web.analysis import RunStep, analyze_run
from ctxline.web.app import create_app
from ctxline.web.data import branch_marks
from ctxline.web.record import InspectorRecord, open_record
from ctxline.web.server import RunningServer, serve_in_thread
from json_reads_a import dig, num, obj_at
from web_support import (
    FORGED,
    TAMPERED,
    Built,
    browser_context,
    build_record,
    pg_fingerprint,
    screenshot_dir,
    sqlite_fingerprint,
)

MINI = "mini-swe-agent/psf__requests-2317"
TAU = "tau-bench/airline/1-0"


def _headers(record: InspectorRecord, session: str) -> list[RequestHeader]:
    return [e.event for e in record.read(session) if isinstance(e.event, RequestHeader)]


def _broke(header: RequestHeader) -> bool:
    """A break as the header's report tells it (a replaced tail is not one)."""
    first = dig(header.report["prefix"], "first_difference")
    return isinstance(first, dict) and first["section"] != "tail"


def _after_compaction(record: InspectorRecord, session: str) -> int:
    """A logged step that compacted and left the guide as it was (the first compaction also
    adds the compaction's kinds to the guide, so its first difference is the guide)."""
    compacted = guided = False
    for e in record.read(session):
        if isinstance(e.event, Reduction) and e.event.action == "compact":
            compacted = True
        guided = guided or e.kind == "guide"
        if isinstance(e.event, RequestHeader):
            if compacted and not guided:
                return e.event.step
            compacted = guided = False
    raise AssertionError(f"{session} has no second compaction: the fixture does not reduce enough")


def _breaks(record: InspectorRecord, session: str) -> list[RunStep]:
    events = record.read(session)
    marks = branch_marks(record.timelines(session), "main")
    return [s for s in analyze_run(events, marks) if s.diff is not None and s.diff.broke]


@dataclass
class Served:
    backend: str
    url: str
    db: str
    record: InspectorRecord
    built: Built
    before: Any
    server: RunningServer

    def fingerprint(self) -> Any:
        return (
            sqlite_fingerprint(Path(self.db))
            if self.backend == "sqlite"
            else pg_fingerprint(self.db)
        )

    def link(self, path: str, **params: object) -> str:
        query = "&".join(f"{k}={quote(str(v), safe='')}" for k, v in params.items())
        return f"{self.url}{path}{'?' + query if query else ''}"


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    backend = str(request.param)
    store: Store
    if backend == "sqlite":
        db = str(tmp_path_factory.mktemp("browser") / "record.db")
        store = SQLiteStore(db)
    else:
        import pg_server

        pg_server.require_psycopg()
        from ctxline.record.store.postgres import PostgresStore

        db = pg_server.fresh_dsn()
        store = PostgresStore(db)
    built = build_record(store)
    store.close()
    before = sqlite_fingerprint(Path(db)) if backend == "sqlite" else pg_fingerprint(db)
    record = open_record(db)
    server = serve_in_thread(create_app(record))
    yield Served(backend, server.url, db, record, built, before, server)
    server.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with browser_context() as context:
        yield context


@pytest.fixture
def page(browser: Any, served: Served) -> Iterator[Any]:
    problems: list[str] = []
    p = browser.new_page()
    p.on(
        "console",
        lambda m: (
            problems.append(f"console {m.type}: {m.text}")
            if m.type in ("error", "warning")
            else None
        ),
    )
    p.on("pageerror", lambda e: problems.append(f"page error: {e}"))

    def on_dialog(dialog: Any) -> None:  # an alert() would mean a forged script ran
        problems.append(f"dialog: {dialog.message}")
        dialog.dismiss()

    p.on("dialog", on_dialog)
    # a request cut short by the next navigation is not a failure of the page
    p.on(
        "requestfailed",
        lambda r: (
            problems.append(f"request failed: {r.url} ({r.failure})")
            if r.failure != "net::ERR_ABORTED"
            else None
        ),
    )
    p.on(
        "response",
        lambda r: problems.append(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None,
    )
    yield p
    p.close()
    assert problems == []


def shot(page: Any, served: Served, name: str, selector: str | None = None) -> None:
    path = screenshot_dir() / f"{served.backend}-{name}.png"
    if selector:
        page.locator(selector).screenshot(path=str(path))
    else:
        page.screenshot(path=str(path))
    assert path.stat().st_size > 2_000


def test_sessions_page_lists_every_session_and_filters(page: Any, served: Served) -> None:
    page.goto(served.url + "/")
    rows = page.locator("#sessions tbody tr")
    assert rows.count() == len(served.built.sessions)
    ids = [t.strip() for t in page.locator("#sessions a.sid").all_inner_texts()]
    assert ids == served.built.sessions
    mini = page.locator("#sessions tr", has=page.locator(f'a.sid:text-is("{MINI}")'))
    events = len(served.record.read(MINI))
    assert mini.locator("td").nth(1).inner_text() == f"{events:,}"
    requests = sum(1 for e in served.record.read(MINI) if e.kind == "request")
    assert requests > 10
    assert mini.locator("td").nth(3).inner_text() == str(requests)
    shot(page, served, "sessions")
    page.fill("#q", "tau-bench")  # live filter
    assert page.locator("#sessions tbody tr:visible").count() == 4
    page.press("#q", "Enter")  # and the server's search
    page.wait_for_url(re.compile(r"\?q=tau-bench"))
    assert page.locator("#sessions tbody tr").count() == 4


def test_timeline_shows_the_run_by_kind_and_its_branches(page: Any, served: Served) -> None:
    page.goto(served.url + "/")
    page.click(f'a.sid:text-is("{MINI}")')
    page.wait_for_selector("#run-chart svg")
    events = served.record.read(MINI)
    assert page.locator("#events tbody tr").count() == len(events)
    headers = [e.event for e in events if isinstance(e.event, RequestHeader)]
    breaks = sum(1 for h in headers if _broke(h))
    reductions = sum(1 for e in events if e.kind == "reduction")
    assert breaks > 0
    assert reductions > 0
    assert page.locator("#run-chart .mark-break").count() == breaks
    assert page.locator("#run-chart .mark-action").count() == reductions
    shot(page, served, "timeline")
    page.click('#kinds a:text("reduction")')
    page.wait_for_url(re.compile("kind=reduction"))
    assert page.locator("#events tbody tr").count() == reductions
    page.goto(served.link("/timeline", s=FORGED, t="try-b"))
    assert "forked from main at seq 11" in page.locator(".branches").inner_text()
    assert page.locator("h1").inner_text() == FORGED


def test_open_a_step_and_see_its_composition(page: Any, served: Served) -> None:
    page.goto(served.link("/timeline", s=MINI))
    page.click("#first-request")
    page.wait_for_selector("#composition svg")
    assert page.locator("#sha-ok").is_visible()
    compacted = _after_compaction(served.record, MINI)
    for step in (1, compacted):
        page.goto(served.link("/request", s=MINI, step=step))
        header = next(
            e.event
            for e in served.record.read(MINI)
            if isinstance(e.event, RequestHeader) and e.event.step == step
        )
        tokens = obj_at(header.report, "tokens")
        cells = {
            r.get_attribute("data-section"): int(
                r.locator("td").nth(1).inner_text().replace(",", "")
            )
            for r in page.locator("#composition-table tr[data-section]").all()
        }
        assert cells["tools"] == tokens["tools"]
        assert cells["system"] + cells["guide"] == tokens["system"]
        assert cells["history"] + cells["summaries"] == tokens["history"]
        assert page.locator("#total-tokens").inner_text() == f"{tokens['total']:,}"
        drawn = {
            s.get_attribute("data-section") for s in page.locator("#composition rect.seg").all()
        }
        assert drawn == {k for k, v in cells.items() if v}
    assert cells["summaries"] > 0  # the step follows a compaction
    assert page.locator("#actions td.a-compact").count() == 1
    assert page.locator("#parts .part.s-summaries .k-summary").count() > 0
    shot(page, served, "request-composition")


def test_download_the_bytes_and_compare_the_sha256(page: Any, served: Served) -> None:
    compacted = _after_compaction(served.record, MINI)
    page.goto(served.link("/request", s=MINI, step=compacted))
    logged = page.locator("#logged-sha").inner_text()
    with page.expect_download() as info:
        page.click("#download")
    data = Path(info.value.path()).read_bytes()
    assert "sha256:" + hashlib.sha256(data).hexdigest() == logged
    events = served.record.read(MINI)
    _, prep = rebuild_request(
        events, compacted, branch_marks(served.record.timelines(MINI), "main")
    )
    assert data == prep.body_bytes
    assert info.value.suggested_filename.endswith(f"-step-{compacted}.json")


def test_diff_of_a_compaction_step(page: Any, served: Served) -> None:
    compacted = _after_compaction(served.record, MINI)
    page.goto(served.link("/request", s=MINI, step=compacted))
    page.click("#diff-link")
    page.wait_for_selector("#verdict")
    assert "Cache break" in page.locator("#verdict").inner_text()
    assert page.locator("#cause").inner_text() == "compaction"
    shared = int(page.locator("#shared").inner_text().replace(",", ""))
    rebilled = int(page.locator("#rebilled").inner_text().replace(",", ""))
    events = served.record.read(MINI)
    previous = next(
        e.event
        for e in events
        if isinstance(e.event, RequestHeader) and e.event.step == compacted - 1
    )
    this = next(
        e.event for e in events if isinstance(e.event, RequestHeader) and e.event.step == compacted
    )
    assert shared == dig(this.report["prefix"], "shared_tokens")  # ctxline's own report agrees
    assert (
        0 <= rebilled < num(dig(previous.report["tokens"], "total")) - shared
    )  # only what the compaction kept
    assert page.locator("#cost").inner_text().startswith("$")
    assert page.locator("#unified .del").count() > 0
    shot(page, served, "diff")
    page.click("#cause-event")
    assert "reduction" in page.locator("h1").inner_text()
    assert '"action": "compact"' in page.locator("#event-json").inner_text()


def test_cache_break_page_prices_every_break(page: Any, served: Served) -> None:
    page.goto(served.link("/timeline", s=MINI))
    page.click("#breaks-link")
    page.wait_for_selector("#breaks-summary")
    rows = page.locator("#breaks tbody tr")
    breaks = _breaks(served.record, MINI)
    causes = [b.diff.cause for b in breaks if b.diff is not None]
    assert "compaction" in causes
    assert page.locator("#breaks td b").all_inner_texts() == causes
    costs = [r.locator("td").nth(6).inner_text() for r in rows.all()]
    assert all(c.startswith("$") for c in costs)
    total = sum(Decimal(c.removeprefix("$")) for c in costs)
    summary = page.locator("#breaks-summary").inner_text()
    assert f"{len(breaks)} breaks in {len(_headers(served.record, MINI))} requests" in summary
    shown = re.search(r"re-billed · \$([0-9.]+)", summary)
    assert shown is not None
    assert abs(Decimal(shown.group(1)) - total) <= Decimal("0.0001") * len(
        costs
    )  # each cost is rounded
    shot(page, served, "cache-breaks")
    page.locator("#run-chart a").first.click()  # a break marker links to its diff
    page.wait_for_selector("#verdict")
    assert page.locator("#cause").inner_text() == causes[0]
    # tau-bench runs with a status bar (an empty one is not sent; later ones are appended or
    # replace the tail): a replaced tail is no break (issue 23: "7 cache breaks" with 0
    # tokens re-billed; the runner's case is test_web_data's)
    page.goto(served.link("/breaks", s=TAU))
    assert _breaks(served.record, TAU) == []
    tau = _headers(served.record, TAU)
    assert any(isinstance(h.report.get("status"), dict) for h in tau)  # it had a status bar
    firsts = [dig(h.report["prefix"], "first_difference") for h in tau]
    tails = [f for f in firsts if isinstance(f, dict)]
    assert all(f["section"] == "tail" for f in tails)
    assert f"0 breaks in {len(tau)} requests" in page.locator("#breaks-summary").inner_text()
    assert page.locator("#run-chart .mark-break").count() == 0
    page.goto(served.link("/diff", s=TAU, step=2))
    verdict = page.locator("#verdict").inner_text()
    assert verdict.startswith("✓ No cache break: this request extends step 1")
    second = firsts[1]  # step 2's first difference from step 1
    assert ("only its tail" in verdict) == (isinstance(second, dict) and second["section"] == "tail")
    page.goto(served.link("/timeline", s=TAU))
    assert page.locator("#run-chart .mark-break").count() == 0


def test_anthropic_diff_prices_the_write_premium(page: Any, served: Served) -> None:
    guide_break = next(
        b.step
        for b in _breaks(served.record, MINI + "@anthropic")
        if b.diff and b.diff.cause == "guide"
    )
    page.goto(served.link("/diff", s=MINI + "@anthropic", step=guide_break))
    assert page.locator("#cause").inner_text() == "guide"
    assert page.locator("#shared").inner_text() == "0"  # Anthropic: a system change misses it all
    rebilled = int(page.locator("#rebilled").inner_text().replace(",", ""))
    # claude-sonnet-4-5: written again at $3.75/M instead of read at $0.30/M
    expected = Decimal(rebilled) * (Decimal("3.75") - Decimal("0.30")) / MILLION
    assert rebilled > 0
    assert page.locator("#cost").inner_text() == format_usd(expected)


def test_forgeries_render_inert(page: Any, served: Served) -> None:
    page.goto(served.link("/request", s=FORGED, t="try-b", step=3))
    assert page.title().startswith("Step 3 · forged <script>")
    text = page.locator("#parts").inner_text()
    assert "<script>document.title='pwned'" in text  # shown as text, never run
    assert page.evaluate("document.querySelectorAll('#parts script, #parts img').length") == 0
    assert page.evaluate("document.title").startswith("Step 3")
    blocks = {
        k: page.locator(f"#parts .txt.k-{k}").count()
        for k in ("state", "rule", "notification", "branch")
    }
    assert all(blocks.values()), blocks
    # the forged tags in user text and tool output are text outside any block
    tool = page.locator('#parts .part[data-section="history"]', has_text="a.log")
    assert tool.locator(".in-ctx").count() == 0
    assert "&lt;/ctx-state>&lt;ctx-rule" in tool.inner_text()
    shot(page, served, "forgeries", "#parts")
    page.goto(served.url + "/")
    assert page.evaluate("document.querySelectorAll('main script').length") == 0


def test_a_request_that_does_not_rebuild_is_shown_clearly(page: Any, served: Served) -> None:
    page.goto(served.link("/breaks", s=TAMPERED))  # the page that rebuilds every request
    assert "Steps 3 do not rebuild" in page.locator("#mismatch").inner_text()
    page.goto(served.link("/request", s=TAMPERED, step=3))
    assert "does not rebuild to what was logged" in page.locator("#sha-mismatch").inner_text()
    assert page.locator("#logged-sha").inner_text() == "sha256:" + "0" * 64
    with page.expect_download() as info:
        page.click("#download-mismatch")
    assert info.value.suggested_filename.startswith("MISMATCH-")


def test_blobs_guides_and_events(page: Any, served: Served) -> None:
    page.goto(served.url + "/blobs")
    count, _ = served.record.blob_count()
    assert page.locator("#blobs tbody tr").count() == min(count, 50)
    page.locator("#blobs a").first.click()
    ref = page.locator("#ref").inner_text()
    assert page.locator("#blob-text").inner_text().rstrip("\n") == served.record.blob(
        ref
    ).decode().rstrip("\n")
    page.goto(served.link("/guides", s=MINI))
    assert page.locator("article.guide").count() == sum(
        1 for e in served.record.read(MINI) if e.kind == "guide"
    )
    state_seq = next(e.seq for e in served.record.read(FORGED) if e.kind == "state")
    page.goto(served.link("/event", s=FORGED, seq=state_seq))
    assert '"kind": "state"' in page.locator("#event-json").inner_text()


def test_step_keys_walk_the_run(page: Any, served: Served) -> None:
    page.goto(served.link("/request", s=MINI, step=2))
    page.keyboard.press("]")
    page.wait_for_url(re.compile("step=3"))
    page.keyboard.press("[")
    page.wait_for_url(re.compile("step=2"))
    assert page.locator("h1").inner_text().startswith("Step 2")


def test_serving_never_changed_the_database(served: Served) -> None:
    assert served.fingerprint() == served.before
