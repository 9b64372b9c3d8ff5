"""OpenAI Responses input items ↔ ctxline events, as pure functions (no SDK import).

Why: the Agents SDK keeps a conversation as Responses *input items* (plain dicts). The
record needs them as events, and the prepared view must go back as items:

- ``{"role": "user"|"system"|"developer", ...}`` → user / system message (text parts joined);
- a run of assistant-side items — assistant ``message`` items and ``function_call``
  items — → one assistant message with its calls, so parallel calls stay one turn;
- ``function_call_output`` → a tool result (the tool name taken from its call);
- every other item (``reasoning``, hosted tool calls, ``item_reference``, …) → an opaque
  ``openai-agents.<type>`` event holding the item whole: recorded, never dropped, and
  not shown to the model (ctxline's view is text; its budget covers exactly what is sent).

Each item's key ignores ``id`` and ``status`` (the SDK may re-derive them). An item that
ctxline's default reconstruction would not give back byte for byte is kept in ``raw``,
so :func:`events_to_items` returns what the SDK stored, unchanged.

    conv = items_to_events([{"role": "user", "content": "hi"}])
    conv[0].event                                  # UserMessage(text='hi')
    view_to_items(chat_view(prep).messages)        # the view as input items
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ctxline.errors import ValidationError
from ctxline.integrations.core import Converted, call_names, item_key, parse_arguments
from ctxline.record.codec import canonical_json
from ctxline.record.events import (
    AssistantMessage,
    Event,
    JsonValue,
    SystemMessage,
    ToolCall,
    ToolResult,
    UnknownEvent,
    UserMessage,
)
from ctxline.render.openai import arguments_text
from ctxline.text import clean_json, clean_text

__all__ = [
    "FRAMEWORK",
    "events_to_items",
    "items_to_events",
    "jsonable",
    "responses_key",
    "view_to_items",
]

FRAMEWORK = "openai-agents"
_INCIDENTAL = ("id", "status")
_TEXT_PARTS = ("input_text", "output_text", "text", "refusal")


def jsonable(item: object) -> dict[str, JsonValue]:
    """An item as plain JSON (pydantic models dumped); a clear error for anything else."""
    if hasattr(item, "model_dump"):
        item = item.model_dump(mode="json", exclude_unset=True)
    if not isinstance(item, Mapping):
        raise ValidationError(
            f"expected a Responses input item (a dict), got {type(item).__name__}", field="input"
        )
    try:
        out: dict[str, JsonValue] = json.loads(json.dumps(clean_json(dict(item))))
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"an input item is not JSON: {exc}", field="input") from None
    return out


def responses_key(item: object) -> str:
    data = jsonable(item)
    return item_key({k: v for k, v in data.items() if k not in _INCIDENTAL})


def _text(content: object) -> str:
    if isinstance(content, str):
        return clean_text(content)
    if not isinstance(content, list):
        return ""
    texts = []
    for part in content:
        if isinstance(part, Mapping) and part.get("type") in _TEXT_PARTS:
            value = part.get("text", part.get("refusal", ""))
            texts.append(clean_text(value) if isinstance(value, str) else "")
    return "\n".join(texts)


def _kind(item: Mapping[str, Any]) -> str:
    raw = item.get("type")
    name = raw if isinstance(raw, str) and re.fullmatch(r"[a-z][a-z0-9_]{0,40}", raw) else "item"
    return f"{FRAMEWORK}.{name}"


def _default_message(role: str, text: str) -> dict[str, JsonValue]:
    return {"role": role, "content": text}


def _default_call(call: ToolCall) -> dict[str, JsonValue]:
    return {
        "type": "function_call",
        "call_id": call.id,
        "name": call.name,
        "arguments": arguments_text(call.arguments),
    }


def _default_output(result: ToolResult) -> dict[str, JsonValue]:
    return {"type": "function_call_output", "call_id": result.call_id, "output": result.content}


def _raw(item: dict[str, JsonValue], default: dict[str, JsonValue]) -> JsonValue:
    return None if canonical_json(item) == canonical_json(default) else item


class _Group:
    """Assistant-side items of one model turn, merged into one assistant message."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.calls: list[ToolCall] = []
        self.keys: list[str] = []
        self.raw: list[JsonValue] = []

    def flush(self, out: list[Converted]) -> None:
        if not self.keys:
            return
        event = AssistantMessage("\n\n".join(self.texts), tuple(self.calls))
        out.append(Converted(event, tuple(self.keys), tuple(self.raw)))
        self.__init__()  # type: ignore[misc]


def items_to_events(
    items: Sequence[object], tool_name: Callable[[str], str] = lambda _: ""
) -> list[Converted]:
    """Events for ``items`` in order; ``tool_name`` names calls made before these items."""
    out: list[Converted] = []
    group = _Group()
    names: dict[str, str] = {}
    for obj in items:
        item = jsonable(obj)
        key = item_key({k: v for k, v in item.items() if k not in _INCIDENTAL})
        kind = item.get("type", "message" if "role" in item else None)
        role = item.get("role")
        if kind == "message" and role == "assistant":
            text = _text(item.get("content"))
            group.texts.append(text)
            group.keys.append(key)
            group.raw.append(item)  # texts are joined: a message item is always kept whole
            continue
        if kind == "function_call" and isinstance(item.get("name"), str):
            call = ToolCall(
                clean_text(str(item.get("call_id") or "")),
                clean_text(str(item["name"])),
                parse_arguments(item.get("arguments")),
            )
            names[call.id] = call.name
            group.calls.append(call)
            group.keys.append(key)
            group.raw.append(_raw(item, _default_call(call)))
            continue
        group.flush(out)
        event: Event
        if kind == "message" and role in ("user", "system", "developer"):
            text = _text(item.get("content"))
            event = UserMessage(text) if role == "user" else SystemMessage(text)
            default = _default_message(str(role), text)
        elif kind == "function_call_output" and isinstance(item.get("call_id"), str):
            call_id = clean_text(str(item["call_id"]))
            output = item.get("output")
            text = _text(output) if not isinstance(output, str) else clean_text(output)
            name = names.get(call_id) or tool_name(call_id)
            event = ToolResult(call_id, text, name)
            default = _default_output(ToolResult(call_id, text))
        else:
            out.append(Converted(UnknownEvent(_kind(item), {"item": item}), (key,), (None,)))
            continue
        out.append(Converted(event, (key,), (_raw(item, default),)))
    group.flush(out)
    return out


def events_to_items(events: Sequence[tuple[Event, Sequence[JsonValue]]]) -> list[JsonValue]:
    """The input items events stand for: ``raw`` where kept, else the default form.

    Each entry is an event and the ``raw`` list recorded with it (``[]`` when none).
    """
    items: list[JsonValue] = []
    for event, raw in events:
        if isinstance(event, AssistantMessage):
            n = 0  # the calls are in item order; a kept message item is never a call
            for kept in list(raw) or [None] * len(event.tool_calls):
                is_call = kept is None or (
                    isinstance(kept, dict) and kept.get("type") == "function_call"
                )
                if kept is None:
                    kept = _default_call(event.tool_calls[n])
                items.append(kept)
                n += is_call
            continue
        default: JsonValue
        if isinstance(event, UnknownEvent):
            default = event.data.get("item")
        elif isinstance(event, ToolResult):
            default = _default_output(event)
        elif isinstance(event, UserMessage):
            default = _default_message("user", event.text)
        elif isinstance(event, SystemMessage):
            default = _default_message("system", event.text)
        else:
            continue
        items.append(raw[0] if raw and raw[0] is not None else default)
    return items


def view_to_items(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, JsonValue]]:
    """Chat Completions messages of ctxline's view as Responses input items.

    Calls keep their call id but carry no item ``id``, so the Responses API never looks
    for a reasoning item the view does not hold. An assistant message with text and calls
    becomes an output ``message`` item (id ``msg_`` + a hash of its call ids) and then
    its ``function_call`` items.
    """
    names = call_names(messages)
    items: list[dict[str, JsonValue]] = []
    for m in messages:
        role = m.get("role")
        if role == "tool":
            call_id = str(m["tool_call_id"])
            assert call_id in names, f"tool message {call_id!r} has no call in the view"
            items.append(
                {"type": "function_call_output", "call_id": call_id, "output": m["content"]}
            )
        elif role == "assistant":
            calls = m.get("tool_calls") or ()
            if not calls:
                items.append({"role": "assistant", "content": m.get("content") or ""})
            elif m.get("content") is not None:
                # the output-message form (it needs an id) keeps the text and the calls one
                # turn in the SDK's Chat Completions mapping; an easy message would split them
                items.append(
                    {
                        "type": "message",
                        "role": "assistant",
                        "id": "msg_" + item_key([c["id"] for c in calls]),
                        "status": "completed",
                        "content": [
                            {"type": "output_text", "text": m["content"], "annotations": []}
                        ],
                    }
                )
            for call in m.get("tool_calls") or ():
                fn = call["function"]
                items.append(
                    {
                        "type": "function_call",
                        "call_id": call["id"],
                        "name": fn["name"],
                        "arguments": fn["arguments"],
                    }
                )
        else:
            items.append({"role": str(role), "content": m.get("content") or ""})
    return items
