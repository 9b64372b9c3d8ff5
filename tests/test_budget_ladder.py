"""The cost-aware ladder's decisions, as the step's report gives them, and what they did.

Every decision's inputs come from the record (logged request headers) and the options,
so a fresh Context on the same record decides the same; the report's ``cost`` section
carries enough to recompute it.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from conftest import FakeClock, counter_ids
from ctxline.context import Context
from ctxline.cost import cache_pricing, edit_gain
from ctxline.errors import ContextOverflow
from ctxline.record.events import AssistantMessage, Event, ToolCall, ToolResult, UserMessage
from ctxline.record.store import MemoryStore, Store
from ctxline.tokens.counters import get_counter
from ctxline.view.options import PrepareOptions
from json_reads_b import at_int

T0 = datetime(2026, 11, 2, 12, 0, tzinfo=UTC)
BYTES = get_counter("bytes/4")


def _ctx(store: Store | None = None, **options: object) -> Context:
    opts = PrepareOptions(tokenizer="bytes/4", **options)  # type: ignore[arg-type]
    store = store or MemoryStore(clock=FakeClock(), new_id=counter_ids())
    return Context(store, "s", options=opts, counter=BYTES)


def _turn(i: int, tokens: int, *, error: bool = False) -> list[Event]:
    line = f"line {i} " + "y" * 70 + "\n"
    text = line * max(1, tokens * 4 // len(line))
    return [
        AssistantMessage(f"step {i}", (ToolCall(f"c{i}", "bash", {"command": f"run {i}"}),)),
        ToolResult(f"c{i}", text, is_error=error),
    ]


def _run(c: Context, sizes: list[int], start: int = 0) -> list[dict[str, Any]]:
    reports = []
    for k, size in enumerate(sizes):
        c.append(*_turn(start + k, size))
        reports.append(c.prepare(now=T0 + timedelta(seconds=start + k)).report.to_json())
    return reports


def test_under_the_pressure_line_an_edit_waits_until_it_pays_enough() -> None:
    c = _ctx(context_window=100_000, max_output=4_000)
    c.append(UserMessage("audit the repository"))
    reports = _run(c, [3_000] * 3 + [100] * 40)
    decisions = [r["cost"]["decision"] for r in reports if "cost" in r]
    assert "keep" in decisions
    assert "edit" in decisions
    first_edit = decisions.index("edit")
    assert "edit" not in decisions[:first_edit]
    assert first_edit > 0
    pricing = cache_pricing("openai", "gpt-4.1")
    for r in reports:
        cost = r.get("cost")
        if not cost:
            continue
        assert cost["alpha"] == pricing.alpha
        assert cost["write_premium"] == pricing.write_premium
        gain = edit_gain(cost.get("saved", 0), cost.get("rewritten", 0), cost["steps"], pricing)
        assert abs(gain - cost["gain"]) <= 0.1 * cost["steps"] + 1  # steps are rounded in the report
        acted = any(a["action"] in ("fold", "trim") for a in r["actions"])
        assert acted == (cost["decision"] == "edit")
        assert (cost["gain"] >= cost["threshold"]) == acted
    assert max(r["tokens"]["total"] for r in reports) <= reports[0]["budget"]["pressure_line"]


def test_no_edits_under_the_pressure_line_when_edit_gain_is_none() -> None:
    c = _ctx(context_window=100_000, max_output=4_000, edit_gain=None)
    c.append(UserMessage("audit"))
    reports = _run(c, [3_000] * 3 + [100] * 40)
    assert all(r["actions"] == [] and "cost" not in r for r in reports)


def test_over_the_pressure_line_it_waits_while_waiting_is_cheaper_then_reduces() -> None:
    # results of 1,200 tokens, whole (a fresh limit above them): the view grows past the line
    c = _ctx(context_window=20_000, max_output=2_000, edit_gain=None, fresh_tokens=4_500)
    c.append(UserMessage("dig"))
    reports = _run(c, [1_200] * 30)
    over = [r for r in reports if r["tokens"]["total"] > r["budget"]["pressure_line"] or "cost" in r]
    decisions = [r["cost"]["decision"] for r in over if "cost" in r]
    assert decisions[0] == "wait"
    assert any(d in ("reduce", "compact", "edits") for d in decisions)
    waits = [r["cost"] for r in over if "cost" in r and r["cost"]["decision"] == "wait"]
    assert all(w["rent"] < w["buy"] for w in waits)
    assert [w.get("waited", 0) for w in waits[:3]] == [0, 1, 2]  # counted from the logged requests
    assert all(r["tokens"]["total"] <= r["budget"]["input_limit"] for r in reports)
    # the same record, a cold Context: the same decision at the next step
    c.append(*_turn(99, 50))
    cold = _ctx(c.store, context_window=20_000, max_output=2_000, edit_gain=None, fresh_tokens=4_500)
    assert cold.prepare(now=T0, log=False).report.to_json() == c.prepare(now=T0).report.to_json()


def test_without_defer_it_reduces_as_soon_as_the_line_is_crossed() -> None:
    c = _ctx(context_window=20_000, max_output=2_000, edit_gain=None, defer=False)
    c.append(UserMessage("dig"))
    for r in _run(c, [1_200] * 30):
        if r["budget"]["over_pressure"]:
            assert r["actions"], r  # reduced in the very step it was over
            assert r["tokens"]["total"] <= r["budget"]["target"]


def test_a_compaction_takes_the_edits_after_its_cut_with_it() -> None:
    c = _ctx(context_window=20_000, max_output=2_000, edit_gain=None)
    c.append(UserMessage("dig"))
    reports = _run(c, [250] * 120)
    compacting = [r for r in reports if any(a["action"] == "compact" for a in r["actions"])]
    assert compacting
    assert any(any(a["action"] == "trim" for a in r["actions"]) for r in compacting)
    assert all(r["cost"]["decision"] == "compact" for r in compacting)


def test_the_newest_group_that_alone_does_not_fit_shows_its_result_as_a_preview() -> None:
    c = _ctx(context_window=4_000, max_output=500, fresh_tokens=3_000)
    c.append(UserMessage("read it"), *_turn(0, 2_900))  # under its fresh limit, over the room left
    prep = c.prepare(now=T0)
    assert at_int(prep.report, "tokens", "total") <= 3_500
    assert prep.body["messages"][-1]["content"].startswith("[output shown as a preview")


def test_only_a_task_that_alone_does_not_fit_is_refused() -> None:
    c = _ctx(context_window=2_000, max_output=500)
    c.append(UserMessage("x" * 8_000))
    with pytest.raises(ContextOverflow, match="original task"):
        c.prepare(now=T0)
