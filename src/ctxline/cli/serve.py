"""``ctxline serve``: the inspector — what the model saw at every step, what changed, what it cost.

Opens the record read-only (it never writes, and never creates a database at a
mistyped path) and serves a local web app; by default on 127.0.0.1, so only this
machine can connect.

    ctxline serve --db ctxline.db
    ctxline serve --db postgresql://ctxline@db.internal/ctxline --port 9000
"""

from __future__ import annotations

import importlib.util

import click

from ctxline.cli.common import db_option, fail, one_line_errors
from ctxline.cli.options import harden

__all__ = ["WEB_MODULES", "serve_cmd"]

WEB_MODULES = ("starlette", "jinja2", "uvicorn")
LOOPBACK = ("127.0.0.1", "localhost", "::1", "[::1]")


def missing_web() -> list[str]:
    """The web extra's modules that are not installed."""
    return [name for name in WEB_MODULES if importlib.util.find_spec(name) is None]


@click.command("serve")
@db_option
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True)
def serve_cmd(db: str, host: str, port: int) -> None:
    """Serve the inspector over a record (read-only; 127.0.0.1 unless --host says otherwise)."""
    missing = missing_web()
    if missing:
        fail(
            f"ctxline serve needs the web extra ({', '.join(missing)} missing): pip install 'ctxline[web]'"
        )
    import uvicorn

    from ctxline.web.app import create_app
    from ctxline.web.record import open_record
    from ctxline.web.server import bind

    with one_line_errors():
        record = open_record(db)
        try:
            sock = bind(host, port)
        except OSError as exc:
            fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}")
            return
        actual = sock.getsockname()[1]
        shown = f"[{host.strip('[]')}]" if ":" in host else host
        click.echo(
            f"ctxline inspector on http://{shown}:{actual}/ — {record.describe}, opened read-only"
        )
        if host in LOOPBACK:
            click.echo(f"bound to {host}: only this machine can connect (--host to change it)")
        else:
            click.echo(
                f"warning: bound to {host}: other machines can connect and read this record",
                err=True,
            )
        server = uvicorn.Server(
            uvicorn.Config(create_app(record, host=host), log_level="warning", lifespan="off")
        )
        server.run(sockets=[sock])


# hardened where defined, as the ctxline group would: imported directly, it refuses the same
harden(serve_cmd)
