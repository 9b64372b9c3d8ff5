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
    "file_state",
    "file_uri",
    "held_open",
    "open_here",
    "open_read_only",
    "read_only_params",
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
_shm_count: dict[tuple[int, int], int] = {}
"""Of those, the ones whose connection uses the WAL files (a writer, a ``mode=ro`` reader)."""


def _key(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def _count(counts: dict[tuple[int, int], int], key: tuple[int, int], step: int) -> None:
    left = counts.get(key, 0) + step
    if left > 0:
        counts[key] = left
    else:
        counts.pop(key, None)


@contextmanager
def held_open(path: Path, *, shm: bool = False) -> Iterator[None]:
    """Mark ``path`` as open in this process for as long as the block runs (``shm``: by a
    connection that uses its ``-wal`` and ``-shm``)."""
    key = _key(path)
    if key is not None:
        with _open_lock:
            _count(_open_count, key, 1)
            if shm:
                _count(_shm_count, key, 1)
    try:
        yield
    finally:
        if key is not None:
            with _open_lock:
                _count(_open_count, key, -1)
                if shm:
                    _count(_shm_count, key, -1)


def open_here(path: Path) -> bool:
    key = _key(path)
    with _open_lock:
        return key is not None and key in _open_count


def _shm_here(path: Path) -> bool:
    key = _key(path)
    with _open_lock:
        return key is not None and key in _shm_count


# --- the checks before opening -------------------------------------------------------------


def file_uri(path: Path, **params: str) -> str:
    query = "&".join(f"{k}={v}" for k, v in params.items())
    return f"file:{quote(str(path.absolute()))}?{query}"


def file_state(path: Path) -> tuple[int | bool, ...]:
    """What an ``immutable`` reader of ``path`` relies on: the database file (inode, size,
    times) and which of its WAL files exist. Only ``stat`` calls: no descriptor is opened,
    so no lock of this process is dropped."""
    try:
        st = path.stat()
    except OSError:
        return ()
    wal, shm = Path(f"{path}-wal").exists(), Path(f"{path}-shm").exists()
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, wal, shm)


def read_only_params(path: Path) -> dict[str, str]:
    """How to open ``path`` for reading without changing any of its files.

    A database some connection has open (here or in another process): ``mode=ro``, the
    ``-wal`` and ``-shm`` are that connection's and are shared as SQLite shares them. A
    crashed writer's ``-wal`` holding frames: ``mode=ro`` with ``readonly_shm=1`` (SQLite
    reads the frames into memory and writes no index). Otherwise the database file holds
    everything: ``immutable=1``, which opens no ``-wal`` or ``-shm`` (``mode=ro`` alone
    would create both, and leave them behind); the store reopens such a connection when
    the files change (:func:`file_state`).
    """
    if _shm_here(path) or live(path):
        return {"mode": "ro"}
    wal, shm = Path(f"{path}-wal"), Path(f"{path}-shm")
    try:
        frames = wal.stat().st_size > 32  # more than the WAL header
    except OSError:
        frames = False
    if frames:
        return {"mode": "ro", "readonly_shm": "1"} if shm.exists() else {"mode": "ro"}
    return {"mode": "ro", "immutable": "1"}


def connect_read_only(path: Path, *, timeout: float = 30.0) -> sqlite3.Connection:
    """A read-only connection that never creates or changes a file of the database
    (see :func:`read_only_params`; its ``immutable`` parameter says which it is)."""
    return open_read_only(path, timeout=timeout)[0]


def open_read_only(path: Path, *, timeout: float = 30.0) -> tuple[sqlite3.Connection, bool]:
    """:func:`connect_read_only`, and whether the connection is ``immutable``.

    Where SQLite cannot open the WAL files (a read-only file system or folder) and no
    ``-wal`` holds anything, ``immutable=1`` (no locks, no WAL: right for a file nobody
    can be writing).
    """
    params = read_only_params(path)
    try:
        conn = sqlite3.connect(
            file_uri(path, **params), uri=True, isolation_level=None, timeout=timeout
        )
        conn.execute("SELECT count(*) FROM sqlite_master").fetchall()
        return conn, "immutable" in params
    except sqlite3.Error as exc:
        code = (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF
        wal = Path(f"{path}-wal")
        if "immutable" in params or code not in (
            SQLITE_CODES["CANTOPEN"],
            SQLITE_CODES["READONLY"],
            SQLITE_CODES["PERM"],
        ):
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
    return conn, True


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
