"""LangChain messages ↔ ctxline events, as pure functions.

Why: LangGraph agents and LangChain v1's ``create_agent`` keep the conversation as
``langchain_core`` messages in the graph state. The mapping:

- ``SystemMessage`` → system message; ``HumanMessage`` → user message (text blocks
  joined; other blocks are recorded opaque beside it, the view is text);
- ``AIMessage`` → assistant message with its ``tool_calls`` (and ``invalid_tool_calls``,
  whose arguments stay the model's raw text);
- ``ToolMessage`` → tool result (``status="error"`` → an error result);
- any other message (``ChatMessage``, ``FunctionMessage``, ``RemoveMessage``, …) → an
  opaque ``langchain.<type>`` event holding the message's JSON: recorded, not shown.

A message's key covers its type, text, calls and call id — not its ``id`` (LangGraph
assigns ids when a message enters the state) or response metadata.

    conv = messages_to_events(state["messages"])
    view_to_messages(chat_view(prep).messages)   # HumanMessage / AIMessage / ToolMessage
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ctxline.integrations.core import Converted, call_names, item_key
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
from ctxline.text import clean_json, clean_text

try:
    from langchain_core.messages import (
        AIMessage,
        BaseMessage,
        HumanMessage,
        ToolMessage,
    )
    from langchain_core.messages import SystemMessage as LCSystemMessage
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    from ctxline.models.base import MissingExtra

    raise MissingExtra("langgraph", "langchain-core") from exc

__all__ = ["FRAMEWORK", "message_key", "messages_to_events", "view_to_messages"]

FRAMEWORK = "langchain"


def _text(content: object) -> tuple[str, bool]:
    """The text of a message's content, and whether it held non-text blocks."""
    if isinstance(content, str):
        return clean_text(content), False
    texts, other = [], False
    for block in content if isinstance(content, list) else ():
        if isinstance(block, str):
            texts.append(clean_text(block))
        elif isinstance(block, Mapping) and block.get("type") == "text":
            texts.append(clean_text(str(block.get("text", ""))))
        else:
            other = True
    return "\n".join(texts), other


def _opaque(message: BaseMessage, label: str | None = None) -> UnknownEvent:
    kind = label or message.type
    name = kind if re.fullmatch(r"[a-z][a-z0-9_-]{0,40}", kind) else "message"
    data: dict[str, JsonValue] = clean_json(json.loads(message.model_dump_json()))
    return UnknownEvent(f"{FRAMEWORK}.{name}", {"message": data})


def _calls(message: AIMessage) -> tuple[ToolCall, ...]:
    calls = [
        ToolCall(clean_text(c.get("id") or ""), clean_text(c["name"]), clean_json(c["args"]))
        for c in message.tool_calls
    ]
    calls += [
        ToolCall(
            clean_text(c.get("id") or ""),
            clean_text(c.get("name") or ""),
            clean_text(c.get("args") or ""),
        )
        for c in message.invalid_tool_calls
    ]
    return tuple(calls)


def message_key(message: BaseMessage) -> str:
    summary: list[JsonValue] = [message.type, _text(message.content)[0]]
    if isinstance(message, AIMessage):
        summary.append([[c.id, c.name, c.arguments] for c in _calls(message)])
    if isinstance(message, ToolMessage):
        summary += [message.tool_call_id, message.status]
    if not isinstance(message, AIMessage | HumanMessage | ToolMessage | LCSystemMessage):
        summary.append(message.model_dump_json(exclude={"id"}))
    return item_key(summary)


def _events(message: BaseMessage, tool_name: Callable[[str], str]) -> list[Event]:
    text, other = _text(message.content)
    extra = [_opaque(message, f"{message.type}-content")] if other else []
    if isinstance(message, LCSystemMessage):
        return [SystemMessage(text), *extra]
    if isinstance(message, HumanMessage):
        return [UserMessage(text), *extra]
    if isinstance(message, AIMessage):
        return [*extra, AssistantMessage(text, _calls(message))]
    if isinstance(message, ToolMessage):
        call_id = clean_text(message.tool_call_id)
        name = clean_text(message.name or "") or tool_name(call_id)
        return [ToolResult(call_id, text, name, message.status == "error"), *extra]
    return [_opaque(message)]


def messages_to_events(
    messages: Sequence[BaseMessage], tool_name: Callable[[str], str] = lambda _: ""
) -> list[Converted]:
    """Events for ``messages`` in order; each message's key rides on its last event."""
    out: list[Converted] = []
    for message in messages:
        events = _events(message, tool_name)
        out.extend(Converted(e, ()) for e in events[:-1])
        out.append(Converted(events[-1], (message_key(message),)))
    return out


def view_to_messages(messages: Sequence[Mapping[str, Any]], system: str = "") -> list[BaseMessage]:
    """Chat Completions messages of ctxline's view as LangChain messages.

    ``system`` (ctxline's system text), when given, comes first as a ``SystemMessage``.
    """
    names = call_names(messages)
    out: list[BaseMessage] = [LCSystemMessage(system)] if system else []
    for m in messages:
        role = m.get("role")
        if role == "assistant":
            calls: list[dict[str, Any]] = []
            invalid: list[dict[str, Any]] = []
            for call in m.get("tool_calls") or ():
                fn = call["function"]
                try:
                    args = json.loads(fn["arguments"])
                except ValueError:
                    args = None
                if isinstance(args, dict):
                    calls.append(
                        {"name": fn["name"], "args": args, "id": call["id"], "type": "tool_call"}
                    )
                else:
                    invalid.append(
                        {
                            "name": fn["name"],
                            "args": fn["arguments"],
                            "id": call["id"],
                            "error": None,
                            "type": "invalid_tool_call",
                        }
                    )
            out.append(
                AIMessage(
                    content=m.get("content") or "", tool_calls=calls, invalid_tool_calls=invalid
                )
            )
        elif role == "tool":
            # no name: Chat Completions tool messages carry none, and LangChain would send it
            call_id = str(m["tool_call_id"])
            assert call_id in names, f"tool message {call_id!r} has no call in the view"
            out.append(ToolMessage(content=str(m["content"]), tool_call_id=call_id))
        else:
            out.append(HumanMessage(content=str(m.get("content") or "")))
    return out
