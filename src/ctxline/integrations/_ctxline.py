"""ctxline's own tools as the integrations offer them: the one place they are imported from.

Why one module: the built-in tools are becoming (spec, handler) pairs in ``ctxline.tools``
(with the todo tools among the defaults); every integration — the Agents SDK function
tools, the Pydantic AI toolset, the LangChain tools and the MCP server — reaches them
only through :func:`tool_specs` and :func:`run_tool`, so re-pointing them is one edit.

``run_tool`` answers ``read_result`` and ``search_history`` with
:meth:`~ctxline.Context.run_builtin` (saved bytes, never a re-run), and ``todo_write`` /
``todo_update`` with :func:`~ctxline.sources.todo.apply_todo_call` against the current
list, appending the ``todo`` event it yields. The tool result itself is recorded by the
framework's own flow (it comes back as a tool output item), not here.

    specs = tool_specs(ctx)                 # read_result, search_history, todo_write, todo_update
    result = run_tool(ctx, ToolCall("c1", "todo_write", {"items": []}))
    result.content                          # 'The TODO list is now empty.'
"""

from __future__ import annotations

from ctxline.context import Context
from ctxline.record.events import ToolCall, ToolResult
from ctxline.render.neutral import ToolSpec
from ctxline.sources.todo import TODO_TOOLS, apply_todo_call, current_todos
from ctxline.tools.read_result import READ_RESULT
from ctxline.tools.search_history import SEARCH_HISTORY

__all__ = ["READ_RESULT", "SEARCH_HISTORY", "TODO_TOOLS", "run_tool", "tool_names", "tool_specs"]


def tool_specs(ctx: Context, *, todo: bool = True) -> tuple[ToolSpec, ...]:
    """The tools ctxline runs for this context: its built-in ones, then the todo tools."""
    specs = list(ctx.builtin_tools)
    if todo:
        specs += [t for t in TODO_TOOLS if all(s.name != t.name for s in specs)]
    return tuple(specs)


def tool_names(ctx: Context, *, todo: bool = True) -> frozenset[str]:
    return frozenset(spec.name for spec in tool_specs(ctx, todo=todo))


def run_tool(ctx: Context, call: ToolCall) -> ToolResult | None:
    """The result of a call to one of ctxline's tools, or None when the call is the app's."""
    result = ctx.run_builtin(call)
    if result is not None:
        return result
    if all(t.name != call.name for t in TODO_TOOLS):
        return None
    ctx.refresh()
    outcome = apply_todo_call(call.name, call.arguments, current_todos(ctx.events))
    if outcome.event is not None:
        ctx.append(outcome.event)
    return ToolResult(call.id, outcome.text, call.name, outcome.is_error)
