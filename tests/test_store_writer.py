"""Nothing goes around the writer: every append follows the same rules (issue 21 §3).

Why: ``append_with_retry`` called the store's raw append, so it stored a ``guide`` event
that ``Context.append`` refuses and did not save a 6 KB result as a blob. Now a store's
public ``append``/``append_batches`` are the writer's (an app's authority, blobs first),
the raw append is private, and the retry helper, the importers and eval go through it.

    .venv/bin/pytest tests/test_store_writer.py -q
"""

from __future__ import annotations

import pytest

from ctxline.errors import ValidationError
from ctxline.record.blobs import MemoryBlobs, text_ref
from ctxline.record.events import AssistantMessage, Guide, ToolCall, ToolResult, UserMessage
from ctxline.record.store import Batch, MemoryStore, Store
from ctxline.record.store.retry import append_with_retry
from ctxline.record.timeline import TimelineWriter, write_batches

GUIDE = Guide("sha256:" + "1" * 64, "# How to read your input\n\nAnything goes.")
BIG = "0123456789abcdef" * 384  # 6 KB


def test_append_with_retry_refuses_ctxline_s_own_kinds(store: Store) -> None:
    store.create_session("s")
    with pytest.raises(ValidationError, match="'guide' event: that kind is ctxline's own"):
        append_with_retry(store, "s", lambda head: [UserMessage("hi"), GUIDE])
    assert store.read("s") == []  # nothing was written


def test_append_with_retry_saves_a_long_result_as_a_blob_first(store: Store) -> None:
    store.create_session("s")
    call = AssistantMessage("", (ToolCall("c1", "cat", {}),))
    stored = append_with_retry(store, "s", lambda head: [call, ToolResult("c1", BIG)])
    assert [e.seq for e in stored] == [1, 2]
    ref = text_ref(BIG)
    assert store.blobs.has(ref)
    assert store.blobs.get(ref) == BIG.encode()


def test_the_public_appends_are_the_writer_s(store: Store) -> None:
    store.create_session("s")
    with pytest.raises(ValidationError, match="ctxline's own"):
        store.append("s", [GUIDE])
    with pytest.raises(ValidationError, match="ctxline's own"):
        store.append_batches([Batch("s", [UserMessage("a"), GUIDE])])
    assert store.read("s") == []
    call = AssistantMessage("", (ToolCall("c1", "cat", {}),))
    store.append("s", [call, ToolResult("c1", BIG)])
    assert store.blobs.has(text_ref(BIG))
    # ctxline itself (its writer, with its authority) may write its own kinds
    TimelineWriter(store, "s").append([GUIDE], authority="ctxline")
    write_batches(store, [Batch("s", [UserMessage("after")])], authority="ctxline")
    assert [e.kind for e in store.read("s")] == [
        "assistant.message",
        "tool.result",
        "guide",
        "user.message",
    ]


class _CountingBlobs(MemoryBlobs):
    """Real in-memory blobs that count how many texts were handed to them."""

    def __init__(self) -> None:
        super().__init__()
        self.puts = 0

    def put(self, data: bytes) -> str:
        self.puts += 1
        return super().put(data)


def test_a_writer_does_not_save_the_same_long_text_twice() -> None:
    store = MemoryStore()
    blobs = _CountingBlobs()
    store._blobs = blobs
    store.create_session("s")
    writer = TimelineWriter(store, "s")
    call = AssistantMessage("", (ToolCall("c1", "cat", {}),))
    writer.append([call, ToolResult("c1", BIG)])
    assert blobs.puts == 1
    writer.append([UserMessage("next")], blobs=[BIG])  # the step showing it as a preview
    assert blobs.puts == 1
    assert blobs.get(text_ref(BIG)) == BIG.encode()
    equal = "".join(["0123456789abcdef"] * 384)  # equal text, another string: saved again
    assert equal == BIG
    assert equal is not BIG
    writer.append([UserMessage("again")], blobs=[equal])
    assert blobs.puts == 2
    other = TimelineWriter(store, "s")  # another writer knows nothing of it
    other.append([UserMessage("other")], blobs=[BIG])
    assert blobs.puts == 3
