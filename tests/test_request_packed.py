"""Packed request headers: half the bytes, the same header, the same rebuild — old ones too.

``tests/fixtures/plain_request_headers.jsonl`` (not in tests/data: a folder import there
refuses its own kinds) is a timeline written before headers were
packed (13 steps, two reductions, non-default options): every one of its headers must
still parse, write back to its very bytes (the hash chain is over them) and rebuild to
its logged hash; a Context that goes on with it logs packed headers that rebuild too.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from ctxline import Context
from ctxline.errors import ValidationError
from ctxline.record.codec import canonical_json, event_to_json, stored_to_json
from ctxline.record.events import (
    AssistantMessage,
    JsonValue,
    RequestHeader,
    StoredEvent,
    ToolCall,
    ToolResult,
    UserMessage,
)
from ctxline.record.packed import OPTIONS_V1, pack, unpack
from ctxline.record.parse import event_from_json, stored_from_json
from ctxline.record.store import open_store
from ctxline.record.store.memory import MemoryStore
from ctxline.view.options import PrepareOptions
from ctxline.view.rebuild import rebuild_all, rebuild_request
from test_cli import export, ok

FIXTURE = Path(__file__).parent / "fixtures" / "plain_request_headers.jsonl"
SESSION = FIXTURE.stem  # an import names the session after its file


def _old() -> list[StoredEvent]:
    return [stored_from_json(json.loads(line)) for line in FIXTURE.read_text().splitlines()]


def _headers(events: list[StoredEvent]) -> list[RequestHeader]:
    return [e.event for e in events if isinstance(e.event, RequestHeader)]


def _clock() -> Callable[[], datetime]:
    start = datetime(2026, 3, 1, tzinfo=UTC)
    ticks = iter(range(1, 10_000))
    return lambda: start + timedelta(seconds=next(ticks))


def test_a_header_written_before_packing_writes_back_to_its_bytes() -> None:
    lines = FIXTURE.read_text().splitlines()
    events = _old()
    assert len(_headers(events)) == 13
    for line, stored in zip(lines, events, strict=True):
        assert canonical_json(stored_to_json(stored)).decode() == line
    assert all(h.plain for h in _headers(events))


def test_every_old_header_rebuilds_to_its_logged_hash() -> None:
    events = _old()
    rebuilt = list(rebuild_all(events))
    assert [h.step for h, _ in rebuilt] == list(range(1, 14))
    assert all(prep.sha256 == h.sha256 for h, prep in rebuilt)
    header, prep = rebuild_request(events, 7)
    assert prep.sha256 == header.sha256


def test_an_old_header_packed_is_the_same_header_in_under_half_the_bytes() -> None:
    plain_total = packed_total = 0
    for header in _headers(_old()):
        plain = canonical_json(event_to_json(header))
        packed_json = event_to_json(replace(header, plain=False))
        assert "opts" in packed_json
        assert "options" not in packed_json
        packed = canonical_json(packed_json)
        if not header.report.get("actions"):  # a step without reductions: its report is short
            assert len(packed) * 2 < len(plain)
        plain_total, packed_total = plain_total + len(plain), packed_total + len(packed)
        back = event_from_json(json.loads(packed))
        assert back == header
        assert not back.plain
        assert canonical_json(back.report) == canonical_json(header.report)
        assert canonical_json(back.options) == canonical_json(header.options)
    assert packed_total * 2 < plain_total


def test_a_new_session_logs_packed_headers_that_rebuild() -> None:
    store = MemoryStore()
    ctx = Context(
        store, "s", clock=_clock(), options=PrepareOptions(context_window=3000, max_output=500)
    )
    ctx.append(*[e.event for e in _old()[:2]])  # the system message and the task
    for n in range(8):
        ctx.prepare()
        call = ToolCall(f"c{n}", "bash", {"cmd": f"cat f{n}.py"})
        ctx.append(
            AssistantMessage(f"looking {n}", tool_calls=(call,)),
            ToolResult(f"c{n}", "x\n" * (60 * n), name="bash"),
        )
    ctx.prepare()
    events = store.read("s")
    for stored in events:
        if isinstance(stored.event, RequestHeader):
            assert "rep" in json.loads(canonical_json(event_to_json(stored.event)))
            assert not stored.event.plain
    assert all(prep.sha256 == h.sha256 for h, prep in rebuild_all(events))
    assert len(list(rebuild_all(events))) == 9


def test_a_continued_old_session_mixes_forms_and_exports_byte_for_byte(tmp_path: Path) -> None:
    db = str(tmp_path / "a.db")
    ok(["import", str(FIXTURE), "--db", db, "--trusted"])
    # after the export's session line, the very lines of the file: old headers unchanged
    assert export(db, SESSION).split(b"\n", 1)[1] == FIXTURE.read_bytes()
    store = open_store(db)
    ctx = Context(
        store, SESSION, clock=_clock(), options=PrepareOptions(context_window=3000, max_output=500)
    )
    ctx.append(UserMessage("and the docs too"))
    ctx.prepare()
    events = store.read(SESSION)
    store.close()
    forms = [h.plain for h in _headers(events)]
    assert forms == [True] * 13 + [False]
    assert all(prep.sha256 == h.sha256 for h, prep in rebuild_all(events))
    exported = export(db, SESSION)
    assert exported.split(b"\n", 1)[1].startswith(FIXTURE.read_bytes())
    db2 = str(tmp_path / "b.db")
    path = tmp_path / "e.jsonl"
    path.write_bytes(exported)
    ok(["import", str(path), "--db", db2, "--trusted"])
    assert export(db2, SESSION) == exported


def test_options_not_in_the_table_or_of_another_type_stay_in_opts() -> None:
    options: dict[str, JsonValue] = {
        **OPTIONS_V1,
        "edit_gain": 5,
        "call_labels": True,
    }  # 5, not 5.0
    pairing: dict[str, JsonValue] = {
        k: [] for k in ("duplicates", "late", "orphans", "renamed", "repaired")
    }
    report: dict[str, JsonValue] = {"step": 2, "tokens": {"total": 3}, "pairing": pairing}
    report.update(provider="openai", tokenizer="o200k_base", actions=[], guide_version=None)
    budget: dict[str, JsonValue] = {
        "context_window": 128000,
        "max_output": 4096,
        "input_limit": 123904,
    }
    budget.update(pressure_line=99123, target=74342, over_limit=False, over_pressure=False)
    report["budget"] = budget
    packed = pack(options, report, step=2)
    assert packed is not None
    assert packed[0] == {"edit_gain": 5, "call_labels": True}
    assert packed[1] == {"tokens": {"total": 3}}
    back_options, back_report = unpack(*packed, step=2)
    assert canonical_json(back_options) == canonical_json(options)
    assert back_report == report


def test_a_report_unpacking_would_change_is_stored_plainly() -> None:
    # no pairing in it: unpacking would add the empty one, so it is not packed
    report: dict[str, JsonValue] = {"step": 3, "provider": "openai", "tokens": {"total": 3}}
    assert pack(dict(OPTIONS_V1), report, step=3) is None
    header = RequestHeader(3, 9, "sha256:" + "0" * 64, dict(OPTIONS_V1), {}, report)
    stored = event_to_json(header)
    assert stored["report"] == report
    assert "rep" not in stored
    back = event_from_json(json.loads(canonical_json(stored)))
    assert back == header
    assert back.plain


def test_a_header_with_both_forms_is_refused() -> None:
    obj = json.loads(canonical_json(event_to_json(_headers(_old())[0])))
    obj["rep"] = {}
    with pytest.raises(ValidationError, match="not both"):
        event_from_json(obj)


def test_candidate_names_and_the_threshold_pack_and_come_back() -> None:
    header = _headers(_old())[6]  # step 7: a trim, what the rungs weighed, a cost decision
    considered = header.report["considered"]
    assert isinstance(considered, list)
    assert considered
    packed = json.loads(canonical_json(event_to_json(replace(header, plain=False))))
    first = packed["rep"]["considered"][0]
    assert first["candidates"] == "trim:6 +3 +3 +3"
    assert event_from_json(packed) == header
    # not all packable: kept
    names: list[JsonValue] = ["trim:9", "fold:4", "fold:12", "trim:3", "drop:x"]
    report: dict[str, JsonValue] = {
        **header.report,
        "considered": [{"rung": "r", "candidates": names, "count": 5}],
    }
    back = event_from_json(
        json.loads(canonical_json(event_to_json(replace(header, report=report))))
    )
    assert isinstance(back, RequestHeader)
    assert back.report == report


def test_a_packed_name_list_that_is_not_one_is_a_clear_error() -> None:
    packed = json.loads(canonical_json(event_to_json(replace(_headers(_old())[6], plain=False))))
    packed["rep"]["considered"][0]["candidates"] = "trim:6 +x"
    with pytest.raises(ValidationError, match="rep"):
        event_from_json(packed)
