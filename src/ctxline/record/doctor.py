"""``ctxline doctor``: run every integrity check of a record and say what is wrong.

Why: a record is only worth keeping if it can be trusted, and the failures that
matter (a damaged page, a ``-wal`` file lost or damaged after a crash, a head that
disagrees with its events, a row edited outside ctxline, a blob whose bytes no longer
match their hash, a search index that drifted from the events) are silent until
something reads the wrong bytes. The doctor looks at all of them without changing
anything: it never migrates, repairs or rebuilds (SQLite: a read-only connection that
opens no WAL file, the FTS5 structure check run on a scratch copy of the index;
PostgreSQL: ``migrate=False`` and a read-only snapshot), and it never creates a
database: a damaged file stays byte for byte as it was found.

Checks, in order. SQLite: ``file`` (header, WAL files with every frame checksummed —
see :mod:`ctxline.record.store.sqlite_files` — and ``integrity_check``; nothing else
runs when it fails), then the checks of :mod:`ctxline.record.store.sqlite_health`:
``pages``, ``schema``, ``timelines``, ``rows`` (every row parsed), ``chain`` (every
hash link), ``calls``, ``blobs``, ``search``. PostgreSQL: the same from ``schema`` on.
A memory store has nothing to check. No bad row raises: each is a problem naming its
session, timeline and seq.

    report = run_doctor("ctxline.db")
    report.healthy                      # False
    report.problems                     # ['blob sha256:… is corrupt: …']
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

from ctxline.errors import IntegrityError, ValidationError
from ctxline.record.events import JsonValue
from ctxline.record.store.base import HealthCheck, StorageError
from ctxline.record.store.failures import sqlite_failure
from ctxline.record.store.sqlite_files import (
    check_sqlite_file,
    file_state,
    held_open,
    open_read_only,
)
from ctxline.record.store.sqlite_health import connection_health

__all__ = ["DoctorReport", "run_doctor"]


@dataclass(frozen=True, slots=True)
class DoctorReport:
    db: str
    """The database, its password hidden."""
    backend: str
    checks: tuple[HealthCheck, ...]

    @property
    def problems(self) -> list[str]:
        return [p for c in self.checks for p in c.problems]

    @property
    def healthy(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, JsonValue]:
        return {
            "db": self.db,
            "backend": self.backend,
            "healthy": self.healthy,
            "problems": len(self.problems),
            "checks": [
                {"check": c.name, "ok": c.ok, "detail": c.detail, "problems": list(c.problems)}
                for c in self.checks
            ],
        }

    def lines(self) -> list[str]:
        """The report for a terminal: one line per check, its problems indented."""
        out = [f"ctxline doctor: {self.backend} {self.db}"]
        for c in self.checks:
            out.append(f"{'ok  ' if c.ok else 'FAIL'}  {c.name:<10} {c.detail}")
            out += [f"      - {p}" for p in c.problems]
        n = len(self.problems)
        out.append(
            f"healthy: {len(self.checks)} check(s) passed" if not n else f"{n} problem(s) found"
        )
        return out


def _sqlite(path: Path) -> list[HealthCheck]:
    wal = Path(f"{path}-wal")
    if not path.exists() and not wal.exists():
        raise ValidationError("no such database file", source=str(path))
    file_detail = "header, WAL files (-wal/-shm, every frame checksummed), PRAGMA integrity_check"
    try:
        check_sqlite_file(path)
    except IntegrityError as exc:
        return [HealthCheck("file", file_detail, (str(exc),))]
    if path.stat().st_size == 0:
        return [HealthCheck("file", file_detail, (f"{path} is empty: not a database",))]
    try:  # read-only, and no WAL file created or removed (see read_only_params)
        conn, immutable = open_read_only(path)
    except sqlite3.Error as exc:
        raise sqlite_failure(exc, str(path), "open the database") from None
    state = file_state(path)
    try:
        with held_open(path, shm=not immutable):
            checks = connection_health(conn, full=True)
    except sqlite3.DatabaseError as exc:
        checks = [HealthCheck("pages", "reading the database", (f"{path} is damaged ({exc})",))]
    finally:
        conn.close()
    if immutable and file_state(path)[:4] != state[:4]:
        raise StorageError(
            f"{path} was changed by a writer while it was checked; nothing was changed,"
            " run ctxline doctor again"
        )
    return [HealthCheck("file", file_detail), *checks]


def run_doctor(url: str) -> DoctorReport:
    """Check the database at ``url`` (as ``open_store`` takes it); changes nothing.

    Raises :class:`ValidationError` when there is no database to check (a missing file,
    an unreachable server), so the CLI can say so in one line.
    """
    if url in (":memory:", "memory://", "memory:"):
        return DoctorReport(
            url, "memory", (HealthCheck("memory", "an in-memory store keeps nothing to check"),)
        )
    if url.startswith(("postgresql://", "postgres://")):
        try:
            from ctxline.record.store.postgres import PostgresStore, redact
        except ImportError as exc:
            raise ValidationError(
                f"PostgreSQL needs psycopg ({exc.name or exc}); install it with"
                " pip install 'ctxline[postgres]'",
                field="db",
            ) from None
        store = PostgresStore(url, pool_size=1, migrate=False)
        try:
            return DoctorReport(redact(url), "postgresql", tuple(store.health()))
        finally:
            store.close()
    if url.startswith("sqlite://"):
        path = url.removeprefix("sqlite://").removeprefix("/")
    elif "://" in url:
        raise ValidationError(
            f"unknown database URL {url!r}; use a path, sqlite:///path, postgresql://… or :memory:",
            field="db",
        )
    else:
        path = url
    return DoctorReport(path, "sqlite", tuple(_sqlite(Path(path))))
