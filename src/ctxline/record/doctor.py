"""``ctxline doctor``: run every integrity check of a record and say what is wrong.

Why: a record is only worth keeping if it can be trusted, and the failures that
matter (a damaged page, a ``-wal`` file lost after a crash, a head that disagrees
with its events, a blob whose bytes no longer match their hash, a search index that
drifted from the events) are silent until something reads the wrong bytes. The
doctor looks at all of them without changing anything: it never migrates, repairs or
rebuilds (SQLite: a read-write connection inside a rolled-back savepoint, for the
FTS5 structure check; PostgreSQL: ``migrate=False`` and a read-only snapshot).

Checks, in order. SQLite: ``file`` (header, WAL files — see
:mod:`ctxline.record.store.sqlite_health` — and ``quick_check``; nothing else runs when it
fails), ``pages`` (``PRAGMA integrity_check``), ``schema``, ``timelines`` (head ==
own events, gap-free), ``blobs`` (every blob re-hashed), ``search`` (FTS5
``integrity-check``, one entry per searchable event, word counts equal).
PostgreSQL: ``schema``, ``timelines``, ``blobs``, ``search`` (every tsvector
recomputed from its event). A memory store has nothing to check.

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
from ctxline.record.store.base import HealthCheck
from ctxline.record.store.sqlite_health import check_sqlite_file, connection_health, held_open

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
    if not path.exists():
        raise ValidationError("no such database file", source=str(path))
    file_detail = "header, WAL files (-wal/-shm), PRAGMA quick_check"
    try:
        check_sqlite_file(path)
    except IntegrityError as exc:
        return [HealthCheck("file", file_detail, (str(exc),))]
    try:  # mode=rw: never create a file; the FTS5 check needs a connection that may write
        conn = sqlite3.connect(f"file:{path}?mode=rw", uri=True, isolation_level=None, timeout=30)
    except sqlite3.OperationalError:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None, timeout=30)
    try:
        with held_open(path):
            checks = connection_health(conn, full=True)
    except sqlite3.DatabaseError as exc:
        checks = [HealthCheck("pages", "reading the database", (f"{path} is damaged ({exc})",))]
    finally:
        conn.close()
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
