"""A cold fold copies the sources' folds at the latest compaction's cut instead of feeding
them the record again (issue 25): what the compaction re-affirms is the same as a warm
cache renders, wherever the cut falls — on a state update, a rule, a call, a result."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import pytest

from ctxline import (
    AssistantMessage,
    Context,
    MemoryStore,
    Rule,
    State,
    ToolCall,
    ToolResult,
    UserMessage,
)
from ctxline.record.events import Event, Reduction, StoredEvent
from ctxline.record.timeline import TimelineWriter
from ctxline.sources.base import BaseSource, Block
from ctxline.sources.guide import MessageKind

T0 = datetime(2026, 12, 7, 9, tzinfo=UTC)


class _Seen:
    """Every event seen, by seq and kind: a fold any off-by-one would change."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def feed(self, stored: StoredEvent) -> Sequence[MessageKind]:
        self.seen.append(f"{stored.seq}:{stored.kind}")
        return ()


class _Seer(BaseSource):
    """A plugin source that restates, at a compaction, everything its fold saw."""

    name = "seer"

    def fold(self) -> _Seen:
        return _Seen()

    def reaffirm(self, fold: _Seen) -> Sequence[Block]:
        return (Block("ctx-seen", " ".join(fold.seen)),)


class _Locked(_Seen):
    """A fold that cannot be copied (it holds a lock): fed again, as before."""

    def __init__(self) -> None:
        super().__init__()
        self.lock = threading.Lock()


class _LockedSeer(_Seer):
    name = "locked"

    def fold(self) -> _Locked:
        return _Locked()


def _events() -> list[Event]:
    out: list[Event] = [UserMessage("ship the release")]
    for i in range(4):
        call = ToolCall(f"c{i}", "bash", {"cmd": f"make step{i}"})
        out += [
            State("env/branch", f"release-{i}"),
            AssistantMessage(f"step {i}", tool_calls=(call,)),
            ToolResult(f"c{i}", f"done {i}\n" * 20, name="bash"),
            Rule("tone", "set", text=f"terse, take {i}") if i % 2 == 0 else Rule("tone", "revoke"),
        ]
    return out


@pytest.mark.parametrize("locked", [False, True], ids=["copied", "fed-again"])
def test_a_cold_fold_reaffirms_what_a_warm_one_does_at_every_cut(locked: bool) -> None:
    def sources() -> list[_Seer]:
        return [_Seer(), _LockedSeer()] if locked else [_Seer()]

    events = _events()
    checked = 0
    for cut in range(2, len(events) + 1):
        store = MemoryStore()
        warm = Context(store, "s", clock=lambda: T0, sources=sources())
        warm.append(*events)
        warm.prepare(now=T0)  # the warm cache has folded the record before the cut exists
        compact = Reduction("compact", upto_seq=cut, summary="Earlier: the release steps ran.")
        TimelineWriter(store, "s").append([compact], authority="ctxline")
        warm.prepare(now=T0 + timedelta(seconds=30))  # logged with the compaction in force
        warm.append(UserMessage("and tag it"))
        now = T0 + timedelta(minutes=1)
        opened = Context(store, "s", create=False, clock=lambda: T0, sources=sources())
        cold = opened.prepare(now=now, log=False)
        hot = warm.prepare(now=now)
        assert cold.body_bytes == hot.body_bytes, cut
        assert cold.report.to_json() == hot.report.to_json(), cut
        seen = " ".join(f"{ev.seq}:{ev.kind}" for ev in warm.events[:cut])
        assert seen.encode() in hot.body_bytes  # each source's fold as fed up to the cut
        checked += 1
    assert checked == len(events) - 1
