"""What the inspector's pages show, as plain values for the templates to escape.

Nothing here builds HTML (the charts aside, which escape their own labels): the
templates autoescape every value, so a session name, tool output or summary holding
``<script>`` or a forged ``</ctx-state>`` shows as text. The only structure taken from
a request's text are ctxline's real tags — after ctxline's escaping, a ``<ctx-`` in
rendered text can only be ctxline's own (:data:`ctxline.tags.TAG_PATTERN`) — which
:func:`segments` turns into spans coloured by their source.

    segments('<ctx-state source="env/date">2026-11-03</ctx-state>')
    # [Seg('<ctx-state source="env/date">', ('ctx-state',), True, …), Seg('2026-11-03', …), …]
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, assert_never

from ctxline.record.codec import event_to_json
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
    StoredEvent,
    SystemMessage,
    Todo,
    ToolResult,
    Tools,
    UnknownEvent,
    UserMessage,
)
from ctxline.record.jsonvalue import JsonObject, get_object
from ctxline.web.record import BlobRow

__all__ = [
    "Seg",
    "blob_row",
    "blob_text",
    "event_json",
    "guide_versions",
    "kind_counts",
    "one_line",
    "segments",
    "summarize",
]

_TAG = re.compile(r"<(/?)(ctx-[a-z][a-z0-9-]*)((?:\s[^<>]*?)?)(/?)>")
_ATTR = re.compile(r'([a-z][a-z0-9-]*)="([^"]*)"')


@dataclass(frozen=True, slots=True)
class Seg:
    """A run of text inside the ``tags`` open at that point; ``markup``: a tag itself."""

    text: str
    tags: tuple[str, ...]
    markup: bool
    title: str

    @property
    def css(self) -> str:
        names = [t.removeprefix("ctx-") for t in self.tags]
        kind = f" k-{names[-1]}" if names else ""
        return ("tag" if self.markup else "txt") + kind + (" in-ctx" if names else "")


def segments(text: str) -> list[Seg]:
    """``text`` split at ctxline's tags, each run knowing which blocks it is in."""
    out: list[Seg] = []
    stack: list[tuple[str, str]] = []  # (tag, title)
    pos = 0

    def title() -> str:
        return " › ".join(t for _, t in stack)

    matches = list(_TAG.finditer(text))
    closes: dict[str, int] = {}  # tag -> index of its last closing tag
    for i, m in enumerate(matches):
        if m.group(1):
            closes[m.group(2)] = i
    for i, m in enumerate(matches):
        if m.start() > pos:
            out.append(Seg(text[pos : m.start()], tuple(t for t, _ in stack), False, title()))
        closing, tag, attrs, self_closing = m.group(1), m.group(2), m.group(3), m.group(4)
        if closing:
            out.append(Seg(m.group(0), tuple(t for t, _ in stack), True, title()))
            for j in range(len(stack) - 1, -1, -1):
                if stack[j][0] == tag:
                    del stack[j:]
                    break
        elif self_closing or closes.get(tag, -1) < i:  # a mention of a tag (the guide), not a block
            label = tag + "".join(f" {k}={v}" for k, v in _ATTR.findall(attrs))
            out.append(Seg(m.group(0), (*(t for t, _ in stack), tag), True, label))
        else:
            label = tag + "".join(f" {k}={v}" for k, v in _ATTR.findall(attrs))
            stack.append((tag, label))
            out.append(Seg(m.group(0), tuple(t for t, _ in stack), True, title()))
        pos = m.end()
    if pos < len(text):
        out.append(Seg(text[pos:], tuple(t for t, _ in stack), False, title()))
    return out


def one_line(text: str, width: int = 160) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def summarize(event: Event) -> str:
    """One line about an event, for the timeline (plain text: the template escapes it)."""
    match event:
        case SystemMessage(text=text) | UserMessage(text=text):
            return one_line(text)
        case AssistantMessage(text=text, tool_calls=calls):
            names = ", ".join(c.name for c in calls)
            return one_line(f"{text} {'→ ' + names if names else ''}".strip())
        case ToolResult(name=name, content=content, is_error=is_error):
            flag = " (error)" if is_error else ""
            return one_line(f"{name or 'tool'}{flag}: {content}")
        case State(source=source, value=value, cleared=cleared):
            return one_line(
                f"{source} cleared"
                if cleared
                else f"{source} = {json.dumps(value, ensure_ascii=False)}"
            )
        case Rule(rule_id=rule_id, op=op, scope=scope, text=text):
            return one_line(f"{op} {scope}/{rule_id}: {text}")
        case Notification(source=source, text=text):
            return one_line(f"{source}: {text}")
        case Todo(op=op, items=items, item_id=item_id, status=status):
            if op == "write":
                return one_line(
                    f"write {len(items)} items: "
                    + "; ".join(f"[{i.status}] {i.content}" for i in items)
                )
            return one_line(f"{op} {item_id} → {status}")
        case Compaction(trigger=trigger, pre_tokens=pre, summary=summary):
            return one_line(f"{trigger or 'compaction'} ({pre or '?'} tokens before): {summary}")
        case Guide(version=version, text=text):
            return one_line(f"version {version[:12]}: {text}")
        case Tools(tools=tools):
            return one_line(f"{len(tools)} tools: " + ", ".join(str(t.get("name")) for t in tools))
        case RequestHeader(step=step, report=report):
            tokens = get_object(report, "tokens").get("total")
            return f"step {step}: {tokens:,} tokens" if isinstance(tokens, int) else f"step {step}"
        case Reduction(action=action, saved_tokens=saved, seqs=seqs, upto_seq=upto):
            where = f"up to seq {upto}" if action == "compact" else f"{len(seqs)} results"
            return f"{action} {where}, {saved:,} tokens saved"
        case StatusSnapshot(text=text):
            return one_line(text)
        case ModelUsage(model=model, input=tokens_in, output=tokens_out):
            return one_line(f"{model}: {tokens_in:,} in, {tokens_out:,} out")
        case ModelFailure(model=model, error=error, error_type=error_type):
            return one_line(f"{error_type}: {error} (model {model})")
        case Slot(name=name, op=op, value=value):
            shown = "" if value is None else " " + json.dumps(value, ensure_ascii=False)
            return one_line(f"slot {name} {op}{shown}")
        case UnknownEvent(kind=kind):
            return f"{kind} (unknown kind, kept as is)"
        case _:
            assert_never(event)


def event_json(stored: StoredEvent) -> str:
    """The event as the record holds it, indented (plain text for the template)."""
    data: JsonObject = {
        "seq": stored.seq,
        "id": stored.id,
        "at": stored.at.isoformat(),
        **event_to_json(stored.event),
    }
    return json.dumps(data, indent=2, ensure_ascii=False)


def kind_counts(events: Sequence[StoredEvent]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for ev in events:
        counts[ev.kind] = counts.get(ev.kind, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def guide_versions(guides: Sequence[StoredEvent]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    previous = ""
    for stored in guides:
        g = stored.event
        assert isinstance(g, Guide)
        changes = list(
            difflib.unified_diff(
                previous.splitlines(), g.text.splitlines(), "before", "after", lineterm="", n=1
            )
        )
        out.append(
            {
                "seq": stored.seq,
                "at": stored.at.isoformat(timespec="seconds"),
                "version": g.version,
                "text": g.text,
                "segments": segments(g.text),
                "changes": changes,
            }
        )
        previous = g.text
    return out


def blob_text(data: bytes, limit: int = 1_000_000) -> str:
    return data[:limit].decode("utf-8", "replace")


def blob_row(row: BlobRow) -> dict[str, Any]:
    return {
        "ref": row.ref,
        "size": row.size,
        "preview": " ".join(blob_text(row.head, 200).split())[:160],
    }
