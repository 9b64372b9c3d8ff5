"""CLI command ``search``: what the built-in ``search_history`` tool returns to the model,
from the shell.

    ctxline search --session tau-bench/airline/0-0 "cancel reservation"
"""

from __future__ import annotations

import json

import click

from ctxline.cli.common import db_option, one_line_errors
from ctxline.cli.options import harden
from ctxline.record.store import MAIN, open_store
from ctxline.tools.search_history import DEFAULT_LIMIT, render_hits

__all__ = ["search_cmd"]


@click.command("search")
@click.argument("query")
@click.option("--session", required=True)
@click.option("--timeline", default=MAIN, show_default=True)
@click.option("--limit", type=int, default=DEFAULT_LIMIT, show_default=True)
@db_option
@click.option("--json", "as_json", is_flag=True, help="Print the hits as a JSON list.")
def search_cmd(query: str, session: str, timeline: str, limit: int, db: str, as_json: bool) -> None:
    """Search a timeline's history: what the search_history tool returns to the model."""
    with one_line_errors():
        store = open_store(db, read_only=True)
        try:
            hits = store.search(session, query, timeline=timeline, limit=limit)
        finally:
            store.close()
    if as_json:
        rows = [
            {
                "seq": h.seq,
                "kind": h.kind,
                "snippet": h.snippet,
                "handle": h.handle,
                "score": h.score,
            }
            for h in hits
        ]
        click.echo(json.dumps(rows, ensure_ascii=False))
        return
    click.echo(render_hits(query, hits))


# hardened where defined, as the ctxline group would: imported directly, it refuses the same
harden(search_cmd)
