"""One line per event, for people: what ``ctxline show`` and the inspector list.

Every kind has its line — ctxline's own records included — and the dispatch ends in
``assert_never``, so a kind added to :data:`~ctxline.record.events.Event` without a line
here fails the type check (``mypy``) instead of crashing ``show`` at run time.

    >>> describe(UserMessage("Cancel my plan"))
    'Cancel my plan'
"""

from __future__ import annotations

import json
from typing import assert_never

from ctxline.record.codec import canonical_json
from ctxline.record.events import (
    AssistantMessage,
    Compaction,
    Event,
    Guide,
    ModelFailure,
    ModelUsage,
    Notification,
    Reduction,
    RequestHeader,
    Rule,
    Slot,
    State,
    StatusSnapshot,
    SystemMessage,
    Todo,
    ToolResult,
    Tools,
    UnknownEvent,
    UserMessage,
)

__all__ = ["describe"]


def _clip(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _json(value: object) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError):
        return repr(value)


def describe(event: Event, width: int = 100) -> str:
    """A one-line description of ``event`` (text clipped to ``width`` characters)."""
    match event:
        case SystemMessage() | UserMessage():
            return _clip(event.text, width)
        case AssistantMessage():
            calls = ", ".join(
                f"{c.name}({_clip(_json(c.arguments), 60)})" for c in event.tool_calls
            )
            return _clip(event.text, width) + (f"  → {calls}" if calls else "")
        case ToolResult():
            label = "error " if event.is_error else ""
            return f"[{event.call_id}] {label}{len(event.content):,} chars: {_clip(event.content, width)}"
        case State():
            if event.cleared:
                return f"{event.source} cleared"
            return f"{event.source} = {_clip(_json(event.value), width)}"
        case Rule():
            return f"{event.op} {event.rule_id} [{event.scope}] {_clip(event.text, width)}"
        case Notification():
            return f"{event.source}: {_clip(event.text, width)}"
        case Todo():
            if event.op == "write":
                return "write " + ", ".join(f"{i.id}:{i.status}" for i in event.items)
            return f"update {event.item_id}:{event.status}"
        case Compaction():
            return f"{event.trigger} pre_tokens={event.pre_tokens} {_clip(event.summary, width)}"
        case Guide():
            return f"guide {event.version[:19]}… ({len(event.text):,} chars)"
        case Tools():
            return "tools: " + ", ".join(str(t.get("name", "?")) for t in event.tools)
        case RequestHeader():
            tokens = event.report_field("tokens")
            total = tokens.get("total") if isinstance(tokens, dict) else None
            size = f", {total:,} tokens" if isinstance(total, int) else ""
            return f"request step {event.step} over seq 1–{event.upto_seq}{size}, {event.sha256[:19]}…"
        case Reduction():
            if event.action == "compact":
                what = f"up to seq {event.upto_seq}, kept {list(event.keep)}"
            elif event.action == "fold":
                what = f"seqs {sorted(int(k) for k in event.refs)}"
            else:
                what = f"seqs {list(event.seqs)}"
            return f"{event.action} {what}, saved {event.saved_tokens:,} tokens"
        case StatusSnapshot():
            return "status: " + _clip(event.text, width)
        case ModelUsage():
            return (
                f"{event.model}: input {event.input:,} (cache read {event.cache_read:,}, write "
                f"{event.cache_write:,}), output {event.output:,}, {event.latency_ms:,} ms"
            )
        case ModelFailure():
            return _clip(f"{event.error_type}: {event.error} (model {event.model})", width)
        case Slot():
            if event.value is None:
                return f"slot {event.name} {event.op}"
            return f"slot {event.name} {event.op} {_clip(_json(event.value), width)}"
        case UnknownEvent():
            return _clip(canonical_json(event.data).decode(), width)
        case _:
            assert_never(event)
