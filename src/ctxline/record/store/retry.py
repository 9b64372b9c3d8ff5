"""Appending from many workers: re-read the head after each conflict and try again.

Works with any :class:`~ctxline.record.store.base.Store` (it is exported from
:mod:`ctxline.record.store.postgres`, where many workers are the norm, too).

    append_with_retry(store, "run-7", lambda head: [Pending(UserMessage("hi"), id="w1-1")])
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence

from ctxline.errors import Conflict, ValidationError
from ctxline.record.events import Event, Pending, StoredEvent
from ctxline.record.store.base import MAIN, Store

__all__ = ["append_with_retry"]


def append_with_retry(
    store: Store,
    session: str,
    make_events: Callable[[int], Sequence[Event | Pending]],
    *,
    timeline: str = MAIN,
    attempts: int = 10,
    retry_on: tuple[type[BaseException], ...] = (),
    on_conflict: Callable[[Conflict], None] | None = None,
) -> list[StoredEvent]:
    """Append ``make_events(head)`` at ``head``, re-reading the head after each Conflict.

    ``make_events`` gets the head it will be appended after, so it can decide what to
    write from what it has seen. Errors in ``retry_on`` (for example
    ``psycopg.OperationalError``, a dropped connection) are retried too; that is
    exactly-once only when the events carry client ids and the same content each
    time, so a batch that did commit is recognised and returned. The last error is
    raised after ``attempts`` tries. Works with any :class:`Store`.
    """
    if attempts < 1:
        raise ValidationError(f"attempts must be at least 1, got {attempts}", field="attempts")
    for attempt in range(1, attempts + 1):
        try:
            head = store.head(session, timeline)
            return store.append(session, make_events(head), expected_seq=head, timeline=timeline)
        except Conflict as exc:
            if on_conflict is not None:
                on_conflict(exc)
            if attempt == attempts:
                raise
        except retry_on:
            if attempt == attempts:
                raise
        time.sleep(random.uniform(0, min(0.05, 0.001 * 2**attempt)))
    raise AssertionError("unreachable")
