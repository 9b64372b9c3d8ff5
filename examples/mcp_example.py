"""ctxline's tools over MCP, driven by the official mcp SDK's client (in-process, offline).

The same server runs over stdio with ``ctxline mcp --db ctxline.db --session ID``.

    python examples/mcp_example.py
"""

from __future__ import annotations

import anyio
from mcp import Client
from mcp_types import TextContent

from ctxline import AssistantMessage, Context, MemoryStore, ToolCall, ToolResult, UserMessage
from ctxline.integrations.mcp_server import build_server


async def main() -> None:
    store = MemoryStore()
    agent = Context(store, "mcp-demo")
    agent.append(
        UserMessage("Why did the deploy fail?"),
        AssistantMessage(tool_calls=(ToolCall("c1", "deploy_log"),)),
        ToolResult(
            "c1",
            "step 3/9 ok\n" * 300 + "ERROR: certificate expired for api.example.com",
            "deploy_log",
        ),
    )
    async with Client(build_server(Context(store, "mcp-demo", create=False))) as client:
        tools = await client.list_tools()
        print("tools:", [t.name for t in tools.tools])
        hits = await client.call_tool("search_history", {"query": "certificate"})
        text = hits.content[0].text if isinstance(hits.content[0], TextContent) else ""
        print("search:", text.splitlines()[0])
        handle = text.split("handle ")[1].split(" ")[0]
        page = await client.call_tool("read_result", {"handle": handle, "page": 1})
        body = page.content[0].text if isinstance(page.content[0], TextContent) else ""
        print("read_result:", body.splitlines()[0])
        todo = await client.call_tool(
            "todo_write", {"items": [{"id": "1", "content": "Renew the certificate"}]}
        )
        print(
            "todo:",
            todo.content[0].text.splitlines()[0]
            if isinstance(todo.content[0], TextContent)
            else "",
        )
        bad = await client.call_tool("todo_update", {"id": "9", "status": "completed"})
        print("error is flagged:", bad.is_error)
    print("record:", [e.kind for e in store.read("mcp-demo")])


if __name__ == "__main__":
    anyio.run(main)
