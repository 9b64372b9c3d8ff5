"""One instance, three requests built from the same facts.

- ``ctxline``: the record goes into a store (forks made with ``Store.fork``, a
  compaction appended as the ``Reduction`` the budget ladder would append) and the
  body is ``Context.prepare``'s (without the built-in tools: no view offers tools) —
  persona plus guide in the system prompt, sourced
  ``ctx-`` blocks in history, escaped tool output, and the status or time block in
  the tail where the family uses one (the status bar on ``counters`` and ``rules``: its
  call counts and the rules in force; never an empty one).
- ``roles``: the same events as plain user/assistant text (``env/date: 2026-11-03``,
  ``Rule reply-language is revoked.``, ``You are now on branch fix-auth…``), no guide,
  no tags, nothing escaped; a compaction becomes a plain summary message.
- ``snapshot``: the ``roles`` history, with the current values (from the same folds
  ctxline uses) written into the system prompt.

Bodies are rendered for ``provider`` with the same renderers, so only the view differs.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ctxline.context import Context
from ctxline.eval.probes import Instance, Step
from ctxline.models.base import Provider
from ctxline.record.events import (
    AssistantMessage,
    Event,
    Notification,
    Pending,
    Reduction,
    Rule,
    State,
    StoredEvent,
    SystemMessage,
    UserMessage,
)
from ctxline.record.jsonvalue import as_int
from ctxline.record.store import MAIN, MemoryStore
from ctxline.render.anthropic import to_anthropic
from ctxline.render.neutral import HistoryBuilder, NeutralRequest
from ctxline.render.openai import to_openai
from ctxline.sources.guide import GuideRegistry
from ctxline.sources.rules import valid_rules
from ctxline.sources.state import current_state, value_text
from ctxline.sources.status import STATUS_KIND, StatusConfig, StatusFold, says_nothing
from ctxline.sources.timectx import (
    TIME_KIND,
    TimeConfig,
    render_time,
    side_channel_stamp,
    time_block,
)
from ctxline.tokens.counters import TokenCounter
from ctxline.view.compaction import COMPACTION_KINDS, extractive_summary
from ctxline.view.measure import FRAMING_TOKENS, message_text
from ctxline.view.options import PrepareOptions

__all__ = ["PERSONA", "VIEWS", "Rendered", "render_views"]

VIEWS = ("ctxline", "roles", "snapshot")
PERSONA = (
    "You are the assistant model of a software agent. Read your whole input, then answer "
    "the user's last question with the short exact answer it asks for."
)
SUMMARY_TOKENS = 600
SESSION = "eval"
STATUS = StatusConfig(fail_threshold=0, repeat_threshold=0)


@dataclass(frozen=True, slots=True)
class Rendered:
    view: str
    body: dict[str, Any]
    estimated_tokens: int
    """ctxline's estimate of the request's input tokens (the preparation report's total)."""


def _compaction(events: Sequence[StoredEvent], upto: int, counter: TokenCounter) -> Reduction:
    task = next(ev.seq for ev in events if isinstance(ev.event, UserMessage))
    span = [ev for ev in events[:upto] if ev.seq != task]
    summary = extractive_summary(span, SUMMARY_TOKENS, counter)
    return Reduction("compact", upto_seq=upto, keep=(task,), summary=summary)


def _status_serves(inst: Instance) -> bool:
    """The status bar goes with the families whose facts it restates: call counts (the
    ``status`` tail) and the rules in force."""
    return "status" in inst.tail or any(isinstance(step.event, Rule) for step in inst.steps)


def ctxline_view(
    inst: Instance, options: PrepareOptions, counter: TokenCounter
) -> tuple[dict[str, Any], int]:
    ids = itertools.count(1)
    store = MemoryStore(clock=lambda: inst.now, new_id=lambda: f"{inst.id}-{next(ids):05d}")
    guide = GuideRegistry()
    if _status_serves(inst):
        guide.register(STATUS_KIND)
    if "time" in inst.tail:
        guide.register(TIME_KIND)
    if inst.compact_after:
        for kind in COMPACTION_KINDS:
            guide.register(kind)
    store.create_session(SESSION)
    timeline = MAIN
    store.append(SESSION, [SystemMessage(PERSONA)], timeline=timeline)
    taken = 0
    for fork in [*inst.forks, None]:
        upto = fork.after if fork is not None else len(inst.steps)
        chunk = [Pending(step.event, at=step.at) for step in inst.steps[taken:upto]]
        if chunk:
            store.append(SESSION, chunk, timeline=timeline)
        taken = upto
        if fork is not None:
            head = store.head(SESSION, timeline)
            store.fork(SESSION, timeline, head, fork.name)
            timeline = fork.name
    ctx = Context(
        store,
        SESSION,
        timeline,
        guide=guide,
        options=options,
        counter=counter,
        clock=lambda: inst.now,
        builtin_tools=(),  # the baselines offer no tools either
    )
    if inst.compact_after:
        # the compaction is recorded when the question arrives; it covers the persona too
        question = ctx.events[-1]
        upto = inst.compact_after + 1  # +1: the persona is seq 1
        if question.seq <= upto:
            raise AssertionError("the compaction must leave the question out")
        # ctxline itself writes the reduction here (it is ctxline's own kind)
        ctx.writer.append([_compaction(ctx.events, upto, counter)], authority="ctxline")
        ctx.refresh()
    tail: list[str] = []
    if _status_serves(inst):
        # the status bar as an agent sends it (never while it has nothing to say)
        fold = StatusFold(STATUS).update(ctx.events)
        if not says_nothing(fold.body()):
            tail.append(fold.render())
    if "time" in inst.tail:
        tail.append(render_time(time_block(ctx.events, inst.now, TimeConfig(), None)))
    prep = ctx.prepare(now=inst.now, tail=tail, log=False)
    tokens = prep.report["tokens"]
    assert isinstance(tokens, dict)
    return prep.body, as_int(tokens["total"], "report.tokens.total")


# --- the plain views ------------------------------------------------------------------


def plain_rule(rule: Rule) -> str:
    if rule.op == "set":
        return f"Rule {rule.rule_id}: {rule.text}"
    if rule.op == "replace":
        return f"Rule {rule.rule_id} (replaces its earlier version): {rule.text}"
    return f"Rule {rule.rule_id} is {'revoked' if rule.op == 'revoke' else 'expired'}."


def _plain(step: Step, stamps: bool) -> Event | None:
    event = step.event
    stamp = side_channel_stamp(step.at) + " " if stamps else ""
    if isinstance(event, UserMessage):
        return UserMessage(stamp + event.text)
    if isinstance(event, AssistantMessage):
        return AssistantMessage(stamp + event.text if event.text else event.text, event.tool_calls)
    if isinstance(event, State):
        return UserMessage(
            f"{event.source}: {'(cleared)' if event.cleared else value_text(event.value)}"
        )
    if isinstance(event, Rule):
        return UserMessage(plain_rule(event))
    if isinstance(event, Notification):
        return UserMessage(f"{event.source}: {event.text}")
    return event


def plain_history(inst: Instance, counter: TokenCounter) -> list[Event]:
    forks = {f.after: f for f in inst.forks}
    events: list[Event] = []
    cut = 0
    for i, step in enumerate(inst.steps):
        fork = forks.get(i)
        if fork is not None:
            events.append(
                UserMessage(f"You are now on branch {fork.name}, forked from {fork.parent}.")
            )
        plain = _plain(step, inst.stamps)
        if plain is not None:
            events.append(plain)
        if inst.compact_after and i + 1 == inst.compact_after:
            cut = len(events)
    if not cut:
        return events
    stored = [StoredEvent(n + 1, f"p{n}", inst.now, e) for n, e in enumerate(events[:cut])]
    summary = extractive_summary(stored[1:], SUMMARY_TOKENS, counter)
    return [
        events[0],
        UserMessage("Summary of the earlier conversation:\n" + summary),
        *events[cut:],
    ]


def snapshot_lines(inst: Instance) -> list[str]:
    """The current values, as the snapshot baseline writes them into the system prompt."""
    events = [s.event for s in inst.steps]
    lines: list[str] = []
    for source, state in current_state(events).items():
        lines.append(f"- {source}: {value_text(state.value)}")
    if any(isinstance(e, Rule) for e in events):
        rules = valid_rules(events)
        text = "; ".join(f"{r.rule_id}: {r.text}" for r in rules.values()) or "none"
        lines.append(f"- rules in force: {text}")
    if inst.forks:
        fork = inst.forks[-1]
        lines.append(f"- current branch: {fork.name} (forked from {fork.parent})")
    if "status" in inst.tail:
        fold = StatusFold(STATUS)
        for n, step in enumerate(inst.steps):
            fold.feed(StoredEvent(n + 1, f"s{n}", step.at, step.event))
        counts = ", ".join(f"{name} {k}" for name, k in fold.counts.items()) or "none"
        lines.append(f"- tool calls so far: {counts}")
    if "time" in inst.tail:
        stored = [StoredEvent(n + 1, f"t{n}", s.at, s.event) for n, s in enumerate(inst.steps)]
        reading = time_block(stored, inst.now, TimeConfig(), None)
        lines.extend(f"- {line}" for line in reading.text.split("\n"))
    return lines


def _plain_body(
    system: str,
    events: Sequence[Event],
    provider: Provider,
    options: PrepareOptions,
    counter: TokenCounter,
) -> tuple[dict[str, Any], int]:
    builder = HistoryBuilder(None, escape=lambda text: text)
    for event in events:
        builder.feed(event)
    messages = tuple(builder.messages())
    request = NeutralRequest(system, (), messages)
    if provider == "anthropic":
        body = to_anthropic(request, model=options.model, max_tokens=options.max_output)
    else:
        body = to_openai(request, model=options.model, max_tokens=options.max_output)
    tokens = (
        counter.count(system)
        + FRAMING_TOKENS
        + sum(counter.count(message_text(m)) + FRAMING_TOKENS for m in messages)
    )
    return body, tokens


def render_views(
    inst: Instance, provider: Provider, options: PrepareOptions, counter: TokenCounter
) -> list[Rendered]:
    """The instance as ctxline's view and the two baselines, in :data:`VIEWS` order."""
    body, tokens = ctxline_view(inst, options, counter)
    out = [Rendered("ctxline", body, tokens)]
    history = plain_history(inst, counter)
    body, tokens = _plain_body(PERSONA, history, provider, options, counter)
    out.append(Rendered("roles", body, tokens))
    snapshot = PERSONA + "\n\nCurrent values:\n" + "\n".join(snapshot_lines(inst))
    body, tokens = _plain_body(snapshot, history, provider, options, counter)
    out.append(Rendered("snapshot", body, tokens))
    return out
