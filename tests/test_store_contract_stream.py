"""The contract of a streamed append (``Store._append_stream_raw`` through
``writes.stream_batches``), on every backend: many chunks in one transaction, each
seeing the ones before it, committed at the end or leaving nothing at all.

A long import appends this way (issue 25): these tests are what makes "a bad line
15,000 events in leaves nothing behind" true of the store, whatever read the file.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from conftest import FakeClock, counter_ids, make_store
from ctxline.errors import Conflict, PairingError, UnknownSession, ValidationError
from ctxline.record.blobs import blob_ref
from ctxline.record.events import (
    AssistantMessage,
    Event,
    Guide,
    Pending,
    ToolCall,
    ToolResult,
    UserMessage,
)
from ctxline.record.store import Batch, MemoryStore, SQLiteStore, Store
from ctxline.record.store.writes import stream_batches, write_batches

LONG = "line of a long tool output\n" * 100  # over BLOB_MIN_CHARS: saved as a blob


def _events(n: int, prefix: str = "e") -> list[Pending]:
    """``n`` events: a user message, then call/result pairs (results answer the call just
    before them, so a chunk boundary between the two is a pairing across chunks)."""
    out: list[Pending] = [Pending(UserMessage("start"), f"{prefix}-0")]
    i = 0
    while len(out) < n:
        call = ToolCall(f"{prefix}-c{i}", "run", {"i": i})
        out.append(Pending(AssistantMessage("", (call,)), f"{prefix}-a{i}"))
        if len(out) < n:
            content = LONG + str(i) if i % 5 == 0 else f"output {i}"
            out.append(Pending(ToolResult(call.id, content, "run"), f"{prefix}-r{i}"))
        i += 1
    return out


def _twin(store: Store, tmp_path: Path) -> Store:
    """A fresh store of the same backend, opened the same way (the same clock readings)."""
    kind = {"MemoryStore": "memory", "SQLiteStore": "sqlite", "PostgresStore": "postgres"}
    folder = tmp_path / "twin"
    folder.mkdir()
    return make_store(kind[type(store).__name__], folder)


def _timed(events: list[Pending]) -> list[Pending]:
    start = datetime(2026, 5, 1, 8, 0, tzinfo=UTC)
    return [Pending(p.event, p.id, start + timedelta(seconds=i)) for i, p in enumerate(events)]


def _chunks(events: list[Pending], size: int) -> list[list[Pending]]:
    return [events[i : i + size] for i in range(0, len(events), size)]


def _stream(store: Store, session: str, events: list[Pending], size: int) -> None:
    with stream_batches(store) as tx:
        for i, chunk in enumerate(_chunks(events, size)):
            tx.append([Batch(session, chunk, i * size, create=i == 0, meta={"n": len(events)})])


def test_chunks_see_each_other_and_commit_as_one_batch_would(store: Store) -> None:
    events = _timed(_events(23))
    with stream_batches(store) as tx:
        for i, chunk in enumerate(_chunks(events, 4)):  # every result after a call's chunk
            stored = tx.append([Batch("s", chunk, i * 4, create=i == 0, meta={"n": 23})])[0]
            assert [e.seq for e in stored] == list(range(i * 4 + 1, i * 4 + 1 + len(chunk)))
            assert len(tx.read("s")) == min(23, (i + 1) * 4)  # the open transaction's own
        tx.set_meta("s", {"n": 23, "done": True})
    assert [e.id for e in store.read("s")] == [p.id for p in events]
    assert store.session("s").meta == {"n": 23, "done": True}
    assert store.verify_chain("s").ok
    assert store.blobs.has(blob_ref(LONG.encode() + b"0"))
    # the same events as one batch into the reference backend: the same hash chain
    reference = MemoryStore(clock=FakeClock(), new_id=counter_ids())
    write_batches(reference, [Batch("s", events, 0, create=True, meta={"n": 23})])
    assert store.verify_chain("s").link == reference.verify_chain("s").link
    assert store.read("s") == reference.read("s")


def test_events_without_a_time_share_one_reading_per_session(store: Store, tmp_path: Path) -> None:
    events = [Pending(UserMessage(f"m{i}"), f"m{i}") for i in range(9)]
    _stream(store, "s", events, 2)
    assert len({e.at for e in store.read("s")}) == 1
    twin = _twin(store, tmp_path)  # the same backend, one batch: the same times and chain
    try:
        write_batches(twin, [Batch("s", events, 0, create=True, meta={"n": 9})])
        assert store.read("s") == twin.read("s")
        assert store.verify_chain("s").link == twin.verify_chain("s").link
        assert store.session("s") == twin.session("s")
    finally:
        twin.close()


def test_a_block_that_raises_leaves_nothing_and_the_ids_stay_free(store: Store) -> None:
    events = _events(40)

    def fails_late() -> None:
        with stream_batches(store) as tx:
            for i, chunk in enumerate(_chunks(events, 10)):
                tx.append([Batch("s", chunk, i * 10, create=i == 0)])
            assert len(tx.read("s")) == 40
            raise RuntimeError("bad line 15,000")

    with pytest.raises(RuntimeError, match="bad line"):
        fails_late()
    assert store.sessions() == []
    with pytest.raises(UnknownSession):
        store.read("s")
    if not isinstance(store, MemoryStore):  # SQL: the blobs were saved in the transaction
        assert not store.blobs.has(blob_ref(LONG.encode() + b"0"))
    _stream(store, "s", events, 10)  # no id, seq or call of the rolled-back stream is left
    assert [e.id for e in store.read("s")] == [p.id for p in events]
    assert store.verify_chain("s").ok


def test_a_failed_chunk_rolls_back_even_when_the_block_catches_it(store: Store) -> None:
    store.create_session("kept")
    store.append("kept", [UserMessage("before")])
    events = _events(12)

    def catches() -> None:
        with stream_batches(store) as tx:
            tx.append([Batch("s", events[:6], 0, create=True)])
            tx.append([Batch("kept", [UserMessage("during")], 1)])
            with pytest.raises(Conflict):
                tx.append([Batch("s", events[6:], 5)])  # the head is 6
            with pytest.raises(ValidationError, match="earlier chunk"):
                tx.append([Batch("s", events[6:], 6)])  # a failed stream takes no more

    with pytest.raises(ValidationError, match="nothing was written"):
        catches()
    assert [s.id for s in store.sessions()] == ["kept"]
    assert [e.event for e in store.read("kept")] == [UserMessage("before")]


def test_pairing_and_authority_hold_across_chunks(store: Store) -> None:
    def second_chunk(event: Event | Pending) -> None:
        with stream_batches(store) as tx:
            tx.append([Batch("s", _events(5), 0, create=True)])
            tx.append([Batch("s", [event], 5)])

    with pytest.raises(PairingError):
        second_chunk(Pending(ToolResult("never-called", "x", "run"), "g"))
    with pytest.raises(ValidationError, match="ctxline's own"):
        second_chunk(Guide("sha256:" + "0" * 64, "forged"))
    assert store.sessions() == []


def test_set_meta_is_only_for_a_session_the_stream_created(store: Store) -> None:
    store.create_session("old", meta={"v": 1})

    def set_old() -> None:
        with stream_batches(store) as tx:
            tx.append([Batch("old", [UserMessage("x")], 0)])
            tx.set_meta("old", {"v": 2})

    with pytest.raises(ValidationError, match="not created by this append"):
        set_old()
    assert store.session("old").meta == {"v": 1}
    assert store.head("old") == 0


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_no_other_reader_sees_a_chunk_before_the_block_ends(kind: str, tmp_path: Path) -> None:
    store = make_store(kind, tmp_path)
    other: Store
    if isinstance(store, SQLiteStore):
        other = SQLiteStore(store.path, read_only=True)
    else:
        from ctxline.record.store.postgres import PostgresStore

        assert isinstance(store, PostgresStore)
        other = PostgresStore(store.dsn, read_only=True)
    try:
        with stream_batches(store) as tx:
            tx.append([Batch("s", _events(30), 0, create=True)])
            assert other.sessions() == []
            tx.append([Batch("s", _events(10, "f"), 30)])
            assert other.sessions() == []
        assert other.session("s").events == 40
    finally:
        other.close()
        store.close()
