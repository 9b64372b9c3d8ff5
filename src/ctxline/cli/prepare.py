"""CLI commands of the projection: ``prepare``, ``requests`` and ``request``.

ctxline prepare --session tau-bench/airline/0-0 --provider anthropic --json
ctxline requests --session tau-bench/airline/0-0
ctxline request --session tau-bench/airline/0-0 --step 1 > body.json
"""

from __future__ import annotations

import itertools
import json
import sys
from collections.abc import Iterator

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from ctxline.cli import stream
from ctxline.cli.common import (
    cell,
    db_option,
    model_options,
    one_line_errors,
    prepare_options,
    status_config,
    status_options,
)
from ctxline.cli.options import harden
from ctxline.context import Context
from ctxline.errors import ValidationError
from ctxline.record.codec import canonical_json, parse_at
from ctxline.record.events import RequestHeader, StoredEvent
from ctxline.record.jsonvalue import JsonObject
from ctxline.record.store import MAIN, open_store
from ctxline.sources.statusbar import parse_status_mode

__all__ = ["prepare_cmd", "request_cmd", "requests_cmd"]


@click.command("prepare")
@click.option("--session", required=True)
@click.option("--timeline", default=MAIN, show_default=True)
@db_option
@model_options
@click.option(
    "--now", "now_text", default=None, help="The request time, ISO-8601 with a zone (default: now)."
)
@status_options(
    "auto", "Where the status bar goes: the tail (replace), history (append), or chosen by cost."
)
@click.option("--no-log", is_flag=True, help="Do not log the request.")
@click.option("--json", "as_json", is_flag=True, help='Print {"request": body, "report": {...}}.')
def prepare_cmd(
    session: str,
    timeline: str,
    db: str,
    provider: str,
    model: str | None,
    context_window: int,
    max_output: int,
    tokenizer: str,
    now_text: str | None,
    status_mode: str,
    tz: str | None,
    no_log: bool,
    as_json: bool,
) -> None:
    """Prepare the next request of a timeline, log it, and print it with its report."""
    with one_line_errors():
        status = status_config(status_mode, tz)
        options = prepare_options(provider, model, context_window, max_output, tokenizer)
        now = None if now_text is None else parse_at(now_text, where="--now")
        store = open_store(db, create=False, read_only=no_log)  # --no-log only reads
        store.session(session)
        ctx = Context(
            store,
            session,
            timeline,
            options=options,
            create=False,
            status=status,
            status_mode=parse_status_mode(status_mode),
        )
        prep = ctx.prepare(now=now, log=not no_log)
        store.close()
    if as_json:
        out = sys.stdout.buffer
        out.write(
            b'{"report":'
            + canonical_json(prep.report.to_json())
            + b',"request":'
            + prep.body_bytes
            + b"}\n"
        )
        out.flush()
        return
    report = prep.report
    tokens = report["tokens"]
    budget = report["budget"]
    prefix = report["prefix"]
    assert isinstance(tokens, dict)
    assert isinstance(budget, dict)
    assert isinstance(prefix, dict)
    console = Console()
    console.print(
        f"step {report['step']}  {report['messages']} messages  {prep.sha256}",
        highlight=False,
    )
    table = Table("section", "tokens")
    for name in ("tools", "system", "history", "tail", "total"):
        table.add_row(name, f"{tokens[name]:,}")
    console.print(table)
    console.print(
        f"input limit {budget['input_limit']:,}  pressure line {budget['pressure_line']:,}"
        f"  target {budget['target']:,}  shared with previous request {prefix['shared_tokens']:,} tokens",
        highlight=False,
    )


@click.command("requests")
@click.option("--session", required=True)
@click.option("--timeline", default=MAIN, show_default=True)
@db_option
@click.option("--json", "as_json", is_flag=True)
@click.option(
    "--since",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="List the requests after this step.",
)
@click.option(
    "--limit", type=click.IntRange(min=1), default=None, help="List at most this many requests."
)
def requests_cmd(
    session: str, timeline: str, db: str, as_json: bool, since: int, limit: int | None
) -> None:
    """List the logged requests of a timeline: step, seq, sha256 and tokens.

    Up to 500 print as a table; more are listed line by line as they are read.
    """
    with one_line_errors():
        store = open_store(db, read_only=True)
        try:
            store.timeline(session, timeline)
            rows = _request_rows(stream.events(store, session, timeline), since, limit)
            if as_json:  # the bytes of json.dumps(list), written as the rows are read
                out = sys.stdout
                out.write("[")
                for n, row in enumerate(rows):
                    out.write((", " if n else "") + json.dumps(row))
                out.write("]\n")
                out.flush()
                return
            first: list[JsonObject] = []
            for row in rows:
                first.append(row)
                if len(first) > stream.TABLE_ROWS:
                    _request_lines(itertools.chain(first, rows))
                    return
            _request_table(first)
        finally:
            store.close()


def _request_rows(
    events: Iterator[StoredEvent], since: int, limit: int | None
) -> Iterator[JsonObject]:
    n = 0
    for ev in events:
        h = ev.event
        if not isinstance(h, RequestHeader) or h.step <= since:
            continue
        tokens = h.report.get("tokens")
        yield {
            "step": h.step,
            "upto_seq": h.upto_seq,
            "sha256": h.sha256,
            "tokens": tokens.get("total") if isinstance(tokens, dict) else None,
            "provider": h.options.get("provider"),
        }
        n += 1
        if limit is not None and n >= limit:
            return


def _tokens(value: object) -> Text | str:
    return f"{value:,}" if isinstance(value, int) else cell(str(value))


def _request_table(rows: list[JsonObject]) -> None:
    table = Table("step", "upto seq", "provider", "tokens", "sha256")
    for r in rows:
        table.add_row(
            str(r["step"]),
            str(r["upto_seq"]),
            cell(r["provider"]),
            _tokens(r["tokens"]),
            cell(r["sha256"]),
        )
    Console().print(table)


def _request_lines(rows: Iterator[JsonObject]) -> None:
    """One line per request, written as the record is read (no layout of the whole)."""
    out = sys.stdout
    out.write(f"{'step':>7}  {'upto seq':>9}  {'provider':<9}  {'tokens':>9}  sha256\n")
    for n, r in enumerate(rows, 1):
        provider = stream.plain(str(r["provider"]))
        out.write(
            f"{r['step']:>7}  {r['upto_seq']:>9}  {provider:<9}  {_tokens(r['tokens']):>9}"
            f"  {stream.plain(str(r['sha256']))}\n"
        )
        if n % stream.CHUNK == 0:
            out.flush()
    out.flush()


@click.command("request")
@click.option("--session", required=True)
@click.option("--timeline", default=MAIN, show_default=True)
@click.option("--step", type=int, required=True)
@db_option
def request_cmd(session: str, timeline: str, step: int, db: str) -> None:
    """Rebuild logged step N from the record and print its body (checked against its sha256)."""
    with one_line_errors():
        store = open_store(db, read_only=True)
        store.timeline(session, timeline)
        ctx = Context(store, session, timeline, create=False)
        if step < 1:
            raise ValidationError("steps start at 1", field="--step")
        body = ctx.rebuild(step)
        whys = ctx.redactions(step)
        store.close()
    if whys:
        click.echo(
            f"note: step {step} was redacted since it was sent ({'; '.join(whys)[:300]}): these"
            " bytes show tombstones, not what was sent",
            err=True,
        )
    out = sys.stdout.buffer
    out.write(body + (b"\n" if sys.stdout.isatty() else b""))  # piped: exactly the logged bytes
    out.flush()


# hardened where defined, as the ctxline group would: imported directly, it refuses the same
harden(prepare_cmd)
harden(requests_cmd)
harden(request_cmd)
