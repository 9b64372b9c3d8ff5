"""TODO tools and their fold; detailed tool errors (seed 001)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import cast

import pytest

from ctxline import event_from_json
from ctxline.record.codec import canonical_json, event_to_json
from ctxline.record.events import TODO_STATUSES, JsonValue, StoredEvent, Todo, TodoItem, UserMessage
from ctxline.sources.todo import (
    TODO_TOOLS,
    TODO_UPDATE,
    TODO_WRITE,
    TodoEntry,
    TodoFold,
    apply_todo_call,
    current_todos,
)
from ctxline.tools.errors import derive_hint, detailed_tool_error
from json_reads_a import dig

T0 = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)

PLAN: dict[str, JsonValue] = {
    "items": [
        {"id": "1", "content": "List files", "status": "in_progress"},
        {"id": "2", "content": "Read config"},
        {"id": "3", "content": "Fix bug", "status": "pending"},
    ]
}


class Session:
    """A tiny record: apply tool calls the way an app would, at one minute per call."""

    def __init__(self) -> None:
        self.events: list[StoredEvent] = []

    def append(self, event: Todo | UserMessage) -> None:
        n = len(self.events) + 1
        self.events.append(StoredEvent(n, f"e{n}", T0 + timedelta(minutes=n), event))

    def call(self, name: str, arguments: JsonValue) -> tuple[str, bool]:
        event, text, is_error = apply_todo_call(name, arguments, current_todos(self.events))
        if event is not None:
            self.append(event)
        return text, is_error


# --- schemas -----------------------------------------------------------------------


def test_tool_schemas() -> None:
    assert [t.name for t in TODO_TOOLS] == ["todo_write", "todo_update"]
    for tool in TODO_TOOLS:
        json.dumps(tool.parameters)  # JSON-serializable
        assert tool.parameters["type"] == "object"
        assert tool.description
    item = dig(TODO_WRITE.parameters, "properties", "items", "items")
    assert dig(item, "properties", "status", "enum") == list(TODO_STATUSES)
    assert dig(item, "required") == ["id", "content"]
    assert TODO_UPDATE.parameters["required"] == ["id", "status"]
    assert dig(TODO_UPDATE.parameters, "properties", "status", "enum") == list(TODO_STATUSES)


# --- calls -------------------------------------------------------------------------


def test_write_then_update_with_timestamps() -> None:
    s = Session()
    text, err = s.call("todo_write", PLAN)
    assert not err
    assert "3 items" in text
    assert "[pending] 2: Read config" in text
    text, err = s.call("todo_update", {"id": "1", "status": "completed"})
    assert not err
    assert "[completed] 1: List files" in text
    items = current_todos(s.events)
    assert [(t.id, t.status) for t in items] == [
        ("1", "completed"),
        ("2", "pending"),
        ("3", "pending"),
    ]
    first, second = items[0], items[1]
    assert first.created_at == T0 + timedelta(minutes=1)
    assert first.updated_at == T0 + timedelta(minutes=2)
    assert second.created_at == second.updated_at == T0 + timedelta(minutes=1)
    assert first.as_item() == TodoItem("1", "List files", "completed")


def test_rewrite_keeps_creation_time_of_unchanged_ids() -> None:
    s = Session()
    s.call("todo_write", PLAN)
    s.call(
        "todo_write",
        {
            "items": [
                {"id": "1", "content": "List files", "status": "in_progress"},
                {"id": "2", "content": "Read the config file"},
                {"id": "4", "content": "Write tests"},
            ]
        },
    )
    one, two, four = current_todos(s.events)
    assert one.created_at == one.updated_at == T0 + timedelta(minutes=1)
    assert two.created_at == T0 + timedelta(minutes=1)
    assert two.updated_at == T0 + timedelta(minutes=2)
    assert four.created_at == T0 + timedelta(minutes=2)
    assert [t.id for t in current_todos(s.events)] == ["1", "2", "4"]


def test_unknown_id_is_an_error_listing_valid_ids_and_changes_nothing() -> None:
    s = Session()
    s.call("todo_write", PLAN)
    before = list(s.events)
    text, err = s.call("todo_update", {"id": "7", "status": "completed"})
    assert err
    assert "no TODO item with id '7'" in text
    assert "Valid ids: '1', '2', '3'" in text
    assert "Nothing was changed" in text
    assert s.events == before


def test_unknown_status_is_an_error_listing_valid_statuses() -> None:
    s = Session()
    s.call("todo_write", PLAN)
    before = list(s.events)
    text, err = s.call("todo_update", {"id": "1", "status": "done"})
    assert err
    assert "Valid statuses: pending, in_progress, completed, cancelled" in text
    assert "Did you mean 'completed'?" in text
    assert s.events == before
    text, err = s.call("todo_write", {"items": [{"id": "1", "content": "x", "status": "blocked"}]})
    assert err
    assert "Valid statuses" in text
    assert "Did you mean" not in text
    assert s.events == before


def test_update_on_an_empty_list_points_to_todo_write() -> None:
    out = apply_todo_call("todo_update", {"id": "1", "status": "completed"}, [])
    assert out.is_error
    assert out.event is None
    assert "todo_write" in out.text


@pytest.mark.parametrize(
    ("name", "arguments", "fragment"),
    [
        ("todo_write", {}, '"items"'),
        ("todo_write", {"items": "1. do it"}, '"items"'),
        ("todo_write", {"items": ["do it"]}, "items[0] is not an object"),
        ("todo_write", {"items": [{"content": "x"}]}, "non-empty string id"),
        ("todo_write", {"items": [{"id": "1", "content": ""}]}, "non-empty string content"),
        (
            "todo_write",
            {"items": [{"id": "1", "content": "a"}, {"id": "1", "content": "b"}]},
            "repeats the id '1'",
        ),
        ("todo_write", '{"items": [', "JSON object"),
        ("todo_update", {"id": None, "status": "completed"}, "no TODO item"),
        ("todo_delete", {"id": "1"}, "unknown TODO tool 'todo_delete'"),
    ],
)
def test_invalid_calls_are_tool_errors(name: str, arguments: JsonValue, fragment: str) -> None:
    current = [TodoItem("1", "x")]
    out = apply_todo_call(name, arguments, current)
    assert out.is_error
    assert out.event is None
    assert fragment in out.text
    assert out.text.startswith("Error: ")


def test_integer_ids_are_accepted_as_text() -> None:
    out = apply_todo_call("todo_write", {"items": [{"id": 1, "content": "a"}]}, [])
    assert not out.is_error
    assert out.event is not None
    assert out.event.items == (TodoItem("1", "a", "pending"),)
    out = apply_todo_call("todo_update", {"id": 1, "status": "cancelled"}, out.event.items)
    assert not out.is_error
    assert out.event == Todo(op="update", item_id="1", status="cancelled")


def test_entries_are_accepted_as_current_items() -> None:
    entry = TodoEntry("1", "x", "pending", T0, T0)
    out = apply_todo_call("todo_update", {"id": "1", "status": "in_progress"}, [entry])
    assert not out.is_error


def test_events_round_trip_canonical_json() -> None:
    out = apply_todo_call("todo_write", PLAN, [])
    assert out.event is not None
    obj = json.loads(canonical_json(event_to_json(out.event)))
    assert event_from_json(obj) == out.event


def test_fold_ignores_invalid_recorded_events() -> None:
    s = Session()
    s.call("todo_write", PLAN)
    s.append(Todo(op="update", item_id="99", status="completed"))
    s.append(Todo(op="update", item_id="1", status="bogus"))  # type: ignore[arg-type]  # a bad recorded event
    s.append(Todo(op="write", items=(TodoItem("a", "x"), TodoItem("a", "y"))))
    s.append(UserMessage("not a todo"))
    assert [(t.id, t.status) for t in current_todos(s.events)] == [
        ("1", "in_progress"),
        ("2", "pending"),
        ("3", "pending"),
    ]


def test_incremental_fold_matches_a_fresh_one() -> None:
    s = Session()
    s.call("todo_write", PLAN)
    s.call("todo_update", {"id": "2", "status": "in_progress"})
    s.call(
        "todo_write", {"items": [{"id": "2", "content": "Read config", "status": "in_progress"}]}
    )
    fold = TodoFold()
    for i, stored in enumerate(s.events):
        fold.feed(stored)
        assert fold.items() == current_todos(s.events[: i + 1])


# --- detailed tool errors ----------------------------------------------------------


def raised(fn: Callable[[], object]) -> BaseException:
    try:
        fn()
    except BaseException as exc:
        return exc
    raise AssertionError("did not raise")


def _read(path: str) -> str:
    with open(path) as f:
        return f.read()


def test_four_layers_in_order() -> None:
    exc = raised(lambda: _read("/no/such/dir/a.txt"))
    text = detailed_tool_error(exc, "read_file", {"path": "/no/such/dir/a.txt", "n": 3})
    head, args, trace, hint = text.split("\n\n")
    assert head == (
        "Error: tool 'read_file' failed: FileNotFoundError: [Errno 2] No such file or "
        "directory: '/no/such/dir/a.txt'"
    )
    assert args.startswith("Arguments:\n")
    assert json.loads(args.removeprefix("Arguments:\n")) == {"path": "/no/such/dir/a.txt", "n": 3}
    assert trace.startswith("Traceback:\nTraceback (most recent call last):")
    assert "_read" in trace
    assert trace.rstrip().endswith("with open(path) as f:")  # layer 1 says the rest
    assert "FileNotFoundError" not in trace
    assert hint.startswith("Hint: The path '/no/such/dir/a.txt' does not exist")


def _parse_port(text: str) -> int:
    return int(text)


def _read_port(config: dict[str, str]) -> int:
    try:
        return _parse_port(config["port"])
    except KeyError as exc:
        raise LookupError("no port in the config") from exc


def test_the_traceback_keeps_the_chain_and_drops_column_markers() -> None:
    exc = raised(lambda: _read_port({}))
    text = detailed_tool_error(exc, "config", {})
    trace = text[text.index("\n\nTraceback:\n") : text.index("\n\nHint: ")]
    # the cause's own closing line stays: only the outermost one repeats layer 1
    assert "KeyError: 'port'" in trace
    assert "The above exception was the direct cause of the following exception:" in trace
    assert not trace.rstrip().endswith("no port in the config")
    assert "raise LookupError" in trace
    # the 3.11+ position markers ("^^^^", "~~~") are tokens that only point at a line shown
    assert not [
        line for line in trace.splitlines() if line.strip() and set(line.strip()) <= set("^~")
    ]


def test_caller_hint_wins_and_traceback_is_optional() -> None:
    empty: dict[str, int] = {}
    exc = raised(lambda: empty["x"])
    text = detailed_tool_error(
        exc, "lookup", {"k": "x"}, hint="Use get_user_details first.", include_traceback=False
    )
    assert "Traceback" not in text
    assert text.endswith("Hint: Use get_user_details first.")


def _kw(a: int) -> int:
    return a


def test_derived_hints() -> None:
    key = raised(lambda: {"a": 1}["reservation_id"])
    assert "'reservation_id' was not found" in derive_hint(key, "t", {})
    kw = raised(lambda: _kw(a=1, colour="red"))  # type: ignore[call-arg]
    hint = derive_hint(kw, "paint", {"a": 1, "colour": "red"})
    assert "does not accept the argument 'colour'" in hint
    assert "You sent: 'a', 'colour'" in hint
    missing = raised(lambda: _kw())  # type: ignore[call-arg]
    assert "A required argument is missing: 'a'" in derive_hint(missing, "t", {})
    bad_json = raised(lambda: json.loads("{'a': 1}"))
    assert "not valid JSON (line 1, column 2" in derive_hint(bad_json, "t", {})
    assert "JSON object" in derive_hint(ValueError("x"), "t", "{'a': 1")
    timeout = subprocess.TimeoutExpired(["sleep", "9"], 5)
    assert "timed out after 5 s" in derive_hint(timeout, "bash", {"command": "sleep 9"})
    assert "timed out" in derive_hint(TimeoutError(), "fetch", {})
    assert "out of range" in derive_hint(raised(lambda: [][1]), "t", {})
    assert "repeating the same call" in derive_hint(RuntimeError("boom"), "t", {})


def test_unserializable_and_huge_arguments() -> None:
    # deliberately not JSON (a caller the type checker does not see): the text shows its repr
    not_json = cast(JsonValue, {"when": datetime(2026, 1, 1, tzinfo=UTC)})
    text = detailed_tool_error(ValueError("bad"), "t", not_json)
    assert "datetime.datetime(2026, 1, 1" in text
    text = detailed_tool_error(ValueError("bad"), "t", {"blob": "x" * 20_000})
    assert "more characters]" in text
    assert len(text) < 15_000


def test_an_exception_that_was_never_raised() -> None:
    text = detailed_tool_error(KeyError("k"), "t", {})
    assert "Traceback:\nKeyError: 'k'" in text
