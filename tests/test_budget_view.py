"""The view the budget leaves: the newest results whole, the newest group never
summarized, edited outputs and arguments that read back, edits that change only what
they touch (the rest of the rendered view is reused, earlier requests keep their bytes).
"""

from __future__ import annotations

import hashlib
import json
import re
from datetime import UTC, datetime, timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import FakeClock, counter_ids
from ctxline.context import Context
from ctxline.record.events import AssistantMessage, Event, ToolCall, ToolResult, UserMessage
from ctxline.record.jsonvalue import JsonValue, as_array, as_int, as_object, get_object
from ctxline.record.store import MemoryStore
from ctxline.replay import shows_whole
from ctxline.tags import escape
from ctxline.tokens.counters import get_counter
from ctxline.view.options import FRESH_CAP, FRESH_MIN, PrepareOptions
from json_reads_a import dig, num, objects

T0 = datetime(2026, 11, 2, 12, 0, tzinfo=UTC)
BYTES = get_counter("bytes/4")
HANDLE = re.compile(r"sha256:[0-9a-f]{64}")


def _ctx(**options: object) -> Context:
    opts = PrepareOptions(tokenizer="bytes/4", **options)  # type: ignore[arg-type]
    return Context(MemoryStore(clock=FakeClock(), new_id=counter_ids()), "s", options=opts, counter=BYTES)


def _output(i: int, tokens: int) -> str:
    """About ``tokens`` bytes/4 tokens of distinct lines."""
    line = f"out {i} " + "x" * 70 + "\n"
    return line * max(1, tokens * 4 // len(line))


def _turn(i: int, tokens: int, *, error: bool = False, args: JsonValue = None) -> list[Event]:
    call = ToolCall(f"c{i}", "bash", args if args is not None else {"command": f"cat f{i}"})
    return [AssistantMessage(f"step {i}", (call,)), ToolResult(f"c{i}", _output(i, tokens), is_error=error)]


def _read_back(ctx: Context, handle: str) -> str:
    pages, page = [], 1
    while True:
        result = ctx.run_builtin(ToolCall(f"r{page}", "read_result", {"handle": handle, "page": page}))
        assert result is not None
        assert not result.is_error, result
        header, _, rest = result.content.partition("\n")
        total = int(header.split(" of ")[1].split(",")[0])
        pages.append(rest.rsplit("\n[continues on page", 1)[0] if page < total else rest)
        if page == total:
            return "".join(pages)
        page += 1


def test_the_fresh_limit_defaults_to_5_percent_of_the_input_limit_within_bounds() -> None:
    assert PrepareOptions(context_window=32_000, max_output=4_000).fresh_limit == 1_400
    assert PrepareOptions(context_window=200_000, max_output=32_000).fresh_limit == 8_400
    assert PrepareOptions(context_window=1_000_000, max_output=64_000).fresh_limit == FRESH_CAP
    assert PrepareOptions(context_window=8_000, max_output=1_000).fresh_limit == FRESH_MIN  # the floor
    # a tiny window: never more than a quarter of it, so a compaction can still make room
    assert PrepareOptions(context_window=3_000, max_output=1_000).fresh_limit == 500
    assert PrepareOptions(fresh_tokens=3_000).fresh_limit == 3_000
    # 0, and a header logged before there was a fresh limit: the offload limit, as then
    assert PrepareOptions(fresh_tokens=0).fresh_limit == PrepareOptions().offload_limit
    old = PrepareOptions(offload_tokens=500).to_json()
    del old["fresh_tokens"]
    assert PrepareOptions.from_json(old).fresh_limit == 500


def test_the_newest_result_is_whole_then_stays_so_without_breaking_the_cache() -> None:
    c = _ctx(context_window=32_000, max_output=4_000)
    # over the offload limit (1,000), under the fresh one (1,400)
    c.append(UserMessage("inspect the logs"), *_turn(1, 1_300))
    first = c.prepare(now=T0)
    assert first.body["messages"][-1]["content"] == escape(_output(1, 1_300))
    c.append(*_turn(2, 100))
    second = c.prepare(now=T0 + timedelta(seconds=1))
    assert dig(second.report["prefix"], "first_difference") is None  # appended to, not rewritten
    assert second.body["messages"][: len(first.body["messages"])] == first.body["messages"]


def test_a_result_over_the_fresh_limit_is_a_preview_from_the_start() -> None:
    c = _ctx(context_window=32_000, max_output=4_000)
    c.append(UserMessage("inspect"), *_turn(1, 9_000))
    shown = c.prepare(now=T0).body["messages"][-1]["content"]
    assert shown.startswith("[output shown as a preview")
    (handle,) = HANDLE.findall(shown)
    assert _read_back(c, handle) == _output(1, 9_000)


def test_compaction_never_summarizes_the_newest_group() -> None:
    c = _ctx(context_window=8_000, max_output=1_000, fresh_tokens=1_750)
    c.append(UserMessage("fix it"))
    for i in range(20):  # failed results are never trimmed: only a compaction makes room
        c.append(*_turn(i, 300, error=True))
    c.append(*_turn(99, 1_500))  # the newest group, under the fresh limit (1,750)
    prep = c.prepare(now=T0)
    compact = next(a for a in objects(prep.report["actions"]) if a["action"] == "compact")
    newest = [e for e in c.events if e.kind in ("assistant.message", "tool.result")][-2:]
    assert num(compact["upto_seq"]) < newest[0].seq
    messages = [vm.message for vm in c.view()]
    assert all(shows_whole(messages, e) for e in newest)
    assert num(dig(prep.report["tokens"], "total")) <= num(dig(prep.report["budget"], "input_limit"))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sizes=st.lists(st.integers(10, 1_500), min_size=1, max_size=30), window=st.sampled_from([8_000, 16_000]))
def test_the_newest_result_is_whole_whenever_it_fits(sizes: list[int], window: int) -> None:
    c = _ctx(context_window=window, max_output=1_000)
    c.append(UserMessage("go"))
    for i, size in enumerate(sizes):
        c.append(*_turn(i, size))
        prep = c.prepare(now=T0 + timedelta(seconds=i))
        newest = c.events[[e.kind for e in c.events].index("tool.result", len(c.events) - 8) :]
        result = next(e for e in reversed(newest) if e.kind == "tool.result")
        assert isinstance(result.event, ToolResult)
        fits = BYTES.count(result.event.content) <= c.options.fresh_limit
        assert shows_whole([vm.message for vm in c.view()], result) == fits, prep.report["actions"]


def test_trimmed_outputs_and_elided_arguments_read_back() -> None:
    c = _ctx(context_window=60_000, max_output=4_000, edit_gain=0.0)
    c.append(UserMessage("write the files"))
    written = {f"f{i}.py": f"# file {i}\n" + "value = 1\n" * 300 for i in range(3)}
    for i, (path, text) in enumerate(written.items()):
        c.append(*_turn(i, 2_000, args={"path": path, "content": text}))
        c.prepare(now=T0 + timedelta(seconds=i))
    for i in range(3, 9):
        c.append(*_turn(i, 50))
        prep = c.prepare(now=T0 + timedelta(seconds=i))
    body = json.dumps(prep.body)
    assert "[older output trimmed" in body
    assert "characters elided" in body
    assert any(a["action"] == "trim" for h in c.requests() for a in objects(h.report["actions"]))
    texts = {_read_back(c, h) for h in set(HANDLE.findall(body))}
    assert set(written.values()) <= texts  # the arguments, whole
    assert {_output(i, 2_000) for i in range(3)} <= texts  # the outputs, whole
    cost = next(as_object(h.report["cost"]) for h in c.requests() if get_object(h.report, "cost").get("decision") == "edit")
    assert num(cost["gain"]) >= num(cost.get("threshold", 0))


def test_an_edit_reuses_the_rest_of_the_rendered_view_and_earlier_requests_keep_their_bytes() -> None:
    c = _ctx(context_window=60_000, max_output=4_000, edit_gain=None)  # no edit yet
    c.append(UserMessage("go"), *_turn(0, 3_000))
    for i in range(1, 4):
        c.append(*_turn(i, 40))
        before = c.prepare(now=T0 + timedelta(seconds=i))
    items = list(c._cache.openai._stream.items)
    c.append(*_turn(9, 40))
    edit_now = PrepareOptions(tokenizer="bytes/4", context_window=60_000, max_output=4_000, edit_gain=0.0)
    after = c.prepare(now=T0 + timedelta(seconds=9), options=edit_now)
    trims = [a for a in objects(after.report["actions"]) if a["action"] == "trim"]
    assert trims, after.report
    edited = {c._cache.index.seq_index[as_int(s)] for a in trims for s in as_array(a["events"])}
    now = c._cache.openai._stream.items
    for i, item in enumerate(items):  # only the edited messages were serialized again
        assert (now[i] is item) == (i not in edited)
    # the earlier request's body is joined only now, after the edit: still what it was
    assert "sha256:" + hashlib.sha256(before.body_bytes).hexdigest() == before.sha256
    assert c.rebuild(after.header.step) == after.body_bytes
