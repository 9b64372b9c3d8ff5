"""The mark a redacted event carries, read without a store.

Why: the view's rebuild must tell a logged request whose bytes changed because a
redaction replaced a text (``forget``) from one that was damaged, and the view never
imports the store (the layer contract). The mark is part of the event itself, so reading
it needs only the event::

    >>> from ctxline.record.events import UserMessage
    >>> redaction_of(UserMessage("[erased]", {REDACTED_KEY: {"digest": "sha256:…"}}))
    {'digest': 'sha256:…'}
    >>> redaction_of(UserMessage("hello")) is None
    True

Writing redactions lives in :mod:`ctxline.record.store.redaction`.
"""

from __future__ import annotations

from ctxline.record.events import Event, JsonValue, UnknownEvent

__all__ = ["REDACTED_KEY", "redaction_of"]

REDACTED_KEY = "ctxline.redacted"
"""The meta key of a redacted event's mark."""


def _meta(event: Event) -> dict[str, JsonValue]:
    if isinstance(event, UnknownEvent):
        meta = event.data.get("meta")
        return meta if isinstance(meta, dict) else {}
    return event.meta


def redaction_of(event: Event) -> dict[str, JsonValue] | None:
    """The redaction mark of ``event`` (``digest``, ``why``, ``at``), or None."""
    mark = _meta(event).get(REDACTED_KEY)
    return mark if isinstance(mark, dict) else None
