"""Open a record for reading only: the inspector looks and never writes.

Why not the store classes: opening a :class:`~ctxline.record.store.SQLiteStore` runs
migrations in a write transaction, sets the journal mode and creates a missing file;
:class:`~ctxline.record.store.postgres.PostgresStore` migrates unless told not to and
writes through autocommit connections. An inspector pointed at a mistyped path must
not create a database there, and a browser session must not change a byte, so this
module reads the record's tables itself (the same schema, versions 1–3):

* **SQLite** is opened with a ``mode=ro`` URI, so the file is never created or written.
  A WAL database with no ``-wal`` file beside it (no writer has it open) is read
  with ``immutable=1`` too: a read-only connection would otherwise create ``-wal`` and
  ``-shm`` files that nobody removes. ``immutable`` is only safe while nobody writes,
  so each read checks afterwards that the file is unchanged and still has no
  ``-wal``; if a writer appeared meanwhile, the read runs again with plain ``mode=ro``
  (which sees live writers' commits through their WAL).
* **PostgreSQL** connections start with ``default_transaction_read_only=on`` and
  each read is one ``READ ONLY`` repeatable-read transaction (one consistent snapshot),
  rolled back at its end.

    record = open_readonly("ctxline.db")
    record.sessions()                  # [SessionRow(id=…, events=…, requests=…), …]
    events = record.read("demo", "main")
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from ctxline.errors import (
    BlobError,
    IntegrityError,
    UnknownSession,
    UnknownTimeline,
    ValidationError,
)
from ctxline.record.blobs import parse_ref, verify
from ctxline.record.codec import parse_at
from ctxline.record.events import StoredEvent
from ctxline.record.parse import event_from_json
from ctxline.record.store.base import MAIN, TimelineInfo

__all__ = ["KNOWN_SCHEMA", "BlobRow", "ReadOnlyRecord", "SessionRow", "open_readonly"]

KNOWN_SCHEMA = frozenset({1, 2, 3, 4, 5})  # 5: memory indexes only
"""Schema versions this reader understands (``migrations`` table)."""

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class SessionRow:
    id: str
    created_at: str
    events: int
    """Events on the ``main`` timeline."""
    timelines: int
    requests: int
    """Logged requests, all timelines."""
    reductions: int
    meta: dict[str, Any]


@dataclass(frozen=True, slots=True)
class BlobRow:
    ref: str
    size: int
    head: bytes
    """The first bytes (for a preview)."""


class _Cursor(Protocol):
    def fetchall(self) -> list[Any]: ...

    def fetchone(self) -> Any: ...


Run = Callable[[str, Sequence[Any]], _Cursor]


class Snapshot(Protocol):
    """Runs ``fn(run)`` inside one read-only transaction."""

    def __call__(self, fn: Callable[[Run], T], /) -> T: ...


class ReadOnlyRecord:
    """The read side of a record: sessions, timelines, events, blobs. Thread-safe."""

    def __init__(self, describe: str, snapshot: Snapshot, mark: str) -> None:
        self.describe = describe
        """The database, as the page header shows it (a password is never included)."""
        self._snapshot = snapshot
        self._mark = mark  # the placeholder: '?' (SQLite) or '%s' (PostgreSQL)

    def _q(self, sql: str) -> str:
        return sql.replace("?", self._mark)

    def run(self, fn: Callable[[Run], T]) -> T:
        """``fn(run)`` inside one read-only snapshot; ``run(sql, args)`` takes ``?`` marks."""
        return self._snapshot(lambda run: fn(lambda sql, args: run(self._q(sql), args)))

    def schema_versions(self) -> list[int]:
        return self.run(
            lambda q: [
                int(r[0])
                for r in q("SELECT version FROM migrations ORDER BY version", ()).fetchall()
            ]
        )

    def sessions(self) -> list[SessionRow]:
        def go(q: Run) -> list[SessionRow]:
            counts: dict[str, dict[str, int]] = {}
            for sid, kind, n in q(
                "SELECT session, kind, count(*) FROM events WHERE kind IN ('request', 'reduction')"
                " GROUP BY session, kind",
                (),
            ).fetchall():
                counts.setdefault(sid, {})[kind] = int(n)
            rows = q(
                "SELECT s.id, s.created_at, s.meta,"
                " (SELECT head FROM timelines t WHERE t.session = s.id AND t.name = 'main'),"
                " (SELECT count(*) FROM timelines t WHERE t.session = s.id) FROM sessions s ORDER BY s.id",
                (),
            ).fetchall()
            return [
                SessionRow(
                    r[0],
                    str(r[1]),
                    int(r[3] or 0),
                    int(r[4]),
                    counts.get(r[0], {}).get("request", 0),
                    counts.get(r[0], {}).get("reduction", 0),
                    json.loads(r[2]),
                )
                for r in rows
            ]

        return self.run(go)

    def timelines(self, session: str) -> list[TimelineInfo]:
        def go(q: Run) -> list[TimelineInfo]:
            rows = q(
                "SELECT name, head, parent, fork_seq FROM timelines WHERE session = ?"
                " ORDER BY created_at, name",
                (session,),
            ).fetchall()
            if not rows:
                raise UnknownSession(session)
            return [TimelineInfo(session, r[0], int(r[1]), r[2], r[3]) for r in rows]

        return self.run(go)

    def read(self, session: str, timeline: str = MAIN) -> list[StoredEvent]:
        """Every visible event of a timeline (a fork: its parent's up to the fork point)."""

        def go(q: Run) -> list[StoredEvent]:
            rows = {
                r[0]: r
                for r in q(
                    "SELECT name, parent, fork_seq, head FROM timelines WHERE session = ?",
                    (session,),
                ).fetchall()
            }
            if not rows:
                raise UnknownSession(session)
            if timeline not in rows:
                raise UnknownTimeline(session, timeline)
            chain: list[tuple[str, int, int]] = []
            name: str | None = timeline
            upto = int(rows[timeline][3])
            while name is not None:
                row = rows[name]
                chain.append((name, int(row[2] or 0), upto))
                name, upto = row[1], min(upto, int(row[2] or 0))  # never above a nearer fork
            out: list[StoredEvent] = []
            for name, base, top in reversed(chain):
                for r in q(
                    "SELECT seq, id, at, body FROM events WHERE session = ? AND timeline = ?"
                    " AND seq > ? AND seq <= ? ORDER BY seq",
                    (session, name, base, top),
                ).fetchall():
                    try:
                        event = event_from_json(json.loads(r[3]))
                    except (ValueError, ValidationError) as exc:
                        raise IntegrityError(
                            f"{session}/{name} seq {r[0]}: unreadable event ({exc})"
                        ) from None
                    out.append(StoredEvent(int(r[0]), r[1], parse_at(r[2]), event))
            return out

        return self.run(go)

    def blob_count(self) -> tuple[int, int]:
        """(blobs, bytes in all)."""
        row = self.run(lambda q: q("SELECT count(*), sum(size) FROM blobs", ()).fetchone())
        return int(row[0] or 0), int(row[1] or 0)

    def blobs(self, *, offset: int = 0, limit: int = 50) -> list[BlobRow]:
        """One page of blobs, by handle."""
        return self.run(
            lambda q: [
                BlobRow(r[0], int(r[1]), bytes(r[2]))
                for r in q(
                    "SELECT ref, size, substr(data, 1, 512) FROM blobs ORDER BY ref LIMIT ? OFFSET ?",
                    (limit, offset),
                ).fetchall()
            ]
        )

    def blob(self, ref: str) -> bytes:
        """The verified bytes; BlobError when missing, malformed or corrupt."""
        parse_ref(ref)
        row = self.run(lambda q: q("SELECT data FROM blobs WHERE ref = ?", (ref,)).fetchone())
        if row is None:
            raise BlobError(f"blob {ref} is missing")
        return verify(ref, bytes(row[0]))

    def close(self) -> None:
        """Nothing is held between reads (each opens and closes its own connection)."""


# --- SQLite ----------------------------------------------------------------------------


def _stat(path: Path) -> tuple[int, int, int, bool]:
    st = path.stat()
    return (st.st_ino, st.st_size, st.st_mtime_ns, Path(f"{path}-wal").exists())


def _wal_header(path: Path) -> bool:
    with path.open("rb") as f:
        header = f.read(20)
    return len(header) == 20 and header[18] == 2


def _read_error(path: Path, exc: sqlite3.DatabaseError) -> Exception:
    if "no such table" in str(exc):
        return ValidationError(f"holds no ctxline record ({exc})", source=str(path))
    return IntegrityError(f"{path}: cannot read the database ({exc})")


def _sqlite(path: Path) -> ReadOnlyRecord:
    if not path.is_file():
        raise ValidationError(
            "no such database file (nothing is created: check the path)", source=str(path)
        )
    with path.open("rb") as f:
        if f.read(16) != b"SQLite format 3\x00":
            raise ValidationError("not a SQLite database", source=str(path))
    uri = "file:" + str(path.resolve()).replace("?", "%3f").replace("#", "%23")

    @contextmanager
    def connect(immutable: bool) -> Iterator[sqlite3.Connection]:
        conn = sqlite3.connect(
            f"{uri}?mode=ro{'&immutable=1' if immutable else ''}",
            uri=True,
            timeout=30,
            check_same_thread=False,
        )
        try:
            conn.execute("PRAGMA query_only = ON")
            conn.execute("BEGIN")  # one snapshot for the whole read
            yield conn
        finally:
            conn.close()

    def snapshot(fn: Callable[[Run], T]) -> T:
        before = _stat(path)
        if _wal_header(path) and not before[3]:
            try:
                with connect(True) as conn:
                    out = fn(lambda sql, args: conn.execute(sql, tuple(args)))
            except sqlite3.DatabaseError as exc:
                if _stat(path) == before:
                    raise _read_error(path, exc) from None
            else:
                if _stat(path) == before:
                    return out
            # a writer opened or changed the file during the immutable read: read it live
        try:
            with connect(False) as conn:
                return fn(lambda sql, args: conn.execute(sql, tuple(args)))
        except sqlite3.DatabaseError as exc:
            raise _read_error(path, exc) from None

    record = ReadOnlyRecord(str(path), snapshot, "?")
    _check_schema(record, str(path))
    return record


# --- PostgreSQL ------------------------------------------------------------------------


def _postgres(dsn: str) -> ReadOnlyRecord:
    try:
        import psycopg
        from psycopg.conninfo import conninfo_to_dict, make_conninfo
    except ImportError as exc:
        raise ValidationError(
            f"PostgreSQL needs psycopg ({exc.name or exc}); install it with pip install 'ctxline[postgres]'",
            field="db",
        ) from None
    from ctxline.record.store.postgres import redact

    params = conninfo_to_dict(dsn)
    options = str(params.get("options") or "")
    params["options"] = f"{options} -c default_transaction_read_only=on".strip()
    conninfo = make_conninfo("", **{k: v for k, v in params.items() if v is not None})

    def snapshot(fn: Callable[[Run], T]) -> T:
        try:
            conn = psycopg.connect(conninfo, connect_timeout=10)
        except psycopg.Error as exc:
            detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ValidationError(
                f"cannot connect to PostgreSQL at {redact(dsn)}: {detail}", field="db"
            ) from None
        try:
            conn.read_only = True
            conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
            with conn.transaction(force_rollback=True):
                return fn(lambda sql, args: conn.execute(sql, tuple(args)))
        except psycopg.errors.UndefinedTable as exc:
            raise ValidationError(
                f"{redact(dsn)} holds no ctxline record ({exc})".splitlines()[0], field="db"
            ) from None
        finally:
            conn.close()

    record = ReadOnlyRecord(redact(dsn), snapshot, "%s")
    _check_schema(record, redact(dsn))
    return record


def _check_schema(record: ReadOnlyRecord, where: str) -> None:
    versions = set(record.schema_versions())
    if not versions:
        raise ValidationError("holds no ctxline record (no schema version)", source=where)
    if versions - KNOWN_SCHEMA:
        raise IntegrityError(
            f"{where} has schema versions {sorted(versions - KNOWN_SCHEMA)} from a newer ctxline; upgrade ctxline"
        )


def open_readonly(url: str) -> ReadOnlyRecord:
    """A read-only view of the record at ``url`` (a path, ``sqlite:///path`` or ``postgresql://…``).

    Raises :class:`ValidationError` for a missing file (never creating one), a file that
    is not a ctxline record, or a server that cannot be reached.
    """
    if url in (":memory:", "memory://", "memory:"):
        raise ValidationError(
            "an in-memory store keeps nothing to inspect; give a database", field="db"
        )
    if url.startswith(("postgresql://", "postgres://")):
        return _postgres(url)
    if url.startswith("sqlite://"):
        return _sqlite(Path(url.removeprefix("sqlite://").removeprefix("/") or "."))
    if "://" in url:
        raise ValidationError(
            f"unknown database URL {url!r}; use a path, sqlite:///path or postgresql://…",
            field="db",
        )
    return _sqlite(Path(os.path.expanduser(url)))
