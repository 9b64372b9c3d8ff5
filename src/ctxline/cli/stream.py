"""Reads that print as they go: ``show``, ``requests`` and ``export`` on long timelines.

Why: laying out one rich table of 60,000 rows took ``ctxline show`` 129 s on a
20,000-step session before its first line, and ``requests`` 74 s. These commands now
read the timeline in chunks (each checked by the store like any read) and print each
chunk before reading the next; a result of at most :data:`TABLE_ROWS` rows is still
one table, exactly as before, and a longer one is a plain, aligned listing that starts
at once. ``--since`` and ``--limit`` page through it.

    for ev in events(store, "demo", "main", after_seq=200, limit=100):
        ...
"""

from __future__ import annotations

from collections.abc import Iterator

from ctxline.cli.common import BIDI_CONTROLS
from ctxline.record.events import StoredEvent
from ctxline.record.store import Store

__all__ = ["CHUNK", "TABLE_ROWS", "events", "plain"]

CHUNK = 1_000
"""Events read per store call."""

TABLE_ROWS = 500
"""Up to this many rows print as one table; more stream as plain lines."""

_CONTROLS = dict.fromkeys(
    (*range(0x00, 0x20), *range(0x7F, 0xA0), 0x2028, 0x2029, *map(ord, BIDI_CONTROLS)), "\ufffd"
)


def plain(text: str) -> str:
    """``text`` safe on one terminal line: what :func:`~ctxline.cli.common.printable` shows
    escaped in a table (control characters, line and paragraph separators, bidirectional
    overrides) as U+FFFD, in one ``str.translate``."""
    return text.translate(_CONTROLS)


def events(
    store: Store,
    session: str,
    timeline: str,
    *,
    after_seq: int = 0,
    limit: int | None = None,
    chunk: int = CHUNK,
) -> Iterator[StoredEvent]:
    """The visible events after ``after_seq`` (at most ``limit``), a chunk per store read."""
    seq, left = after_seq, limit
    while left is None or left > 0:
        want = chunk if left is None else min(chunk, left)
        got = store.read(session, timeline, after_seq=seq, limit=want)
        yield from got
        if len(got) < want:
            return
        seq = got[-1].seq
        if left is not None:
            left -= len(got)
