"""ctxline's built-in tools, as (spec, handler) pairs in one place.

Every :class:`~ctxline.Context` offers them from its first request (so adding them never
breaks the cache later) and answers them itself (:meth:`~ctxline.Context.run_builtin`):

- ``read_result(handle, page)``: a saved output, page by page; it never re-runs anything;
- ``search_history(query, limit)``: the session's own record, BM25 / full text;
- ``todo_write(items)`` and ``todo_update(id, status)``: the plan the status bar shows.

Handlers read only the structured call and the :class:`~ctxline.tools.base.ToolEnv`;
a handler that raises gives the detailed error result (:func:`~ctxline.tools.base.run_tool`).

    tool = find_tool(BUILTIN_TOOLS, "read_result")
"""

from __future__ import annotations

from ctxline.record.events import ToolCall
from ctxline.record.jsonvalue import JsonObject
from ctxline.sources.todo import TODO_UPDATE, TODO_WRITE, TodoFold, apply_todo_call
from ctxline.tools.base import Tool, ToolEnv, ToolOutcome
from ctxline.tools.read_result import READ_RESULT, call_read_result
from ctxline.tools.search_history import SEARCH_HISTORY, answer_search

__all__ = [
    "BUILTIN_TOOLS",
    "READ_RESULT_TOOL",
    "SEARCH_HISTORY_TOOL",
    "TODO_TOOLS",
    "TODO_UPDATE_TOOL",
    "TODO_WRITE_TOOL",
]


def _arguments(call: ToolCall) -> JsonObject:
    return call.arguments if isinstance(call.arguments, dict) else {}


def _read_result(call: ToolCall, env: ToolEnv) -> ToolOutcome:
    text, is_error = call_read_result(env.blobs, _arguments(call))
    return ToolOutcome(text, is_error)


def _search_history(call: ToolCall, env: ToolEnv) -> ToolOutcome:
    text, is_error = answer_search(_arguments(call), env.search)
    return ToolOutcome(text, is_error)


def _todo(call: ToolCall, env: ToolEnv) -> ToolOutcome:
    fold = env.fold("todo")
    items = fold.items() if isinstance(fold, TodoFold) else []
    outcome = apply_todo_call(call.name, call.arguments, items)
    events = (outcome.event,) if outcome.event is not None else ()
    return ToolOutcome(outcome.text, outcome.is_error, events)


READ_RESULT_TOOL = Tool(READ_RESULT, _read_result)
SEARCH_HISTORY_TOOL = Tool(SEARCH_HISTORY, _search_history)
TODO_WRITE_TOOL = Tool(TODO_WRITE, _todo)
TODO_UPDATE_TOOL = Tool(TODO_UPDATE, _todo)
TODO_TOOLS: tuple[Tool, ...] = (TODO_WRITE_TOOL, TODO_UPDATE_TOOL)
BUILTIN_TOOLS: tuple[Tool, ...] = (READ_RESULT_TOOL, SEARCH_HISTORY_TOOL, *TODO_TOOLS)
"""Offered by every Context unless told otherwise."""
