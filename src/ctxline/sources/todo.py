"""TODO tools (seed 001): a plan the model keeps outside its head, stored in the record.

Why: on long trajectories an agent fixes on the sub-task at hand and forgets the rest of
the request. Two tools let it write and tick off a plan; the status bar restates that
plan at the end of every request. The plan is a fold over ``todo`` events, never text
parsed back from a request, so a forged list inside a tool result changes nothing.

- ``todo_write(items)`` replaces the whole list (ids unique, status one of
  :data:`TODO_STATUSES`, ``pending`` if left out);
- ``todo_update(id, status)`` sets one item's status.

:func:`apply_todo_call` validates a call against the current list and returns the
event to append (or None), the tool result text and whether it is an error. A wrong id
or status is an error whose text lists the valid ones; nothing is changed.

    >>> out = apply_todo_call("todo_update", {"id": "9", "status": "completed"}, [])
    >>> out.event is None, out.is_error
    (True, True)
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import NamedTuple

from ctxline.record.events import (
    TODO_STATUSES,
    JsonValue,
    StoredEvent,
    Todo,
    TodoItem,
    TodoStatus,
    is_todo_status,
)
from ctxline.render.neutral import ToolSpec
from ctxline.sources.base import BaseSource
from ctxline.sources.guide import MessageKind

__all__ = [
    "TODO_STATUSES",
    "TODO_TOOLS",
    "TODO_UPDATE",
    "TODO_WRITE",
    "TodoEntry",
    "TodoFold",
    "TodoOutcome",
    "TodoSource",
    "apply_todo_call",
    "current_todos",
]

_STATUS_SCHEMA: dict[str, JsonValue] = {"type": "string", "enum": list(TODO_STATUSES)}

TODO_WRITE = ToolSpec(
    "todo_write",
    "Replace your TODO list with these items. Use it to plan a task of several steps and to "
    "add, reword or drop steps. Keep one item in_progress at a time.",
    {
        "type": "object",
        "properties": {
            "items": {
                "type": "array",
                "description": "The whole list, in order.",
                "items": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "string", "description": "Unique short id, e.g. '1'."},
                        "content": {"type": "string", "description": "What to do."},
                        "status": {**_STATUS_SCHEMA, "description": "Default: pending."},
                    },
                    "required": ["id", "content"],
                    "additionalProperties": False,
                },
            }
        },
        "required": ["items"],
        "additionalProperties": False,
    },
)

TODO_UPDATE = ToolSpec(
    "todo_update",
    "Set the status of one TODO item: pending, in_progress, completed or cancelled.",
    {
        "type": "object",
        "properties": {
            "id": {"type": "string", "description": "The item's id."},
            "status": _STATUS_SCHEMA,
        },
        "required": ["id", "status"],
        "additionalProperties": False,
    },
)

TODO_TOOLS: tuple[ToolSpec, ...] = (TODO_WRITE, TODO_UPDATE)

_SYNONYMS = {
    "done": "completed",
    "complete": "completed",
    "finished": "completed",
    "in progress": "in_progress",
    "in-progress": "in_progress",
    "inprogress": "in_progress",
    "doing": "in_progress",
    "started": "in_progress",
    "todo": "pending",
    "open": "pending",
    "canceled": "cancelled",
    "cancel": "cancelled",
    "dropped": "cancelled",
    "skipped": "cancelled",
}


@dataclass(frozen=True, slots=True)
class TodoEntry:
    """A current TODO item with its times: ``created_at`` when its id entered the list,
    ``updated_at`` when its content or status last changed."""

    id: str
    content: str
    status: TodoStatus
    created_at: datetime
    updated_at: datetime

    def as_item(self) -> TodoItem:
        return TodoItem(self.id, self.content, self.status)


class TodoOutcome(NamedTuple):
    event: Todo | None
    """The event to append (None when nothing changes)."""
    text: str
    """The tool result content."""
    is_error: bool


class TodoFold:
    """The current list, fed one stored event at a time (invalid ``todo`` events are ignored)."""

    __slots__ = ("_items",)

    def __init__(self) -> None:
        self._items: dict[str, TodoEntry] = {}

    def feed(self, stored: StoredEvent) -> Sequence[MessageKind]:
        event = stored.event
        if not isinstance(event, Todo):
            return ()
        self._take(event, stored.at)
        return ()

    def _take(self, event: Todo, at: datetime) -> None:
        if event.op == "write":
            if len({item.id for item in event.items}) != len(event.items):
                return
            items: dict[str, TodoEntry] = {}
            for item in event.items:
                old = self._items.get(item.id)
                if old is None:
                    items[item.id] = TodoEntry(item.id, item.content, item.status, at, at)
                elif (old.content, old.status) != (item.content, item.status):
                    items[item.id] = replace(
                        old, content=item.content, status=item.status, updated_at=at
                    )
                else:
                    items[item.id] = old
            self._items = items
        elif event.op == "update":
            old = self._items.get(event.item_id)
            if (
                old is not None
                and is_todo_status(event.status)
                and old.status != event.status
            ):
                self._items[event.item_id] = replace(old, status=event.status, updated_at=at)

    def items(self) -> list[TodoEntry]:
        return list(self._items.values())


def current_todos(events: Iterable[StoredEvent]) -> list[TodoEntry]:
    """The TODO list after ``events``, in the order it was last written."""
    fold = TodoFold()
    for stored in events:
        fold.feed(stored)
    return fold.items()


def _error(message: str) -> TodoOutcome:
    return TodoOutcome(None, f"Error: {message} Nothing was changed.", True)


def _status_hint(value: object) -> str:
    valid = ", ".join(TODO_STATUSES)
    guess = _SYNONYMS.get(value.strip().lower()) if isinstance(value, str) else None
    mean = f" Did you mean {guess!r}?" if guess else ""
    return f"unknown status {value!r}. Valid statuses: {valid}.{mean}"


def _listing(items: Sequence[TodoItem]) -> str:
    if not items:
        return "The TODO list is now empty."
    lines = [f"The TODO list now has {len(items)} item{'s' if len(items) != 1 else ''}:"]
    lines.extend(f"- [{item.status}] {item.id}: {item.content}" for item in items)
    return "\n".join(lines)


def _write(arguments: dict[str, JsonValue]) -> TodoOutcome:
    raw = arguments.get("items")
    if not isinstance(raw, list):
        return _error('todo_write needs "items": a list of {"id", "content", "status"} objects.')
    items: list[TodoItem] = []
    seen: set[str] = set()
    for i, obj in enumerate(raw):
        if not isinstance(obj, dict):
            return _error(f"items[{i}] is not an object with id, content and status.")
        ident, content, status = obj.get("id"), obj.get("content"), obj.get("status", "pending")
        if isinstance(ident, int) and not isinstance(ident, bool):
            ident = str(ident)
        if not isinstance(ident, str) or not ident.strip():
            return _error(f"items[{i}] needs a non-empty string id.")
        if ident in seen:
            return _error(f"items[{i}] repeats the id {ident!r}; ids must be unique.")
        if not isinstance(content, str) or not content.strip():
            return _error(f"items[{i}] (id {ident!r}) needs a non-empty string content.")
        if not is_todo_status(status):
            return _error(f"items[{i}] (id {ident!r}) has an {_status_hint(status)}")
        seen.add(ident)
        items.append(TodoItem(ident, content, status))
    return TodoOutcome(Todo(op="write", items=tuple(items)), _listing(items), False)


def _update(arguments: dict[str, JsonValue], current: Sequence[TodoItem]) -> TodoOutcome:
    ident, status = arguments.get("id"), arguments.get("status")
    if isinstance(ident, int) and not isinstance(ident, bool):
        ident = str(ident)
    by_id = {item.id: item for item in current}
    if not isinstance(ident, str) or ident not in by_id:
        if not by_id:
            return _error(
                f"no TODO item with id {ident!r}: the list is empty; create it with todo_write."
            )
        valid = ", ".join(repr(i) for i in by_id)
        return _error(f"no TODO item with id {ident!r}. Valid ids: {valid}.")
    if not is_todo_status(status):
        return _error(_status_hint(status))
    items = [replace(item, status=status) if item.id == ident else item for item in current]
    return TodoOutcome(Todo(op="update", item_id=ident, status=status), _listing(items), False)


def apply_todo_call(
    name: str, arguments: JsonValue, current_items: Sequence[TodoItem | TodoEntry]
) -> TodoOutcome:
    """Validate one ``todo_write`` / ``todo_update`` call against the current list.

    Returns ``(event, result_text, is_error)``: append ``event`` (when not None) and then
    the tool result. ``arguments`` is the call's parsed JSON (a ``str`` when it was not
    valid JSON, which is an error).
    """
    current = [e.as_item() if isinstance(e, TodoEntry) else e for e in current_items]
    if not isinstance(arguments, dict):
        return _error(f"{name} takes a JSON object of arguments, got {type(arguments).__name__}.")
    if name == TODO_WRITE.name:
        return _write(arguments)
    if name == TODO_UPDATE.name:
        return _update(arguments, current)
    return _error(f"unknown TODO tool {name!r}; use todo_write or todo_update.")


class TodoSource(BaseSource):
    """The TODO list's fold (the todo tools validate against it; the status bar shows it)."""

    name = "todo"

    def fold(self) -> TodoFold:
        return TodoFold()
