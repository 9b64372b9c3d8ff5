"""PostgreSQL schema migrations, recorded in a ``migrations`` table.

The schema mirrors SQLite's (see :mod:`ctxline.store.migrations`) with PostgreSQL
types: event bodies are canonical JSON in a ``text`` column (not ``jsonb``, which
cannot hold U+0000 and would reorder keys), blobs are ``bytea``. Many workers may
open the same fresh database at once, so migrating takes a transaction-scoped
advisory lock first: one worker migrates, the others wait and then find it done. A
database written by a newer ctxline is refused rather than guessed at.

    with conn.transaction():
        apply_pg_migrations(conn, utc_now)
"""

from __future__ import annotations

from typing import Any

import psycopg

from ctxline.errors import IntegrityError
from ctxline.events import format_at
from ctxline.store.base import Clock

__all__ = ["MIGRATION_LOCK", "PG_MIGRATIONS", "apply_pg_migrations"]

# pg_advisory_xact_lock key: "ctxline" in ASCII, so other users of advisory locks
# on the same database are unlikely to collide with it.
MIGRATION_LOCK = 0x6374786C696E65

PG_MIGRATIONS: tuple[tuple[int, str, str], ...] = (
    (
        1,
        "record",
        """
        CREATE TABLE sessions (
            id text PRIMARY KEY,
            created_at text NOT NULL,
            meta text NOT NULL
        );
        CREATE TABLE timelines (
            session text NOT NULL REFERENCES sessions(id),
            name text NOT NULL,
            parent text,
            fork_seq bigint,
            head bigint NOT NULL,
            created_at text NOT NULL,
            PRIMARY KEY (session, name)
        );
        CREATE TABLE events (
            session text NOT NULL,
            timeline text NOT NULL,
            seq bigint NOT NULL,
            id text NOT NULL,
            at text NOT NULL,
            kind text NOT NULL,
            body text NOT NULL,
            CONSTRAINT events_seq_key PRIMARY KEY (session, timeline, seq),
            CONSTRAINT events_id_key UNIQUE (id),
            FOREIGN KEY (session, timeline) REFERENCES timelines(session, name)
        );
        CREATE TABLE tool_calls (
            session text NOT NULL,
            timeline text NOT NULL,
            call_id text NOT NULL,
            seq bigint NOT NULL
        );
        CREATE INDEX tool_calls_by_id ON tool_calls(session, timeline, call_id, seq);
        CREATE TABLE token_counts (
            event_id text NOT NULL,
            tokenizer text NOT NULL,
            count bigint NOT NULL,
            PRIMARY KEY (event_id, tokenizer)
        );
        CREATE TABLE blobs (
            ref text PRIMARY KEY,
            size bigint NOT NULL,
            data bytea NOT NULL
        );
        """,
    ),
)


def apply_pg_migrations(conn: psycopg.Connection[Any], clock: Clock) -> list[int]:
    """Apply pending migrations inside the caller's transaction; returns those applied."""
    conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
    conn.execute(
        "CREATE TABLE IF NOT EXISTS migrations (version integer PRIMARY KEY, name text NOT NULL,"
        " applied_at text NOT NULL)"
    )
    done = {row[0] for row in conn.execute("SELECT version FROM migrations")}
    known = {version for version, _, _ in PG_MIGRATIONS}
    if done - known:
        raise IntegrityError(
            f"the database has schema versions {sorted(done - known)} from a newer ctxline; upgrade ctxline"
        )
    applied = []
    for version, name, sql in PG_MIGRATIONS:
        if version in done:
            continue
        for statement in sql.split(";"):
            if statement.strip():
                conn.execute(statement.encode())
        conn.execute(
            "INSERT INTO migrations(version, name, applied_at) VALUES (%s, %s, %s)",
            (version, name, format_at(clock())),
        )
        applied.append(version)
    return applied
