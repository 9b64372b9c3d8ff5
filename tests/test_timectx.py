"""Time context (seed 004) with a fake clock: every rule of the RFC, one test each."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import pytest

from ctxline.errors import ValidationError
from ctxline.record.events import (
    AssistantMessage,
    Event,
    Notification,
    RequestHeader,
    Rule,
    State,
    StoredEvent,
    SystemMessage,
    Todo,
    ToolCall,
    ToolResult,
    UserMessage,
)
from ctxline.sources.guide import GuideRegistry
from ctxline.sources.timectx import (
    FIRST_TURN,
    TIME_KIND,
    TimeConfig,
    TimeReading,
    TurnFold,
    format_elapsed,
    format_now,
    render_time,
    side_channel_stamp,
    time_block,
)
from ctxline.tags import count_tags

T0 = datetime(2026, 11, 2, 9, 0, 0, tzinfo=UTC)


def record(*items: tuple[float, Event]) -> list[StoredEvent]:
    """Stored events appended ``offset`` seconds after T0."""
    return [
        StoredEvent(i + 1, f"e{i + 1}", T0 + timedelta(seconds=offset), ev)
        for i, (offset, ev) in enumerate(items)
    ]


def elapsed_line(reading: TimeReading) -> str:
    return reading.text.split("\n")[1].split(": ", 1)[1]


def call(call_id: str) -> AssistantMessage:
    return AssistantMessage(tool_calls=(ToolCall(call_id, "lookup", {"q": "x"}),))


# --- formatting --------------------------------------------------------------------


def test_format_now_utc_and_offset_zone() -> None:
    now = datetime(2026, 11, 2, 23, 0, 22, 999_999, tzinfo=UTC)
    assert format_now(now, "UTC") == "2026-11-02T23:00:22+00:00 (UTC)"
    assert format_now(now, "Europe/Berlin") == "2026-11-03T00:00:22+01:00 (Europe/Berlin)"
    assert format_now(now, "Asia/Kolkata") == "2026-11-03T04:30:22+05:30 (Asia/Kolkata)"
    assert format_now(now, "America/New_York") == "2026-11-02T18:00:22-05:00 (America/New_York)"


def test_dst_change_is_shown_by_the_offset() -> None:
    # Europe/Berlin leaves summer time at 01:00 UTC on 2026-10-25: 03:00 CEST -> 02:00 CET
    before = datetime(2026, 10, 25, 0, 30, tzinfo=UTC)
    after = datetime(2026, 10, 25, 1, 30, tzinfo=UTC)
    assert format_now(before, "Europe/Berlin") == "2026-10-25T02:30:00+02:00 (Europe/Berlin)"
    assert format_now(after, "Europe/Berlin") == "2026-10-25T02:30:00+01:00 (Europe/Berlin)"
    cfg = TimeConfig(zone="Europe/Berlin", refresh_s=0)
    events = record((0, UserMessage("hi")))
    first = time_block(events, before, cfg, None)
    second = time_block(events, after, cfg, first)
    assert "+02:00" in first.text
    assert "+01:00" in second.text
    assert first.text != second.text


def test_format_elapsed_compact_units() -> None:
    assert format_elapsed(0) == "0s"
    assert format_elapsed(59) == "59s"
    assert format_elapsed(60) == "1m"
    assert format_elapsed(3_600) == "1h"
    assert format_elapsed(3 * 3600 + 12 * 60 + 5) == "3h 12m 5s"
    assert format_elapsed(2 * 86_400 + 3_605) == "2d 1h 5s"
    assert format_elapsed(-5) == "0s"


def test_naive_now_is_rejected() -> None:
    with pytest.raises(ValidationError, match="no time zone"):
        format_now(datetime(2026, 1, 1), "UTC")  # noqa: DTZ001
    with pytest.raises(ValidationError):
        time_block([], datetime(2026, 1, 1), TimeConfig(), None)  # noqa: DTZ001


def test_side_channel_stamp() -> None:
    at = datetime(2025, 9, 14, 8, 30, 45, 500_000, tzinfo=UTC)
    assert side_channel_stamp(at) == "[2025-09-14 08:30:45]"
    assert side_channel_stamp(at, "Europe/Berlin") == "[2025-09-14 10:30:45]"


# --- configuration -----------------------------------------------------------------


@pytest.mark.parametrize("zone", ["Mars/Olympus_Mons", "", "../etc/passwd", "Europe/"])
def test_invalid_zone_is_a_clear_error_naming_it(zone: str) -> None:
    with pytest.raises(ValidationError) as info:
        TimeConfig(zone=zone)
    assert info.value.field == "tz"
    assert repr(zone) in str(info.value)


@pytest.mark.parametrize("refresh", [-1, True, 1.5])
def test_invalid_refresh_interval(refresh: object) -> None:
    with pytest.raises(ValidationError) as info:
        TimeConfig(refresh_s=refresh)  # type: ignore[arg-type]
    assert info.value.field == "refresh_s"


def test_invalid_placement() -> None:
    with pytest.raises(ValidationError, match="placement"):
        TimeConfig(placement="middle")  # type: ignore[arg-type]


def test_defaults() -> None:
    cfg = TimeConfig()
    assert (cfg.zone, cfg.refresh_s, cfg.placement) == ("UTC", 60, "tail")


# --- elapsed -----------------------------------------------------------------------


def test_first_turn_text() -> None:
    events = record((0, SystemMessage("persona")), (1, UserMessage("hello")))
    reading = time_block(events, T0 + timedelta(seconds=3), TimeConfig(), None)
    assert reading.text == (
        "now: 2026-11-02T09:00:03+00:00 (UTC)\n"
        f"elapsed since the last message before this turn: {FIRST_TURN}"
    )
    assert reading.elapsed_s is None
    assert reading.turn_seq == 2


def test_empty_record_is_the_first_turn() -> None:
    reading = time_block([], T0, TimeConfig(), None)
    assert elapsed_line(reading) == FIRST_TURN
    assert reading.turn_seq == 0


def test_first_turn_stays_unavailable_through_its_tool_loop() -> None:
    events = record((0, UserMessage("go")), (5, call("c1")), (9, ToolResult("c1", "ok")))
    reading = time_block(events, T0 + timedelta(seconds=20), TimeConfig(), None)
    assert elapsed_line(reading) == FIRST_TURN


def test_elapsed_across_turns_excludes_the_new_prompt() -> None:
    gap = 3 * 3600 + 12 * 60
    events = record(
        (0, UserMessage("first")),
        (4, call("c1")),
        (6, ToolResult("c1", "ok")),
        (10, AssistantMessage("done")),
        (10 + gap, UserMessage("again?")),
    )
    now = T0 + timedelta(seconds=10 + gap + 5)
    reading = time_block(events, now, TimeConfig(), None)
    # measured from the assistant reply at +10s, not from the new prompt
    assert reading.elapsed_s == gap + 5
    assert elapsed_line(reading) == "3h 12m 5s"
    assert reading.turn_seq == 5


def test_consecutive_user_messages_are_one_new_prompt() -> None:
    events = record(
        (0, UserMessage("a")),
        (1, AssistantMessage("b")),
        (100, UserMessage("c")),
        (150, UserMessage("and also d")),
    )
    reading = time_block(events, T0 + timedelta(seconds=151), TimeConfig(), None)
    assert reading.elapsed_s == 150
    assert reading.turn_seq == 3


@pytest.mark.parametrize(
    "visible",
    [
        AssistantMessage("reply"),
        ToolResult("c0", "out"),
        Notification("exec/job", "finished"),
        State("env/date", "2026-11-02"),
    ],
)
def test_every_model_visible_kind_is_a_baseline(visible: Event) -> None:
    events = record(
        (0, UserMessage("start")),
        (1, AssistantMessage("ok")),
        (40, visible),
        (90, UserMessage("next")),
    )
    reading = time_block(events, T0 + timedelta(seconds=100), TimeConfig(), None)
    assert reading.elapsed_s == 60
    assert reading.turn_seq == 4


def test_a_user_message_is_the_baseline_when_a_request_followed_it() -> None:
    # the model call of the first turn failed: nothing was appended after the request
    events = record(
        (0, UserMessage("start")),
        (1, RequestHeader(step=1, upto_seq=1, sha256="sha256:x")),
        (3_600, UserMessage("hello? still there?")),
    )
    reading = time_block(events, T0 + timedelta(seconds=3_601), TimeConfig(), None)
    assert reading.turn_seq == 3
    assert reading.elapsed_s == 3_601
    assert elapsed_line(reading) == "1h 1s"


def test_invisible_kinds_are_not_baselines() -> None:
    events = record(
        (0, UserMessage("start")),
        (1, AssistantMessage("ok")),
        (50, SystemMessage("persona v2")),
        (55, Rule("r", "set", text="x")),
        (60, Todo(op="update", item_id="1", status="completed")),
        (90, UserMessage("next")),
    )
    reading = time_block(events, T0 + timedelta(seconds=91), TimeConfig(), None)
    assert reading.elapsed_s == 90


def test_long_turn_keeps_its_baseline_and_the_elapsed_time_grows() -> None:
    cfg = TimeConfig(refresh_s=60)
    events = record((0, UserMessage("a")), (2, AssistantMessage("b")), (600, UserMessage("c")))
    first = time_block(events, T0 + timedelta(seconds=601), cfg, None)
    later_events = [
        *events,
        StoredEvent(4, "e4", T0 + timedelta(seconds=700), call("c1")),
        StoredEvent(5, "e5", T0 + timedelta(seconds=760), ToolResult("c1", "x")),
    ]
    later = time_block(later_events, T0 + timedelta(seconds=800), cfg, first)
    assert first.elapsed_s == 599
    assert later.elapsed_s == 798  # still from the reply at +2s
    assert later.turn_seq == first.turn_seq == 3


def test_clock_moved_back_clamps_to_zero() -> None:
    events = record((0, UserMessage("a")), (500, AssistantMessage("b")), (600, UserMessage("c")))
    reading = time_block(events, T0 + timedelta(seconds=100), TimeConfig(), None)
    assert reading.elapsed_s == 0
    assert elapsed_line(reading) == "0s"


# --- refresh -----------------------------------------------------------------------


def steps(
    events: Sequence[StoredEvent], cfg: TimeConfig, offsets: Sequence[float]
) -> list[TimeReading]:
    out: list[TimeReading] = []
    previous = None
    for offset in offsets:
        previous = time_block(events, T0 + timedelta(seconds=offset), cfg, previous)
        out.append(previous)
    return out


def test_reuse_within_the_refresh_interval() -> None:
    events = record((0, UserMessage("a")), (1, AssistantMessage("b")), (30, UserMessage("c")))
    a, b, c, d = steps(events, TimeConfig(refresh_s=60), [31, 60, 90.9, 91])
    assert b is a
    assert c is a
    assert d is not a
    assert d.sampled_at == T0 + timedelta(seconds=91)
    assert d.elapsed_s == 90


def test_first_request_of_a_turn_always_refreshes() -> None:
    cfg = TimeConfig(refresh_s=3600)
    turn1 = record((0, UserMessage("a")))
    first = time_block(turn1, T0 + timedelta(seconds=1), cfg, None)
    turn2 = [
        *turn1,
        StoredEvent(2, "e2", T0 + timedelta(seconds=2), AssistantMessage("b")),
        StoredEvent(3, "e3", T0 + timedelta(seconds=5), UserMessage("c")),
    ]
    second = time_block(turn2, T0 + timedelta(seconds=6), cfg, first)
    assert second is not first
    assert second.turn_seq == 3
    assert second.elapsed_s == 4


def test_interval_zero_refreshes_every_step() -> None:
    events = record((0, UserMessage("a")))
    readings = steps(events, TimeConfig(refresh_s=0), [1, 1, 2])
    assert readings[1] is not readings[0]
    assert readings[1] == readings[0]  # same instant, same value
    assert readings[2].sampled_at == T0 + timedelta(seconds=2)


def test_zone_change_refreshes() -> None:
    events = record((0, UserMessage("a")))
    first = time_block(events, T0, TimeConfig(), None)
    second = time_block(events, T0 + timedelta(seconds=1), TimeConfig(zone="Asia/Tokyo"), first)
    assert second.zone == "Asia/Tokyo"
    assert "+09:00 (Asia/Tokyo)" in second.text


def test_clock_behind_the_previous_sample_refreshes() -> None:
    events = record((0, UserMessage("a")))
    first = time_block(events, T0 + timedelta(seconds=30), TimeConfig(), None)
    second = time_block(events, T0 + timedelta(seconds=10), TimeConfig(), first)
    assert second.sampled_at == T0 + timedelta(seconds=10)


# --- reading, rendering, guide -----------------------------------------------------


def test_reading_round_trips_through_json() -> None:
    events = record((0, UserMessage("a")), (1, AssistantMessage("b")), (30, UserMessage("c")))
    reading = time_block(
        events, T0 + timedelta(seconds=45, microseconds=7), TimeConfig("Europe/Berlin"), None
    )
    assert TimeReading.from_json(reading.to_json()) == reading
    first = time_block(events[:1], T0, TimeConfig(), None)
    assert TimeReading.from_json(first.to_json()) == first
    with pytest.raises(ValidationError):
        TimeReading.from_json({"text": "x"})


def test_rebuild_from_the_logged_reading_is_exact() -> None:
    events = record((0, UserMessage("a")), (1, AssistantMessage("b")), (30, UserMessage("c")))
    cfg = TimeConfig(refresh_s=60)
    first = time_block(events, T0 + timedelta(seconds=31), cfg, None)
    logged = first.to_json()
    # next step, rebuilt in another process from the logged reading
    again = time_block(events, T0 + timedelta(seconds=50), cfg, TimeReading.from_json(logged))
    assert again.text == first.text


def test_incremental_fold_equals_the_pure_function() -> None:
    events = record(
        (0, UserMessage("a")),
        (3, call("c1")),
        (4, ToolResult("c1", "x")),
        (9, AssistantMessage("b")),
        (70, UserMessage("c")),
        (71, Notification("job", "done")),
    )
    fold = TurnFold()
    for i, stored in enumerate(events):
        fold.feed(stored)
        fresh = TurnFold().feed_all(events[: i + 1])
        assert (fold.turn_seq, fold.baseline_at) == (fresh.turn_seq, fresh.baseline_at)


def test_render_time_block() -> None:
    reading = time_block(
        [], datetime(2026, 11, 2, 23, 0, 22, tzinfo=UTC), TimeConfig("Europe/Berlin"), None
    )
    block = render_time(reading)
    assert block == (
        '<ctx-time zone="Europe/Berlin">now: 2026-11-03T00:00:22+01:00 (Europe/Berlin)\n'
        f"elapsed since the last message before this turn: {FIRST_TURN}</ctx-time>"
    )
    assert count_tags(block) == 2


def test_time_kind_registers_in_the_guide() -> None:
    registry = GuideRegistry()
    registry.register(TIME_KIND)
    assert "- <ctx-time>:" in registry.compose()
