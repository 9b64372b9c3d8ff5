"""The contract, continued: hash chain, atomic multi-session appends, limits, large bodies.

Part of the contract suite (see ``test_store_contract.py``): every test runs against
the memory store, SQLite and PostgreSQL (``conftest.BACKENDS``) and must give the same
answer on each — the same links for the same events, the same refusals.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from typing import cast

import pytest

from ctxline.errors import Conflict, DuplicateEventId, PairingError, UnknownSession, ValidationError
from ctxline.record.blobs import blob_ref
from ctxline.record.codec import canonical_json, stored_to_json
from ctxline.record.events import (
    AssistantMessage,
    Pending,
    StoredEvent,
    ToolCall,
    ToolResult,
    UnknownEvent,
    UserMessage,
)
from ctxline.record.jsonvalue import JsonValue
from ctxline.record.store import GENESIS, MAIN, Batch, Store, put_text


def _link(prev: str, ev: StoredEvent) -> str:
    """The documented link, recomputed from an exported line (docs/integrity.md)."""
    line = stored_to_json(ev)
    head = {k: line.pop(k) for k in ("seq", "id", "at")}
    body = canonical_json(line)
    head["body"] = "sha256:" + hashlib.sha256(body).hexdigest()
    framed = prev.encode() + b"\n" + canonical_json(head)
    return "sha256:" + hashlib.sha256(framed).hexdigest()


def _chain(events: list[StoredEvent], start: str = GENESIS) -> str:
    link = start
    for ev in events:
        link = _link(link, ev)
    return link


def _session(store: Store) -> None:
    store.create_session("s")
    call = AssistantMessage("", (ToolCall("c1", "ls", {"path": "."}),))
    store.append("s", [UserMessage("one"), call, ToolResult("c1", "a.txt\nb.txt")])
    store.append("s", [UserMessage("two", meta={"k": [1, 2.5, None, "é"]})])


# --- the hash chain ------------------------------------------------------------------------


def test_chain_links_follow_the_documented_formula(store: Store) -> None:
    _session(store)
    events = store.read("s")
    check = store.verify_chain("s")
    assert check.ok, check.problems
    assert (check.head, check.checked) == (4, 4)
    assert check.link == _chain(events)
    empty = store.create_session("e")
    assert empty.events == 0
    assert store.verify_chain("e").link == GENESIS


def test_fork_chain_starts_from_the_parent_link_at_the_fork_point(store: Store) -> None:
    _session(store)
    parent = store.read("s")
    store.fork("s", MAIN, 2, "alt")
    assert store.verify_chain("s", "alt").link == _chain(parent[:2])
    store.append("s", [UserMessage("on alt")], timeline="alt")
    store.append("s", [UserMessage("three")])
    alt = store.read("s", "alt")
    assert [e.seq for e in alt] == [1, 2, 3]
    check = store.verify_chain("s", "alt")
    assert check.ok
    assert check.link == _chain(alt)
    assert store.verify_chain("s").link == _chain(store.read("s"))
    store.fork("s", "alt", 3, "alt2")
    assert store.verify_chain("s", "alt2").link == check.link


def test_same_events_give_the_same_links_on_every_backend(store: Store) -> None:
    """With the fixture's fixed clock and ids, the head link is a known constant: the
    memory store, SQLite and PostgreSQL must all reach it."""
    store.create_session("s")
    store.append("s", [Pending(UserMessage("same"), id="u-1", at=datetime(2026, 1, 2, tzinfo=UTC))])
    (ev,) = store.read("s")
    assert store.verify_chain("s").link == _link(GENESIS, ev)
    assert _link(GENESIS, ev) == (
        "sha256:"
        + hashlib.sha256(
            (GENESIS + "\n").encode()
            + json.dumps(
                {
                    "at": "2026-01-02T00:00:00.000000Z",
                    "body": "sha256:"
                    + hashlib.sha256(b'{"kind":"user.message","text":"same"}').hexdigest(),
                    "id": "u-1",
                    "seq": 1,
                },
                separators=(",", ":"),
            ).encode()
        ).hexdigest()
    )


def test_verify_chain_unknown_names(store: Store) -> None:
    with pytest.raises(UnknownSession):
        store.verify_chain("nope")
    store.create_session("s")
    with pytest.raises(KeyError):
        store.verify_chain("s", "nope")


# --- append_batches: all or nothing -------------------------------------------------------


def test_append_batches_writes_every_batch_in_one_go(store: Store) -> None:
    store.create_session("a")
    out = store.append_batches(
        [
            Batch("a", [UserMessage("a1"), UserMessage("a2")], expected_seq=0),
            Batch("b", [UserMessage("b1")], create=True, meta={"from": "import"}),
            Batch("a", [UserMessage("a3")], expected_seq=2),
        ]
    )
    assert [[e.seq for e in part] for part in out] == [[1, 2], [1], [3]]
    assert store.session("b").meta == {"from": "import"}
    assert [e.event for e in store.read("a")] == [
        UserMessage("a1"),
        UserMessage("a2"),
        UserMessage("a3"),
    ]
    assert store.verify_chain("a").ok
    assert store.verify_chain("b").ok


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param(Batch("a", [UserMessage("late")], expected_seq=0), id="conflict"),
        pytest.param(Batch("a", [ToolResult("nowhere", "x")]), id="orphan-result"),
        pytest.param(Batch("missing", [UserMessage("x")]), id="unknown-session"),
        pytest.param(Batch("a", [Pending(UserMessage("other"), id="dup")]), id="reused-id"),
    ],
)
def test_append_batches_failing_late_writes_nothing(store: Store, bad: Batch) -> None:
    store.create_session("a")
    store.append("a", [Pending(UserMessage("first"), id="dup")])
    before = store.read("a")
    with pytest.raises((Conflict, PairingError, UnknownSession, DuplicateEventId)):
        store.append_batches(
            [
                Batch("a", [UserMessage("ok")], expected_seq=1),
                Batch("new", [UserMessage("n1")], create=True),
                bad,
            ]
        )
    assert store.read("a") == before
    assert [s.id for s in store.sessions()] == ["a"], "a session created by the failed batch"
    assert store.verify_chain("a").ok
    store.append("a", [UserMessage("after")], expected_seq=1)  # the store is still usable
    assert store.head("a") == 2


def test_append_batches_with_a_bad_event_checks_before_writing(store: Store) -> None:
    with pytest.raises(ValidationError, match="lone surrogate"):
        store.append_batches(
            [
                Batch("x", [UserMessage("fine")], create=True),
                Batch("y", [UserMessage("\ud800")], create=True),
            ]
        )
    assert store.sessions() == []


# --- the limits every backend shares ------------------------------------------------------


def _deep(n: int) -> JsonValue:
    value: JsonValue = "leaf"
    for _ in range(n):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("events", "field"),
    [
        pytest.param([Pending(UserMessage("x"), id="i" * 1025)], "id", id="long-id"),
        pytest.param([Pending(UserMessage("x"), id="a\x00b")], "id", id="nul-id"),
        pytest.param(
            [AssistantMessage("", (ToolCall("c" * 1025, "f", {}),))], "call_id", id="long-call-id"
        ),
        pytest.param([UserMessage("x", meta={"deep": _deep(300)})], "meta.deep", id="deep-meta"),
        pytest.param([UserMessage("x", meta={"n": float("inf")})], "event", id="infinity"),
        pytest.param([UnknownEvent("bad\x00kind", {})], "kind", id="nul-kind"),
        pytest.param(  # deliberately not JSON, past the type checker: the store must refuse it
            [UserMessage("x", meta={"s": cast(JsonValue, {1, 2})})], "event", id="a-set"
        ),
    ],
)
def test_unstorable_batches_are_refused_alike(
    store: Store, events: list[object], field: str
) -> None:
    store.create_session("s")
    store.append("s", [UserMessage("kept")])
    with pytest.raises(ValidationError) as info:
        store.append("s", events)  # type: ignore[arg-type]
    assert (info.value.field or "").startswith(field), info.value
    assert store.head("s") == 1


@pytest.mark.parametrize(
    "name", ["", " ", "tab\there", "x" * 513, "é" * 257, "line\nbreak", "\x1b[31mred"]
)
def test_bad_names_are_refused_alike(store: Store, name: str) -> None:
    with pytest.raises(ValidationError):
        store.create_session(name)
    store.create_session("ok")
    with pytest.raises(ValidationError):
        store.fork("ok", MAIN, 0, name)
    with pytest.raises(ValidationError):
        store.put_token_counts(name, {"e": 1})
    assert [s.id for s in store.sessions()] == ["ok"]


@pytest.mark.parametrize(
    ("after_seq", "limit"),
    [(-1, None), (0, -1), (2**64, None), (0, 2**64), (True, None), (0, 1.5), ("1", None)],
)
def test_read_bounds_are_checked(store: Store, after_seq: object, limit: object) -> None:
    store.create_session("s")
    with pytest.raises(ValidationError):
        store.read("s", after_seq=after_seq, limit=limit)  # type: ignore[arg-type]


def test_fork_point_and_counts_out_of_range(store: Store) -> None:
    store.create_session("s")
    for at in (-1, 2**70):
        with pytest.raises(ValidationError):
            store.fork("s", MAIN, at, "f")
    with pytest.raises(ValidationError):
        store.put_token_counts("o200k", {"e": -1})
    with pytest.raises(ValidationError):
        store.put_token_counts("o200k", {"e": 2**64})
    with pytest.raises(ValidationError):
        store.append("s", [UserMessage("x")], expected_seq="0")  # type: ignore[arg-type]
    assert store.timelines("s")[0].head == 0


# --- large bodies and blobs ---------------------------------------------------------------


def test_large_results_round_trip_and_chain(store: Store) -> None:
    """A result over the piece size is encoded, hashed and written in pieces."""
    big = ('line of output ✓ "quoted" \\ back\n' * 40_000) + "tail\x00end"
    assert len(big) > 1 << 20
    store.create_session("s")
    call = AssistantMessage("", (ToolCall("c", "cat", {}),))
    batch = [Pending(call, id="call-1"), Pending(ToolResult("c", big), id="big-1")]
    stored = store.append("s", batch)
    assert store.read("s") == stored
    assert store.append("s", batch) == stored  # a retry: recognised by digest, nothing new
    assert store.head("s") == 2
    check = store.verify_chain("s")
    assert check.ok
    assert check.link == _chain(stored)
    with pytest.raises(DuplicateEventId):
        store.append("s", [Pending(ToolResult("c", big + "!"), id="big-1")])
    assert store.search("s", "tail") == []  # past the indexed head of the output
    assert [h.seq for h in store.search("s", "quoted")] == [2]
    assert store.search("s", "quoted")[0].handle == blob_ref(big.encode())


def test_large_blobs_and_text_blobs(store: Store) -> None:
    text = "é" * 700_000 + "x" * 600_000
    data = text.encode()
    ref = store.blobs.put(data)
    assert ref == blob_ref(data)
    assert put_text(store.blobs, text) == ref
    other = put_text(store.blobs, text + "!")
    assert other == blob_ref((text + "!").encode())
    assert store.blobs.get(ref) == data
    assert store.blobs.get(other) == (text + "!").encode()
