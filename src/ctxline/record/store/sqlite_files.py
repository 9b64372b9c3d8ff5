"""Fail-closed opening of a SQLite record: the files are checked before SQLite sees them.

Why: a damaged file must stop ctxline with a clear error and stay untouched, and the
states in which SQLite would silently drop acknowledged commits must be refused: a
missing or empty database file beside a non-empty ``-wal`` (SQLite treats a 0-page
database as new and *deletes* the ``-wal``); a missing, shortened or foreign ``-wal``
whose index (``-shm``) says it held committed frames; a damaged ``-wal`` (recovery stops
at the first frame whose checksum or salt is wrong and discards every frame after it,
committed or not).

The checks, before any connection is opened, on a database no process holds open (a
live database's files are its owners'): the index against the ``-wal``; every frame of
the ``-wal`` checksummed as SQLite would (about 25 ms per MB, only after a crash: a
clean close deletes the ``-wal``), refusing a commit frame recovery would drop, with the
offset to cut at to accept the loss; then ``PRAGMA integrity_check`` (``quick_check``
over :data:`FULL_CHECK_MAX_BYTES`) on a read-only connection. docs/integrity.md explains
the WAL format these rely on, and what cannot be detected.

    check_sqlite_file(Path("ctxline.db"))     # raises IntegrityError, touches nothing
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

from ctxline.errors import IntegrityError
from ctxline.record.store.failures import SQLITE_CODES, os_failure, sqlite_failure
from ctxline.record.store.sqlite_wal import SQLITE_MAGIC, live, wal_frames_problem, wal_problem

__all__ = [
    "FULL_CHECK_MAX_BYTES",
    "SQLITE_MAGIC",
    "check_sqlite_file",
    "connect_read_only",
    "file_uri",
    "held_open",
    "open_here",
    "wal_frames_problem",
    "wal_problem",
]

FULL_CHECK_MAX_BYTES = 256 * 1024 * 1024
"""Opening runs ``PRAGMA integrity_check`` on files up to this size, ``quick_check``
above it (``ctxline doctor`` always runs the full check)."""

# --- databases this process holds open ----------------------------------------------
#
# A POSIX lock belongs to a process and an inode, and closing *any* descriptor of the
# file drops all of that process's locks on it. Reading the header or -shm of a database
# this process already has open through SQLite would silently release SQLite's locks,
# so the file checks are skipped for those (the file was checked when first opened).

_open_lock = threading.Lock()
_open_count: dict[tuple[int, int], int] = {}


def _key(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


@contextmanager
def held_open(path: Path) -> Iterator[None]:
    """Mark ``path`` as open in this process for as long as the block runs."""
    key = _key(path)
    if key is not None:
        with _open_lock:
            _open_count[key] = _open_count.get(key, 0) + 1
    try:
        yield
    finally:
        if key is not None:
            with _open_lock:
                left = _open_count.get(key, 1) - 1
                if left:
                    _open_count[key] = left
                else:
                    _open_count.pop(key, None)


def open_here(path: Path) -> bool:
    key = _key(path)
    with _open_lock:
        return key is not None and key in _open_count


# --- the checks before opening -------------------------------------------------------------


def file_uri(path: Path, **params: str) -> str:
    query = "&".join(f"{k}={v}" for k, v in params.items())
    return f"file:{quote(str(path.absolute()))}?{query}"


def connect_read_only(path: Path, *, timeout: float = 30.0) -> sqlite3.Connection:
    """A read-only connection that never creates or changes the database file.

    ``mode=ro`` first; where SQLite cannot open the WAL files (a read-only file system
    or folder) and no ``-wal`` holds anything, ``immutable=1`` (no locks, no WAL: right
    for a file nobody can be writing).
    """
    try:
        conn = sqlite3.connect(
            file_uri(path, mode="ro"), uri=True, isolation_level=None, timeout=timeout
        )
        conn.execute("SELECT count(*) FROM sqlite_master").fetchall()
        return conn
    except sqlite3.Error as exc:
        code = (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF
        wal = Path(f"{path}-wal")
        if code not in (SQLITE_CODES["CANTOPEN"], SQLITE_CODES["READONLY"], SQLITE_CODES["PERM"]):
            raise
        if wal.exists() and wal.stat().st_size > 0:
            raise sqlite_failure(
                exc,
                str(path),
                "open the database read-only (its -wal needs recovery, which needs a writable folder)",
            ) from None
    conn = sqlite3.connect(
        file_uri(path, mode="ro", immutable="1"), uri=True, isolation_level=None, timeout=timeout
    )
    return conn


def check_sqlite_file(path: Path) -> None:
    """Fail closed on a file that exists but is not a healthy SQLite database.

    Checks the database file against its WAL files (:func:`wal_problem`,
    :func:`wal_frames_problem`), the header, and ``PRAGMA integrity_check`` (or
    ``quick_check`` above :data:`FULL_CHECK_MAX_BYTES`) on a read-only connection;
    raises :class:`IntegrityError` and changes nothing. Skipped for a database this
    process already holds open.
    """
    wal = Path(f"{path}-wal")
    shm = Path(f"{path}-shm")
    try:
        size = path.stat().st_size if path.exists() else None
        wal_size = wal.stat().st_size if wal.exists() else 0
    except OSError as exc:
        raise os_failure(exc, str(path), "read the database file") from None
    if not size:
        if wal_size > 0:
            what = "is missing" if size is None else "is empty (0 bytes)"
            raise IntegrityError(
                f"{path} {what} but {wal.name} beside it holds {wal_size:,} bytes of committed"
                f" transactions; SQLite would open an empty database and delete {wal.name}."
                f" Restore {path.name} (the copy this WAL belongs to); to start afresh instead,"
                f" move {wal.name} and {shm.name} away; nothing was changed"
            )
        return
    if open_here(path):
        return
    try:
        with path.open("rb") as fh:
            magic = fh.read(16)
    except OSError as exc:
        raise os_failure(exc, str(path), "read the database file") from None
    if magic != SQLITE_MAGIC:
        raise IntegrityError(
            f"{path} is not a SQLite database (bad header); the file was left untouched"
        )
    problem = wal_problem(path) or (None if live(path) else wal_frames_problem(path))
    if problem is not None:
        raise IntegrityError(problem)
    pragma = "integrity_check" if size <= FULL_CHECK_MAX_BYTES else "quick_check"
    try:
        conn = connect_read_only(path)
        try:
            rows = conn.execute(f"PRAGMA {pragma}").fetchall()
        finally:
            conn.close()
    except sqlite3.Error as exc:
        failure = sqlite_failure(exc, str(path), "check the database")
        if not isinstance(failure, IntegrityError) and "malformed" not in str(exc):
            raise failure from None
        raise IntegrityError(f"{path} is damaged ({exc}); the file was left untouched") from None
    problems = [r[0] for r in rows if r[0] != "ok"]
    if problems:
        raise IntegrityError(
            f"{path} failed the integrity check: {'; '.join(problems[:3])}; the file was left untouched"
        )
