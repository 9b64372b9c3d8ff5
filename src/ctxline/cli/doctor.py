"""CLI command ``doctor``: check a record before trusting it.

Why: ``doctor`` is how someone finds out, before trusting a record, whether its pages,
WAL files, timeline heads, blobs and search index are sound (exit 0 healthy, 2 when
something is wrong; it changes nothing).

    ctxline doctor --db ctxline.db --json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from ctxline.cli.common import db_option, fail, one_line_errors
from ctxline.cli.options import harden
from ctxline.record.doctor import run_doctor

__all__ = ["doctor_cmd"]


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


# hardened where defined, as the ctxline group would: imported directly, it refuses the same
harden(doctor_cmd)
