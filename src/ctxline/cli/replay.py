"""``ctxline replay``: the main job — walk real trajectories and measure every request.

ctxline replay examples/data --context-window 32000 --max-output 4000
ctxline replay ../shared/data/tau-bench --context-window 8000 --max-output 1000 --json

Billed input is reported in two pricing styles: OpenAI's (cached reads at ``--alpha``,
everything else at 1.0) and Anthropic's (cached reads at ``--alpha``, the rest written
to the cache at ``--write-premium``, 1.25 for the 5-minute cache).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ctxline.cli.common import (
    db_option,
    finite_float,
    model_options,
    one_line_errors,
    prepare_options,
    status_config,
    status_options,
)
from ctxline.cli.options import harden
from ctxline.errors import ValidationError
from ctxline.importers import FORMATS, load_tree
from ctxline.record.jsonvalue import JsonValue
from ctxline.record.store import Store, open_store
from ctxline.replay import ANTHROPIC_WRITE, ReplayStats, model_calls, replay_session
from ctxline.sources.statusbar import parse_status_mode
from ctxline.tokens.counters import get_counter

__all__ = ["replay_cmd"]


def _free_id(store: Store, base: str) -> str:
    existing = {s.id for s in store.sessions()}
    n = 1
    while f"{base}@replay{n}" in existing:
        n += 1
    return f"{base}@replay{n}"


@click.command("replay")
@click.argument("path", type=click.Path(path_type=Path))
@click.option(
    "--format",
    "fmt",
    default="auto",
    show_default=True,
    help=f"auto or one of: {', '.join(FORMATS)}",
)
@db_option
@model_options
@click.option(
    "--pressure", type=float, default=None, help="Pressure line as a share of the input limit."
)
@click.option(
    "--target",
    type=float,
    default=None,
    help="Target after a reduction, as a share of the input limit.",
)
@click.option(
    "--offload-tokens",
    type=int,
    default=None,
    help="Results over this many tokens show as previews.",
)
@click.option(
    "--fresh-tokens",
    type=int,
    default=None,
    help="The newest results are whole up to this many tokens (default: 5 % of the input limit, at least 1,000 and at most 25,000).",
)
@status_options(
    "off", "Add ctxline's status bar to every request (off: the recorded agent had none)."
)
@click.option(
    "--alpha",
    type=finite_float(0, 1),
    default=0.1,
    show_default=True,
    help="Price of a cached input token (both pricing styles), as a share of a normal one.",
)
@click.option(
    "--write-premium",
    type=finite_float(1, 100),
    default=ANTHROPIC_WRITE,
    show_default=True,
    help="Price of a token written to the cache in the Anthropic pricing style (OpenAI's is 1.0).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one summary object.")
@click.option(
    "--report",
    "report_path",
    type=click.Path(path_type=Path),
    default=None,
    help="Write an HTML report.",
)
def replay_cmd(
    path: Path,
    fmt: str,
    db: str,
    provider: str,
    model: str | None,
    context_window: int,
    max_output: int,
    tokenizer: str,
    pressure: float | None,
    target: float | None,
    offload_tokens: int | None,
    fresh_tokens: int | None,
    status_mode: str,
    tz: str | None,
    alpha: float,
    write_premium: float,
    as_json: bool,
    report_path: Path | None,
) -> None:
    """Import recorded trajectories and prepare every request their agent made, with figures."""
    with one_line_errors():
        options = prepare_options(
            provider,
            model,
            context_window,
            max_output,
            tokenizer,
            pressure=pressure,
            target=target,
            offload_tokens=offload_tokens,
        )
        if fresh_tokens is not None:
            options = replace(options, fresh_tokens=fresh_tokens)
        if not 0 <= alpha <= 1 or write_premium < 1:
            raise ValidationError("need 0 <= --alpha <= 1 and --write-premium >= 1", field="alpha")
        counter = get_counter(tokenizer)
        status = status_config(status_mode, tz)
        sessions = load_tree(path, fmt)
        if not sessions:
            raise ValidationError("no trajectories found", source=str(path))
        store = open_store(db)
        stats = ReplayStats(
            alpha=alpha, write_premium=write_premium, keep_steps=report_path is not None
        )
        steps_total = sum(1 for s in sessions for _ in model_calls(s.events))
        progress = Progress(
            TextColumn("[bold]replay"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("steps"),
            TimeElapsedColumn(),
            console=Console(stderr=True),
            disable=not sys.stderr.isatty(),
            transient=True,
        )
        with progress:
            task = progress.add_task("replay", total=steps_total)
            for session in sessions:
                stats.trajectories += 1
                sid = _free_id(store, session.id)
                for step in replay_session(
                    store,
                    session,
                    options=options,
                    counter=counter,
                    session_id=sid,
                    keep_ids=False,
                    status=status,
                    status_mode=parse_status_mode(status_mode),
                ):
                    stats.add(step)
                    progress.advance(task)
        store.close()
        summary = stats.summary()
        summary["options"] = {
            "provider": options.provider,
            "context_window": context_window,
            "max_output": max_output,
            "tokenizer": counter.name,
            "pressure": options.pressure,
            "target": options.target,
            "offload_tokens": options.offload_limit,
            "fresh_tokens": options.fresh_limit,
            "status": status_mode,
        }
        if report_path is not None:
            from ctxline.web.report_html import write_report

            write_report(
                report_path,
                summary=summary,
                per_step=stats.per_step,
                title=f"ctxline replay of {path}",
            )
    if as_json:
        click.echo(json.dumps(summary))
        return
    _print_summary(summary, db)


def _print_summary(summary: Mapping[str, JsonValue], db: str) -> None:
    table = Table("figure", "value", title="ctxline replay")
    for key, value in summary.items():
        if key == "options":
            continue
        if key == "pricing" and isinstance(value, dict):  # one short line: cache read / write
            key, value = (
                "pricing (read/write)",
                ", ".join(
                    f"{style} {p.get('cache_read')}/{p.get('cache_write')}"
                    for style, p in value.items()
                    if isinstance(p, dict)
                ),
            )
        shown = (
            json.dumps(value)
            if isinstance(value, dict)
            else f"{value:,}"
            if isinstance(value, int)
            else str(value)
        )
        table.add_row(key, shown)
    console = Console()
    console.print(table)
    console.print(
        f"sessions and every logged request are in {db}; see `ctxline requests --db {db} --session ID`",
        highlight=False,
    )


# hardened where defined, as the ctxline group would: imported directly, it refuses the same
harden(replay_cmd)
