"""Schema migrations, recorded in a ``migrations`` table.

Each migration runs once, inside the opening write transaction, and is recorded with
its version, name and time; a database written by a newer ctxline (a version this
build does not know) is refused rather than guessed at.
"""

from __future__ import annotations

import sqlite3

from ctxline.errors import IntegrityError
from ctxline.events import format_at
from ctxline.store.base import Clock

__all__ = ["SQLITE_MIGRATIONS", "apply_sqlite_migrations"]

SQLITE_MIGRATIONS: tuple[tuple[int, str, str], ...] = (
    (
        1,
        "record",
        """
        CREATE TABLE sessions (
            id TEXT PRIMARY KEY,
            created_at TEXT NOT NULL,
            meta TEXT NOT NULL
        );
        CREATE TABLE timelines (
            session TEXT NOT NULL REFERENCES sessions(id),
            name TEXT NOT NULL,
            parent TEXT,
            fork_seq INTEGER,
            head INTEGER NOT NULL,
            created_at TEXT NOT NULL,
            PRIMARY KEY (session, name)
        );
        CREATE TABLE events (
            session TEXT NOT NULL,
            timeline TEXT NOT NULL,
            seq INTEGER NOT NULL,
            id TEXT NOT NULL UNIQUE,
            at TEXT NOT NULL,
            kind TEXT NOT NULL,
            body TEXT NOT NULL,
            PRIMARY KEY (session, timeline, seq),
            FOREIGN KEY (session, timeline) REFERENCES timelines(session, name)
        );
        CREATE TABLE tool_calls (
            session TEXT NOT NULL,
            timeline TEXT NOT NULL,
            call_id TEXT NOT NULL,
            seq INTEGER NOT NULL
        );
        CREATE INDEX tool_calls_by_id ON tool_calls(session, timeline, call_id, seq);
        CREATE TABLE token_counts (
            event_id TEXT NOT NULL,
            tokenizer TEXT NOT NULL,
            count INTEGER NOT NULL,
            PRIMARY KEY (event_id, tokenizer)
        );
        CREATE TABLE blobs (
            ref TEXT PRIMARY KEY,
            size INTEGER NOT NULL,
            data BLOB NOT NULL
        );
        """,
    ),
)


def apply_sqlite_migrations(conn: sqlite3.Connection, clock: Clock) -> list[int]:
    """Apply pending migrations inside the caller's transaction; returns those applied."""
    conn.execute(
        "CREATE TABLE IF NOT EXISTS migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL,"
        " applied_at TEXT NOT NULL)"
    )
    done = {row[0] for row in conn.execute("SELECT version FROM migrations")}
    known = {version for version, _, _ in SQLITE_MIGRATIONS}
    if done - known:
        raise IntegrityError(
            f"the database has schema versions {sorted(done - known)} from a newer ctxline; upgrade ctxline"
        )
    applied = []
    for version, name, sql in SQLITE_MIGRATIONS:
        if version in done:
            continue
        for statement in sql.split(";"):
            if statement.strip():
                conn.execute(statement)
        conn.execute(
            "INSERT INTO migrations(version, name, applied_at) VALUES (?, ?, ?)",
            (version, name, format_at(clock())),
        )
        applied.append(version)
    return applied
