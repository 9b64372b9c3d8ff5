"""The PostgreSQL store's part of a redaction: the body written and its ``tsvector`` redone.

Why here: the checks and the order are :mod:`ctxline.record.store.sql_redaction`'s; what
is PostgreSQL's own is the text column a body is written to and the search row
(``search_docs.tsv``), recomputed from the redacted event or removed when it has no
words left. The old row versions stay in the table files until ``VACUUM`` reclaims them
(and in the server's WAL and its backups): docs/memory.md says so.

    done = redact_pg(conn, redactions)              # inside the store's transaction
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ctxline.record.events import Event
from ctxline.record.store.chain import Body
from ctxline.record.store.pg_events import read_events
from ctxline.record.store.redaction import Redaction
from ctxline.record.store.sql_redaction import redact_rows
from ctxline.record.store.textsearch import index_words

__all__ = ["redact_pg"]

_ROW = "WHERE session = %s AND timeline = %s AND seq = %s"


def _read_one(conn: Any, r: Redaction) -> Event:
    (stored,) = read_events(conn, r.session, r.timeline, r.seq - 1, 1, True, True, True)
    return stored.event


def _write_body(conn: Any, r: Redaction, body: Body) -> None:
    text = body.text if body.data is not None else b"".join(body.pieces()).decode()
    conn.execute(f"UPDATE events SET body = %s {_ROW}", (text, r.session, r.timeline, r.seq))


def _reindex(conn: Any, r: Redaction, old: Event, new: Event) -> None:
    key = (r.session, r.timeline, r.seq)
    conn.execute(f"DELETE FROM search_docs {_ROW}", key)
    words = index_words(new)
    if words:
        conn.execute(
            "INSERT INTO search_docs(session, timeline, seq, tsv)"
            " VALUES (%s, %s, %s, to_tsvector('simple', %s))",
            (*key, " ".join(words)),
        )


def redact_pg(conn: Any, redactions: Sequence[Redaction]) -> int:
    """Check and write ``redactions`` inside the caller's transaction."""
    return redact_rows(conn, "%s", redactions, _read_one, _write_body, _reindex)
