"""``prepare``: the exact request the model will see, and the report of how it was built.

Rendering a step is a pure function of the fed cache (the record so far), the options and
the step inputs (the time, the tail blocks): the same arguments give the same bytes. It
does no I/O. The layout keeps the prefix stable for provider caches:

    [tools] [system: persona + guide] [history, in append order] [tail]

The persona is the record's system messages; the guide and the tool schemas are the
latest ``guide`` and ``tools`` events in the record, so a request can be rebuilt from
the record alone. History renders user, assistant and tool messages with pairing
repaired, and sourced blocks at their place. A :class:`ViewCache` makes steady-state
steps cost O(new events): frozen messages are rendered, serialized and counted once.

:func:`prepare` is the cold form (a fresh cache over ``events``) that rebuilds use;
agents go through :meth:`ctxline.Context.prepare`, which plans the whole step
(:func:`ctxline.view.step.plan_step`).

    prep = prepare(store.read("demo"), PrepareOptions(provider="openai", model="gpt-4.1"))
    client.chat.completions.create(**prep.body)
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from ctxline.record.codec import canonical_json
from ctxline.record.events import Guide, JsonValue, RequestHeader, StoredEvent
from ctxline.render.ids import IdMap
from ctxline.render.neutral import NeutralMessage, ToolSpec
from ctxline.render.stream import BodyParts
from ctxline.sources.base import Source
from ctxline.sources.branch import BranchMark
from ctxline.sources.defaults import history_sources
from ctxline.tags import escape
from ctxline.tokens.counters import CountLookup, TokenCounter, get_counter
from ctxline.view.cache import PreviousRequest, ViewCache, ViewSetup
from ctxline.view.measure import FRAMING_TOKENS, ViewMessage, message_text
from ctxline.view.options import PrepareOptions, Provider, StepInputs
from ctxline.view.report import (
    MANY_TOOLS,
    Action,
    Budget,
    CostReport,
    FirstDifference,
    Pairing,
    PrefixReport,
    Report,
    Section,
    TokenSections,
    action_of,
    shared_prefix,
)

__all__ = ["HistoryView", "Preparation", "prepare", "render_step", "view_messages"]


@dataclass(frozen=True, slots=True)
class HistoryView:
    """The history of one prepared view, by reference: frozen lists only ever grow."""

    frozen: Sequence[NeutralMessage] = ()
    frozen_tokens: Sequence[int] = ()
    count: int = 0
    open: Sequence[NeutralMessage] = ()
    open_tokens: Sequence[int] = ()

    def messages(self) -> list[ViewMessage]:
        frozen = zip(self.frozen[: self.count], self.frozen_tokens[: self.count], strict=True)
        out = [ViewMessage(m, t) for m, t in frozen]
        out.extend(ViewMessage(m, t) for m, t in zip(self.open, self.open_tokens, strict=True))
        return out


@dataclass(frozen=True)
class Preparation:
    """A prepared request: its canonical bytes, hash, report and the header to log."""

    parts: BodyParts
    sha256: str
    report: Report
    header: RequestHeader
    guide: Guide | None = None
    history: HistoryView = HistoryView()

    @cached_property
    def messages(self) -> tuple[ViewMessage, ...]:
        """The history of the view, message by message with its tokens and record seq."""
        return tuple(self.history.messages())

    @cached_property
    def body_bytes(self) -> bytes:
        """The canonical bytes of the body (joined on first use)."""
        return self.parts.join()

    @property
    def body(self) -> dict[str, Any]:
        """The body as a dict, ready for ``client.chat.completions.create(**body)``."""
        parsed: dict[str, Any] = json.loads(self.body_bytes)
        return parsed


def _count(cache: ViewCache, setup: ViewSetup, messages: Sequence[NeutralMessage]) -> list[int]:
    counts = cache.count_texts([message_text(m) for m in messages], setup)
    return [n + FRAMING_TOKENS for n in counts]


def view_messages(cache: ViewCache, setup: ViewSetup) -> list[ViewMessage]:
    """The history of the cache's view, message by message with its tokens."""
    frozen = [
        ViewMessage(m, t) for m, t in zip(cache.builder.frozen, cache.frozen_tokens, strict=True)
    ]
    live = cache.builder.open_messages()
    return frozen + [ViewMessage(m, t) for m, t in zip(live, _count(cache, setup, live), strict=True)]


def _tools_json(cache: ViewCache, tools: tuple[ToolSpec, ...]) -> str:
    """The tools as canonical JSON (counted as the report's ``tools``), once per set."""
    if not tools:
        return ""
    if cache.tools_json[0] != tools:  # the fold keeps one tuple per tools event
        listed: list[JsonValue] = [
            {"name": t.name, "description": t.description, "parameters": t.parameters}
            for t in tools
        ]
        cache.tools_json = (tools, canonical_json(listed).decode())
    return cache.tools_json[1]


def render_step(
    cache: ViewCache,
    setup: ViewSetup,
    inputs: StepInputs,
    *,
    extra_actions: Sequence[Action] = (),
    upto_seq: int | None = None,
    remember: bool = True,
    cost: CostReport | None = None,
) -> Preparation:
    """The request over what ``cache`` was fed, with ``inputs``.

    With ``remember`` it becomes the previous request the next one is compared with;
    without, it is kept as ``cache.candidate`` (a step's attempt that may be replaced).
    """
    options, counter = setup.options, setup.counter
    rec, builder = cache.record, cache.builder
    cache.sync_frozen(setup)
    frozen = builder.frozen
    open_messages = builder.open_messages()
    tail_messages = [NeutralMessage("user", "\n".join(inputs.tail))] if inputs.tail else []
    live = [*open_messages, *tail_messages]
    live_tokens = _count(cache, setup, live)

    guide_text = rec.guide.text if rec.guide is not None else ""
    persona = escape("\n\n".join(t for t in rec.system_texts if t))
    system = "\n\n".join(t for t in (persona, guide_text, inputs.system_suffix) if t)
    tools = rec.tools
    tools_json = _tools_json(cache, tools)
    id_map: IdMap
    if options.provider == "openai":
        parts = cache.openai.assemble(
            system=system,
            tools=tools,
            frozen=frozen,
            live=live,
            model=options.model,
            max_tokens=options.max_output or None,
            extra=inputs.body_extra(options.provider),
        )
        id_map = cache.openai.ids
    else:
        parts = cache.anthropic.assemble(
            system=system,
            tools=tools,
            frozen=frozen,
            live=live,
            history_end=len(open_messages),
            model=options.model,
            max_tokens=options.max_output,
            cache=options.cache,
            extra=inputs.body_extra(options.provider),
        )
        id_map = cache.anthropic.ids
    since = rec.last_header.upto_seq if rec.last_header is not None else 0
    ids = _new_ids(id_map, frozen, open_messages, since)
    sections = TokenSections(
        tools=cache.count_texts([tools_json], setup)[0] if tools else 0,
        system=cache.count_texts([system], setup)[0] + FRAMING_TOKENS if system else 0,
        history=cache.frozen_prefix_sum[-1] + sum(live_tokens[: len(open_messages)]),
        tail=sum(live_tokens[len(open_messages) :]),
    )
    total = sections.total
    step = rec.steps + 1
    fingerprint = (system, tools_json)
    prefix = _prefix(cache, fingerprint, frozen, live, live_tokens, sections.tools + sections.system)
    limit = options.input_limit
    status = inputs.meta.get("status")
    flags: tuple[str, ...] = ()
    if len(tools) > MANY_TOOLS:
        flags = (
            f"many_tools: {len(tools)} tools offered (more than {MANY_TOOLS}); a model"
            " chooses among many less reliably: offer fewer (discovery, allowed_tools by phase)",
        )
    report = Report(
        step=step,
        provider=options.provider,
        tokenizer=counter.name,
        tokens=sections,
        budget=Budget(
            context_window=options.context_window,
            max_output=options.max_output,
            input_limit=limit,
            pressure_line=options.pressure_line,
            target=options.target_line,
            over_pressure=total > options.pressure_line,
            over_limit=total > limit,
        ),
        actions=(*extra_actions, *(action_of(r) for r in rec.actions)),
        prefix=prefix,
        messages=len(frozen) + len(live),
        pairing=Pairing.of(builder.report()),
        guide_version=rec.guide.version if rec.guide is not None else None,
        status=status if isinstance(status, dict) else None,
        ids=ids,
        cost=cost,
        flags=flags,
        exposure=_exposure(inputs, options.provider, len(tools)),
    )
    made = PreviousRequest(step, frozen, len(frozen), cache.generation, fingerprint, live, inputs.tail)
    if remember:
        cache.previous = made
    cache.candidate = made
    upto = rec.seq if upto_seq is None else upto_seq
    header = RequestHeader(step, upto, parts.sha256, options.to_json(), inputs.to_json(), report.to_json())
    history = HistoryView(
        frozen, cache.frozen_tokens, len(frozen), open_messages, live_tokens[: len(open_messages)]
    )
    return Preparation(parts, parts.sha256, report, header, rec.guide, history)


def _exposure(inputs: StepInputs, provider: Provider, offered: int) -> dict[str, JsonValue] | None:
    """The report's staged-exposure section (None when no source narrowed the tools)."""
    allowed = inputs.allowed_tools
    if allowed is None:
        return None
    out: dict[str, JsonValue] = {"allowed": list(allowed), "offered": offered}
    if inputs.allowed_sent(provider):
        out["sent"] = "tool_choice allowed_tools; the tools array is unchanged, so the cache holds"
    elif provider == "openai":
        out["not_sent"] = f"tool_choice {inputs.tool_choice!r} takes precedence"
    else:
        out["not_sent"] = (
            "anthropic has no allowed-tools field, and narrowing its tools array would break"
            " the cache: every offered tool stays callable (the runner's guards decide)"
        )
    return out


def _new_ids(
    id_map: IdMap,
    frozen: Sequence[NeutralMessage],
    open_messages: Sequence[NeutralMessage],
    since: int,
) -> tuple[tuple[str, str], ...]:
    """(view id, sent id) of the calls recorded after ``since`` whose id the provider could
    not take as it is: the step's part of the mapping (O(new); the mapping is a pure
    function of the ids, so the whole of it is the fold of these)."""
    found: list[tuple[str, str]] = []
    for messages in (open_messages, frozen):
        for message in reversed(messages):
            if 0 < message.seq <= since:
                return tuple(reversed(found))
            for call in reversed(message.tool_calls):
                sent = id_map(call.id)
                if sent != call.id:
                    found.append((call.id, sent))
    return tuple(reversed(found))


def _prefix(
    cache: ViewCache,
    fingerprint: tuple[str, str],
    frozen: Sequence[NeutralMessage],
    live: Sequence[NeutralMessage],
    live_tokens: Sequence[int],
    prefix_tokens: int,
) -> PrefixReport:
    prev = cache.previous
    if prev is None:
        return PrefixReport()
    if fingerprint[1] != prev.fingerprint[1]:
        return _broken(prev, 0, 0, "tools", "the tool schemas changed")
    if fingerprint[0] != prev.fingerprint[0]:
        return _broken(prev, 0, 0, "system", "the system prompt changed (persona or guide)")
    if prev.generation != cache.generation:  # the view was rendered again: compare it whole
        old = [*prev.frozen[: prev.frozen_count], *prev.live]
        new = [*frozen, *live]
        same = shared_prefix(old, new)
        shared_tokens = prefix_tokens + sum([*cache.frozen_tokens, *live_tokens][:same])
        if same == len(old):
            return PrefixReport(prev.step, shared_tokens, same)
        is_tail = bool(prev.tail) and same == len(old) - 1
        reason = "the tail is replaced on every step" if is_tail else "a reduction rewrote the view from here"
        if not is_tail and same < len(new) and new[same].seq in cache.record.ended_rules:
            reason = "a rule ended: its earlier block is shown without its text"
        return _broken(prev, same, shared_tokens, "tail" if is_tail else "history", reason)
    # everything frozen at the previous step is still there; compare what was live then
    shared = prev.frozen_count
    now_messages = [*frozen[prev.frozen_count :], *live]
    now_tokens = [*cache.frozen_tokens[prev.frozen_count :], *live_tokens]
    shared_tokens = prefix_tokens + cache.frozen_prefix_sum[prev.frozen_count]
    for i, before in enumerate(prev.live):
        if i >= len(now_messages) or now_messages[i] != before:
            is_tail = i >= len(prev.live) - (1 if prev.tail else 0)
            reason = "the tail is replaced on every step" if is_tail else "a history message changed"
            return _broken(prev, shared + i, shared_tokens, "tail" if is_tail else "history", reason)
        shared_tokens += now_tokens[i]
    return PrefixReport(prev.step, shared_tokens, shared + len(prev.live))


def _broken(
    prev: PreviousRequest, index: int, shared_tokens: int, section: Section, reason: str
) -> PrefixReport:
    return PrefixReport(prev.step, shared_tokens, index, FirstDifference(index, section, reason))


def prepare(
    events: Sequence[StoredEvent],
    options: PrepareOptions | None = None,
    inputs: StepInputs | None = None,
    *,
    branches: Sequence[BranchMark] = (),
    counter: TokenCounter | None = None,
    cache: ViewCache | None = None,
    count_store: CountLookup | None = None,
    sources: Sequence[Source] | None = None,
) -> Preparation:
    """The request over ``events`` (a timeline's stored events in seq order) as they stand.

    Nothing is planned: no guide or tools adoption, no status bar, no reductions — it renders
    what the record already holds (what a rebuild needs). ``branches`` are the fork points
    of the timeline's ancestry; ``count_store`` looks up persisted token counts.
    """
    options = options or PrepareOptions()
    counter = counter or get_counter(options.tokenizer)
    chosen = tuple(sources) if sources is not None else history_sources()
    setup = ViewSetup(chosen, options, counter, tuple(branches), None, count_store)
    cache = cache if cache is not None else ViewCache()
    cache.catch_up(events, setup)
    return render_step(cache, setup, inputs or StepInputs())


def report_json(prep: Preparation) -> dict[str, JsonValue]:
    return prep.report.to_json()
