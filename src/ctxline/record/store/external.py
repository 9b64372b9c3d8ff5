"""Huge tool results stored once: the content in the blob store, the row without it.

Why: a long result is saved whole as a blob before its event is appended (``read_result``
pages through it), and its event row held the same text again, JSON-escaped: a 200 MB
output was escaped twice and written durably twice (issue 25). A result whose content is
longer than :data:`EXTERNAL_MIN_CHARS` characters is now stored *external*: its row holds
the event with ``content`` empty, ``chain.external`` holds the content's blob handle, and
``chain.digest`` is still the digest of the whole event's canonical JSON. So the hash
chain is unchanged — the link of an external row is the link the same event has inline,
an export is byte-identical, and an auditor recomputes it the same way — and a read
puts the content back from the blob and checks the whole event's digest against its link
(a changed blob, row or handle is an :class:`~ctxline.errors.IntegrityError` naming the
seq). Schema version 7 (``external``) adds the column on SQLite and PostgreSQL; an older
file's rows stay inline and verify as before.

    body = external_body(encode_body(result), "sha256:…")   # small row, whole digest
    event = resolved(parse_body([row_body], where), blob_text)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from ctxline.errors import IntegrityError
from ctxline.record.codec import canonical_json, event_to_json
from ctxline.record.events import Event, ToolResult
from ctxline.record.store.chain import PIECE_CHARS, Body, encode_body

__all__ = [
    "EXTERNAL_MIN_CHARS",
    "external_body",
    "is_external",
    "resolved",
    "whole_digest",
]

EXTERNAL_MIN_CHARS = PIECE_CHARS
"""Results with more characters than this (1 MiB) are stored external. Shorter ones stay
inline too (their blob is a copy): a read of a long session would otherwise fetch a blob
for every result over a KiB, and a row of a MiB costs what it costs."""


def is_external(event: Event) -> bool:
    return isinstance(event, ToolResult) and len(event.content) > EXTERNAL_MIN_CHARS


def external_body(body: Body, ref: str) -> Body:
    """The row of an external result whose content is the blob ``ref``: the event without
    its content, the whole event's digest (``body``: the whole event's, already encoded
    for its size and digest)."""
    event = body.event
    assert isinstance(event, ToolResult)
    empty = replace(event, content="")
    data = canonical_json(event_to_json(empty))
    return Body(len(data), body.digest, data, empty, ref)


def resolved(event: Event, load: Callable[[], str], where: str) -> Event:
    """The event of an external row (its content empty) with its content put back."""
    if not isinstance(event, ToolResult) or event.content:
        raise IntegrityError(
            f"{where}: the row names a content blob but is not an empty tool result"
            " (changed outside ctxline); run ctxline doctor"
        )
    return replace(event, content=load())


def whole_digest(event: Event) -> str:
    """The digest an external row's link was made from (one streaming pass)."""
    return encode_body(event).digest
