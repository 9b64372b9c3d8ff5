"""The Bridge every integration shares: new items found in O(new), divergence refused,
instructions recorded once then as state, framework input never one of ctxline's kinds."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxline import Context, MemoryStore, PrepareOptions, State, SystemMessage, UserMessage
from ctxline.errors import ValidationError
from ctxline.integrations.core import Bridge, Converted, framework_info, item_key
from ctxline.record.events import Guide, RequestHeader, UnknownEvent


def _bridge(store: MemoryStore | None = None) -> Bridge:
    return Bridge(Context(store or MemoryStore(), "s"), "test")


def _record(bridge: Bridge, items: list[str]) -> None:
    new = bridge.new_items(items, item_key)
    bridge.record([Converted(UserMessage(t), (item_key(t),)) for t in new])


@settings(deadline=None)  # the first example loads the tokenizer; no timing is asserted here
@given(st.lists(st.lists(st.text(max_size=5), max_size=4), min_size=1, max_size=5))
def test_growing_list_records_each_item_once(batches: list[list[str]]) -> None:
    bridge = _bridge()
    history: list[str] = []
    for batch in batches:
        history = history + batch
        _record(bridge, history)
    users = [e.event.text for e in bridge.ctx.events if isinstance(e.event, UserMessage)]
    assert users == history
    assert bridge.recorded == len(history)


def test_window_and_view_and_resume() -> None:
    store = MemoryStore()
    bridge = _bridge(store)
    _record(bridge, ["a", "b", "c", "d"])
    _record(bridge, ["c", "d", "e"])  # a session that reads only the last items
    bridge.remember_view([item_key("V1"), item_key("V2")])
    _record(bridge, ["V1", "V2", "f"])  # a framework that stored the view as history
    again = _bridge(store)  # a new process on the same store resumes the keys
    assert again.recorded == 6
    _record(again, ["a", "b", "c", "d", "e", "f", "g"])
    texts = [e.event.text for e in again.ctx.events if isinstance(e.event, UserMessage)]
    assert texts == ["a", "b", "c", "d", "e", "f", "g"]


def test_rewritten_history_is_refused_and_nothing_is_appended() -> None:
    bridge = _bridge()
    _record(bridge, ["a", "b", "c"])
    before = len(bridge.ctx.events)
    with pytest.raises(ValidationError, match="no longer matches what ctxline recorded"):
        _record(bridge, ["a", "X", "Y"])
    assert len(bridge.ctx.events) == before


def test_instructions_first_as_system_then_as_state() -> None:
    bridge = _bridge()
    bridge.record([], instructions="Be brief.")
    bridge.record([], instructions="Be brief.")
    bridge.record([], instructions="Be thorough.")
    kinds = [type(e.event) for e in bridge.ctx.events]
    assert kinds == [SystemMessage, State]
    resumed = Bridge(bridge.ctx, "test")
    assert resumed.instructions("Be thorough.") == []
    assert framework_info(bridge.ctx.events[0].event) == {"name": "test", "instructions": True}


@pytest.mark.parametrize(
    "event",
    [
        Guide("v1", "forged guide"),
        RequestHeader(1, 1, "sha256:x"),
        State("env/date", "2026-01-01"),
        UnknownEvent("guide", {}),
        UnknownEvent("other.reasoning", {}),
    ],
)
def test_framework_input_never_becomes_a_ctxline_kind(event: object) -> None:
    bridge = _bridge()
    with pytest.raises(ValidationError, match="may not become"):
        bridge.record([Converted(event, ("k",))])  # type: ignore[arg-type]
    assert bridge.ctx.events == []


def test_only_openai_shaped_views() -> None:
    ctx = Context(MemoryStore(), "s", options=PrepareOptions(provider="anthropic", model="claude"))
    with pytest.raises(ValidationError, match="provider='openai'"):
        Bridge(ctx, "test")
