"""CLI command ``blob``: read a saved (offloaded) tool output back from the record.

The same read-back the model gets through ``read_result``: verified bytes, never a
re-run. A missing or damaged blob is one line on stderr and exit code 2.

    ctxline blob sha256:3f… --page 2
    ctxline blob sha256:3f… --raw > output.txt
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ctxline.cli.common import db_option, fail, one_line_errors
from ctxline.cli.options import harden
from ctxline.errors import ValidationError
from ctxline.record.blobs import parse_ref
from ctxline.record.store import open_store
from ctxline.tools.read_result import PAGE_CHARS, read_result, render_page

__all__ = ["blob_cmd"]


def _check_db(db: str) -> None:
    """A plain path must exist: reading a blob never creates an empty database."""
    if db in (":memory:", "memory:", "memory://") or "://" in db:
        return
    if not Path(db).exists():
        raise ValidationError(f"no such database {db}", field="db")


@click.command("blob")
@click.argument("handle")
@click.option("--page", type=click.IntRange(min=1), default=1, show_default=True)
@click.option(
    "--page-chars",
    type=click.IntRange(min=1),
    default=PAGE_CHARS,
    show_default=True,
    help="Characters per page (the model's read_result uses the default).",
)
@click.option("--raw", is_flag=True, help="Write the whole saved bytes to stdout, unpaged.")
@db_option
def blob_cmd(handle: str, page: int, page_chars: int, raw: bool, db: str) -> None:
    """Print a saved tool output by its handle (sha256:…), one page at a time."""
    with one_line_errors():
        parse_ref(handle.strip())
        _check_db(db)
        store = open_store(db, read_only=True)
        try:
            if raw:
                data = store.blobs.get(handle.strip())
            else:
                result = read_result(store.blobs, handle, page, page_chars=page_chars)
        finally:
            store.close()
    if raw:
        out = sys.stdout.buffer
        out.write(data)
        out.flush()
        return
    if not result.ok:
        fail(result.message)
    click.echo(render_page(result))


# hardened where defined, as the ctxline group would: imported directly, it refuses the same
harden(blob_cmd)
