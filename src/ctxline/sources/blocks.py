"""Sourced blocks in history, and the folds that give current state and valid rules.

State, rules and notifications are rendered as user-role messages at the place they
were appended (seed 000): the value lives in history, the guide explains how to read
it, and the system prompt never changes because a value did. All text inside a block
is escaped (:func:`ctxline.tags.escape`); attributes are escaped as attributes.

The folds read the record, never rendered text, so a forged tag inside a tool result
cannot change them:

- :func:`current_state`: the latest value per source (``cleared`` removes it);
- :func:`valid_rules`: per (scope, id), the latest ``set``/``replace`` unless a later
  ``revoke``/``expired`` ended it, or its ``expires_at`` has passed.

    >>> render_state(State("env/date", "2026-11-03"))
    '<ctx-state source="env/date">2026-11-03</ctx-state>'
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from ctxline.record.events import (
    Event,
    JsonValue,
    Notification,
    Rule,
    State,
    StatusSnapshot,
    StoredEvent,
    canonical_json,
    format_at,
)
from ctxline.render.neutral import NeutralMessage
from ctxline.tags import element, escape

__all__ = [
    "BranchMark",
    "current_state",
    "render_branch",
    "render_other",
    "render_rule",
    "render_state",
    "rule_in_force",
    "valid_rules",
    "value_text",
]


def value_text(value: JsonValue) -> str:
    """A state value as text: strings as they are, anything else as canonical JSON."""
    return value if isinstance(value, str) else canonical_json(value).decode()


def render_state(event: State) -> str:
    if event.cleared:
        return element("ctx-state", None, source=event.source, cleared="true")
    return element("ctx-state", escape(value_text(event.value)), source=event.source)


def render_rule(event: Rule) -> str:
    expires = format_at(event.expires_at) if event.expires_at is not None else None
    body = escape(event.text) if event.op in ("set", "replace") else None
    return element(
        "ctx-rule", body, id=event.rule_id, scope=event.scope, op=event.op, expires=expires
    )


def render_notification(event: Notification) -> str:
    return element(
        "ctx-notification", escape(event.text), source=event.source, ref=event.ref or None
    )


@dataclass(frozen=True, slots=True)
class BranchMark:
    """A fork point in a timeline's ancestry: the view shows ``name``'s identity there."""

    name: str
    parent: str
    fork_seq: int


def render_branch(mark: BranchMark) -> str:
    """The branch identity, as attributes and as a sentence (a small model read the
    attributes-only form badly in ``ctxline eval``: it answered the parent's name)."""
    sentence = (
        f"You are now on branch {mark.name}, forked from {mark.parent} after its event"
        f" {mark.fork_seq}; what follows happened on {mark.name} only."
    )
    return element(
        "ctx-branch",
        escape(sentence),
        name=mark.name,
        parent=mark.parent,
        fork_seq=str(mark.fork_seq),
    )


def render_other(event: Event) -> NeutralMessage | None:
    """The user-role message of a sourced event, or None for kinds not shown in history."""
    text: str | None = None
    if isinstance(event, State):
        text = render_state(event)
    elif isinstance(event, Rule):
        text = render_rule(event)
    elif isinstance(event, Notification):
        text = render_notification(event)
    elif isinstance(event, StatusSnapshot):
        text = event.text  # rendered by ctxline from the record; untrusted parts already escaped
    # A Compaction imported from another agent's log is kept in the record but not shown:
    # the history it summarized is still in the record, and ctxline's own budget decides
    # what the view keeps (see ctxline.view.compaction).
    return None if text is None else NeutralMessage("user", text)


# --- folds -------------------------------------------------------------------------


def _events(items: Iterable[Event | StoredEvent]) -> Iterable[Event]:
    for item in items:
        yield item.event if isinstance(item, StoredEvent) else item


def current_state(events: Iterable[Event | StoredEvent]) -> dict[str, State]:
    """The current value of every source that has one (later values win)."""
    state: dict[str, State] = {}
    for event in _events(events):
        if isinstance(event, State):
            if event.cleared:
                state.pop(event.source, None)
            else:
                state[event.source] = event
    return state


def rule_in_force(rule: Rule, now: datetime | None) -> bool:
    return rule.expires_at is None or now is None or now < rule.expires_at


def valid_rules(
    events: Iterable[Event | StoredEvent], now: datetime | None = None
) -> dict[tuple[str, str], Rule]:
    """Rules in force per (scope, rule id): the latest set/replace form, not revoked or expired.

    With ``now``, a rule whose ``expires_at`` is not after ``now`` has expired.
    """
    rules: dict[tuple[str, str], Rule] = {}
    for event in _events(events):
        if not isinstance(event, Rule):
            continue
        key = (event.scope, event.rule_id)
        if event.op in ("set", "replace"):
            rules[key] = event
        else:
            rules.pop(key, None)
    return {key: rule for key, rule in rules.items() if rule_in_force(rule, now)}
