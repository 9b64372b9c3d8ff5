"""The tool registry: the app's tools by name, with the metadata code reads.

Tools are looked up by name, never by description; selection by ``tags`` or ``group`` is
for the app (and for tool discovery: :meth:`ToolRegistry.select` is the seam a
``search_tools`` can narrow). A name is registered once; two tools with one name is an
error at construction, not a surprise at call time.

    registry = ToolRegistry([forecast, book_flight])
    registry.get("forecast").meta.max_calls
    registry.select(tags=("weather",)).names
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from ctxline.errors import ValidationError
from ctxline.render.neutral import ToolSpec
from ctxline.runner.tools import FunctionTool, ToolMeta, function_tool
from ctxline.tools.base import Tool
from ctxline.tools.builtin import BUILTIN_TOOLS

__all__ = ["ToolLike", "ToolRegistry", "as_tools", "pick_builtins"]

ToolLike = FunctionTool | Callable[..., Any]


def as_tools(value: ToolLike | Iterable[ToolLike]) -> list[FunctionTool]:
    """A function, a :class:`FunctionTool`, or a list of them, as tools."""
    if isinstance(value, FunctionTool) or (callable(value) and not isinstance(value, type)):
        return [function_tool(value)]
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise ValidationError(
            f"expected a function or a list of functions, got {type(value).__name__}",
            field="tools",
        )
    return [function_tool(item) for item in value]


class ToolRegistry:
    """An ordered set of tools, unique by name."""

    def __init__(self, tools: Iterable[ToolLike] = ()) -> None:
        self._tools: dict[str, FunctionTool] = {}
        for item in tools:
            self.add(item)

    def add(self, item: ToolLike) -> FunctionTool:
        tool = function_tool(item)
        if tool.name in self._tools:
            raise ValidationError(f"two tools are named {tool.name!r}", field="tools")
        self._tools[tool.name] = tool
        return tool

    def get(self, name: str) -> FunctionTool | None:
        return self._tools.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[FunctionTool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._tools)

    def specs(self) -> tuple[ToolSpec, ...]:
        return tuple(t.spec for t in self._tools.values())

    def limits(self) -> Mapping[str, int]:
        """``max_calls`` per tool (what the status bar shows as ``N/max``)."""
        return {t.name: t.meta.max_calls for t in self._tools.values() if t.meta.max_calls}

    def meta(self, name: str) -> ToolMeta | None:
        tool = self._tools.get(name)
        return tool.meta if tool is not None else None

    def select(
        self,
        names: Sequence[str] | None = None,
        *,
        tags: Sequence[str] = (),
        group: str | None = None,
    ) -> ToolRegistry:
        """A registry of the tools named in ``names`` (unknown names are an error), or of
        those with any of ``tags`` / in ``group``."""
        if names is not None:
            unknown = [n for n in names if n not in self._tools]
            if unknown:
                raise ValidationError(
                    f"unknown tools {unknown}; the tools are {list(self._tools)}", field="tools"
                )
            return ToolRegistry(self._tools[n] for n in dict.fromkeys(names))
        chosen = [
            t
            for t in self._tools.values()
            if (not tags or set(tags) & set(t.meta.tags))
            and (group is None or t.meta.group == group)
        ]
        return ToolRegistry(chosen)


def pick_builtins(chosen: Sequence[Tool | str]) -> tuple[Tool, ...]:
    """ctxline's built-in tools to offer: tools, or the names of the built-in ones
    (``read_result``, ``search_history``, ``todo_write``, ``todo_update``; ``()``: none)."""
    known = {t.name: t for t in BUILTIN_TOOLS}
    out: list[Tool] = []
    for item in chosen:
        if isinstance(item, Tool):
            out.append(item)
        elif item in known:
            out.append(known[item])
        else:
            raise ValidationError(
                f"no built-in tool is named {item!r}; they are {', '.join(known)}",
                field="builtin_tools",
            )
    return tuple(out)
