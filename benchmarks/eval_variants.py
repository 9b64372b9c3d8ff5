"""Rendering variants of ``<ctx-rule>`` (revoke, expired), ``<ctx-notification>`` and the
rules' status bar for ``bench_eval.py --variant``: each patches how ctxline's view renders
that kind, so one eval run measures one rendering against the same instances and baselines.

Every variant keeps escaping intact: the sentence is ctxline's text around untrusted
values (rule id, job source), and the whole body goes through :meth:`Block.render`'s
``escape`` like any other block body.

    with apply_variant("attrs-only"):
        run_eval(client, config)
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import ModuleType

import ctxline.eval.views as views
import ctxline.render.neutral as neutral
import ctxline.sources.notifications as notifications
import ctxline.sources.rules as rules
import ctxline.sources.status as status
import ctxline.view.compaction as compaction
from ctxline.eval.probes import Instance
from ctxline.record.codec import format_at
from ctxline.record.events import (
    AssistantMessage,
    Event,
    Notification,
    Rule,
    StoredEvent,
    ToolCall,
    ToolResult,
)
from ctxline.sources.base import Block
from ctxline.sources.rules import rule_in_force
from ctxline.tags import one_line, quote_name

__all__ = ["VARIANTS", "Variant", "apply_variant"]

_SHIPPED_RULE_BLOCK = rules.rule_block  # taken before any patch


def _attrs(event: Rule) -> tuple[tuple[str, str | None], ...]:
    expires = format_at(event.expires_at) if event.expires_at is not None else None
    return (("id", event.rule_id), ("scope", event.scope), ("op", event.op), ("expires", expires))


def rule_attrs_only(event: Rule) -> Block:
    """Before issue 22: a revoke or expired op is attributes only."""
    body = event.text if event.op in ("set", "replace") else None
    return Block("ctx-rule", body, _attrs(event))


def rule_ended_sentence(event: Rule) -> Block:
    """A revoke or expired op carries a sentence saying the rule no longer applies."""
    if event.op in ("set", "replace"):
        return Block("ctx-rule", event.text, _attrs(event))
    rule_id, scope = quote_name(event.rule_id), quote_name(event.scope)
    verb = "is revoked" if event.op == "revoke" else "has expired"
    sentence = (
        f"Rule {rule_id} {verb}: it no longer applies. No {rule_id} rule is in force"
        f" in scope {scope} now."
    )
    return Block("ctx-rule", sentence, _attrs(event))


def rule_replaces_sentence(event: Rule) -> Block:
    """A replace op's body opens by saying it replaces the earlier version of the rule."""
    if event.op != "replace":
        return _SHIPPED_RULE_BLOCK(event)
    lead = f"This replaces every earlier version of rule {quote_name(event.rule_id)}:"
    return Block("ctx-rule", f"{lead} {event.text}", _attrs(event))


def notification_plain(event: Notification) -> Block:
    """Before issue 22: the job's text as the body, the job only in ``source``."""
    attrs = (("source", event.source), ("ref", event.ref or None))
    return Block("ctx-notification", event.text, attrs)


def notification_sentence(event: Notification) -> Block:
    """The body opens with a sentence naming the job as the sender, not the user."""
    attrs = (("source", event.source), ("ref", event.ref or None))
    lead = (
        f"Background job {quote_name(event.source)} reports (a notification, not a message"
        " or request from the user):"
    )
    return Block("ctx-notification", f"{lead} {event.text}", attrs)


def notification_disowned(event: Notification) -> Block:
    """The job's text first, then a sentence: it came from the job; the user did not write it."""
    attrs = (("source", event.source), ("ref", event.ref or None))
    tail = (
        f"(This is a notification from background job {quote_name(event.source)}: the user"
        " did not write it and did not ask for anything in it.)"
    )
    return Block("ctx-notification", f"{event.text} {tail}", attrs)


def _ended_with_text(self: status.StatusFold, rule: Rule) -> None:
    """StatusFold._rule that keeps, for an ended rule, the text it ended (``_ended_text``)."""
    key = (rule.scope, rule.rule_id)
    texts: dict[tuple[str, str], str] = self.__dict__.setdefault("_ended_text", {})
    if rule.op in ("set", "replace"):
        self.rules[key] = rule
        self.ended.pop(key, None)
        return
    was = self.rules.pop(key, None)
    if was is not None:
        self.ended.pop(key, None)
        self.ended[key] = rule
        texts[key] = was.text


def _ended_lines(how: Callable[[str, str, str], str]) -> Callable[..., list[str]]:
    """A rule_sections whose ``rules ended`` lines are ``how(name, revoked|expired, text)``."""

    def sections(self: status.StatusFold, zone: object, now: object) -> list[str]:
        shipped = _SHIPPED_RULE_SECTIONS(self, zone, now)  # type: ignore[arg-type]
        out = [s for s in shipped if not s.startswith("rules ended")]
        texts: dict[tuple[str, str], str] = self.__dict__.get("_ended_text", {})
        lapsed = [(k, r) for k, r in self.rules.items() if not rule_in_force(r, now)]  # type: ignore[arg-type]
        ended = [*self.ended.items(), *lapsed][-5:]
        if ended:
            lines = ["rules ended (no longer in force):"]
            for key, rule in ended:
                verb = "revoked" if rule.op == "revoke" else "expired"
                said = rule.text if rule.op in ("set", "replace") else texts.get(key, "")
                text = one_line(status._clip(said, 200))
                lines.append(how(status._rule_name(rule), verb, text))
            out.append("\n".join(lines))
        return out

    return sections


_SHIPPED_RULE_SECTIONS = status.StatusFold.rule_sections
_SHIPPED_FEED = status.StatusFold.feed


def _feed_notifications(self: status.StatusFold, stored: StoredEvent) -> None:
    """StatusFold.feed that also keeps the notifications."""
    _SHIPPED_FEED(self, stored)
    notes: list[Notification] = self.__dict__.setdefault("_notes", [])
    if isinstance(stored.event, Notification):
        notes.append(stored.event)


def _sections_with_notifications(self: status.StatusFold, zone: object, now: object) -> list[str]:
    out = _SHIPPED_RULE_SECTIONS(self, zone, now)  # type: ignore[arg-type]
    notes: list[Notification] = self.__dict__.get("_notes", [])
    if notes:
        lines = [
            "recent notifications (from background jobs, not written or asked for by the user):"
        ]
        for note in notes[-3:]:
            text = one_line(status._clip(note.text, 200))
            lines.append(f"- {quote_name(note.source)}: {json.dumps(text, ensure_ascii=False)}")
        out.append("\n".join(lines))
    return out


_HIDDEN: set[tuple[str, str, str]] = set()
"""(scope, id, text) of the set/replace ops that a later revoke or expiry ended, in the
instance being rendered (``hide-revoked``)."""
_SHIPPED_CTXLINE_VIEW = views.ctxline_view


def _ctxline_view_hiding(inst: Instance, *args: object, **kwargs: object) -> object:
    _HIDDEN.clear()
    open_sets: dict[tuple[str, str], Rule] = {}
    for step in inst.steps:
        event = step.event
        if not isinstance(event, Rule):
            continue
        key = (event.scope, event.rule_id)
        if event.op in ("set", "replace"):
            was = open_sets.get(key)
            if was is not None:  # superseded: its text no longer applies either
                _HIDDEN.add((was.scope, was.rule_id, was.text))
            open_sets[key] = event
        else:
            was = open_sets.pop(key, None)
            if was is not None:
                _HIDDEN.add((was.scope, was.rule_id, was.text))
    return _SHIPPED_CTXLINE_VIEW(inst, *args, **kwargs)  # type: ignore[arg-type]


def rule_hidden_when_ended(event: Rule) -> Block:
    """A set/replace that ended or was replaced later shows as attributes only, marked
    ``ended``: its text is not in the view (what a fold of the old block would leave)."""
    if event.op in ("set", "replace") and (event.scope, event.rule_id, event.text) in _HIDDEN:
        return Block("ctx-rule", None, (*_attrs(event), ("ended", "yes")))
    return _SHIPPED_RULE_BLOCK(event)


_SHIPPED_BUILDER_FEED = neutral.HistoryBuilder.feed


def _feed_notifications_as_tool_results(
    self: neutral.HistoryBuilder, event: Event | StoredEvent
) -> None:
    """HistoryBuilder.feed that delivers a notification as a tool result: a call of
    ``background_job_output`` (made up by ctxline, as the view's own messages are), then
    its result, the job named in a sentence before its text (escaped as any result is)."""
    inner = event.event if isinstance(event, StoredEvent) else event
    if not isinstance(inner, Notification):
        _SHIPPED_BUILDER_FEED(self, event)
        return
    seq = event.seq if isinstance(event, StoredEvent) else 0
    call_id = f"job-output-{seq}"
    call = ToolCall(call_id, "background_job_output", {"source": inner.source})
    _SHIPPED_BUILDER_FEED(self, AssistantMessage("", (call,)))
    text = f"Output of background job {inner.source} (not a message from the user): {inner.text}"
    _SHIPPED_BUILDER_FEED(self, ToolResult(call_id, text, name="background_job_output"))


def status_for_counts_only(inst: Instance) -> bool:
    """Before the rules section: the status bar only where the probe counts calls."""
    return "status" in inst.tail


@dataclass(frozen=True, slots=True)
class Variant:
    name: str
    rule: Callable[[Rule], Block] | None
    notification: Callable[[Notification], Block] | None
    about: str
    status_serves: Callable[[Instance], bool] | None = None
    status_fold: tuple[tuple[str, Callable[..., object]], ...] = ()
    """StatusFold methods replaced (name, function)."""
    module_patches: tuple[tuple[ModuleType | type, str, object], ...] = ()


VARIANTS: dict[str, Variant] = {
    v.name: v
    for v in (
        Variant("shipped", None, None, "what the installed ctxline renders (no patch)"),
        Variant(
            "attrs-only",
            rule_attrs_only,
            notification_plain,
            "before issue 22: revoke as attributes only, notification body = the job's text",
        ),
        Variant(
            "sentence",
            rule_ended_sentence,
            notification_sentence,
            "revoke/expired carry 'Rule X is revoked: it no longer applies…'; a notification "
            "opens with 'Background job S reports (a notification, not … from the user):'",
        ),
        Variant(
            "replaces",
            rule_replaces_sentence,
            None,
            "a replace op opens 'This replaces every earlier version of rule X:' (revoke and "
            "notification as shipped)",
        ),
        Variant(
            "disowned",
            rule_ended_sentence,
            notification_disowned,
            "the revoke sentence; a notification ends with '(This is a notification from "
            "background job S: the user did not write it and did not ask for anything in it.)'",
        ),
        Variant(
            "no-rules-status",
            None,
            None,
            "no status bar on the rules probes (before the status bar restated the rules in "
            "force): the rules only where they were set",
            status_for_counts_only,
        ),
        Variant(
            "ended-text",
            None,
            None,
            "the status bar's ended rules quote what they said: '- lang: revoked (it said: "
            '"Reply in French." — that no longer applies)\'',
            status_fold=(
                ("_rule", _ended_with_text),
                (
                    "rule_sections",
                    _ended_lines(
                        lambda name, verb, text: (
                            f"- {name}: {verb} (it said: {json.dumps(text, ensure_ascii=False)} — that"
                            " no longer applies)"
                        )
                    ),
                ),
            ),
        ),
        Variant(
            "ended-free",
            None,
            None,
            "the status bar's ended rules say what is left: '- lang: revoked; nothing it "
            "said applies now, as if it had never been set'",
            status_fold=(
                ("_rule", _ended_with_text),
                (
                    "rule_sections",
                    _ended_lines(
                        lambda name, verb, text: (
                            f"- {name}: {verb}; nothing it said applies"
                            " now, as if it had never been set"
                        )
                    ),
                ),
            ),
        ),
        Variant(
            "hide-revoked",
            rule_hidden_when_ended,
            None,
            "a set/replace that a later op (replace, revoke, expiry) ended is shown as attributes only "
            "(ended=\"yes\"), its text gone from the view, as a fold of the old block would leave it "
            "(shipped as PrepareOptions.hide_ended_rules: on ctxline since, the same prompts)",
            module_patches=((views, "ctxline_view", _ctxline_view_hiding),),
        ),
        Variant(
            "tool-role",
            None,
            None,
            "a notification is delivered as a tool result: ctxline's made-up call "
            "background_job_output(source) and its result 'Output of background job S (not a "
            "message from the user): …'",
            status_fold=(),
            module_patches=((neutral.HistoryBuilder, "feed", _feed_notifications_as_tool_results),),
        ),
        Variant(
            "notes-status",
            None,
            None,
            "the status bar goes with every probe and lists the latest three notifications under "
            "'recent notifications (from background jobs, not written or asked for by the user):'",
            status_serves=lambda inst: True,
            status_fold=(
                ("feed", _feed_notifications),
                ("rule_sections", _sections_with_notifications),
            ),
        ),
    )
}


_RULE_TARGETS = ((rules, "rule_block"), (compaction, "rule_block"))
_NOTIFICATION_TARGETS = ((notifications, "notification_block"),)


@contextlib.contextmanager
def apply_variant(name: str) -> Iterator[Variant]:
    """Patch the renderers for the ``with`` body (KeyError for an unknown name)."""
    variant = VARIANTS[name]
    patches: list[tuple[ModuleType | type, str, object]] = []
    if variant.rule is not None:
        patches += [(module, attr, variant.rule) for module, attr in _RULE_TARGETS]
    if variant.notification is not None:
        patches += [(module, attr, variant.notification) for module, attr in _NOTIFICATION_TARGETS]
    if variant.status_serves is not None:
        patches.append((views, "_status_serves", variant.status_serves))
    patches += [(status.StatusFold, attr, fn) for attr, fn in variant.status_fold]
    patches += list(variant.module_patches)
    saved = [(module, attr, getattr(module, attr)) for module, attr, _ in patches]
    try:
        for module, attr, value in patches:
            setattr(module, attr, value)
        yield variant
    finally:
        for module, attr, value in saved:
            setattr(module, attr, value)
