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
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from ctxline.record.events import (
    Guide,
    JsonValue,
    RequestHeader,
    StoredEvent,
    canonical_json,
)
from ctxline.render.assemble import BodyParts
from ctxline.render.neutral import NeutralMessage
from ctxline.sources.blocks import BranchMark
from ctxline.tags import escape
from ctxline.tokens.counters import CountStore, TokenCounter, get_counter
from ctxline.view.cache import (
    FRAMING_TOKENS,
    PreviousRequest,
    ViewCache,
    count_messages,
    feed_view,
    message_text,
    view_messages,
)
from ctxline.view.options import PrepareOptions, StepInputs
from ctxline.view.report import action_json, pairing_json, prefix_report

__all__ = [
    "FRAMING_TOKENS",
    "Preparation",
    "PrepareOptions",
    "StepInputs",
    "ViewCache",
    "message_text",
    "prepare",
    "view_messages",
]


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
    ancestry (see :class:`~ctxline.sources.blocks.BranchMark`). ``count_store`` keeps the
    token counts of long messages across processes (the store's token-count table).
    """
    options = options or PrepareOptions()
    inputs = inputs or StepInputs()
    counter = counter or get_counter(options.tokenizer)
    cache = cache if cache is not None else ViewCache()
    if cache.counter_name and cache.counter_name != counter.name:
        cache.reset(keep_counts=False)
    cache.counter_name = counter.name
    feed_view(cache, events, branches, options, counter, count_store)
    builder = cache.builder

    frozen = builder.frozen
    new_frozen = frozen[len(cache.frozen_tokens) :]
    for n in count_messages(counter, new_frozen, count_store, cache.text_tokens):
        cache.frozen_tokens.append(n)
        cache.frozen_prefix_sum.append(cache.frozen_prefix_sum[-1] + n)
    open_messages = builder.open_messages()
    tail_messages = [NeutralMessage("user", "\n".join(inputs.tail))] if inputs.tail else []
    live = [*open_messages, *tail_messages]
    live_tokens = count_messages(counter, live)

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
    prefix = prefix_report(
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
            *(action_json(r) for r in cache.actions),
        ],
        "prefix": prefix,
        "messages": len(frozen) + len(live),
        "pairing": pairing_json(builder),
        "guide_version": cache.guide.version if cache.guide is not None else None,
        **({"status": inputs.meta["status"]} if "status" in inputs.meta else {}),
    }
    cache.previous = PreviousRequest(
        step, frozen, len(frozen), cache.generation, fingerprint, live, inputs.tail
    )
    upto = events[-1].seq if events else 0
    header = RequestHeader(step, upto, parts.sha256, options.to_json(), inputs.to_json(), report)
    return Preparation(parts, parts.sha256, report, header, cache.guide)
