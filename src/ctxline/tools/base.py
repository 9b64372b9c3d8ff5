"""Tools as (spec, handler) pairs: what the model is offered, and the code that answers it.

A :class:`Tool` is the schema the model sees (:class:`~ctxline.render.neutral.ToolSpec`)
and a plain callable that answers a call. Handlers get the structured call and a
:class:`ToolEnv` — the blobs, the record's search, the folds of the sources — never
rendered text, and return a :class:`ToolOutcome`: the result text, whether it is an
error, and events to append with the result (a todo change, say). :func:`run_tool`
runs one; a handler that raises gives the four-layer detailed error of seed 001
(:mod:`ctxline.tools.errors`) instead of an exception.

    def echo(call: ToolCall, env: ToolEnv) -> ToolOutcome:
        return ToolOutcome(str(call.arguments.get("text", "")))

    ECHO = Tool(ToolSpec("echo", "Repeat the text."), echo)
    outcome = run_tool(ECHO, ToolCall("c1", "echo", {"text": "hi"}), env)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from ctxline.record.blobs import BlobStore
from ctxline.record.events import Event, JsonValue, ToolCall, ToolResult
from ctxline.render.neutral import ToolSpec
from ctxline.tools.errors import detailed_tool_error

if TYPE_CHECKING:
    from ctxline.record.store.base import SearchHit

__all__ = ["Tool", "ToolEnv", "ToolHandler", "ToolOutcome", "find_tool", "run_tool"]


class ToolEnv(Protocol):
    """What a built-in tool may use: saved outputs, the record's search, the sources' folds."""

    @property
    def blobs(self) -> BlobStore: ...

    def search(self, query: str, limit: int) -> Sequence[SearchHit]:
        """The timeline's events matching ``query``, best first."""
        ...

    def fold(self, source: str) -> object | None:
        """The current fold of the source named ``source`` (None when it is not enabled)."""
        ...


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    """What a handler returns: the result text, and events to append with the result."""

    content: str
    is_error: bool = False
    events: tuple[Event, ...] = ()
    """Appended after the tool result, in order (e.g. the ``todo`` event of todo_write)."""
    meta: Mapping[str, JsonValue] = field(default_factory=dict)
    """Written in the result's ``meta`` (what a fold reads back: the tools a search
    revealed, the skill a read loaded); never rendered."""

    def result(self, call: ToolCall) -> ToolResult:
        return ToolResult(call.id, self.content, call.name, self.is_error, dict(self.meta))


ToolHandler = Callable[[ToolCall, ToolEnv], ToolOutcome]


@dataclass(frozen=True, slots=True)
class Tool:
    """A tool: the schema the model sees and the code that answers a call."""

    spec: ToolSpec
    handler: ToolHandler

    @property
    def name(self) -> str:
        return self.spec.name


def find_tool(tools: Sequence[Tool], name: str) -> Tool | None:
    return next((t for t in tools if t.spec.name == name), None)


def run_tool(tool: Tool, call: ToolCall, env: ToolEnv) -> ToolOutcome:
    """Answer ``call`` with ``tool``; an exception becomes the detailed error result."""
    try:
        return tool.handler(call, env)
    except Exception as exc:  # a tool's failure is the model's information, not a crash
        return ToolOutcome(detailed_tool_error(exc, call.name, call.arguments), True)
