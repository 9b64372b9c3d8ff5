"""Background notifications (seed 000): the result of earlier work, never a user request.

    >>> NotificationSource().history(Notification("exec/job-7", "build finished, exit 0")).render()
    '<ctx-notification source="exec/job-7">build finished, exit 0</ctx-notification>'
"""

from __future__ import annotations

from collections.abc import Sequence

from ctxline.record.events import Event, Notification, StoredEvent
from ctxline.sources.base import BaseSource, Block
from ctxline.sources.guide import NOTIFICATION_KIND, MessageKind

__all__ = ["NOTIFICATION_KIND", "NotificationSource", "notification_block"]



def notification_block(event: Notification) -> Block:
    attrs = (("source", event.source), ("ref", event.ref or None))
    return Block("ctx-notification", event.text, attrs)


class _Fold:
    def feed(self, stored: StoredEvent) -> Sequence[MessageKind]:
        return (NOTIFICATION_KIND,) if isinstance(stored.event, Notification) else ()


class NotificationSource(BaseSource):
    """Renders ``notification`` events at their place in history."""

    name = "notifications"

    def fold(self) -> _Fold:
        return _Fold()

    def history(self, event: Event) -> Block | None:
        return notification_block(event) if isinstance(event, Notification) else None
