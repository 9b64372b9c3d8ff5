"""Report.from_json is the inverse of to_json, over the reports of real prepares.

The reports come from replays of recorded sessions in tests/data under a small window (so
the ladder folds, trims, compacts and weighs candidates); each is also read back as the
header a SQLite store logged. Bad shapes are a ValidationError naming the field.
"""

from __future__ import annotations

import json
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import REPO
from ctxline import Context, PrepareOptions, SQLiteStore
from ctxline.errors import ValidationError
from ctxline.importers import load_tree
from ctxline.record.events import RequestHeader
from ctxline.replay import model_calls
from ctxline.view.report import Considered, Report

_SESSIONS = ("mini-swe-agent/psf__requests-2317.traj.json", "swe-agent/ctf__crypto__eps.traj")


@lru_cache(maxsize=1)
def _reports() -> tuple[tuple[Report, dict[str, Any]], ...]:
    """(the report a prepare made, the report its logged header holds, read from SQLite)."""
    out: list[tuple[Report, dict[str, Any]]] = []
    options = PrepareOptions(context_window=6_000, max_output=1_000)
    with tempfile.TemporaryDirectory() as folder:
        _replay(folder, options, out)
    return tuple(out)


def _replay(folder: str, options: PrepareOptions, out: list[tuple[Report, dict[str, Any]]]) -> None:
    for index, name in enumerate(_SESSIONS):
        (session,) = load_tree(REPO / "tests" / "data" / name, "auto")
        store = SQLiteStore(str(Path(folder) / f"{index}.db"))
        try:
            ctx = Context(store, session.id, options=options)
            calls = set(model_calls(session.events))
            made: list[Report] = []
            for i, pending in enumerate(session.events):
                if i in calls and ctx.events:
                    made.append(ctx.prepare(now=ctx.events[-1].at).report)
                ctx.append(pending)
            logged = [
                e.event.report for e in store.read(session.id) if isinstance(e.event, RequestHeader)
            ]
            out.extend(zip(made, logged, strict=True))
        finally:
            store.close()


def test_the_reports_cover_the_ladder() -> None:
    reports = [r for r, _ in _reports()]
    assert len(reports) > 20
    assert {a.action for r in reports for a in r.actions} >= {"compact"}
    assert any(r.considered for r in reports)
    assert any(r.cost is not None for r in reports)
    assert any(r.prefix.first_difference is not None for r in reports)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_from_json_inverts_to_json(data: st.DataObject) -> None:
    report, logged = data.draw(st.sampled_from(_reports()))
    as_json = report.to_json()
    # through the JSON text, as a log or an HTTP answer carries it
    text = json.loads(json.dumps(as_json))
    back = Report.from_json(text)
    assert back.to_json() == as_json
    assert Report.from_json(logged) == back  # the header the store logged types the same
    shown = all(c.count is None or c.count == len(c.candidates) for c in report.considered)
    if all(len(c.candidates) <= 24 for c in report.considered) and shown:
        assert back == report  # nothing was cut from the JSON: the same value
    assert dict(back) == dict(report)  # the mapping view too


def test_a_considered_list_cut_for_the_json_keeps_its_count() -> None:
    many = Considered("trim", tuple(f"trim:{i}" for i in range(30)), ("trim:1",))
    back = Considered.from_json(json.loads(json.dumps(many.to_json())))
    assert back.to_json() == many.to_json()
    assert back.count == 30
    assert len(back.candidates) == 24


@pytest.mark.parametrize(
    ("path", "value", "named"),
    [
        (("tokens", "total"), "12", "report.tokens.total must be an integer, got str"),
        (("tokens", "total"), 1, "report.tokens.total is 1 but the sections add up to"),
        (("budget",), None, "report.budget must be an object, got NoneType"),
        (("budget", "over_limit"), 0, "report.budget.over_limit must be true or false, got int"),
        (("step",), True, "report.step must be an integer, got bool"),
        (("actions",), [{"action": "shred"}], "report.actions[0].action must be one of"),
        (("prefix", "first_difference"), {"message": 1}, "first_difference.section is missing"),
        (("pairing", "renamed"), [["a"]], "report.pairing.renamed must hold [a, b] pairs"),
    ],
)
def test_a_bad_field_is_named(path: tuple[str, ...], value: object, named: str) -> None:
    report, _ = _reports()[-1]
    data = json.loads(json.dumps(report.to_json()))
    place = data
    for key in path[:-1]:
        place = place[key]
    place[path[-1]] = value
    with pytest.raises(ValidationError) as caught:
        Report.from_json(data)
    assert named in str(caught.value)
    assert caught.value.field is not None
    assert caught.value.field.startswith("report.")
