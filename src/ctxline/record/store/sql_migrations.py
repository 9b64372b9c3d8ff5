"""The migrations both SQL stores share: the record's tables and the chain's order.

Why a module of its own: migration 1 creates the same six tables on SQLite and
PostgreSQL but for the type names and how the events' keys are declared, and
migration 3 computes the hash chain of the timelines already stored in the same
order (parents before forks) on both; the SQL of each engine and the rows it reads
stay in :mod:`.migrations` and :mod:`.pg_migrations`.

    SQL = record_sql(text="TEXT", integer="INTEGER", blob="BLOB", id_unique=" UNIQUE",
                     keys="PRIMARY KEY (session, timeline, seq),")
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ctxline.errors import IntegrityError

__all__ = ["EXTERNAL_SQL", "REDACTION_SQL", "chain_timelines", "record_sql"]

REDACTION_SQL = "ALTER TABLE chain ADD COLUMN redacted TEXT"
"""Migration 6, ``redaction``: the digest of a redacted body (NULL: not redacted)."""

EXTERNAL_SQL = "ALTER TABLE chain ADD COLUMN external TEXT"
"""Migration 7, ``external``: the blob handle of an external row's content, a huge tool
result stored once (:mod:`ctxline.record.store.external`; NULL: the row holds it)."""

_RECORD = """
        CREATE TABLE sessions (
            id {text} PRIMARY KEY,
            created_at {text} NOT NULL,
            meta {text} NOT NULL
        );
        CREATE TABLE timelines (
            session {text} NOT NULL REFERENCES sessions(id),
            name {text} NOT NULL,
            parent {text},
            fork_seq {integer},
            head {integer} NOT NULL,
            created_at {text} NOT NULL,
            PRIMARY KEY (session, name)
        );
        CREATE TABLE events (
            session {text} NOT NULL,
            timeline {text} NOT NULL,
            seq {integer} NOT NULL,
            id {text} NOT NULL{id_unique},
            at {text} NOT NULL,
            kind {text} NOT NULL,
            body {text} NOT NULL,
            {keys}
            FOREIGN KEY (session, timeline) REFERENCES timelines(session, name)
        );
        CREATE TABLE tool_calls (
            session {text} NOT NULL,
            timeline {text} NOT NULL,
            call_id {text} NOT NULL,
            seq {integer} NOT NULL
        );
        CREATE INDEX tool_calls_by_id ON tool_calls(session, timeline, call_id, seq);
        CREATE TABLE token_counts (
            event_id {text} NOT NULL,
            tokenizer {text} NOT NULL,
            count {integer} NOT NULL,
            PRIMARY KEY (event_id, tokenizer)
        );
        CREATE TABLE blobs (
            ref {text} PRIMARY KEY,
            size {integer} NOT NULL,
            data {blob} NOT NULL
        );
        """


def record_sql(*, text: str, integer: str, blob: str, id_unique: str, keys: str) -> str:
    """Migration 1, ``record``, in one engine's type names; ``id_unique`` follows the
    events' id column and ``keys`` (ending in a comma) declares the events' keys."""
    return _RECORD.format(text=text, integer=integer, blob=blob, id_unique=id_unique, keys=keys)


def chain_timelines(
    conn: Any, chain_one: Callable[[Any, str, str, str | None, int, Any], None]
) -> None:
    """Call ``chain_one(conn, session, name, parent, base, head)`` for every timeline,
    parents before forks; a fork whose parent is missing or loops stops the migration."""
    todo = conn.execute(
        "SELECT session, name, parent, fork_seq, head FROM timelines ORDER BY session, name"
    ).fetchall()
    done: set[tuple[str, str]] = set()
    while todo:
        ready = [t for t in todo if t[2] is None or (t[0], t[2]) in done]
        if not ready:
            session, name, parent = todo[0][:3]
            raise IntegrityError(
                f"cannot compute the hash chain: timeline {session}/{name} forks from"
                f" {parent!r}, which is missing or loops; run ctxline doctor"
            )
        for session, name, parent, fork_seq, head in ready:
            chain_one(conn, session, name, parent, fork_seq or 0, head)
            done.add((session, name))
        todo = [t for t in todo if (t[0], t[1]) not in done]
