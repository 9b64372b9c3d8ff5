"""ctxline's own tools as the integrations offer them: the one place they are reached from.

Every integration — the Agents SDK function tools, the Pydantic AI toolset, the LangChain
tools and the MCP server — reaches ctxline's tools only through :func:`tool_specs` and
:func:`run_tool`: the built-in (spec, handler) pairs of :mod:`ctxline.tools.builtin`
(``read_result``, ``search_history``, ``todo_write``, ``todo_update``) and the tools of
the Context's sources, answered by :meth:`~ctxline.Context.call_tool`. Events a tool
produces (the ``todo`` event of todo_write) are appended here; the tool result itself is
recorded by the framework's own flow (it comes back as a tool output item).

    specs = tool_specs(ctx)                 # read_result, search_history, todo_write, todo_update
    result = run_tool(ctx, ToolCall("c1", "todo_write", {"items": []}))
    result.content                          # 'The TODO list is now empty.'
"""

from __future__ import annotations

from ctxline.context import Context
from ctxline.record.events import ToolCall, ToolResult
from ctxline.render.neutral import ToolSpec
from ctxline.tools.builtin import TODO_TOOLS
from ctxline.tools.read_result import READ_RESULT
from ctxline.tools.search_history import SEARCH_HISTORY

__all__ = ["READ_RESULT", "SEARCH_HISTORY", "run_tool", "tool_names", "tool_specs"]

_TODO = frozenset(t.name for t in TODO_TOOLS)


def tool_specs(ctx: Context, *, todo: bool = True) -> tuple[ToolSpec, ...]:
    """The tools ctxline runs for this context (``todo=False`` leaves the todo tools out)."""
    return tuple(t.spec for t in ctx.tools if todo or t.name not in _TODO)


def tool_names(ctx: Context, *, todo: bool = True) -> frozenset[str]:
    return frozenset(spec.name for spec in tool_specs(ctx, todo=todo))


def run_tool(ctx: Context, call: ToolCall) -> ToolResult | None:
    """The result of a call to one of ctxline's tools, or None when the call is the app's."""
    return ctx.run_builtin(call)
