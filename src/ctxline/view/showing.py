"""How the history shows what is not a plain message: sourced blocks, status snapshots,
side-channel time stamps; and what a step remembers of the request before it.

Split from :mod:`ctxline.view.cache` (which re-exports these names).

    render = history_renderer(sources)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from ctxline.record.events import Event, StatusSnapshot, StoredEvent, ToolResult, UserMessage
from ctxline.render.neutral import NeutralMessage
from ctxline.sources.base import Source
from ctxline.sources.status import snapshot_text
from ctxline.sources.timectx import side_channel_stamp

__all__ = ["PreviousRequest", "history_renderer", "stamped"]


@dataclass
class PreviousRequest:
    step: int
    frozen: list[NeutralMessage]
    frozen_count: int
    generation: int
    fingerprint: tuple[str, str]
    live: list[NeutralMessage]
    tail: tuple[str, ...]


def history_renderer(sources: Sequence[Source]) -> Callable[[Event], NeutralMessage | None]:
    """How history shows the events that are not messages: ctxline's own status snapshots,
    then the first source that renders the event (None: not shown)."""

    def render(event: Event) -> NeutralMessage | None:
        if isinstance(event, StatusSnapshot):  # ctxline's own kind: its text is ctxline's
            return NeutralMessage("user", snapshot_text(event))
        for source in sources:
            block = source.history(event)
            if block is not None:
                return NeutralMessage("user", block.render())
        return None

    return render


def stamped(stored: StoredEvent, zone: str) -> StoredEvent:
    """Seed 001's side-channel time stamp on user messages and tool results.

    It comes from the append time, which never changes, so it never breaks the cache.
    """
    ev = stored.event
    stamp = side_channel_stamp(stored.at, zone)
    if isinstance(ev, UserMessage):
        return replace(stored, event=replace(ev, text=f"{stamp} {ev.text}"))
    if isinstance(ev, ToolResult):
        return replace(stored, event=replace(ev, content=f"{stamp} {ev.content}"))
    return stored
