"""``ctxline mcp``: serve ctxline's tools for one recorded session over MCP (stdio).

Why: any MCP client — a desktop assistant, an IDE, an agent framework's MCP support —
gets ``read_result``, ``search_history`` and the todo tools of a session its agent
records into, without linking ctxline in. Needs the ``mcp`` extra.

    ctxline mcp --db ctxline.db --session support-42
"""

from __future__ import annotations

import click

from ctxline.cli.common import db_option, fail, one_line_errors
from ctxline.cli.options import harden
from ctxline.context import Context
from ctxline.models.base import MissingExtra
from ctxline.record.store import MAIN, open_store

__all__ = ["mcp_cmd"]


@click.command("mcp")
@db_option
@click.option("--session", required=True, help="The session whose tools to serve.")
@click.option("--timeline", default=MAIN, show_default=True)
@click.option("--todo/--no-todo", default=True, show_default=True, help="Serve the todo tools.")
def mcp_cmd(db: str, session: str, timeline: str, todo: bool) -> None:
    """Serve read_result, search_history and the todo tools of SESSION over stdio (MCP)."""
    try:
        import anyio

        from ctxline.integrations.mcp_server import serve_stdio
    except ImportError as exc:  # the mcp extra is not installed
        fail(str(exc) if isinstance(exc, MissingExtra) else str(MissingExtra("mcp", "mcp")))
    with one_line_errors():
        store = open_store(db, create=False)  # serving a session never creates a database
        ctx = Context(store, session, timeline, create=False)  # unknown: "did you mean"
        try:
            anyio.run(lambda: serve_stdio(ctx, todo=todo))
        finally:
            store.close()


# hardened where defined, as the ctxline group would: imported directly, it refuses the same
harden(mcp_cmd)
