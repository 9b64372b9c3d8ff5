"""PostgreSQL schema migrations, recorded in a ``migrations`` table.

The schema mirrors SQLite's (see :mod:`ctxline.record.store.migrations`) with PostgreSQL
types: event bodies are canonical JSON in a ``text`` column (not ``jsonb``, which
cannot hold U+0000 and would reorder keys), blobs are ``bytea``. Many workers may
open the same fresh database at once, so migrating takes a transaction-scoped
advisory lock first: one worker migrates, the others wait and then find it done. A
database written by a newer ctxline is refused rather than guessed at.

Version 2, ``search``: ``search_docs`` holds one ``tsvector`` per searchable event
(``to_tsvector('simple', …)`` over the normalized words of
:mod:`ctxline.record.store.textsearch`; ``simple`` has no stop words and no stemming, so
PostgreSQL matches the same events as SQLite), with a GIN index. The migration
back-fills it from the events already stored; appends index in their transaction.

    with conn.transaction():
        apply_pg_migrations(conn, utc_now)
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import psycopg

from ctxline.errors import IntegrityError
from ctxline.record.codec import format_at
from ctxline.record.parse import event_from_json
from ctxline.record.store.base import Clock
from ctxline.record.store.textsearch import index_words

__all__ = ["MIGRATION_LOCK", "PG_MIGRATIONS", "apply_pg_migrations", "index_events"]

Step = str | Callable[[psycopg.Connection[Any]], None]

INDEX_SQL = (
    "INSERT INTO search_docs(session, timeline, seq, tsv)"
    " VALUES (%s, %s, %s, to_tsvector('simple', %s))"
)


def index_events(
    conn: psycopg.Connection[Any], rows: Sequence[tuple[str, str, int, list[str]]]
) -> int:
    """Add (session, timeline, seq, words) to the search index; rows without words are skipped."""
    params = [(r[0], r[1], r[2], " ".join(r[3])) for r in rows if r[3]]
    if params:
        with conn.cursor() as cur:
            cur.executemany(INDEX_SQL, params)
    return len(params)


def _search_index(conn: psycopg.Connection[Any]) -> None:
    conn.execute(
        "CREATE TABLE search_docs (session text NOT NULL, timeline text NOT NULL,"
        " seq bigint NOT NULL, tsv tsvector NOT NULL, PRIMARY KEY (session, timeline, seq))"
    )
    conn.execute("CREATE INDEX search_docs_tsv ON search_docs USING gin (tsv)")
    last: tuple[str, str, int] = ("", "", 0)
    while True:  # back-fill from the events already stored, in key order
        chunk = conn.execute(
            "SELECT session, timeline, seq, body FROM events"
            " WHERE (session, timeline, seq) > (%s, %s, %s)"
            " ORDER BY session, timeline, seq LIMIT 500",
            last,
        ).fetchall()
        if not chunk:
            return
        index_events(
            conn,
            [
                (r[0], r[1], int(r[2]), index_words(event_from_json(json.loads(r[3]))))
                for r in chunk
            ],
        )
        last = (chunk[-1][0], chunk[-1][1], int(chunk[-1][2]))


# pg_advisory_xact_lock key: "ctxline" in ASCII, so other users of advisory locks
# on the same database are unlikely to collide with it.
MIGRATION_LOCK = 0x6374786C696E65

PG_MIGRATIONS: tuple[tuple[int, str, Step], ...] = (
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
    (2, "search", _search_index),
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
        if callable(sql):
            sql(conn)
        else:
            for statement in sql.split(";"):
                if statement.strip():
                    conn.execute(statement.encode())
        conn.execute(
            "INSERT INTO migrations(version, name, applied_at) VALUES (%s, %s, %s)",
            (version, name, format_at(clock())),
        )
        applied.append(version)
    return applied
