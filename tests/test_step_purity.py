"""A step reads no store: what it needs is read before it (token counts, the memory overview).

The store here is a real ``Store`` over a SQLite file that raises on any call made while
:func:`ctxline.view.step.plan_step` is on the stack; a replay of a recorded session with
a memory source prepares through it, cold and warm, and matches the plain path byte for
byte and report for report, and its logged requests rebuild exactly.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from pathlib import Path

from conftest import REPO
from ctxline import Context, PrepareOptions, SQLiteStore
from ctxline.importers import load_tree
from ctxline.memory import Memory
from ctxline.record.blobs import BlobStore
from ctxline.record.events import Event, JsonValue, Pending, StoredEvent, UserMessage
from ctxline.record.store import Store
from ctxline.record.store.base import (
    MAIN,
    AppendStream,
    Batch,
    SearchHit,
    SessionInfo,
    TimelineInfo,
)
from ctxline.record.store.chain import ChainCheck
from ctxline.record.store.memories import (
    MemoryBackend,
    MemoryEntry,
    MemoryHit,
    NewMemory,
    Owner,
    Scope,
)
from ctxline.replay import model_calls
from ctxline.view.cache import ViewCache
from ctxline.view.step import StepRequest, plan_step

_PLAN = plan_step.__code__


def _guard(what: str) -> None:
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code is _PLAN:
            raise AssertionError(f"the step touched the store: {what}")
        frame = frame.f_back  # type: ignore[assignment]


class GuardedBlobs:
    def __init__(self, inner: BlobStore) -> None:
        self.inner = inner

    def put(self, data: bytes) -> str:
        _guard("blobs.put")
        return self.inner.put(data)

    def get(self, ref: str) -> bytes:
        _guard("blobs.get")
        return self.inner.get(ref)

    def has(self, ref: str) -> bool:
        _guard("blobs.has")
        return self.inner.has(ref)


class GuardedMemories:
    def __init__(self, inner: MemoryBackend) -> None:
        self.inner = inner

    def remember(self, new: NewMemory) -> MemoryEntry:
        _guard("memories.remember")
        return self.inner.remember(new)

    def get(self, memory_id: str) -> MemoryEntry:
        _guard("memories.get")
        return self.inner.get(memory_id)

    def by_key(self, scope: Scope, owner: str, key: str) -> MemoryEntry | None:
        _guard("memories.by_key")
        return self.inner.by_key(scope, owner, key)

    def search(self, query: str, owners: Sequence[Owner], *, limit: int = 10) -> list[MemoryHit]:
        _guard("memories.search")
        return self.inner.search(query, owners, limit=limit)

    def entries(
        self, owners: Sequence[Owner] | None, *, include_superseded: bool = False, limit: int = 100
    ) -> list[MemoryEntry]:
        _guard("memories.entries")
        return self.inner.entries(owners, include_superseded=include_superseded, limit=limit)

    def forget(self, memory_id: str) -> MemoryEntry:
        _guard("memories.forget")
        return self.inner.forget(memory_id)


class GuardedStore:
    """A SQLite store that fails every call made during ``plan_step``."""

    def __init__(self, inner: SQLiteStore) -> None:
        self.inner = inner
        self._blobs = GuardedBlobs(inner.blobs)
        self._memories = GuardedMemories(inner.memories)
        self.count_reads = 0

    @property
    def blobs(self) -> BlobStore:
        _guard("blobs")
        return self._blobs

    @property
    def memories(self) -> MemoryBackend:
        _guard("memories")
        return self._memories

    def create_session(
        self, session: str, *, meta: dict[str, JsonValue] | None = None, exist_ok: bool = False
    ) -> SessionInfo:
        _guard("create_session")
        return self.inner.create_session(session, meta=meta, exist_ok=exist_ok)

    def session(self, session: str) -> SessionInfo:
        _guard("session")
        return self.inner.session(session)

    def sessions(self) -> list[SessionInfo]:
        _guard("sessions")
        return self.inner.sessions()

    def timelines(self, session: str) -> list[TimelineInfo]:
        _guard("timelines")
        return self.inner.timelines(session)

    def timeline(self, session: str, timeline: str = MAIN) -> TimelineInfo:
        _guard("timeline")
        return self.inner.timeline(session, timeline)

    def fork(self, session: str, timeline: str, at_seq: int, name: str) -> TimelineInfo:
        _guard("fork")
        return self.inner.fork(session, timeline, at_seq, name)

    def append(
        self,
        session: str,
        events: Sequence[Event | Pending],
        *,
        expected_seq: int | None = None,
        timeline: str = MAIN,
    ) -> list[StoredEvent]:
        _guard("append")
        return self.inner.append(session, events, expected_seq=expected_seq, timeline=timeline)

    def append_batches(self, batches: Sequence[Batch]) -> list[list[StoredEvent]]:
        _guard("append_batches")
        return self.inner.append_batches(batches)

    def _append_raw(
        self,
        session: str,
        events: Sequence[Event | Pending],
        *,
        expected_seq: int | None = None,
        timeline: str = MAIN,
    ) -> list[StoredEvent]:
        _guard("_append_raw")
        return self.inner._append_raw(session, events, expected_seq=expected_seq, timeline=timeline)

    def _append_batches_raw(self, batches: Sequence[Batch]) -> list[list[StoredEvent]]:
        _guard("_append_batches_raw")
        return self.inner._append_batches_raw(batches)

    def _append_stream_raw(self) -> AbstractContextManager[AppendStream]:
        _guard("_append_stream_raw")
        return self.inner._append_stream_raw()

    def read(
        self, session: str, timeline: str = MAIN, *, after_seq: int = 0, limit: int | None = None
    ) -> list[StoredEvent]:
        _guard("read")
        return self.inner.read(session, timeline, after_seq=after_seq, limit=limit)

    def verify_chain(self, session: str, timeline: str = MAIN) -> ChainCheck:
        _guard("verify_chain")
        return self.inner.verify_chain(session, timeline)

    def head(self, session: str, timeline: str = MAIN) -> int:
        _guard("head")
        return self.inner.head(session, timeline)

    def search(
        self, session: str, query: str, *, timeline: str = MAIN, limit: int = 10
    ) -> list[SearchHit]:
        _guard("search")
        return self.inner.search(session, query, timeline=timeline, limit=limit)

    def get_token_counts(self, event_ids: Sequence[str], tokenizer: str) -> dict[str, int]:
        _guard("get_token_counts")
        found = self.inner.get_token_counts(event_ids, tokenizer)
        self.count_reads += len(found)
        return found

    def put_token_counts(self, tokenizer: str, counts: dict[str, int]) -> None:
        _guard("put_token_counts")
        self.inner.put_token_counts(tokenizer, counts)

    def close(self) -> None:
        self.inner.close()


OPTIONS = PrepareOptions(context_window=8_000, max_output=1_000)


def _memory(store: Store) -> Memory:
    return Memory(store, user="mia", project="shop", overview=3)


def _context(store: Store, session: str) -> Context:
    return Context(store, session, options=OPTIONS, sources=[_memory(store)])


def test_a_replay_prepares_through_a_store_that_fails_inside_the_step(tmp_path: Path) -> None:
    session = load_tree(REPO / "tests" / "data" / "mini-swe-agent", "auto")[0]
    inner = SQLiteStore(str(tmp_path / "a.db"))
    guarded = GuardedStore(inner)
    mem = _memory(guarded)
    mem.remember("The repo uses pytest -x", key="tests", scope="project")
    mem.remember("Mia prefers short diffs", scope="user")
    warm = _context(guarded, session.id)
    calls = set(model_calls(session.events))
    steps = 0
    bodies: list[bytes] = []
    for index, pending in enumerate(session.events):
        if index in calls and warm.events:
            now = warm.events[-1].at
            # the step as a caller that reads nothing ahead plans it (the store is read
            # during the step): the same bytes and report as the pure step
            plain = _context(inner, session.id)
            plain.refresh()
            setup = plain._setup(None)
            impure = plan_step(plain.events, setup, StepRequest(now), ViewCache()).preparation
            # cold (a fresh Context, its counts read from the file), then warm (logged)
            cold = _context(guarded, session.id).prepare(now=now, log=False)
            hot = warm.prepare(now=now)
            bodies.append(hot.body_bytes)
            for prep in (cold, impure):
                assert prep.body_bytes == hot.body_bytes
                assert prep.report.to_json() == hot.report.to_json()
                assert prep.header.inputs == hot.header.inputs
            steps += 1
        warm.append(pending)
    assert steps > 5
    # the overview read ahead was shown (until the ladder dropped it under pressure)
    assert any("Mia prefers short diffs" in body.decode() for body in bodies)
    assert guarded.count_reads > 0  # the cold steps found persisted counts (read ahead)
    # every logged request rebuilds from the record alone (checked against its sha256)
    rebuilt = [prep.body_bytes for _h, prep in _context(guarded, session.id).rebuild_all()]
    assert rebuilt == bodies
    inner.close()


def test_the_memory_overview_is_read_before_the_step(tmp_path: Path) -> None:
    inner = SQLiteStore(str(tmp_path / "m.db"))
    guarded = GuardedStore(inner)
    ctx = _context(guarded, "s")
    _memory(guarded).remember("The office is in Berlin", key="office", scope="user")
    ctx.append(UserMessage("Where is the office?"))
    prep = ctx.prepare(now=datetime.fromisoformat("2026-11-02T10:00:00+00:00"))
    assert "The office is in Berlin" in prep.body_bytes.decode()
    assert ctx.rebuild(1) == prep.body_bytes
    inner.close()


def test_the_shared_blackboard_is_read_before_the_step(tmp_path: Path) -> None:
    """The environment's board (a store read) comes through the source's prefetch too."""
    from board_process import board_env
    from ctxline.record.events import AssistantMessage, ToolCall

    inner = SQLiteStore(str(tmp_path / "b.db"))
    guarded = GuardedStore(inner)
    planner = board_env(guarded, "planner")  # type: ignore[arg-type]  # any Store does
    p_ctx = Context(guarded, "planner", sources=[planner.source])
    p_ctx.append(UserMessage("Plan the trip together."))
    p_ctx.prepare()
    call = ToolCall("g1", "update_goal", {"goal": "Book Oslo for May 20"})
    p_ctx.append(AssistantMessage("", (call,)))
    p_ctx.record_outcome(call, planner.call(p_ctx, call))
    executor = board_env(guarded, "executor")  # type: ignore[arg-type]
    e_ctx = Context(guarded, "executor", sources=[executor.source])
    e_ctx.append(UserMessage("Plan the trip together."))
    prep = e_ctx.prepare()  # raises if the step itself read the board
    assert "): Book Oslo for May 20\n" in prep.body["messages"][-1]["content"]
    assert e_ctx.rebuild(1) == prep.body_bytes
    inner.close()
