"""Errors from the database engine, turned into ctxline's typed errors.

Why: "attempt to write a readonly database" or "database or disk is full" as a
``sqlite3.OperationalError`` traceback tells a user nothing they can act on, and a
healthy database on a read-only disk must never be called damaged. Each engine error
becomes one of three kinds, by SQLite's result code (not by parsing its message):

* :class:`~ctxline.record.store.base.StorageError` — the environment: read-only file
  or file system, permission, full disk, I/O error, a lock held too long, no memory;
* :class:`~ctxline.errors.IntegrityError` — the file is damaged or not a database;
* :class:`~ctxline.errors.ValidationError` — a value the engine cannot hold.

In every case the transaction was rolled back: nothing was written.

    try: ...
    except sqlite3.Error as exc:
        raise sqlite_failure(exc, path, "append") from None
"""

from __future__ import annotations

import errno
import os
import sqlite3
from pathlib import Path

from ctxline.errors import CtxlineError, IntegrityError, ValidationError
from ctxline.record.store.base import StorageError

__all__ = ["SQLITE_CODES", "os_failure", "read_only_reason", "sqlite_failure"]

SQLITE_CODES = {
    "PERM": 3,
    "BUSY": 5,
    "LOCKED": 6,
    "NOMEM": 7,
    "READONLY": 8,
    "IOERR": 10,
    "CORRUPT": 11,
    "FULL": 13,
    "CANTOPEN": 14,
    "TOOBIG": 18,
    "NOTADB": 26,
}
_NOTHING = "nothing was written"


def sqlite_failure(exc: sqlite3.Error, path: str, doing: str) -> CtxlineError:
    """The typed error for an engine error met while ``doing`` something to ``path``."""
    code = (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF
    text = str(exc)
    if code == 0 and isinstance(exc, sqlite3.OperationalError):  # older builds: no code
        lowered = text.lower()
        code = next(
            (
                SQLITE_CODES[name]
                for name, needle in (
                    ("READONLY", "readonly"),
                    ("FULL", "is full"),
                    ("CANTOPEN", "unable to open"),
                    ("BUSY", "locked"),
                    ("IOERR", "disk i/o"),
                )
                if needle in lowered
            ),
            0,
        )
    if code in (SQLITE_CODES["READONLY"], SQLITE_CODES["PERM"]) or (
        code == SQLITE_CODES["CANTOPEN"] and read_only_reason(path)
    ):
        why = read_only_reason(path) or f"the database is read-only ({text})"
        return StorageError(
            f"{path}: cannot {doing}: {why}; commands that only read (sessions, export, show,"
            f" search, doctor) still work; {_NOTHING}"
        )
    if code == SQLITE_CODES["FULL"]:
        return StorageError(
            f"{path}: cannot {doing}: the disk is full (or the database reached its size"
            f" limit) ({text}); free some space and retry; {_NOTHING}"
        )
    if code == SQLITE_CODES["CANTOPEN"]:
        return StorageError(
            f"{path}: cannot open the database file ({text}): a missing folder, missing"
            " permissions or a read-only file system"
        )
    if code == SQLITE_CODES["IOERR"]:
        return StorageError(f"{path}: I/O error while trying to {doing} ({text}); {_NOTHING}")
    if code in (SQLITE_CODES["BUSY"], SQLITE_CODES["LOCKED"]):
        return StorageError(
            f"{path}: cannot {doing}: another process kept the database locked ({text});"
            f" retry; {_NOTHING}"
        )
    if code == SQLITE_CODES["NOMEM"]:
        return StorageError(f"{path}: out of memory while trying to {doing}; {_NOTHING}")
    if code == SQLITE_CODES["TOOBIG"]:
        return ValidationError(f"a value is too big for SQLite ({text}); {_NOTHING}", field="event")
    if code in (SQLITE_CODES["CORRUPT"], SQLITE_CODES["NOTADB"]):
        return IntegrityError(
            f"{path} is damaged ({text}); the file was left as it is; run ctxline doctor"
        )
    if isinstance(exc, sqlite3.IntegrityError):  # a constraint: something bypassed ctxline
        return IntegrityError(f"{path}: cannot {doing}: {text}; {_NOTHING}; run ctxline doctor")
    return StorageError(f"{path}: cannot {doing} ({type(exc).__name__}: {text}); {_NOTHING}")


def read_only_reason(path: str) -> str | None:
    """Why ``path`` cannot be written, when the file system says so (else None)."""
    if path in ("", ":memory:"):
        return None
    file = Path(path)
    folder = file.parent if str(file.parent) else Path(".")
    try:
        if os.statvfs(folder).f_flag & os.ST_RDONLY:
            return "it is on a read-only file system"
        if file.exists() and not os.access(file, os.W_OK):
            return "the file is read-only"
        if not os.access(folder, os.W_OK):
            return f"its folder {folder} is read-only (SQLite writes -wal and -shm files there)"
    except OSError:
        return None
    return None


def os_failure(exc: OSError, path: str, doing: str) -> StorageError:
    """A file-system error met while ``doing`` something to ``path``."""
    reason = {
        errno.EROFS: "the file system is read-only",
        errno.EACCES: "permission denied",
        errno.EPERM: "operation not permitted",
        errno.ENOSPC: "the disk is full",
        errno.EDQUOT: "the disk quota is exhausted",
    }.get(exc.errno or 0, exc.strerror or str(exc))
    return StorageError(f"{path}: cannot {doing}: {reason}; {_NOTHING}")
