"""The cycle collector is paused during a bulk read and comes back as it was."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ctxline.record.events import UserMessage
from ctxline.record.gc_pause import gc_paused
from ctxline.record.store import open_store


@pytest.fixture
def collector() -> Iterator[None]:
    was = gc.isenabled()
    yield
    if was:
        gc.enable()
    else:
        gc.disable()


def test_a_pause_nests_and_restores_the_collector(collector: None) -> None:
    gc.enable()
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the outer read is still going
    assert gc.isenabled()
    with pytest.raises(ValueError, match="boom"), gc_paused():
        raise ValueError("boom")
    assert gc.isenabled()
    gc.disable()  # an app that runs without it keeps it off
    with gc_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_overlapping_reads_in_two_threads_end_with_the_collector_on(collector: None) -> None:
    gc.enable()
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen: list[bool] = []

    def first() -> None:
        with gc_paused():
            first_in.set()
            second_in.wait(5)
        first_out.set()

    def second() -> None:
        first_in.wait(5)
        with gc_paused():
            second_in.set()
            first_out.wait(5)
            seen.append(gc.isenabled())  # the first read ended: this one is still paused

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert seen == [False]
    assert gc.isenabled()  # the last one out turned it back on


def test_a_store_read_pauses_the_collector_only_while_it_reads(
    tmp_path: Path, collector: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ctxline.record.store.sql_events as sql_events

    gc.enable()
    store = open_store(str(tmp_path / "s.db"))
    store.create_session("s")
    store.append("s", [UserMessage(f"m{i}") for i in range(50)])
    seen: list[bool] = []
    parse = sql_events.parse_body  # type: ignore[attr-defined]

    def watched(*args: Any, **kwargs: Any) -> Any:
        seen.append(gc.isenabled())
        return parse(*args, **kwargs)

    monkeypatch.setattr(sql_events, "parse_body", watched)
    events = store.read("s")
    store.close()
    assert len(events) == 50
    assert seen == [False] * 50  # every row parsed with the collector paused
    assert gc.isenabled()  # and on again after


def test_a_cold_prepare_on_a_long_record_folds_with_the_collector_paused(
    tmp_path: Path, collector: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Opening a Context on a long session feeds every event with the collector paused
    (issue 25); a step's few new events are fed with it running, and it is on after both."""
    from ctxline import Context
    from ctxline.view.cache import BULK_EVENTS
    from ctxline.view.fold import RecordFold

    gc.enable()
    store = open_store(str(tmp_path / "s.db"))
    store.create_session("s")
    store.append("s", [UserMessage(f"m{i}") for i in range(BULK_EVENTS + 10)])
    seen: list[bool] = []
    feed = RecordFold.feed

    def watched(self: RecordFold, *args: Any, **kwargs: Any) -> Any:
        seen.append(gc.isenabled())
        return feed(self, *args, **kwargs)

    monkeypatch.setattr(RecordFold, "feed", watched)
    ctx = Context(store, "s", create=False)
    cold = ctx.prepare()
    assert len(seen) >= BULK_EVENTS + 10
    assert not any(seen)  # every event of the cold fold: paused
    assert gc.isenabled()
    seen.clear()
    ctx.append(UserMessage("one more"))
    warm = ctx.prepare()
    assert seen
    assert all(seen)  # a step's new events: the collector runs
    assert gc.isenabled()
    assert warm.header.step == cold.header.step + 1
    again = Context(store, "s", create=False).prepare(log=False)
    assert again.body_bytes == Context(store, "s", create=False).prepare(log=False).body_bytes
    store.close()
