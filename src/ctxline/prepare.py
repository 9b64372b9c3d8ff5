"""``prepare``: the exact request the model will see, and the report of how it was built.

``prepare`` is a pure function of the record (the timeline's events up to a seq), the
options and the step inputs (the time, the tail blocks): the same arguments give the
same bytes. It does no I/O. The layout keeps the prefix stable for provider caches:

    [tools] [system: persona + guide] [history, in append order] [tail]

The persona is the record's system messages; the guide and the tool schemas are the
latest ``guide`` and ``tools`` events in the record, so a request can be rebuilt from
the record alone even after the app registers new kinds. History renders user,
assistant and tool messages with pairing repaired, and state, rules, notifications and
branch identity as user-role ``ctx-`` blocks at their place.

A :class:`ViewCache` makes steady-state steps cost O(new events): frozen messages are
rendered, serialized and counted once. Passing a cache never changes the output.

    prep = prepare(store.read("demo"), PrepareOptions(provider="openai", model="gpt-4.1"))
    client.chat.completions.create(**prep.body)
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from functools import cached_property
from typing import Any, Literal

from ctxline.blobs import blob_ref
from ctxline.budget import ViewEdits, ViewMessage, fold_reference, preview
from ctxline.compaction import SpanFold, compaction_block
from ctxline.errors import ValidationError
from ctxline.events import (
    Guide,
    JsonValue,
    Reduction,
    RequestHeader,
    StoredEvent,
    SystemMessage,
    ToolResult,
    Tools,
    UserMessage,
    canonical_json,
    format_at,
    parse_at,
)
from ctxline.render.assemble import AnthropicAssembler, BodyParts, OpenAIAssembler
from ctxline.render.neutral import HistoryBuilder, NeutralMessage, ToolSpec
from ctxline.render.openai import arguments_text
from ctxline.sources import BranchMark, render_branch, render_other
from ctxline.tags import escape
from ctxline.timectx import side_channel_stamp, zone_info
from ctxline.tokens import CountStore, TextCounts, TokenCounter, get_counter

__all__ = [
    "FRAMING_TOKENS",
    "Preparation",
    "PrepareOptions",
    "StepInputs",
    "ViewCache",
    "prepare",
]

Provider = Literal["openai", "anthropic"]
FRAMING_TOKENS = 4
"""Tokens counted per message for its role and separators (the peers' recipe)."""


@dataclass(frozen=True, slots=True)
class PrepareOptions:
    provider: Provider = "openai"
    model: str = "gpt-4.1"
    context_window: int = 128_000
    max_output: int = 4_096
    tokenizer: str = "o200k_base"
    pressure: float = 0.8
    target: float = 0.6
    cache: bool = True
    """Anthropic: put cache_control breakpoints at the end of the prefix and of history."""
    offload_tokens: int | None = None
    """A tool result over this many tokens shows as a preview and a handle (0: never;
    None: 1,000, or a quarter of the input limit if that is less). Peers keep outputs of
    5–10k characters (Letta, Pydantic AI Harness); 1,000 tokens is about 4k characters."""
    compact_target: float = 0.3
    """Compaction, the last rung, reduces to this share of the input limit: it breaks the
    cache and summarizes, so when it has to run it buys a longer quiet period."""
    timestamps: str | None = None
    """An IANA zone: prefix user messages and tool results with ``[YYYY-MM-DD HH:MM:SS]``
    of their append time in that zone (seed 001's side-channel stamps). None: off."""
    min_compaction_saving: float = 0.05
    """A compaction must save at least this share of the request, or it stops with
    :class:`~ctxline.errors.CompactionError` and writes nothing (peers have been seen to
    compact 29 times for 0.4 %)."""
    keep_groups: int = 2
    """The most recent assistant groups, whose results are never trimmed."""
    summary_tokens: int = 2_000
    """The most a compaction summary may take."""

    def __post_init__(self) -> None:
        if self.provider not in ("openai", "anthropic"):
            raise ValidationError(
                f"unknown provider {self.provider!r} (openai, anthropic)", field="provider"
            )
        if (
            self.context_window <= 0
            or self.max_output < 0
            or self.max_output >= self.context_window
        ):
            raise ValidationError(
                f"need 0 <= max_output < context_window, got {self.max_output} and {self.context_window}",
                field="max_output",
            )
        if not 0 < self.target <= self.pressure <= 1:
            raise ValidationError("need 0 < target <= pressure <= 1", field="pressure")
        if self.timestamps is not None:
            zone_info(self.timestamps)
        if not 0 < self.compact_target <= self.target:
            raise ValidationError("need 0 < compact_target <= target", field="compact_target")

    @property
    def input_limit(self) -> int:
        return self.context_window - self.max_output

    @property
    def offload_limit(self) -> int:
        if self.offload_tokens is not None:
            return self.offload_tokens
        return min(1_000, self.input_limit // 4)

    def to_json(self) -> dict[str, JsonValue]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, JsonValue]) -> PrepareOptions:
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in known})


@dataclass(frozen=True, slots=True)
class StepInputs:
    """What a step adds besides the record, all logged in the request header.

    ``tail`` are rendered blocks placed as the last user-role message (status bar,
    dynamic context); ``system_suffix`` is appended to the system prompt (the time
    context in the system placement of seed 004); ``meta`` is logged, not rendered
    (the time reading, the status strategy decision, …).
    """

    now: datetime | None = None
    tail: tuple[str, ...] = ()
    system_suffix: str = ""
    meta: Mapping[str, JsonValue] = field(default_factory=dict)

    def to_json(self) -> dict[str, JsonValue]:
        out: dict[str, JsonValue] = {
            "now": None if self.now is None else format_at(self.now),
            "tail": list(self.tail),
        }
        if self.system_suffix:
            out["system_suffix"] = self.system_suffix
        if self.meta:
            out["meta"] = dict(self.meta)
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, JsonValue]) -> StepInputs:
        now, tail = data.get("now"), data.get("tail") or []
        meta = data.get("meta")
        return cls(
            now=None if now is None else parse_at(now, where="inputs.now"),
            tail=tuple(str(t) for t in tail) if isinstance(tail, list) else (),
            system_suffix=str(data.get("system_suffix") or ""),
            meta=meta if isinstance(meta, dict) else {},
        )


@dataclass(frozen=True)
class Preparation:
    """A prepared request: its canonical bytes, hash, report and the header to log."""

    parts: BodyParts
    sha256: str
    report: dict[str, JsonValue]
    header: RequestHeader
    guide: Guide | None = None

    @cached_property
    def body_bytes(self) -> bytes:
        """The canonical bytes of the body (joined on first use)."""
        return self.parts.join()

    @property
    def body(self) -> dict[str, Any]:
        """The body as a dict, ready for ``client.chat.completions.create(**body)``."""
        parsed: dict[str, Any] = json.loads(self.body_bytes)
        return parsed


def message_text(message: NeutralMessage) -> str:
    """The text a message costs: content, plus each call's name and arguments."""
    if not message.tool_calls:
        return message.text
    parts = [message.text] if message.text else []
    for call in message.tool_calls:
        parts.append(call.name)
        parts.append(arguments_text(call.arguments))
    return "\n".join(parts)


@dataclass
class _Previous:
    step: int
    frozen: list[NeutralMessage]
    frozen_count: int
    generation: int
    fingerprint: tuple[str, str]
    live: list[NeutralMessage]
    tail: tuple[str, ...]


@dataclass
class ViewCache:
    """Per-timeline memo of the rendered history. Never changes what prepare returns."""

    builder: HistoryBuilder = field(default_factory=lambda: HistoryBuilder(render_other))
    fed_seq: int = 0
    fed_id: str = ""
    marks_fed: int = 0
    generation: int = 0
    frozen_tokens: list[int] = field(default_factory=list)
    frozen_prefix_sum: list[int] = field(default_factory=lambda: [0])
    system_texts: list[str] = field(default_factory=list)
    guide: Guide | None = None
    tools: tuple[ToolSpec, ...] = ()
    last_step: int = 0
    openai: OpenAIAssembler = field(default_factory=OpenAIAssembler)
    anthropic: AnthropicAssembler = field(default_factory=AnthropicAssembler)
    previous: _Previous | None = None
    counter_name: str = ""
    edits: ViewEdits = field(default_factory=ViewEdits.empty)
    compact_shown: bool = False
    handles: dict[int, str] = field(default_factory=dict)
    actions: list[Reduction] = field(default_factory=list)
    span: SpanFold = field(default_factory=SpanFold)
    text_tokens: dict[str, int] = field(default_factory=dict)
    """Token counts by text, kept when the view is rendered again (same counter)."""

    def reset(self, keep_counts: bool = True) -> None:
        """Forget the rendered view (it is rebuilt on the next prepare); keeps the previous
        request, and the token counts unless ``keep_counts`` is false (another counter)."""
        generation, previous, counter_name = self.generation + 1, self.previous, self.counter_name
        text_tokens = self.text_tokens if keep_counts else {}
        span = self.span
        fresh = ViewCache()
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(fresh, name))
        self.generation, self.previous, self.counter_name = generation, previous, counter_name
        self.span = span  # it checks by itself that it is folding the same record
        self.text_tokens = text_tokens


def _tool_specs(event: Tools) -> tuple[ToolSpec, ...]:
    specs = []
    for tool in event.tools:
        params = tool.get("parameters") or {}
        specs.append(
            ToolSpec(
                str(tool.get("name", "")),
                str(tool.get("description", "") or ""),
                params if isinstance(params, dict) else {},
            )
        )
    return tuple(specs)


def _result_view(
    cache: ViewCache,
    stored: StoredEvent,
    event: ToolResult,
    options: PrepareOptions,
    counter: TokenCounter,
    count_store: CountStore | None,
) -> StoredEvent:
    """The result as the view shows it: folded, trimmed, offloaded or whole."""
    seq = stored.seq
    later = cache.edits.folded.get(seq)
    if later is not None:
        content = fold_reference(event.name or "the tool", later)
        return replace(stored, event=replace(event, content=content))
    trimmed = seq in cache.edits.trimmed
    limit = options.offload_limit
    offload = limit > 0 and len(event.content) > limit
    if not (trimmed or offload):
        return stored
    tokens = cache.text_tokens.get(event.content)
    if tokens is None:
        tokens = TextCounts(counter, count_store).counts([event.content])[0]
        cache.text_tokens[event.content] = tokens
    if not trimmed and tokens <= limit:
        return stored
    handle = cache.handles.get(seq)
    if handle is None:
        handle = cache.handles[seq] = blob_ref(event.content.encode())
    return replace(
        stored, event=replace(event, content=preview(event.content, handle, tokens=tokens))
    )


def _stamped(stored: StoredEvent, zone: str) -> StoredEvent:
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


def _show_compaction(cache: ViewCache, events: Sequence[StoredEvent]) -> None:
    compact = cache.edits.compact
    if compact is not None and not cache.compact_shown:
        text = compaction_block(compact, events, cache.handles, cache.span)
        cache.builder.add(NeutralMessage("user", text))
        cache.compact_shown = True


def _feed(
    cache: ViewCache,
    events: Sequence[StoredEvent],
    marks: Sequence[BranchMark],
    options: PrepareOptions,
    counter: TokenCounter,
    count_store: CountStore | None = None,
) -> None:
    """Bring the cache up to the end of ``events``, restarting if they are not its continuation."""
    if cache.fed_seq:
        at = cache.fed_seq - 1
        if at >= len(events) or events[at].id != cache.fed_id or events[at].seq != cache.fed_seq:
            cache.reset()
        elif any(isinstance(ev.event, Reduction) for ev in events[cache.fed_seq :]):
            cache.reset()  # a reduction rewrites earlier parts of the view: render it again
    if cache.fed_seq == 0:
        for stored in events:
            if isinstance(stored.event, Reduction):
                cache.edits.apply(stored.event)
    pending_marks = sorted(marks, key=lambda m: m.fork_seq)
    compact = cache.edits.compact
    for event in events[cache.fed_seq :]:
        while (
            cache.marks_fed < len(pending_marks)
            and pending_marks[cache.marks_fed].fork_seq < event.seq
        ):
            cache.builder.add(NeutralMessage("user", render_branch(pending_marks[cache.marks_fed])))
            cache.marks_fed += 1
        ev = event.event
        if compact is not None and event.seq > compact.upto_seq:
            _show_compaction(cache, events)
        if isinstance(ev, SystemMessage):
            cache.system_texts.append(ev.text)
        elif isinstance(ev, Guide):
            cache.guide = ev
        elif isinstance(ev, Tools):
            cache.tools = _tool_specs(ev)
        elif isinstance(ev, RequestHeader):
            cache.last_step = ev.step
            cache.actions = []
        elif isinstance(ev, Reduction):
            cache.actions.append(ev)
        cache.fed_seq, cache.fed_id = event.seq, event.id
        if cache.edits.hidden(event.seq) or isinstance(ev, SystemMessage):
            continue
        if isinstance(ev, ToolResult):
            event = _result_view(cache, event, ev, options, counter, count_store)
        if options.timestamps is not None:
            event = _stamped(event, options.timestamps)
        cache.builder.feed(event)
    if compact is not None and cache.fed_seq >= compact.upto_seq:
        _show_compaction(cache, events)
    while (
        cache.marks_fed < len(pending_marks)
        and pending_marks[cache.marks_fed].fork_seq <= cache.fed_seq
    ):
        cache.builder.add(NeutralMessage("user", render_branch(pending_marks[cache.marks_fed])))
        cache.marks_fed += 1


def view_messages(cache: ViewCache, counter: TokenCounter) -> list[ViewMessage]:
    """The history of the last prepared view, message by message with its tokens."""
    frozen = [
        ViewMessage(m, t) for m, t in zip(cache.builder.frozen, cache.frozen_tokens, strict=True)
    ]
    live = cache.builder.open_messages()
    return frozen + [ViewMessage(m, t) for m, t in zip(live, _count(counter, live), strict=True)]


def _count(
    counter: TokenCounter,
    messages: Sequence[NeutralMessage],
    store: CountStore | None = None,
    memo: dict[str, int] | None = None,
) -> list[int]:
    """Tokens of each message; ``memo`` (text → count) survives view rebuilds."""
    texts = [message_text(m) for m in messages]
    if memo is None:
        return [n + FRAMING_TOKENS for n in TextCounts(counter, store).counts(texts)]
    missing = [t for t in texts if t not in memo]
    if missing:
        memo.update(zip(missing, TextCounts(counter, store).counts(missing), strict=True))
    return [memo[t] + FRAMING_TOKENS for t in texts]


def prepare(
    events: Sequence[StoredEvent],
    options: PrepareOptions | None = None,
    inputs: StepInputs | None = None,
    *,
    branches: Sequence[BranchMark] = (),
    counter: TokenCounter | None = None,
    cache: ViewCache | None = None,
    count_store: CountStore | None = None,
) -> Preparation:
    """The request for the next model call on a timeline whose record is ``events``.

    ``events`` are the timeline's stored events in seq order (those after the request
    point must not be included). ``branches`` are the fork points of the timeline's
    ancestry (see :class:`~ctxline.sources.BranchMark`). ``count_store`` keeps the
    token counts of long messages across processes (the store's token-count table).
    """
    options = options or PrepareOptions()
    inputs = inputs or StepInputs()
    counter = counter or get_counter(options.tokenizer)
    cache = cache if cache is not None else ViewCache()
    if cache.counter_name and cache.counter_name != counter.name:
        cache.reset(keep_counts=False)
    cache.counter_name = counter.name
    _feed(cache, events, branches, options, counter, count_store)
    builder = cache.builder

    frozen = builder.frozen
    new_frozen = frozen[len(cache.frozen_tokens) :]
    for n in _count(counter, new_frozen, count_store, cache.text_tokens):
        cache.frozen_tokens.append(n)
        cache.frozen_prefix_sum.append(cache.frozen_prefix_sum[-1] + n)
    open_messages = builder.open_messages()
    tail_messages = [NeutralMessage("user", "\n".join(inputs.tail))] if inputs.tail else []
    live = [*open_messages, *tail_messages]
    live_tokens = _count(counter, live)

    guide_text = cache.guide.text if cache.guide is not None else ""
    persona = escape("\n\n".join(t for t in cache.system_texts if t))
    system = "\n\n".join(t for t in (persona, guide_text, inputs.system_suffix) if t)
    tools = cache.tools
    tools_json = (
        canonical_json(
            [
                {"name": t.name, "description": t.description, "parameters": t.parameters}
                for t in tools
            ]
        ).decode()
        if tools
        else ""
    )

    if options.provider == "openai":
        parts = cache.openai.assemble(
            system=system,
            tools=tools,
            frozen=frozen,
            live=live,
            model=options.model,
            max_tokens=options.max_output or None,
        )
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
        )

    tokens_tools = counter.count(tools_json) if tools else 0
    tokens_system = counter.count(system) + FRAMING_TOKENS if system else 0
    tokens_history = cache.frozen_prefix_sum[-1] + sum(live_tokens[: len(open_messages)])
    tokens_tail = sum(live_tokens[len(open_messages) :])
    total = tokens_tools + tokens_system + tokens_history + tokens_tail

    step = cache.last_step + 1
    fingerprint = (system, tools_json)
    prefix = _prefix_report(
        cache, fingerprint, frozen, live, live_tokens, tokens_tools + tokens_system
    )
    limit = options.input_limit
    report: dict[str, JsonValue] = {
        "step": step,
        "provider": options.provider,
        "tokenizer": counter.name,
        "tokens": {
            "tools": tokens_tools,
            "system": tokens_system,
            "history": tokens_history,
            "tail": tokens_tail,
            "total": total,
        },
        "budget": {
            "context_window": options.context_window,
            "max_output": options.max_output,
            "input_limit": limit,
            "pressure_line": int(limit * options.pressure),
            "target": int(limit * options.target),
            "over_pressure": total > int(limit * options.pressure),
            "over_limit": total > limit,
        },
        "actions": [
            *(
                {"action": "drop_dynamic", "items": list(dropped)}
                for dropped in [inputs.meta.get("dropped_dynamic")]
                if dropped
            ),
            *(
                {"action": "compact_failed", "reason": reason}
                for reason in [inputs.meta.get("compaction_failed")]
                if reason
            ),
            *(_action(r) for r in cache.actions),
        ],
        "prefix": prefix,
        "messages": len(frozen) + len(live),
        "pairing": _pairing(builder),
        "guide_version": cache.guide.version if cache.guide is not None else None,
        **({"status": inputs.meta["status"]} if "status" in inputs.meta else {}),
    }
    cache.previous = _Previous(
        step, frozen, len(frozen), cache.generation, fingerprint, live, inputs.tail
    )
    upto = events[-1].seq if events else 0
    header = RequestHeader(step, upto, parts.sha256, options.to_json(), inputs.to_json(), report)
    return Preparation(parts, parts.sha256, report, header, cache.guide)


def _action(reduction: Reduction) -> dict[str, JsonValue]:
    out: dict[str, JsonValue] = {"action": reduction.action, "saved_tokens": reduction.saved_tokens}
    if reduction.action == "fold":
        out["events"] = sorted(int(k) for k in reduction.refs)
    elif reduction.action == "trim":
        out["events"] = list(reduction.seqs)
    else:
        out["upto_seq"] = reduction.upto_seq
        out["kept"] = list(reduction.keep)
    return out


def _pairing(builder: HistoryBuilder) -> dict[str, JsonValue]:
    report = builder.report()
    return {
        "repaired": list(report.repaired),
        "orphans": list(report.orphans),
        "duplicates": list(report.duplicates),
        "late": list(report.late),
        "renamed": [list(pair) for pair in report.renamed],
    }


def _prefix_report(
    cache: ViewCache,
    fingerprint: tuple[str, str],
    frozen: Sequence[NeutralMessage],
    live: Sequence[NeutralMessage],
    live_tokens: Sequence[int],
    prefix_tokens: int,
) -> dict[str, JsonValue]:
    prev = cache.previous
    if prev is None:
        return {
            "previous_step": None,
            "shared_tokens": 0,
            "shared_messages": 0,
            "first_difference": None,
        }
    if fingerprint[1] != prev.fingerprint[1]:
        return _broken(prev, 0, 0, "tools", "the tool schemas changed")
    if fingerprint[0] != prev.fingerprint[0]:
        return _broken(prev, 0, 0, "system", "the system prompt changed (persona or guide)")
    if prev.generation != cache.generation:  # the view was rendered again: compare it whole
        old = [*prev.frozen[: prev.frozen_count], *prev.live]
        new = [*frozen, *live]
        new_tokens = [*cache.frozen_tokens, *live_tokens]
        same = 0
        for a, b in zip(old, new, strict=False):
            if a != b:
                break
            same += 1
        shared_tokens = prefix_tokens + sum(new_tokens[:same])
        if same == len(old):
            return {
                "previous_step": prev.step,
                "shared_tokens": shared_tokens,
                "shared_messages": same,
                "first_difference": None,
            }
        is_tail = bool(prev.tail) and same == len(old) - 1
        reason = (
            "the tail is replaced on every step"
            if is_tail
            else "a reduction rewrote the view from here"
        )
        return _broken(prev, same, shared_tokens, "tail" if is_tail else "history", reason)
    # everything frozen at the previous step is still there; compare what was live then
    shared = prev.frozen_count
    now_messages = [*frozen[prev.frozen_count :], *live]
    now_tokens = [*cache.frozen_tokens[prev.frozen_count :], *live_tokens]
    shared_tokens = prefix_tokens + cache.frozen_prefix_sum[prev.frozen_count]
    for i, before in enumerate(prev.live):
        if i >= len(now_messages) or now_messages[i] != before:
            is_tail = i >= len(prev.live) - (1 if prev.tail else 0)
            reason = (
                "the tail is replaced on every step" if is_tail else "a history message changed"
            )
            return _broken(
                prev, shared + i, shared_tokens, "tail" if is_tail else "history", reason
            )
        shared_tokens += now_tokens[i]
    return {
        "previous_step": prev.step,
        "shared_tokens": shared_tokens,
        "shared_messages": shared + len(prev.live),
        "first_difference": None,
    }


def _broken(
    prev: _Previous, index: int, shared_tokens: int, section: str, reason: str
) -> dict[str, JsonValue]:
    return {
        "previous_step": prev.step,
        "shared_tokens": shared_tokens,
        "shared_messages": index,
        "first_difference": {"message": index, "section": section, "reason": reason},
    }
