"""The rendered history of a timeline, kept from step to step (the view cache).

Events are fed once, in order: reductions (fold, trim, compaction), offload previews
and side-channel stamps are applied as they are fed, frozen messages are rendered and
counted once, and a :class:`~ctxline.record.events.Reduction` event makes the view render
again from the record (the token counts, by text, are kept). Feeding never changes what
``prepare`` returns: a cold cache gives the same bytes.

    cache = ViewCache()
    feed_view(cache, events, [], options, counter)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from ctxline.record.blobs import blob_ref
from ctxline.record.events import (
    Guide,
    Reduction,
    RequestHeader,
    StoredEvent,
    SystemMessage,
    ToolResult,
    Tools,
    UserMessage,
)
from ctxline.render.assemble import AnthropicAssembler, OpenAIAssembler
from ctxline.render.neutral import HistoryBuilder, NeutralMessage, ToolSpec
from ctxline.render.openai import arguments_text
from ctxline.sources.blocks import BranchMark, render_branch, render_other
from ctxline.sources.timectx import side_channel_stamp
from ctxline.tokens.counters import CountStore, TextCounts, TokenCounter
from ctxline.view.compaction import SpanFold, compaction_block
from ctxline.view.ladder import ViewEdits, ViewMessage, fold_reference, preview
from ctxline.view.options import PrepareOptions

__all__ = [
    "FRAMING_TOKENS",
    "PreviousRequest",
    "ViewCache",
    "count_messages",
    "feed_view",
    "message_text",
    "view_messages",
]

FRAMING_TOKENS = 4
"""Tokens counted per message for its role and separators (the peers' recipe)."""


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
class PreviousRequest:
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
    previous: PreviousRequest | None = None
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


def feed_view(
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
    return frozen + [
        ViewMessage(m, t) for m, t in zip(live, count_messages(counter, live), strict=True)
    ]


def count_messages(
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
