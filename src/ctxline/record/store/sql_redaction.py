"""How both SQL stores write a redaction (:mod:`ctxline.record.store.redaction`).

Why a module of its own: SQLite and PostgreSQL check a redaction the same way inside
their write transaction — the row is one of that timeline's own, read back through the
checked read (so a damaged row is never redacted over), of the same kind, and the new
mark names the digest its link was made from — then write the new body, its digest in
``chain.redacted``, drop the event's cached token counts and the blobs of the strings it
no longer holds, and re-index its words; only
how a body is written and how the search index is changed are the engine's own.

    done = redact_rows(conn, "?", redactions, read_one, write_body, reindex)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ctxline.errors import IntegrityError, ValidationError
from ctxline.record.events import Event
from ctxline.record.store.chain import Body, encode_body
from ctxline.record.store.checks import MAX_EVENT_BYTES
from ctxline.record.store.redaction import Redaction, check_form, removed_refs

__all__ = ["redact_rows"]


def redact_rows(
    conn: Any,
    mark: str,
    redactions: Sequence[Redaction],
    read_one: Callable[[Any, Redaction], Event],
    write_body: Callable[[Any, Redaction, Body], None],
    reindex: Callable[[Any, Redaction, Event, Event], None],
) -> int:
    """Check and write every redaction inside the caller's transaction; returns the count."""
    m = mark
    for r in redactions:
        where = f"{r.session}/{r.timeline} seq {r.seq}"
        row = conn.execute(
            f"SELECT e.id, e.kind, c.digest FROM events e JOIN chain c ON c.session = e.session"
            f" AND c.timeline = e.timeline AND c.seq = e.seq"
            f" WHERE e.session = {m} AND e.timeline = {m} AND e.seq = {m}",
            (r.session, r.timeline, r.seq),
        ).fetchone()
        if row is None:
            raise ValidationError(f"{where}: no such event to redact", field="seq")
        eid, kind, digest = row
        old = read_one(conn, r)  # the checked read: a damaged row is never redacted over
        if kind != r.event.kind or old.kind != r.event.kind:
            raise ValidationError(
                f"{where}: a {r.event.kind} event cannot replace a {kind} event", field="event"
            )
        try:
            check_form(r.event, str(digest), where)
        except IntegrityError as exc:
            raise ValidationError(
                str(exc).removesuffix("; run ctxline doctor"), field="event"
            ) from None
        body = encode_body(r.event)
        if body.size > MAX_EVENT_BYTES:
            raise ValidationError(f"{where}: the redacted event is too large", field="event")
        write_body(conn, r, body)
        conn.execute(  # a redacted row holds its (tombstone) content: never external
            f"UPDATE chain SET redacted = {m}, external = NULL"
            f" WHERE session = {m} AND timeline = {m} AND seq = {m}",
            (body.digest, r.session, r.timeline, r.seq),
        )
        conn.execute(f"DELETE FROM token_counts WHERE event_id = {m}", (eid,))
        for ref in removed_refs(old, r.event):  # kept while another row's content is it
            conn.execute(
                f"DELETE FROM blobs WHERE ref = {m}"
                f" AND NOT EXISTS (SELECT 1 FROM chain WHERE external = {m})",
                (ref, ref),
            )
        reindex(conn, r, old, r.event)
    return len(redactions)
