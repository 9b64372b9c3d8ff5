"""ctxline's tools over MCP: ``read_result``, ``search_history`` and the todo tools of one
recorded session, for any MCP client (Claude Desktop, Cursor, an agent framework's MCP
tool support).

Why: an agent that is not built on one of the integrations can still read offloaded
outputs back, search its own history and keep its plan in ctxline's record. The server
is the official ``mcp`` SDK's low-level ``Server``, so the tool schemas sent are exactly
ctxline's; each call's text is exactly what :meth:`~ctxline.Context.run_builtin` (or the
todo handler) returns, with ``isError`` set from it. A name that is not one of these
tools is an MCP error (invalid params), never a silent substitute. The record is read
again before each call, so results follow whatever the agent appended since.

    ctxline mcp --db ctxline.db --session support-42          # stdio

    server = build_server(Context(store, "support-42", create=False))
    async with Client(server) as client:                      # in-process, for tests
        await client.call_tool("search_history", {"query": "refund"})
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from io import TextIOWrapper
from typing import Any, cast

import anyio

from ctxline import __version__
from ctxline.context import Context
from ctxline.integrations._ctxline import run_tool, tool_specs
from ctxline.record.events import ToolCall
from ctxline.tags import escape

try:
    import mcp_types as types
    from mcp.server import Server
    from mcp.server.context import ServerRequestContext
    from mcp.server.stdio import stdio_server
    from mcp.shared.exceptions import MCPError
    from mcp_types.jsonrpc import INVALID_PARAMS, INVALID_REQUEST, PARSE_ERROR
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    from ctxline.models.base import MissingExtra

    raise MissingExtra("mcp", "mcp") from exc

__all__ = ["SERVER_NAME", "build_server", "rpc_error", "serve_stdio"]

SERVER_NAME = "ctxline"


def build_server(ctx: Context, *, todo: bool = True) -> Server[Any]:
    """An MCP server answering ctxline's tools for the timeline of ``ctx``."""
    specs = tool_specs(ctx, todo=todo)
    names = {spec.name for spec in specs}
    counter = iter(range(1, 1 << 62))

    async def list_tools(
        _rc: ServerRequestContext[Any], _params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name=spec.name,
                    description=spec.description,
                    input_schema=dict(spec.parameters) or {"type": "object", "properties": {}},
                )
                for spec in specs
            ]
        )

    async def call_tool(
        _rc: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        if params.name not in names:
            raise MCPError(
                INVALID_PARAMS,
                f"unknown tool {escape(params.name)[:200]!r}; this server has {', '.join(sorted(names))}",
            )
        ctx.refresh()
        call = ToolCall(f"mcp-{next(counter)}", params.name, dict(params.arguments or {}))
        result = run_tool(ctx, call)
        assert result is not None
        return types.CallToolResult(
            content=[types.TextContent(text=result.content)], is_error=result.is_error
        )

    return Server(
        SERVER_NAME,
        version=__version__,
        instructions=(
            f"ctxline's tools for session {ctx.session!r}: read saved tool outputs back"
            " (read_result), search the session's history (search_history), keep a TODO list."
        ),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def rpc_error(line: str) -> str | None:
    """The JSON-RPC error answer to a malformed line (None: a valid message, or blank).

    Not JSON: ``-32700`` (parse error); JSON that is not one JSON-RPC message: ``-32600``
    (invalid request), with the line's ``id`` when it has a usable one — so a client is
    always answered instead of waiting forever (issue 24).
    """
    if not line.strip():
        return None
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError):
        code, message, ident = PARSE_ERROR, "Parse error: the line is not JSON", None
    else:
        try:
            types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        except Exception:
            raw = obj.get("id") if isinstance(obj, dict) else None
            ident = raw if isinstance(raw, str | int) and not isinstance(raw, bool) else None
            code, message = INVALID_REQUEST, "Invalid request: not a JSON-RPC 2.0 message"
        else:
            return None
    error = {"jsonrpc": "2.0", "id": ident, "error": {"code": code, "message": message}}
    return json.dumps(error, separators=(",", ":"))


class _Checked:
    """stdin lines for the SDK's transport; a malformed one is answered here and dropped."""

    def __init__(self, lines: Any, out: Any) -> None:
        self.lines, self.out = lines, out

    def __aiter__(self) -> AsyncIterator[str]:
        return self._iter()

    async def _iter(self) -> AsyncIterator[str]:
        async for line in self.lines:
            error = rpc_error(line)
            if error is None:
                yield line
            else:
                await self.out.write(error + "\n")
                await self.out.flush()


async def serve_stdio(ctx: Context, *, todo: bool = True) -> None:
    """Serve :func:`build_server` over stdin/stdout until the client closes them; a
    malformed line gets a JSON-RPC error answer (:func:`rpc_error`)."""
    server = build_server(ctx, todo=todo)
    raw_in = TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace")
    out = anyio.wrap_file(TextIOWrapper(sys.stdout.buffer, encoding="utf-8", write_through=True))
    stdin = cast("anyio.AsyncFile[str]", _Checked(anyio.wrap_file(raw_in), out))
    async with stdio_server(stdin, out) as (read, write):
        await server.run(read, write, server.create_initialization_options())
