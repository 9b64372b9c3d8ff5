"""CLI commands to look after a record: ``doctor`` and ``search``.

Why: ``doctor`` is how someone finds out, before trusting a record, whether its pages,
WAL files, timeline heads, blobs and search index are sound (exit 0 healthy, 2 when
something is wrong; it changes nothing). ``search`` shows what the built-in
``search_history`` tool returns to the model, from the shell.

    ctxline doctor --db ctxline.db --json
    ctxline search --session tau-bench/airline/0-0 "cancel reservation"
"""

from __future__ import annotations

import json
import sys

import click

from ctxline.cli.common import db_option, fail, one_line_errors
from ctxline.record.doctor import run_doctor
from ctxline.record.store import MAIN, open_store
from ctxline.tools.search_history import DEFAULT_LIMIT, render_hits

__all__ = ["doctor_cmd", "search_cmd"]


@click.command("doctor")
@db_option
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON object.")
def doctor_cmd(db: str, as_json: bool) -> None:
    """Check a record's integrity and say what is wrong (exit 0 healthy, 2 problems).

    SQLite: header, WAL files, every page, timeline heads, every blob re-hashed and the
    search index. PostgreSQL: the same through the server. Nothing is changed.
    """
    with one_line_errors():
        report = run_doctor(db)
    if as_json:
        click.echo(json.dumps(report.to_json(), ensure_ascii=False))
    else:
        for line in report.lines():
            click.echo(line)
    if not report.healthy:
        fail(f"{len(report.problems)} problem(s) found in {report.db}")
    sys.exit(0)


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
