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

Version 4, ``memory``: the memories kept across sessions, with a GIN-indexed
``tsvector`` (:mod:`ctxline.record.store.pg_memory`).

Version 5, ``memory_index``: a partial index over each owner's current memories, newest
first, as in SQLite.

Version 6, ``redaction``: ``chain.redacted``, as in SQLite.

Version 7, ``external``: ``chain.external``, as in SQLite.

Version 3, ``chain``: ``chain`` (digest and hash link per event) and
``timelines.link``, as in SQLite; the migration computes them for the events already
stored, parents before forks, with the bodies hashed by the server (``sha256`` of
their UTF-8), and refuses a timeline with a gap.

    with conn.transaction():
        apply_pg_migrations(conn, utc_now)
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import psycopg

from ctxline.errors import IntegrityError
from ctxline.record.parse import event_from_json
from ctxline.record.store.base import Clock
from ctxline.record.store.chain import GENESIS, chain_link
from ctxline.record.store.pg_events import link_at, visible_segments
from ctxline.record.store.pg_memory import PG_MEMORY_INDEX_SQL, PG_MEMORY_SQL
from ctxline.record.store.rows import apply_steps
from ctxline.record.store.sql_migrations import (
    EXTERNAL_SQL,
    REDACTION_SQL,
    chain_timelines,
    record_sql,
)
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


def _chain(conn: psycopg.Connection[Any]) -> None:
    conn.execute(
        "CREATE TABLE chain (session text NOT NULL, timeline text NOT NULL, seq bigint NOT NULL,"
        " digest text NOT NULL, link text NOT NULL, PRIMARY KEY (session, timeline, seq))"
    )
    conn.execute("ALTER TABLE timelines ADD COLUMN link text")
    chain_timelines(conn, _chain_timeline)


def _chain_timeline(
    conn: psycopg.Connection[Any], session: str, name: str, parent: str | None, base: int, head: int
) -> None:
    base, head = int(base), int(head)
    prev = GENESIS
    if parent is not None and base:
        prev = link_at(conn, session, visible_segments(conn, session, parent, True)[0], base)
    last = base
    while True:
        rows = conn.execute(
            "SELECT seq, id, at, 'sha256:' || encode(sha256(convert_to(body, 'UTF8')), 'hex')"
            " FROM events WHERE session = %s AND timeline = %s AND seq > %s ORDER BY seq LIMIT 1000",
            (session, name, last),
        ).fetchall()
        if not rows:
            break
        links = []
        for seq, eid, at, digest in rows:
            if int(seq) != last + 1:
                raise IntegrityError(
                    f"cannot compute the hash chain: {session}/{name} seq {last + 1} is missing;"
                    " run ctxline doctor"
                )
            prev = chain_link(prev, int(seq), eid, at, digest)
            links.append((session, name, int(seq), digest, prev))
            last = int(seq)
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO chain VALUES (%s, %s, %s, %s, %s)", links)
    if last != head:
        raise IntegrityError(
            f"cannot compute the hash chain: {session}/{name} has head {head} but its events"
            f" end at seq {last}; run ctxline doctor"
        )
    conn.execute(
        "UPDATE timelines SET link = %s WHERE session = %s AND name = %s", (prev, session, name)
    )


# pg_advisory_xact_lock key: "ctxline" in ASCII, so other users of advisory locks
# on the same database are unlikely to collide with it.
MIGRATION_LOCK = 0x6374786C696E65

PG_MIGRATIONS: tuple[tuple[int, str, Step], ...] = (
    (
        1,
        "record",
        record_sql(
            text="text",
            integer="bigint",
            blob="bytea",
            id_unique="",
            keys="CONSTRAINT events_seq_key PRIMARY KEY (session, timeline, seq),\n"
            "            CONSTRAINT events_id_key UNIQUE (id),",
        ),
    ),
    (2, "search", _search_index),
    (3, "chain", _chain),
    (4, "memory", PG_MEMORY_SQL),
    (5, "memory_index", PG_MEMORY_INDEX_SQL),
    (6, "redaction", REDACTION_SQL),
    (7, "external", EXTERNAL_SQL),
)


def apply_pg_migrations(conn: psycopg.Connection[Any], clock: Clock) -> list[int]:
    """Apply pending migrations inside the caller's transaction; returns those applied."""
    conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
    return apply_steps(
        conn,
        PG_MIGRATIONS,
        clock,
        create="CREATE TABLE IF NOT EXISTS migrations (version integer PRIMARY KEY, name text"
        " NOT NULL, applied_at text NOT NULL)",
        mark="%s",
        raw=str.encode,
    )
