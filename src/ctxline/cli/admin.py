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
from pathlib import Path

import click

from ctxline.cli.common import db_option, fail, one_line_errors
from ctxline.record.doctor import run_doctor
from ctxline.record.store import MAIN, open_store
from ctxline.tools.search_history import DEFAULT_LIMIT, render_hits

__all__ = ["doctor_cmd", "search_cmd"]


@click.command("doctor")
@db_option
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON object.")
@click.option(
    "--cache",
    "cache_path",
    type=click.Path(path_type=Path),
    default=None,
    help="Check the prompt cache of another agent's logs instead (Claude Code JSONL, a file or folder).",
)
@click.option(
    "--html",
    "html_path",
    type=click.Path(path_type=Path),
    default=None,
    help="With --cache: also write an HTML page.",
)
@click.option(
    "--prices",
    type=click.Path(path_type=Path),
    default=None,
    help="With --cache: a price table (pricing.json's format).",
)
def doctor_cmd(
    db: str, as_json: bool, cache_path: Path | None, html_path: Path | None, prices: Path | None
) -> None:
    """Check a record's integrity and say what is wrong (exit 0 healthy, 2 problems).

    SQLite: header, WAL files, every page, timeline heads, every blob re-hashed and the
    search index. PostgreSQL: the same through the server. Nothing is changed.
    With --cache: every model call's cache read / write / uncached tokens, every miss
    with its likely cause and cost (exit 0).
    """
    if cache_path is not None:  # the logic lives in ctxline.cachecheck
        from ctxline.cachecheck.cli import run_cache_doctor

        run_cache_doctor(cache_path, html_path, prices, as_json)
        return
    if html_path is not None or prices is not None:
        fail("--html and --prices go with --cache")
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
