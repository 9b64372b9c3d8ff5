"""Slot events in history, with or without the environment that wrote them.

An environment (:mod:`ctxline.environment`) whose block is placed by *appending* records
each new version of its ``<ctx-env>`` block as a ``slot`` event with op ``snapshot``. That
event is part of the history every later request shows, so every view of the timeline —
a rebuild from the CLI, the inspector, a Context without the environment — must render it
the same way: this source does, as one of the history sources. Other slot ops render
nothing (their effect is in the block). The body was computed and escaped by ctxline
line by line; rendering escapes it again, which changes nothing.

    >>> from ctxline.record.events import Slot
    >>> SnapshotSource().history(Slot("environment", "snapshot", "\\ngoal: x\\n")).render()
    '<ctx-env>\\ngoal: x\\n</ctx-env>'
"""

from __future__ import annotations

from collections.abc import Sequence

from ctxline.record.events import Event, Slot, StoredEvent
from ctxline.sources.base import BaseSource, Block
from ctxline.sources.guide import MessageKind

__all__ = ["ENV_KIND", "SnapshotFold", "SnapshotSource"]

ENV_KIND = MessageKind(
    "ctx-env",
    "your environment: the goal, the constraints, the steps and the other slots, each with "
    "when and by whom it was last updated; slots to read with read_slot; actions still locked",
    "ctxline computes it from the record after every change: the latest <ctx-env> is the current "
    "state. Change it only through the environment actions (they check every change); a "
    "constraint written by the model is a reminder and grants nothing.",
    owner="environment",
)


class SnapshotFold:
    """Brings the guide line of ``<ctx-env>`` with the first snapshot in history."""

    def feed(self, stored: StoredEvent) -> Sequence[MessageKind]:
        event = stored.event
        return (ENV_KIND,) if isinstance(event, Slot) and event.op == "snapshot" else ()


class SnapshotSource(BaseSource):
    """Renders ``slot`` snapshots in history as ``<ctx-env>`` blocks."""

    name = "slots"

    def fold(self) -> SnapshotFold:
        return SnapshotFold()

    def history(self, event: Event) -> Block | None:
        if isinstance(event, Slot) and event.op == "snapshot" and isinstance(event.value, str):
            return Block("ctx-env", event.value)
        return None
