"""The ``ctxline`` command: import real agent logs, inspect and export the record.

Every error is one line on stderr and exit code 2 (3 when protected content alone
exceeds the input limit); nothing is half-written.

    ctxline import examples/data/tau-bench/airline-sample.json
    ctxline show --session tau-bench/airline/0-0
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from ctxline import __version__
from ctxline.cli import stream
from ctxline.cli.common import CtxlineGroup, cell, db_option, iter_jsonl, one_line, one_line_errors
from ctxline.cli.lazy import LazyCommands
from ctxline.errors import (
    Conflict,
    UnknownSession,
    UnknownTimeline,
    ValidationError,
)
from ctxline.importers import FORMATS
from ctxline.importers.ingest import FIRST_CHUNK, ImportProgress, import_stream
from ctxline.importers.stream import StreamedSession, read_ahead, stream_tree
from ctxline.record.codec import CANONICAL_VERSION, canonical_json, format_at, stored_to_json
from ctxline.record.describe import describe
from ctxline.record.events import (
    Pending,
    StoredEvent,
)
from ctxline.record.jsonvalue import JsonObject
from ctxline.record.parse import pending_from_json
from ctxline.record.store import MAIN, Store, open_store
from ctxline.record.store.base import check_pairing
from ctxline.record.timeline import TimelineWriter
from ctxline.restore import refuse_own_kinds_at, restore_events

__all__ = ["main"]


def _open(db: str, *, read_only: bool = False) -> Store:
    return open_store(db, read_only=read_only)


# Imported when looked up (run, --help), not at start: ``ctxline append`` of a 50 MB line
# does not carry the runner, pydantic and asyncio (ctxline.cli.lazy).
_LAZY = {
    "prepare": "ctxline.cli.prepare:prepare_cmd",
    "requests": "ctxline.cli.prepare:requests_cmd",
    "request": "ctxline.cli.prepare:request_cmd",
    "replay": "ctxline.cli.replay:replay_cmd",
    "blob": "ctxline.cli.blob:blob_cmd",
    "search": "ctxline.cli.search:search_cmd",
    "doctor": "ctxline.cli.doctor:doctor_cmd",
    "eval": "ctxline.cli.eval:eval_cmd",
    "chat": "ctxline.cli.chat:chat_cmd",
    "run": "ctxline.cli.run:run_cmd",
    "mcp": "ctxline.cli.mcp:mcp_cmd",
    "serve": "ctxline.cli.serve:serve_cmd",
    "tools": "ctxline.cli.tools:tools_group",
    "skills": "ctxline.cli.skills:skills_group",
    "memory": "ctxline.cli.memory:memory_group",
}


@click.group(
    cls=CtxlineGroup,
    commands=LazyCommands(_LAZY),
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.version_option(__version__, prog_name="ctxline")
def main() -> None:
    """ctxline: a durable record of what your agent did, and the exact request it sees."""


@main.command("import")
@click.argument("path", type=click.Path(path_type=Path))
@db_option
@click.option(
    "--format",
    "fmt",
    default="auto",
    show_default=True,
    help=f"auto or one of: {', '.join(FORMATS)}",
)
@click.option("--json", "as_json", is_flag=True, help="Print the imported session ids as JSON.")
@click.option(
    "--trusted",
    is_flag=True,
    help="Restore a ctxline export: its own kinds (guide, tools, request, reduction, status)"
    " are checked and re-derived instead of refused.",
)
@click.option(
    "--progress/--no-progress",
    default=None,
    help="Progress lines on stderr as the import goes  [default: when stderr is a terminal]",
)
def import_cmd(
    path: Path, db: str, fmt: str, as_json: bool, trusted: bool, progress: bool | None
) -> None:
    """Import a recorded agent session (or a file of many) into the record.

    Events are read, checked and appended a chunk at a time in one transaction: progress
    goes to stderr as it goes, the sessions to stdout once all of them are committed; an
    error anywhere (a bad line 15,000 events in) leaves nothing of the import behind."""
    if progress is None:
        progress = sys.stderr.isatty()
    with one_line_errors():
        sessions = stream_tree(
            path, fmt, skipped=lambda _file, exc: click.echo(f"skipped: {exc}", err=True)
        )
        # the first chunk is read before the store opens: a bad small file creates nothing
        restored = read_ahead((_restored(s, trusted) for s in sessions), FIRST_CHUNK)
        store = _open(db)
        try:
            results = import_stream(
                store,
                restored,
                authority="ctxline" if trusted else "app",
                progress=_progress if progress else None,
            )
        finally:
            store.close()
    if as_json:
        click.echo(json.dumps([r.session for r in results]))
        return
    console = Console()
    added = sum(r.appended for r in results)
    for r in results:
        note = f"{r.appended} new" if r.appended else "already imported"
        console.print(f"[bold]{r.session}[/bold]  {r.events} events ({note})", highlight=False)
    console.print(f"{len(results)} session(s), {added} event(s) appended to {db}", highlight=False)


def _restored(s: StreamedSession, trusted: bool) -> StreamedSession:
    events = restore_events(s.events, trusted=trusted, session=s.id, file=s.file)
    return StreamedSession(s.id, events, s.meta, s.stored_meta)


_PROGRESS_EVERY = 10_000


def _progress(p: ImportProgress) -> None:
    """A line on stderr at a session's first chunk, every 10,000 events, and its end."""
    name = stream.plain(p.session)
    if p.done:
        click.echo(f"{name}: {p.read:,} events read, {p.appended:,} new", err=True)
    elif p.read == FIRST_CHUNK or p.read % _PROGRESS_EVERY == 0:
        click.echo(f"{name}: {p.read:,} events read ({p.appended:,} new so far)...", err=True)


@main.command("sessions")
@db_option
@click.option("--json", "as_json", is_flag=True)
def sessions_cmd(db: str, as_json: bool) -> None:
    """List sessions with their event counts."""
    with one_line_errors():
        store = _open(db, read_only=True)
        infos = store.sessions()
        store.close()
    if as_json:
        rows = [
            {
                "session": s.id,
                "events": s.events,
                "timelines": s.timelines,
                "created_at": format_at(s.created_at),
            }
            for s in infos
        ]
        click.echo(json.dumps(rows, ensure_ascii=False))
        return
    table = Table("session", "events", "timelines", "created")
    for s in infos:
        table.add_row(cell(s.id), str(s.events), str(s.timelines), format_at(s.created_at)[:19])
    Console().print(table)


@main.command("export")
@click.option("--session", required=True)
@click.option("--timeline", default=MAIN, show_default=True)
@db_option
def export_cmd(session: str, timeline: str, db: str) -> None:
    """Print a timeline as canonical JSONL (a session header line, then one event per line)."""
    with one_line_errors():
        store = _open(db, read_only=True)
        try:
            info = store.session(session)
            store.timeline(session, timeline)  # an unknown timeline fails before any output
            header: JsonObject = {
                "kind": "ctxline.session",
                "session": session,
                "timeline": timeline,
                "version": CANONICAL_VERSION,
                "meta": info.meta,
            }
            out = sys.stdout.buffer
            out.write(canonical_json(header) + b"\n")
            for n, ev in enumerate(stream.events(store, session, timeline), 1):
                out.write(canonical_json(stored_to_json(ev)) + b"\n")  # written as it is read
                if n % stream.CHUNK == 0:
                    out.flush()
            out.flush()
        finally:
            store.close()


def _has_session(store: Store, session: str) -> bool:
    try:
        store.session(session)
    except UnknownSession:
        return False
    return True


@main.command("append")
@click.option("--session", required=True)
@click.option("--timeline", default=MAIN, show_default=True)
@click.option(
    "--expected-seq", type=int, default=None, help="Fail with a conflict unless the head is this."
)
@click.option("--create", is_flag=True, help="Create the session if it does not exist.")
@db_option
@click.option("--json", "as_json", is_flag=True, help="Print the stored events as JSONL.")
def append_cmd(
    session: str, timeline: str, expected_seq: int | None, create: bool, db: str, as_json: bool
) -> None:
    """Append canonical JSONL events from stdin, atomically (all lines or none)."""
    with one_line_errors():
        batch: list[Pending] = []
        for number, obj in iter_jsonl(sys.stdin.buffer, "stdin"):
            if isinstance(obj, dict) and obj.get("kind") == "ctxline.session":
                continue
            try:
                batch.append(pending_from_json(obj, line=number))
            except ValidationError as exc:
                raise exc.located(source="stdin") from None
            refuse_own_kinds_at(batch[-1], line=number, source="stdin")
        if not batch:
            raise ValidationError("no events on stdin", source="stdin")
        store = _open(db)
        try:
            if create and not _has_session(store, session):
                # check before creating, so a refused append leaves no empty session behind
                if timeline != MAIN:
                    raise UnknownTimeline(session, timeline)
                if expected_seq not in (None, 0):
                    raise Conflict(session, timeline, expected_seq, 0)
                check_pairing(batch, lambda _call: False)
                store.create_session(session, exist_ok=True)
            writer = TimelineWriter(store, session, timeline)
            stored = writer.append(batch, expected_seq=expected_seq)
        finally:
            store.close()
    if as_json:
        for ev in stored:
            click.echo(canonical_json(stored_to_json(ev)).decode())
    else:
        click.echo(
            f"appended {len(stored)} event(s) to {session}/{timeline}: seq {stored[0].seq}-{stored[-1].seq}"
        )


KIND_STYLE = {
    "user.message": "bold green",
    "assistant.message": "bold cyan",
    "tool.result": "yellow",
    "system.message": "magenta",
}


@main.command("show")
@click.option("--session", required=True)
@click.option("--timeline", default=MAIN, show_default=True)
@db_option
@click.option(
    "--width",
    type=click.IntRange(1, 1_000_000),
    default=100,
    show_default=True,
    help="Characters of text per event.",
)
@click.option(
    "--since",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Show the events after this seq.",
)
@click.option(
    "--limit", type=click.IntRange(min=1), default=None, help="Show at most this many events."
)
def show_cmd(
    session: str, timeline: str, db: str, width: int, since: int, limit: int | None
) -> None:
    """Print a readable timeline (a table; over 500 events, lines printed as they are read)."""
    with one_line_errors():
        store = _open(db, read_only=True)
        try:
            store.session(session)  # damaged session metadata is exit 2 here, as export's is
            info = store.timeline(session, timeline)
            count = max(0, info.head - since)  # a timeline is gap-free from seq 1
            count = count if limit is None else min(count, limit)
            title = f"{session} / {timeline}: {count} events"
            if since or limit is not None:
                title += f" after seq {since} (of {info.head})"
            if info.parent is not None:
                title += f" (forked from {info.parent} at seq {info.fork_seq})"
            shown = stream.events(store, session, timeline, after_seq=since, limit=limit)
            if count <= stream.TABLE_ROWS:
                _show_table(title, list(shown), width)
            else:
                _show_lines(title, shown, width, len(str(info.head)))
        finally:
            store.close()


def _show_table(title: str, events: list[StoredEvent], width: int) -> None:
    table = Table(title=Text(one_line(title)), show_lines=False)
    table.add_column("seq", justify="right")
    table.add_column("at")
    table.add_column("kind")
    table.add_column("text", overflow="fold")
    for ev in events:
        table.add_row(
            str(ev.seq),
            format_at(ev.at)[:19].replace("T", " "),
            cell(ev.kind, KIND_STYLE.get(ev.kind, "")),
            cell(describe(ev.event, width)),
        )
    Console().print(table)


def _show_lines(title: str, events: Iterator[StoredEvent], width: int, digits: int) -> None:
    """One line per event, written as the chunks are read (no layout of the whole)."""
    out = sys.stdout
    out.write(stream.plain(title) + "\n")
    out.write(f"{'seq':>{digits}}  {'at':<19}  {'kind':<17}  text\n")
    for n, ev in enumerate(events, 1):
        at = format_at(ev.at)[:19].replace("T", " ")
        text = stream.plain(describe(ev.event, width))
        out.write(f"{ev.seq:>{digits}}  {at:<19}  {ev.kind:<17}  {text}\n")
        if n % stream.CHUNK == 0:
            out.flush()
    out.flush()


@main.command("fork")
@click.option("--session", required=True)
@click.option("--timeline", default=MAIN, show_default=True, help="The parent timeline.")
@click.option(
    "--at", "at_seq", type=int, required=True, help="The last parent seq the branch sees."
)
@click.option("--name", required=True)
@db_option
def fork_cmd(session: str, timeline: str, at_seq: int, name: str, db: str) -> None:
    """Create a branch that sees the parent's events up to --at, then its own."""
    with one_line_errors():
        store = _open(db)
        info = store.fork(session, timeline, at_seq, name)
        store.close()
    click.echo(
        f"created timeline {info.name} of {session}: forked from {info.parent} at seq {info.fork_seq}"
    )


if __name__ == "__main__":  # pragma: no cover
    main()
