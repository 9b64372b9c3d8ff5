"""State from named sources (seed 000): a later value from the same source is current.

A ``state`` event is shown at the place it was appended, as
``<ctx-state source="…">value</ctx-state>`` (``cleared="true"`` when the source no longer
has a value); the value lives in history, the guide explains how to read it, and the
system prompt never changes because a value did. The fold reads the record, never
rendered text, so a forged tag inside a tool result cannot change the current value.

    >>> StateSource().history(State("env/date", "2026-11-03")).render()
    '<ctx-state source="env/date">2026-11-03</ctx-state>'
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ctxline.record.codec import canonical_json
from ctxline.record.events import Event, JsonValue, State, StoredEvent
from ctxline.sources.base import BaseSource, Block
from ctxline.sources.guide import STATE_KIND, MessageKind

__all__ = [
    "STATE_KIND",
    "StateFold",
    "StateSource",
    "current_state",
    "render_state",
    "state_block",
    "value_text",
]



def value_text(value: JsonValue) -> str:
    """A state value as text: strings as they are, anything else as canonical JSON."""
    return value if isinstance(value, str) else canonical_json(value).decode()


def state_block(event: State) -> Block:
    if event.cleared:
        return Block("ctx-state", None, (("source", event.source), ("cleared", "true")))
    return Block("ctx-state", value_text(event.value), (("source", event.source),))


def render_state(event: State) -> str:
    return state_block(event).render()


class StateFold:
    """The current value of every source that has one (later values win)."""

    def __init__(self) -> None:
        self.current: dict[str, State] = {}

    def feed(self, stored: StoredEvent) -> Sequence[MessageKind]:
        event = stored.event
        if not isinstance(event, State):
            return ()
        if event.cleared:
            self.current.pop(event.source, None)
        else:
            self.current[event.source] = event
        return (STATE_KIND,)


class StateSource(BaseSource):
    """Renders ``state`` events in history; its fold holds the current values."""

    name = "state"

    def fold(self) -> StateFold:
        return StateFold()

    def history(self, event: Event) -> Block | None:
        return state_block(event) if isinstance(event, State) else None


def current_state(events: Iterable[Event | StoredEvent]) -> dict[str, State]:
    """The current value of every source that has one (later values win)."""
    state: dict[str, State] = {}
    for item in events:
        event = item.event if isinstance(item, StoredEvent) else item
        if isinstance(event, State):
            if event.cleared:
                state.pop(event.source, None)
            else:
                state[event.source] = event
    return state
