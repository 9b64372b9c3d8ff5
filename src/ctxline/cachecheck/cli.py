"""The body of ``ctxline doctor --cache`` (kept here so the doctor command stays small)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from ctxline.cachecheck import check_path, report_lines
from ctxline.cli.common import one_line_errors
from ctxline.pricing import load_table

__all__ = ["run_cache_doctor"]


def run_cache_doctor(path: Path, html: Path | None, prices: Path | None, as_json: bool) -> None:
    """Print the cache report of ``path`` (and write ``html``); errors are one line, exit 2."""
    with one_line_errors():
        table = load_table(prices) if prices is not None else None
        reports = check_path(path, table)
        if html is not None:
            from ctxline.cachecheck.html import write_cache_html

            write_cache_html(html, reports)
    if as_json:
        click.echo(
            json.dumps([r.to_json() for r in reports] if len(reports) > 1 else reports[0].to_json())
        )
        return
    for n, report in enumerate(reports):
        if n:
            click.echo("")
        for line in report_lines(report):
            click.echo(line)
    if html is not None:
        click.echo(f"wrote {html}")
