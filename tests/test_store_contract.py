"""The contract every Store backend keeps; a new backend joins via conftest.BACKENDS."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from ctxline.errors import (
    BlobError,
    Conflict,
    DuplicateEventId,
    PairingError,
    UnknownSession,
    UnknownTimeline,
    ValidationError,
)
from ctxline.record.blobs import blob_ref
from ctxline.record.events import (
    AssistantMessage,
    Event,
    Pending,
    ToolCall,
    ToolResult,
    UnknownEvent,
    UserMessage,
)
from ctxline.record.store import MAIN, Store


def _user(n: int) -> UserMessage:
    return UserMessage(f"message {n}")


def _texts(store: Store, session: str, timeline: str = MAIN) -> list[str]:
    out = []
    for ev in store.read(session, timeline):
        assert isinstance(ev.event, UserMessage)
        out.append(ev.event.text)
    return out


def test_sessions_start_empty_and_list_sorted(store: Store) -> None:
    assert store.sessions() == []
    store.create_session("b", meta={"origin": "test"})
    store.create_session("a")
    assert [s.id for s in store.sessions()] == ["a", "b"]
    assert store.session("b").meta == {"origin": "test"}
    assert store.session("a").events == 0
    assert store.head("a") == 0


def test_create_session_twice(store: Store) -> None:
    store.create_session("s")
    with pytest.raises(ValidationError, match="already exists"):
        store.create_session("s")
    assert store.create_session("s", exist_ok=True).id == "s"


def test_unknown_session_and_timeline(store: Store) -> None:
    with pytest.raises(UnknownSession):
        store.append("nope", [_user(1)])
    store.create_session("s")
    with pytest.raises(UnknownTimeline):
        store.read("s", "nope")


def test_append_numbers_gap_free_and_reads_back(store: Store) -> None:
    store.create_session("s")
    first = store.append("s", [_user(1), _user(2)], expected_seq=0)
    assert [e.seq for e in first] == [1, 2]
    second = store.append("s", [_user(3)], expected_seq=2)
    assert second[0].seq == 3
    assert _texts(store, "s") == ["message 1", "message 2", "message 3"]
    assert [e.seq for e in store.read("s", after_seq=1)] == [2, 3]
    assert [e.seq for e in store.read("s", limit=2)] == [1, 2]
    assert store.session("s").events == 3
    stored = store.read("s")
    assert stored == [*first, *second]
    assert all(e.at.tzinfo is not None for e in stored)


def test_conflict_carries_seqs_and_writes_nothing(store: Store) -> None:
    store.create_session("s")
    store.append("s", [_user(1)], expected_seq=0)
    with pytest.raises(Conflict) as info:
        store.append("s", [_user(2), _user(3)], expected_seq=0)
    assert (info.value.expected, info.value.actual) == (0, 1)
    assert store.head("s") == 1


def test_none_expected_appends_at_head(store: Store) -> None:
    store.create_session("s")
    store.append("s", [_user(1)])
    store.append("s", [_user(2)])
    assert store.head("s") == 2


def test_client_ids_make_retries_idempotent(store: Store) -> None:
    store.create_session("s")
    batch = [Pending(_user(1), id="c-1"), Pending(_user(2), id="c-2")]
    first = store.append("s", batch, expected_seq=0)
    again = store.append("s", batch, expected_seq=0)
    assert again == first
    assert store.head("s") == 2
    assert [e.id for e in store.read("s")] == ["c-1", "c-2"]


def test_client_id_reused_for_other_content(store: Store) -> None:
    store.create_session("s")
    store.append("s", [Pending(_user(1), id="c-1")])
    with pytest.raises(DuplicateEventId):
        store.append("s", [Pending(_user(9), id="c-1")])
    with pytest.raises(DuplicateEventId):
        store.append("s", [Pending(_user(1), id="c-1"), Pending(_user(2), id="c-2")])
    with pytest.raises(DuplicateEventId):
        store.append("s", [Pending(_user(5), id="x"), Pending(_user(6), id="x")])
    assert store.head("s") == 1


def test_imported_time_is_kept(store: Store) -> None:
    store.create_session("s")
    at = datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=UTC)
    (ev,) = store.append("s", [Pending(_user(1), at=at)])
    assert ev.at == at
    assert store.read("s")[0].at == at


def test_orphan_result_rejected_naming_the_id(store: Store) -> None:
    store.create_session("s")
    store.append("s", [_user(1)])
    with pytest.raises(PairingError, match="call-404"):
        store.append("s", [_user(2), ToolResult("call-404", "out")])
    assert store.head("s") == 1


def test_result_pairs_with_call_in_same_or_earlier_batch(store: Store) -> None:
    store.create_session("s")
    call = AssistantMessage("", (ToolCall("c1", "ls", {"path": "."}), ToolCall("c2", "ls", {})))
    store.append("s", [call, ToolResult("c1", "a.txt")])
    store.append("s", [ToolResult("c2", "b.txt", is_error=True)])
    assert store.head("s") == 3


def test_every_kind_round_trips(store: Store) -> None:
    from ctxline.record.events import Notification, Rule, State, Todo, TodoItem

    events: list[Event] = [
        UserMessage("hé \x00 \x08 字", meta={"k": [1, 2.5, None]}),
        AssistantMessage("x", (ToolCall("c", "f", "not json"),)),
        ToolResult("c", "out", name="f"),
        State("env/date", "2026-11-02"),
        State("env/date", cleared=True),
        Rule(
            "r1",
            "set",
            scope="path:src/**",
            text="keep",
            expires_at=datetime(2027, 1, 1, tzinfo=UTC),
        ),
        Notification("exec/job-7", "done", ref="sha256:" + "0" * 64),
        Todo("write", (TodoItem("1", "List files", "in_progress"),)),
        UnknownEvent("future.kind", {"x": {"y": 1}}),
    ]
    store.create_session("s")
    store.append("s", events)
    assert [e.event for e in store.read("s")] == events


def test_fork_sees_parent_prefix_and_parent_is_unaffected(store: Store) -> None:
    store.create_session("s")
    store.append("s", [_user(1), _user(2), _user(3)])
    info = store.fork("s", MAIN, 2, "alt")
    assert (info.parent, info.fork_seq, info.head) == (MAIN, 2, 2)
    store.append("s", [_user(30)], expected_seq=2, timeline="alt")
    store.append("s", [_user(4)], expected_seq=3)
    assert _texts(store, "s", "alt") == ["message 1", "message 2", "message 30"]
    assert _texts(store, "s") == ["message 1", "message 2", "message 3", "message 4"]
    assert [e.seq for e in store.read("s", "alt")] == [1, 2, 3]
    assert [e.seq for e in store.read("s", "alt", after_seq=2)] == [3]
    grand = store.fork("s", "alt", 3, "alt2")
    store.append("s", [_user(300)], timeline="alt2")
    assert _texts(store, "s", "alt2") == ["message 1", "message 2", "message 30", "message 300"]
    assert grand.head == 3
    assert {t.name for t in store.timelines("s")} == {MAIN, "alt", "alt2"}
    assert store.session("s").timelines == 3


def test_fork_rejects_bad_points_and_names(store: Store) -> None:
    store.create_session("s")
    store.append("s", [_user(1)])
    with pytest.raises(ValidationError, match="fork point"):
        store.fork("s", MAIN, 5, "x")
    store.fork("s", MAIN, 1, "x")
    with pytest.raises(ValidationError, match="already exists"):
        store.fork("s", MAIN, 0, "x")


def test_fork_pairing_uses_only_visible_calls(store: Store) -> None:
    store.create_session("s")
    store.append("s", [_user(1), AssistantMessage("", (ToolCall("late", "f", {}),))])
    store.fork("s", MAIN, 1, "early")
    with pytest.raises(PairingError, match="late"):
        store.append("s", [ToolResult("late", "out")], timeline="early")
    store.fork("s", MAIN, 2, "after")
    store.append("s", [ToolResult("late", "out")], timeline="after")


def test_blobs_are_content_addressed_and_verified(store: Store) -> None:
    data = b"\x00" + "large output ✓".encode() * 1000
    ref = store.blobs.put(data)
    assert ref == blob_ref(data)
    assert ref.startswith("sha256:")
    assert store.blobs.put(data) == ref
    assert store.blobs.get(ref) == data
    assert store.blobs.has(ref)
    missing = blob_ref(b"other")
    assert not store.blobs.has(missing)
    with pytest.raises(BlobError, match="missing"):
        store.blobs.get(missing)
    with pytest.raises(BlobError, match="malformed"):
        store.blobs.get("md5:abc")


def test_token_counts_are_stored_per_tokenizer(store: Store) -> None:
    store.put_token_counts("o200k_base", {"a": 3, "b": 5})
    store.put_token_counts("bytes/4", {"a": 4})
    assert store.get_token_counts(["a", "b", "c"], "o200k_base") == {"a": 3, "b": 5}
    assert store.get_token_counts(["a", "b"], "bytes/4") == {"a": 4}


# --- search (search_history) -------------------------------------------------------


def _searchable(store: Store) -> None:
    store.create_session("s")
    call = AssistantMessage(
        "Running the migration tests.",
        (ToolCall("c1", "bash", {"command": "pytest tests/test_migrations.py"}),),
    )
    store.append(
        "s",
        [
            UserMessage("Please fix the failing migration in the billing service"),
            call,
            ToolResult("c1", "FAILED test_up: IntegrityError: duplicate key\n" + "ok\n" * 600),
            UserMessage("Also the Café menu renders badly on mobile"),
            AssistantMessage("The billing fix is done; the menu is next."),
        ],
    )


def test_search_finds_matching_events_best_first(store: Store) -> None:
    _searchable(store)
    hits = store.search("s", "IntegrityError")
    assert [(h.seq, h.kind) for h in hits] == [(3, "tool.result")]
    assert "IntegrityError" in hits[0].snippet
    assert hits[0].score > 0
    billing = store.search("s", "billing")
    assert {h.seq for h in billing} == {1, 5}
    assert [h.seq for h in store.search("s", "billing", limit=1)] in ([1], [5])
    # any word may match; more of them rank higher
    both = store.search("s", "failing billing")
    assert both[0].seq == 1
    assert {h.seq for h in both} == {1, 5}
    # tool call names and arguments are what the model read, so they are searched
    assert [h.seq for h in store.search("s", "pytest")] == [2]
    assert store.search("s", "nothing-like-this-anywhere") == []


def test_search_normalizes_case_and_accents(store: Store) -> None:
    _searchable(store)
    for query in ("cafe", "CAFÉ", "Café"):
        hits = store.search("s", query)
        assert [h.seq for h in hits] == [4], query
        assert "Café" in hits[0].snippet


def test_search_phrases_match_words_in_order(store: Store) -> None:
    _searchable(store)
    assert [h.seq for h in store.search("s", '"billing service"')] == [1]
    assert store.search("s", '"service billing"') == []


def test_search_handle_for_long_tool_results(store: Store) -> None:
    _searchable(store)
    store.append(
        "s",
        [AssistantMessage("", (ToolCall("c2", "cat", {}),)), ToolResult("c2", "short output")],
    )
    (long_hit,) = store.search("s", "duplicate key")
    (result,) = [e for e in store.read("s") if e.seq == 3]
    assert isinstance(result.event, ToolResult)
    assert long_hit.handle == blob_ref(result.event.content.encode())
    (short_hit,) = store.search("s", "short output")
    assert (short_hit.seq, short_hit.handle) == (7, "")
    assert all(h.handle == "" for h in store.search("s", "billing"))


def test_search_sees_only_the_timeline(store: Store) -> None:
    store.create_session("s")
    store.append("s", [UserMessage("alpha shared"), UserMessage("beta shared")])
    store.append("s", [UserMessage("gamma only on main")])
    store.fork("s", MAIN, 2, "alt")
    store.append("s", [UserMessage("delta only on alt")], timeline="alt")
    store.fork("s", "alt", 3, "alt2")
    store.append("s", [UserMessage("epsilon only on alt2")], timeline="alt2")
    assert {h.seq for h in store.search("s", "shared", timeline="alt")} == {1, 2}
    assert store.search("s", "gamma", timeline="alt") == []
    assert store.search("s", "delta") == []
    assert [h.seq for h in store.search("s", "delta", timeline="alt")] == [3]
    assert [h.seq for h in store.search("s", "delta epsilon", timeline="alt2")] in ([4, 3], [3, 4])
    assert store.search("s", "epsilon", timeline="alt") == []
    store.create_session("other")
    store.append("other", [UserMessage("alpha elsewhere")])
    assert [h.seq for h in store.search("s", "alpha")] == [1]
    assert [h.seq for h in store.search("other", "alpha")] == [1]


def test_search_query_syntax_never_reaches_the_backend(store: Store) -> None:
    _searchable(store)
    for query in (
        "NEAR(billing",
        '"unbalanced billing',
        "billing* OR -mobile",
        "text:billing",
        "billing'; DROP TABLE events; --",
        "billing AND NOT (",
        "^billing {x} [y] <ctx-rule>",
    ):
        hits = store.search("s", query)
        assert {1, 5} <= {h.seq for h in hits}, query
    assert store.head("s") == 5
    for empty in ("", "   ", "!!! ... ???", '""'):
        with pytest.raises(ValidationError, match="query"):
            store.search("s", empty)
    for bad in (0, -1, 101):
        with pytest.raises(ValidationError, match="limit"):
            store.search("s", "billing", limit=bad)
    with pytest.raises(UnknownSession):
        store.search("nope", "billing")
    with pytest.raises(UnknownTimeline):
        store.search("s", "billing", timeline="nope")


def test_search_skips_ctxline_records_and_retries(store: Store) -> None:
    from ctxline.record.events import Guide, RequestHeader
    from ctxline.record.timeline import TimelineWriter

    store.create_session("s")
    batch = [Pending(UserMessage("zebra crossing"), id="u-1")]
    store.append("s", batch)
    store.append("s", batch)  # an idempotent retry indexes nothing twice
    TimelineWriter(store, "s").append(  # ctxline's own records, written by ctxline
        [Guide("v1", "zebra guide text"), RequestHeader(1, 1, "sha256:" + "0" * 64)],
        authority="ctxline",
    )
    assert [h.seq for h in store.search("s", "zebra")] == [1]
    assert store.search("s", "guide") == []


def test_unstorable_text_is_refused_the_same_everywhere(store: Store) -> None:
    store.create_session("s")
    store.append("s", [_user(1)])
    with pytest.raises(ValidationError, match="lone surrogate"):
        store.append("s", [_user(2), UserMessage("broken \ud83d decoder")])
    with pytest.raises(ValidationError, match="lone surrogate"):
        store.append("s", [Pending(_user(3), id="id-\udcff")])
    with pytest.raises(ValidationError, match="not valid JSON"):
        store.append("s", [UserMessage("x", meta={"score": float("nan")})])
    with pytest.raises(ValidationError, match="lone surrogate"):
        store.create_session("bad-\ud800")
    assert store.head("s") == 1
    assert [s.id for s in store.sessions()] == ["s"]


def test_a_fork_of_a_fork_sees_no_more_than_its_nearest_fork_point(store: Store) -> None:
    store.create_session("f")
    store.append("f", [UserMessage("a"), UserMessage("b"), UserMessage("c")])
    store.fork("f", "main", 2, "f1")
    store.append("f", [UserMessage("f1 own")], timeline="f1")
    store.fork("f", "f1", 1, "f2")  # f2 sees main up to seq 1 only
    store.fork("f", "f1", 0, "f3")  # f3 sees nothing of its ancestry
    assert [e.event.text for e in store.read("f", "f2") if isinstance(e.event, UserMessage)] == ["a"]
    assert store.read("f", "f3") == []
    store.append("f", [UserMessage("f3 own")], timeline="f3")
    assert [e.seq for e in store.read("f", "f3")] == [1]
    assert store.verify_chain("f", "f2").problems == ()
    assert store.verify_chain("f", "f3").problems == ()


def test_a_client_id_stored_in_another_session_is_refused_not_taken_for_a_retry(
    store: Store,
) -> None:
    store.create_session("one")
    store.create_session("two")
    store.append("one", [Pending(UserMessage("x"), id="shared-id")])
    with pytest.raises(DuplicateEventId, match="one/main"):
        store.append("two", [Pending(UserMessage("x"), id="shared-id")])
    assert store.read("two") == []
    assert len(store.read("one")) == 1


# --- memories (ctxline.record.store.memories): the same on every backend --------------

from ctxline.record.store.memories import NewMemory, Owner, memories_of  # noqa: E402

SHOP: list[Owner] = [("project", "shop"), ("user", "mia")]


def test_memories_are_remembered_read_and_searched_within_their_owners(store: Store) -> None:
    mem = memories_of(store)
    a = mem.remember(NewMemory("Deploys run with make release", "project", "shop", tags=("ops",)))
    b = mem.remember(NewMemory("Mia prefers short answers", "user", "mia", author="model"))
    mem.remember(NewMemory("Deploys of the other shop use fabric", "project", "other"))
    assert a.id.startswith("m-")
    assert a.current
    assert mem.get(b.id).author == "model"
    assert [h.entry.id for h in mem.search("deploys", SHOP)] == [a.id]  # other owners unseen
    assert [h.entry.id for h in mem.search("ops", SHOP)] == [a.id]  # tags are searched
    assert [h.entry.id for h in mem.search('"short answers"', SHOP)] == [b.id]
    assert mem.search("Déploys", SHOP)[0].entry.id == a.id  # accents and case folded
    assert [e.id for e in mem.entries(SHOP)] == [b.id, a.id]  # newest first
    with pytest.raises(ValidationError, match="no words"):
        mem.search("?!", SHOP)
    with pytest.raises(ValidationError, match="no memory"):
        mem.get("m-nope")


def test_a_memory_under_an_existing_key_supersedes_it(store: Store) -> None:
    mem = memories_of(store)
    old = mem.remember(NewMemory("The office is in Paris", "user", "mia", key="office"))
    elsewhere = mem.remember(NewMemory("The office is in Lyon", "project", "shop", key="office"))
    new = mem.remember(NewMemory("The office moved to Berlin", "user", "mia", key="office"))
    assert mem.get(old.id).superseded_by == new.id  # kept as history
    assert not mem.get(old.id).current
    assert mem.get(elsewhere.id).current  # another scope's key is another fact
    current = mem.by_key("user", "mia", "office")
    assert current is not None
    assert current.id == new.id
    assert [e.id for e in mem.entries([("user", "mia")])] == [new.id]
    both = [e.id for e in mem.entries([("user", "mia")], include_superseded=True)]
    assert both == [new.id, old.id]
    hits = mem.search("office", [("user", "mia")])
    assert {h.entry.id for h in hits} == {old.id, new.id}
    assert [h.entry.current for h in hits if h.entry.id == old.id] == [False]


def test_forget_erases_the_text_and_keeps_a_tombstone(store: Store) -> None:
    mem = memories_of(store)
    secret = mem.remember(NewMemory("My card PIN is 4321", "user", "mia", key="pin"))
    tomb = mem.forget(secret.id)
    assert tomb.forgotten
    assert tomb.text == ""
    assert mem.get(secret.id).text == ""
    assert mem.search("PIN card", [("user", "mia")]) == []
    assert mem.entries([("user", "mia")], include_superseded=True) == []
    assert mem.by_key("user", "mia", "pin") is None
    with pytest.raises(ValidationError, match="no memory"):
        mem.forget("m-missing")


@pytest.mark.parametrize(
    ("new", "needle"),
    [
        (NewMemory("", "user", "mia"), "empty"),
        (NewMemory("x", "team", "mia"), "scope"),  # type: ignore[arg-type]
        (NewMemory("a\x00b", "user", "mia"), "NUL"),
        (NewMemory("x", "user", ""), "owner"),
        (NewMemory("x", "user", "mia", key="two\nlines"), "one line"),
        (NewMemory("x" * 20_001, "user", "mia"), "longer than"),
        (NewMemory("x", "user", "mia", author="admin"), "author"),  # type: ignore[arg-type]
    ],
)
def test_bad_memories_are_refused_and_nothing_is_stored(
    store: Store, new: NewMemory, needle: str
) -> None:
    mem = memories_of(store)
    with pytest.raises(ValidationError, match=needle):
        mem.remember(new)
    assert mem.entries([("user", "mia")], include_superseded=True) == []
