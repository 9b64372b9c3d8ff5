"""The inspector's one adapter to ctxline's internals: rebuild each logged request with its view.

Why one module: the core (view cache, report, renderers) is being redesigned, and the
inspector needs more than the public :func:`ctxline.rebuild_request` gives — each
history message with its tokens and record seq, the guide's share of the system
prompt, the byte range of every message in the body. Everything that reaches past
the public API is here, so a change in the core is fixed in this file alone.

A :class:`Rebuilt` step is the request as it was sent (when its sha256 matches the
logged one) split into :class:`Part` s in the provider's cache order — tools, system
(persona), guide, history messages (compaction blocks are ``summaries``), tail — each
with its tokens and, for messages, the record event it shows and its bytes in the body.

    for step in rebuild_steps(record.read("demo"), branches):
        step.composition        # {"tools": 316, "system": 40, "guide": 71, ...}
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxline.errors import CtxlineError
from ctxline.record.codec import canonical_json
from ctxline.record.events import RequestHeader, StoredEvent
from ctxline.record.jsonvalue import (
    JsonObject,
    JsonValue,
    as_array,
    as_object,
    dig,
    get_array,
    get_str,
)
from ctxline.record.store.base import TimelineInfo
from ctxline.render.anthropic import CONTINUED
from ctxline.render.neutral import NeutralMessage
from ctxline.sources.branch import BranchMark, ancestry_marks
from ctxline.tokens.counters import TokenCounter, get_counter
from ctxline.view.cache import ViewCache
from ctxline.view.options import PrepareOptions, StepInputs
from ctxline.view.prepare import Preparation, prepare

__all__ = [
    "SECTIONS",
    "Part",
    "Rebuilt",
    "branch_marks",
    "json_spans",
    "rebuild_one",
    "rebuild_steps",
]

SECTIONS = ("tools", "system", "guide", "history", "summaries", "tail")
"""The composition of a request, in the order a provider caches it."""

Span = tuple[int, int]
SpanKey = tuple[str | int, ...]
"""Where a span is in a body: keys and indexes from the top (``()``: the whole body)."""


@dataclass(frozen=True, slots=True)
class Part:
    """One unit of a request in cache order: the tools, the persona, the guide, a message, the tail."""

    index: int
    section: str
    role: str
    tokens: int
    text: str
    seq: int = 0
    """The record seq of the event a message shows (0: ctxline made it, or not a message)."""
    message: NeutralMessage | None = None
    spans: tuple[Span, ...] = ()
    """Byte ranges of this part in the body (several for a merged Anthropic message)."""


@dataclass(frozen=True)
class Rebuilt:
    """One logged request, rebuilt from the record."""

    header: RequestHeader
    header_seq: int
    body: bytes
    sha256: str
    parts: tuple[Part, ...]
    error: str | None = None
    """Why the rebuild failed or differs from what was logged (None: byte-exact)."""
    model: str = ""
    provider: str = ""
    cache: bool = False
    composition: dict[str, int] = field(default_factory=dict)

    @property
    def step(self) -> int:
        return self.header.step

    @property
    def matches(self) -> bool:
        return self.error is None

    @property
    def total(self) -> int:
        return sum(p.tokens for p in self.parts)


def branch_marks(timelines: Sequence[TimelineInfo], timeline: str) -> list[BranchMark]:
    """The fork points of ``timeline``'s ancestry, oldest first (as ``Context`` renders them)."""
    by_name = {t.name: (t.parent, t.fork_seq) for t in timelines}
    return ancestry_marks(timeline, by_name.get)


def _counter(header: RequestHeader, memo: dict[str, TokenCounter]) -> TokenCounter:
    name = str(header.report.get("tokenizer") or header.options.get("tokenizer") or "")
    if name not in memo:
        memo[name] = get_counter(name)
    return memo[name]


def rebuild_steps(
    events: Sequence[StoredEvent],
    branches: Sequence[BranchMark] = (),
    *,
    only: set[int] | None = None,
) -> Iterator[Rebuilt]:
    """Every logged request of a timeline, rebuilt in order with one view cache (O(total)).

    ``only``: the steps to split into parts (the others still feed the cache, which is
    needed for the later ones to come out right, but yield with no parts or body).
    A step whose rebuilt sha256 differs from the logged one carries ``error``.
    """
    cache = ViewCache()
    counters: dict[str, TokenCounter] = {}
    for stored in events:
        if not isinstance(stored.event, RequestHeader):
            continue
        wanted = only is None or stored.event.step in only
        rebuilt = _rebuild(stored, events, branches, cache, counters, wanted=wanted)
        if rebuilt.error is not None and rebuilt.error.startswith("cannot rebuild"):
            cache = ViewCache()  # the next step starts cold rather than from a half-fed cache
        yield rebuilt


def rebuild_one(
    stored: StoredEvent, events: Sequence[StoredEvent], branches: Sequence[BranchMark] = ()
) -> Rebuilt:
    """One logged request (``stored``, a ``request`` event) rebuilt cold, with its parts.

    ``events``: the timeline from seq 1 to at least the header's ``upto_seq``. A cold
    prepare renders the same bytes as the incremental one of :func:`rebuild_steps` (the
    record decides every reduction), at the cost of one step, not of every step before.
    """
    return _rebuild(stored, events, branches, ViewCache(), {}, wanted=True)


def _rebuild(
    stored: StoredEvent,
    events: Sequence[StoredEvent],
    branches: Sequence[BranchMark],
    cache: ViewCache,
    counters: dict[str, TokenCounter],
    *,
    wanted: bool,
) -> Rebuilt:
    header = stored.event
    assert isinstance(header, RequestHeader)
    options = PrepareOptions.from_json(header.options)
    try:
        counter = _counter(header, counters)
        prep = prepare(
            events[: header.upto_seq],
            options,
            StepInputs.from_json(header.inputs),
            branches=branches,
            counter=counter,
            cache=cache,
        )
    except (CtxlineError, ValueError, TypeError) as exc:
        return Rebuilt(
            header, stored.seq, b"", "", (), f"cannot rebuild: {type(exc).__name__}: {exc}"
        )
    error = None
    if prep.sha256 != header.sha256:
        error = (
            f"step {header.step} rebuilt to {prep.sha256}, but {header.sha256} was logged:"
            " the record or ctxline's rendering changed since it was prepared"
        )
    parts = _parts(prep, cache, counter, options) if wanted else ()
    composition = dict.fromkeys(SECTIONS, 0)
    for p in parts:
        composition[p.section] += p.tokens
    return Rebuilt(
        header,
        stored.seq,
        prep.body_bytes if wanted else b"",
        prep.sha256,
        parts,
        error,
        options.model,
        options.provider,
        bool(options.cache),
        composition,
    )


def _parts(
    prep: Preparation, cache: ViewCache, counter: TokenCounter, options: PrepareOptions
) -> tuple[Part, ...]:
    tokens = prep.report.tokens
    body_bytes = prep.body_bytes
    body: JsonObject = json.loads(body_bytes)
    spans = json_spans(body)
    assert spans[()] == (0, len(body_bytes)), "the body is not in canonical JSON form"
    parts: list[Part] = []

    def add(section: str, role: str, n: int, text: str, **more: Any) -> None:
        parts.append(Part(len(parts), section, role, n, text, **more))

    if "tools" in body:
        add(
            "tools",
            "tools",
            tokens.tools,
            json.dumps(body["tools"], indent=1, ensure_ascii=False),
            spans=(spans[("tools",)],),
        )
    openai = options.provider == "openai"
    if openai:
        rendered = as_array(body["messages"], "messages")
        first = as_object(rendered[0], "messages[0]") if rendered else {}
        system = str(first.get("content") or "") if first.get("role") == "system" else ""
        system_span = (spans[("messages", 0)],) if system else ()
    else:
        system = "\n\n".join(get_str(as_object(b, "system"), "text") for b in get_array(body, "system"))
        system_span = (spans[("system",)],) if "system" in body else ()
    guide = prep.guide.text if prep.guide is not None else ""
    guide_tokens = counter.count(guide) if guide and guide in system else 0
    persona = system.replace(guide, "", 1).strip("\n") if guide_tokens else system
    if system:
        add("system", "system", tokens.system - guide_tokens, persona, spans=system_span)
    if guide_tokens:
        add("guide", "system", guide_tokens, guide, spans=system_span)
    view = list(prep.messages)
    tail_text = "\n".join(StepInputs.from_json(prep.header.inputs).tail)
    messages = [vm.message for vm in view] + (
        [NeutralMessage("user", tail_text)] if tail_text else []
    )
    located = _locate(body, spans, messages, openai=openai, offset=1 if system and openai else 0)
    for i, vm in enumerate(view):
        m = vm.message
        section = (
            "summaries" if m.role == "user" and m.text.startswith("<ctx-summary") else "history"
        )
        add(section, m.role, vm.tokens, _display(m), seq=m.seq, message=m, spans=located[i])
    if tail_text:
        add("tail", "user", tokens.tail, tail_text, spans=located[len(view)])
    return tuple(parts)


def _display(m: NeutralMessage) -> str:
    """A message as the page shows it: its text, then each call (name and arguments)."""
    lines = [m.text] if m.text else []
    for call in m.tool_calls:
        args = (
            call.arguments
            if isinstance(call.arguments, str)
            else canonical_json(call.arguments).decode()
        )
        lines.append(f"→ {call.name}({args})  [call {call.id}]")
    return "\n".join(lines)


def _locate(
    body: JsonObject,
    spans: dict[SpanKey, Span],
    messages: Sequence[NeutralMessage],
    *,
    openai: bool,
    offset: int,
) -> list[tuple[Span, ...]]:
    """The byte ranges of each neutral message in the body ('' ranges when they cannot be told)."""
    rendered = get_array(body, "messages")
    if openai:  # one body message per neutral message, after the system message
        if len(rendered) - offset != len(messages):
            return [()] * len(messages)
        return [(spans[("messages", i + offset)],) for i in range(len(messages))]
    # Anthropic merges consecutive same-role messages and puts tool results first, but keeps
    # the order of the blocks of each type: the k-th text / tool_use / tool_result block comes
    # from the k-th neutral message that makes one.
    queues: dict[str, list[int]] = {"text": [], "tool_use": [], "tool_result": []}
    for i, m in enumerate(messages):
        if m.role == "tool":
            queues["tool_result"].append(i)
            continue
        if m.text.strip():
            queues["text"].append(i)
        queues["tool_use"].extend(i for _ in m.tool_calls)
    out: list[list[Span]] = [[] for _ in messages]
    continued = bool(messages) and messages[0].role == "assistant"
    for mi, msg in enumerate(rendered):
        for bi, block in enumerate(get_array(as_object(msg, "message"), "content")):
            kind = as_object(block, "block").get("type")
            if continued and mi == 0 and kind == "text" and dig(block, "text") == CONTINUED:
                continue
            queue = queues.get(str(kind))
            if not queue:
                return [()] * len(messages)
            out[queue.pop(0)].append(spans[("messages", mi, "content", bi)])
    return [tuple(s) for s in out]


def json_spans(body: JsonObject) -> dict[SpanKey, Span]:
    """Byte ranges in the canonical JSON of ``body`` of: the whole, each top-level key's value,
    each item of top-level lists, and each item of ``messages[i]["content"]`` lists.

    Each value is serialized once, at the deepest level asked for: a list's or a
    message's size is its items' plus the brackets, commas and keys between them (before,
    a message was serialized once for itself and again inside its list, and its blocks
    a third time: the page measured its body three times over).
    """
    out: dict[SpanKey, Span] = {}
    pos = 1
    for n, key in enumerate(sorted(body)):
        pos += (1 if n else 0) + _size(key) + 1
        value = body[key]
        end = _list_spans(out, key, value, pos) if isinstance(value, list) else pos + _size(value)
        out[(key,)] = (pos, end)
        pos = end
    out[()] = (0, pos + 1)
    return out


def _size(value: JsonValue) -> int:
    return len(canonical_json(value))


def _list_spans(out: dict[SpanKey, Span], key: str, items: list[JsonValue], start: int) -> int:
    """Spans of the items of the list at ``start``; where the list ends."""
    pos = start + 1
    for i, item in enumerate(items):
        pos += 1 if i else 0
        if key == "messages" and isinstance(item, dict) and isinstance(item.get("content"), list):
            end = _content_spans(out, item, i, pos)
        else:
            end = pos + _size(item)
        out[(key, i)] = (pos, end)
        pos = end
    return pos + 1


def _content_spans(out: dict[SpanKey, Span], message: JsonObject, i: int, start: int) -> int:
    """Spans of the blocks of ``messages[i]["content"]`` (the message at ``start``); where
    the message ends."""
    pos = start + 1
    for n, key in enumerate(sorted(message)):
        pos += (1 if n else 0) + _size(key) + 1
        value = message[key]
        if key == "content":
            pos += 1
            for j, block in enumerate(as_array(value)):
                pos += 1 if j else 0
                end = pos + _size(block)
                out[("messages", i, "content", j)] = (pos, end)
                pos = end
            pos += 1
        else:
            pos += _size(value)
    return pos + 1
