"""Request headers read back packed are unpacked at first use, and are the same value.

A checked read (the row's digest matched its link) gives a ``LazyRequestHeader``: equal to
the header an eager parse of the same bytes gives, whichever side of ``==`` it is on;
``report_field`` answers every field without unpacking the report; written again it is
its stored bytes; copied, pickled or replaced it is still the same value; and a Context
opening on the session unpacks only the header it rebuilds.
"""

from __future__ import annotations

import copy
import json
import pickle
import sqlite3
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxline import Context
from ctxline.record.codec import canonical_json, event_to_json
from ctxline.record.events import (
    AssistantMessage,
    JsonValue,
    RequestHeader,
    SystemMessage,
    ToolCall,
    ToolResult,
    UserMessage,
)
from ctxline.record.lazy_header import LazyRequestHeader
from ctxline.record.packed import OPTIONS_V1, pack, unpack, unpack_field, unpacked_report_keys
from ctxline.record.parse import event_from_json
from ctxline.record.store import open_store
from ctxline.view.options import PrepareOptions

OPTIONS = PrepareOptions(context_window=3000, max_output=500, edit_gain=2.0)


def _clock() -> Callable[[], datetime]:
    start = datetime(2026, 3, 1, tzinfo=UTC)
    ticks = iter(range(1, 10_000))
    return lambda: start + timedelta(seconds=next(ticks))


def _session(db: Path) -> bytes:
    """Nine steps of growing results (reports that name trim candidates, over the pressure
    line at the end); the body of the last request."""
    store = open_store(str(db))
    ctx = Context(store, "s", clock=_clock(), options=OPTIONS)
    ctx.append(SystemMessage("You are a coding agent."), UserMessage("Fix the failing test."))
    for n in range(8):
        ctx.prepare()
        call = ToolCall(f"c{n}", "bash", {"cmd": f"cat f{n}.py"})
        ctx.append(
            AssistantMessage(f"looking {n}", tool_calls=(call,)),
            ToolResult(f"c{n}", f"line {n}\n" * (60 * n), name="bash"),
        )
    ctx.prepare()
    body = ctx.prepare(log=False).body_bytes
    store.close()
    return body


def _bodies(db: Path) -> list[bytes]:
    con = sqlite3.connect(db)
    rows = con.execute("SELECT body FROM events WHERE kind = 'request' ORDER BY seq").fetchall()
    con.close()
    return [bytes(row[0]) if isinstance(row[0], bytes) else row[0].encode() for row in rows]


def _same(a: JsonValue, b: JsonValue) -> bool:
    return canonical_json(a) == canonical_json(b)


def test_a_checked_read_gives_lazy_headers_equal_to_the_eager_parse(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    _session(db)
    store = open_store(str(db), read_only=True)
    headers = [e.event for e in store.read("s") if isinstance(e.event, RequestHeader)]
    store.close()
    bodies = _bodies(db)
    assert len(headers) == len(bodies) == 9
    acted = 0
    for lazy, body in zip(headers, bodies, strict=True):
        assert isinstance(lazy, LazyRequestHeader)
        eager = event_from_json(json.loads(body))
        assert type(eager) is RequestHeader
        acted += bool(eager.report.get("considered"))
        for name in [*eager.report, *unpacked_report_keys(), "not-a-field"]:
            assert _same(lazy.report_field(name), eager.report.get(name)), name
        assert lazy.packed_form() is not None  # no field above unpacked it
        assert canonical_json(event_to_json(lazy)) == body  # written as read
        assert lazy == eager
        assert eager == lazy
        assert lazy.packed_form() is None  # comparing read every field
        assert _same(lazy.report, eager.report)
        assert _same(lazy.options, eager.options)
        assert canonical_json(event_to_json(lazy)) == body  # packed again, the same bytes
        assert lazy != replace(eager, sha256="sha256:" + "0" * 64)
    assert acted  # the session's reports name candidates: the packed name lists were read


def test_a_lazy_header_copies_pickles_and_replaces_as_the_same_value(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    _session(db)
    store = open_store(str(db), read_only=True)
    last = [e.event for e in store.read("s") if isinstance(e.event, RequestHeader)][-1]
    store.close()
    eager = event_from_json(json.loads(_bodies(db)[-1]))
    assert isinstance(eager, RequestHeader)
    assert isinstance(last, LazyRequestHeader)
    for other in (pickle.loads(pickle.dumps(last)), copy.copy(last), copy.deepcopy(last)):
        assert other == eager
    # replace() before anything was unpacked: the new header is complete
    again = open_store(str(db), read_only=True)
    fresh = again.read("s")[-1].event
    again.close()
    assert isinstance(fresh, LazyRequestHeader)
    assert fresh.packed_form() is not None
    moved = replace(fresh, meta={"note": "x"})
    assert moved == replace(eager, meta={"note": "x"})
    assert _same(moved.report, eager.report)
    assert moved.report_field("budget") == eager.report.get("budget")


def test_a_context_opening_on_the_session_unpacks_only_what_it_rebuilds(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    warm = _session(db)
    store = open_store(str(db))
    ctx = Context(store, "s", create=False, options=OPTIONS)
    cold = ctx.prepare(log=False).body_bytes
    headers = [e.event for e in ctx.events if isinstance(e.event, LazyRequestHeader)]
    unpacked = [h.step for h in headers if h.packed_form() is None]
    store.close()
    assert cold == warm  # the same request, cold or warm
    assert len(headers) == 9
    assert unpacked == [9]  # the last logged request, rebuilt as a warm cache had it


_SCALARS = st.none() | st.booleans() | st.integers(-5, 10**6) | st.text(max_size=8)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)
_NAMES = st.lists(
    st.sampled_from(["trim", "fold", "compact"]).flatmap(
        lambda kind: st.integers(1, 9999).map(lambda seq: f"{kind}:{seq}")
    ),
    max_size=4,
)
PACKED: list[int] = []
PLAIN: list[int] = []
_REPORT_KEYS = sorted(unpacked_report_keys() | {"tokens", "messages", "environment"})


@given(
    options=st.dictionaries(st.sampled_from(sorted(OPTIONS_V1)), _SCALARS, max_size=4),
    report=st.dictionaries(st.sampled_from(_REPORT_KEYS), _VALUES, max_size=8),
    budget=st.dictionaries(
        st.sampled_from(["over_limit", "over_pressure", "target", "input_limit", "extra"]),
        _SCALARS,
        max_size=3,
    ),
    considered=st.lists(
        st.fixed_dictionaries({"candidates": _NAMES, "adopted": _NAMES}), max_size=2
    ),
    step=st.integers(1, 50),
)
@settings(deadline=None)  # the first example pays for imports on a cold machine
def test_one_field_unpacked_is_that_field_of_the_whole_unpacking(
    options: dict[str, JsonValue],
    report: dict[str, JsonValue],
    budget: dict[str, JsonValue],
    considered: list[JsonValue],
    step: int,
) -> None:
    full_options, base = unpack(options, {}, step=step)  # the report these options derive
    base_budget = base.get("budget")
    assert isinstance(base_budget, dict)
    report = {**base, **report, "budget": {**base_budget, **budget}, "considered": considered}
    packed = pack(full_options, report, step=step)
    if packed is None:  # not packable exactly: stored plainly, nothing to unpack
        PLAIN.append(step)
        return
    PACKED.append(step)
    opts, rep = packed
    whole = unpack(opts, rep, step=step)[1]
    for name in [*_REPORT_KEYS, "not-a-field"]:
        assert _same(unpack_field(opts, rep, name, step=step), whole.get(name)), name


def test_the_generated_reports_are_mostly_packable() -> None:
    """The property above checks something: most generated reports pack."""
    PACKED.clear()
    PLAIN.clear()
    test_one_field_unpacked_is_that_field_of_the_whole_unpacking()
    assert len(PACKED) > len(PLAIN)
