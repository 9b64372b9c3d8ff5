"""A throwaway PostgreSQL server for the tests, and a fresh schema for each test.

The PostgreSQL tests need a real server. ``$CTXLINE_TEST_PG`` names one (CI starts
it with ``.ci/start-postgres``); without it, :func:`server_dsn` starts a private
cluster from the binaries in the machine image (``/usr/lib/postgresql/*/bin``) in a
temporary folder, on 127.0.0.1 and a free port, with trust authentication, as a
child of the test process, and stops it when that process exits. PostgreSQL refuses
to run as root, so as root the cluster is created and run as the ``postgres`` user.
When no server can be had the tests fail, saying why: they never skip.

Each test gets its own schema in one database per test run (``fresh_dsn``), so
tests never see each other's rows; the database is dropped at exit.

    dsn = fresh_dsn()          # postgresql://…?options=-csearch_path%3Dt_…
    store = PostgresStore(dsn)
"""

from __future__ import annotations

import atexit
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

if TYPE_CHECKING:
    import psycopg

__all__ = [
    "PgServer",
    "admin_connect",
    "fresh_dsn",
    "require_psycopg",
    "server_dsn",
    "start_server",
    "with_options",
]


class NoServer(RuntimeError):
    """No PostgreSQL server could be started here (no binaries, no postgres user)."""


def find_bindir() -> Path:
    """The newest ``/usr/lib/postgresql/<v>/bin`` holding initdb, or initdb's folder on PATH."""
    candidates = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: (
            int(Path(p).parent.parent.name) if Path(p).parent.parent.name.isdigit() else 0
        ),
    )
    if candidates:
        return Path(candidates[-1]).parent
    found = shutil.which("initdb")
    if found:
        return Path(found).resolve().parent
    raise NoServer("no PostgreSQL binaries (initdb) in /usr/lib/postgresql/*/bin or on PATH")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class PgServer:
    """A running private cluster (a child of this process); :meth:`stop` ends it."""

    root: Path
    port: int
    bindir: Path
    user: str | None
    proc: subprocess.Popen[bytes] | None = None

    @property
    def dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            list(args),
            user=self.user,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            cwd=self.root,
            check=False,
            timeout=120,
        )

    def log_tail(self) -> str:
        log = self.root / "server.log"
        return log.read_text(errors="replace")[-2000:] if log.exists() else ""

    def stop(self) -> None:
        """Fast shutdown (SIGINT), wait for it, then remove the cluster's files."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.root, ignore_errors=True)


def start_server() -> PgServer:
    """initdb, then run ``postgres`` in a new temporary folder; NoServer when impossible."""
    bindir = find_bindir()
    user: str | None = None
    if os.geteuid() == 0:  # PostgreSQL refuses to run as root
        try:
            pw = pwd.getpwnam("postgres")
        except KeyError:
            raise NoServer(
                "running as root and there is no postgres user to run the server"
            ) from None
        user = "postgres"
    root = Path(tempfile.mkdtemp(prefix="ctxline-pg-"))
    if user is not None:
        os.chown(root, pw.pw_uid, pw.pw_gid)
    server = PgServer(root, free_port(), bindir, user)
    data = root / "data"
    done = server._run(
        str(bindir / "initdb"),
        *("-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C"),
        "--no-sync",
    )
    if done.returncode != 0:
        server.stop()
        raise NoServer(f"initdb failed: {done.stderr.strip() or done.stdout.strip()}")
    with (root / "server.log").open("wb") as log:
        server.proc = subprocess.Popen(
            [
                str(bindir / "postgres"),
                *("-D", str(data), "-p", str(server.port)),
                *("-c", "listen_addresses=127.0.0.1", "-c", f"unix_socket_directories={root}"),
                *("-c", "max_connections=200"),
            ],
            user=user,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=root,
            start_new_session=True,  # a Ctrl-C in the terminal is for pytest, not the server
        )
    deadline = time.monotonic() + 60
    while True:
        ready = subprocess.run(
            [
                str(bindir / "pg_isready"),
                "-q",
                "-h",
                "127.0.0.1",
                "-p",
                str(server.port),
                "-U",
                "postgres",
            ],
            check=False,
        )
        if ready.returncode == 0:
            return server
        if server.proc.poll() is not None or time.monotonic() > deadline:
            tail = server.log_tail()
            server.stop()
            raise NoServer(f"postgres did not start: {tail}")
        time.sleep(0.05)


def with_options(dsn: str, **params: str) -> str:
    """``dsn`` with query parameters added (``options=-csearch_path=…``, ``dbname``)."""
    base, _, query = dsn.partition("?")
    if "dbname" in params:
        scheme, _, rest = base.partition("://")
        authority = rest.split("/", 1)[0]
        base = f"{scheme}://{authority}/{params.pop('dbname')}"
    extra = "&".join(f"{k}={quote(v, safe='')}" for k, v in params.items())
    joined = "&".join(part for part in (query, extra) if part)
    return f"{base}?{joined}" if joined else base


_server: PgServer | None = None
_server_dsn: str | None = None
_no_server: str | None = None
_test_db: str | None = None


def _need_server(reason: str) -> None:
    """Fail the test: PostgreSQL is part of the suite (the binaries are in the machine image)."""
    import pytest

    pytest.fail(f"the PostgreSQL tests need a server: {reason}")


def require_psycopg() -> None:
    """Fail when the ``postgres`` extra (part of ``dev``) is not installed."""
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError as exc:
        _need_server(f"psycopg is not installed ({exc}); pip install -e '.[dev]'")


def server_dsn() -> str:
    """$CTXLINE_TEST_PG, or a throwaway server started once per test process."""
    global _server, _server_dsn, _no_server
    if _server_dsn is not None:
        return _server_dsn
    env = os.environ.get("CTXLINE_TEST_PG")
    if env:
        _server_dsn = env
        return env
    if _no_server is None:
        try:
            _server = start_server()
        except (NoServer, OSError, subprocess.SubprocessError) as exc:
            _no_server = str(exc)
        else:
            atexit.register(_shutdown)
            _server_dsn = _server.dsn
            return _server_dsn
    _need_server(_no_server)
    raise AssertionError("unreachable")


def admin_connect(dsn: str | None = None) -> psycopg.Connection[tuple[Any, ...]]:
    """An autocommit psycopg connection (to the server's database unless ``dsn``)."""
    import psycopg

    return psycopg.connect(dsn or server_dsn(), autocommit=True)


def _test_database() -> str:
    """A database for this test run, created once and dropped at exit."""
    global _test_db
    if _test_db is None:
        name = f"ctxline_test_{os.getpid()}_{uuid.uuid4().hex[:8]}"
        try:
            with admin_connect() as conn:
                conn.execute(f'CREATE DATABASE "{name}"')
        except Exception as exc:  # the server named by $CTXLINE_TEST_PG is not reachable
            _need_server(f"cannot create a test database: {exc}")
        _test_db = name
        atexit.register(_drop_test_database, name)
    return with_options(server_dsn(), dbname=_test_db)


def fresh_dsn() -> str:
    """A DSN whose search_path is a new, empty schema: one isolated store per test."""
    db = _test_database()
    schema = f"t_{uuid.uuid4().hex[:12]}"
    with admin_connect(db) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    return with_options(db, options=f"-csearch_path={schema}")


def _drop_test_database(name: str) -> None:
    try:
        with admin_connect() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    except Exception:
        pass


def _shutdown() -> None:
    global _server
    if _server is not None:
        _server.stop()
        _server = None


if __name__ == "__main__":  # start a server by hand: prints its DSN, Enter stops it
    started = start_server()
    print(started.dsn, flush=True)
    try:
        input()
    finally:
        started.stop()
