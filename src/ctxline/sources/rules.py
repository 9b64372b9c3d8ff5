"""Scoped rules (seed 000): ``set``/``replace`` put a rule in force, ``revoke``/``expired`` end it.

A ``rule`` event is shown at its place as ``<ctx-rule id scope op>text</ctx-rule>``.
The fold keeps the rules with an ``expires_at``; when a request is prepared after that
time, the step appends the ``expired`` op (a fact, so a rebuild and every later view
agree on when it ended). Rules in force come from the record, never from text.

    >>> RuleSource().history(Rule("keep-logs", "set", text="Never delete .log files")).render()
    '<ctx-rule id="keep-logs" scope="session" op="set">Never delete .log files</ctx-rule>'
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from ctxline.record.codec import format_at
from ctxline.record.events import Event, Rule, StoredEvent
from ctxline.sources.base import BaseSource, Block, SourceStep, StepContext
from ctxline.sources.guide import RULE_KIND, MessageKind

__all__ = [
    "RULE_KIND",
    "RuleFold",
    "RuleSource",
    "ended_rule_block",
    "render_rule",
    "rule_block",
    "rule_in_force",
    "valid_rules",
]



def _attrs(event: Rule) -> tuple[tuple[str, str | None], ...]:
    expires = format_at(event.expires_at) if event.expires_at is not None else None
    return (("id", event.rule_id), ("scope", event.scope), ("op", event.op), ("expires", expires))


def rule_block(event: Rule) -> Block:
    body = event.text if event.op in ("set", "replace") else None
    return Block("ctx-rule", body, _attrs(event))


def ended_rule_block(event: Rule) -> Block:
    """A set/replace that a later op ended, as the view shows it: its attributes and
    ``ended="yes"``, no text (``PrepareOptions.hide_ended_rules``)."""
    return Block("ctx-rule", None, (*_attrs(event), ("ended", "yes")))


def render_rule(event: Rule) -> str:
    return rule_block(event).render()


def rule_in_force(rule: Rule, now: datetime | None) -> bool:
    return rule.expires_at is None or now is None or now < rule.expires_at


class RuleFold:
    """The rules with an expiry that are still in force, per (scope, id)."""

    def __init__(self) -> None:
        self.timed: dict[tuple[str, str], Rule] = {}

    def feed(self, stored: StoredEvent) -> Sequence[MessageKind]:
        event = stored.event
        if not isinstance(event, Rule):
            return ()
        key = (event.scope, event.rule_id)
        if event.op in ("set", "replace") and event.expires_at is not None:
            self.timed[key] = event
        else:
            self.timed.pop(key, None)
        return (RULE_KIND,)


class RuleSource(BaseSource):
    """Renders ``rule`` events; appends the ``expired`` op of timed rules whose time has come."""

    name = "rules"

    def fold(self) -> RuleFold:
        return RuleFold()

    def history(self, event: Event) -> Block | None:
        return rule_block(event) if isinstance(event, Rule) else None

    def step(self, fold: RuleFold, ctx: StepContext) -> SourceStep:
        expired = tuple(
            Rule(r.rule_id, "expired", scope=r.scope)
            for r in fold.timed.values()
            if r.expires_at is not None and r.expires_at <= ctx.now
        )
        return SourceStep(events=expired)


def valid_rules(
    events: Iterable[Event | StoredEvent], now: datetime | None = None
) -> dict[tuple[str, str], Rule]:
    """Rules in force per (scope, rule id): the latest set/replace form, not revoked or expired.

    With ``now``, a rule whose ``expires_at`` is not after ``now`` has expired.
    """
    rules: dict[tuple[str, str], Rule] = {}
    for item in events:
        event = item.event if isinstance(item, StoredEvent) else item
        if not isinstance(event, Rule):
            continue
        key = (event.scope, event.rule_id)
        if event.op in ("set", "replace"):
            rules[key] = event
        else:
            rules.pop(key, None)
    return {key: rule for key, rule in rules.items() if rule_in_force(rule, now)}
