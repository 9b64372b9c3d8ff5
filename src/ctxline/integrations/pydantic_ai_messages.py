"""Pydantic AI messages ↔ ctxline events, as pure functions.

Why: Pydantic AI keeps a run's history as ``ModelRequest`` / ``ModelResponse`` messages
made of parts. The mapping, part by part:

- ``SystemPromptPart`` → system message; ``UserPromptPart`` → user message (its text
  items joined; images and files are recorded opaque beside it, the view is text);
- ``ToolReturnPart`` → tool result, an error one when its ``outcome`` is an error
  (failed, denied, retried, …; the text without Pydantic AI's ``{"error": …}`` wrapper,
  since ctxline's view marks errors its own way); a legacy ``RetryPromptPart`` for a
  tool → an error tool result (its ``model_response()`` text), one without → a user message;
- a ``ModelResponse`` → one assistant message: ``TextPart`` s joined by a blank line,
  ``ToolCallPart`` s as its calls (arguments parsed when they are JSON);
- every other part (thinking, native tool calls, files, instruction deltas, …) → an
  opaque ``pydantic-ai.<part kind>`` event holding the part's JSON: recorded, not shown.

A message's key covers what ctxline keeps of it (kinds, text, call ids and names), not
its timestamps, run ids or usage.

    conv = messages_to_events(result.all_messages())
    view_to_messages(chat_view(prep).messages)   # the view as ModelRequest / ModelResponse
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ctxline.integrations.core import Converted, call_names, item_key, parse_arguments
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
    from pydantic_ai.messages import (
        ERROR_OUTCOMES,
        ModelMessage,
        ModelMessagesTypeAdapter,
        ModelRequest,
        ModelRequestPart,
        ModelResponse,
        ModelResponsePart,
        RetryPromptPart,
        SystemPromptPart,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    from ctxline.models.base import MissingExtra

    raise MissingExtra("pydantic-ai", "pydantic-ai-slim") from exc

__all__ = ["FRAMEWORK", "message_key", "messages_to_events", "view_to_messages"]

FRAMEWORK = "pydantic-ai"


def _part_json(message: ModelMessage, index: int) -> dict[str, JsonValue]:
    dumped = ModelMessagesTypeAdapter.dump_python([message], mode="json")[0]
    part: dict[str, JsonValue] = clean_json(dumped["parts"][index])
    return part


def _opaque(message: ModelMessage, index: int, kind: str) -> UnknownEvent:
    name = kind if re.fullmatch(r"[a-z][a-z0-9-]{0,40}", kind) else "part"
    return UnknownEvent(f"{FRAMEWORK}.{name}", {"part": _part_json(message, index)})


def _user_text(content: object) -> tuple[str, bool]:
    """The text of a user prompt, and whether it held anything besides text."""
    if isinstance(content, str):
        return clean_text(content), False
    texts, other = [], False
    for item in content if isinstance(content, Sequence) else ():
        if isinstance(item, str):
            texts.append(clean_text(item))
        else:
            other = True
    return "\n".join(texts), other


def _part_summary(part: ModelRequestPart | ModelResponsePart) -> JsonValue:
    if isinstance(part, ToolCallPart):
        return ["call", part.tool_call_id, part.tool_name, part.args_as_json_str()]
    if isinstance(part, ToolReturnPart):
        return [
            "return",
            part.tool_call_id,
            part.tool_name,
            part.outcome,
            part.model_response_str(),
        ]
    if isinstance(part, RetryPromptPart):
        return ["retry", part.tool_call_id, part.tool_name or "", part.model_response()]
    if isinstance(part, UserPromptPart | SystemPromptPart | TextPart):
        content = part.content
        return [part.part_kind, content if isinstance(content, str) else repr(content)]
    return [part.part_kind, repr(part)]


def message_key(message: ModelMessage) -> str:
    return item_key([message.kind, [_part_summary(p) for p in message.parts]])


def _request_events(message: ModelRequest, tool_name: Callable[[str], str]) -> list[Event]:
    out: list[Event] = []
    for i, part in enumerate(message.parts):
        if isinstance(part, SystemPromptPart):
            out.append(SystemMessage(clean_text(part.content)))
        elif isinstance(part, UserPromptPart):
            text, other = _user_text(part.content)
            out.append(UserMessage(text))
            if other:
                out.append(_opaque(message, i, "user-content"))
        elif isinstance(part, ToolReturnPart):
            call_id = clean_text(part.tool_call_id)
            name = clean_text(part.tool_name) or tool_name(call_id)
            failed = part.outcome in ERROR_OUTCOMES
            text = clean_text(part.model_response_str(wrap_if_error=False))
            out.append(ToolResult(call_id, text, name, failed))
        elif isinstance(part, RetryPromptPart) and part.tool_name:
            call_id = clean_text(part.tool_call_id)
            text = clean_text(part.model_response())
            out.append(ToolResult(call_id, text, clean_text(part.tool_name), is_error=True))
        elif isinstance(part, RetryPromptPart):
            out.append(UserMessage(clean_text(part.model_response())))
        else:
            out.append(_opaque(message, i, str(getattr(part, "part_kind", "part"))))
    return out


def _response_events(message: ModelResponse) -> list[Event]:
    out: list[Event] = []
    texts: list[str] = []
    calls: list[ToolCall] = []
    for i, part in enumerate(message.parts):
        if isinstance(part, TextPart):
            texts.append(clean_text(part.content))
        elif isinstance(part, ToolCallPart):
            args = part.args if isinstance(part.args, dict) else parse_arguments(part.args)
            calls.append(
                ToolCall(
                    clean_text(part.tool_call_id), clean_text(part.tool_name), clean_json(args)
                )
            )
        else:
            out.append(_opaque(message, i, str(getattr(part, "part_kind", "part"))))
    out.append(AssistantMessage("\n\n".join(texts), tuple(calls)))
    return out


def messages_to_events(
    messages: Sequence[ModelMessage], tool_name: Callable[[str], str] = lambda _: ""
) -> list[Converted]:
    """Events for ``messages`` in order; each message's key rides on its last event."""
    out: list[Converted] = []
    for message in messages:
        events = (
            _request_events(message, tool_name)
            if isinstance(message, ModelRequest)
            else _response_events(message)
        )
        if not events:
            events = [UnknownEvent(f"{FRAMEWORK}.empty-request", {})]
        out.extend(Converted(e, ()) for e in events[:-1])
        out.append(Converted(events[-1], (message_key(message),)))
    return out


def view_to_messages(messages: Sequence[Mapping[str, Any]]) -> list[ModelMessage]:
    """Chat Completions messages of ctxline's view as Pydantic AI messages.

    Consecutive user and tool messages share one ``ModelRequest``, as Pydantic AI builds
    them; each assistant message is one ``ModelResponse``.
    """
    names = call_names(messages)
    out: list[ModelMessage] = []
    parts: list[ModelRequestPart] = []
    for m in messages:
        role = m.get("role")
        if role == "assistant":
            if parts:
                out.append(ModelRequest(parts=parts))
                parts = []
            response: list[ModelResponsePart] = []
            if m.get("content"):
                response.append(TextPart(str(m["content"])))
            for call in m.get("tool_calls") or ():
                fn = call["function"]
                response.append(
                    ToolCallPart(
                        str(fn["name"]), str(fn["arguments"]), tool_call_id=str(call["id"])
                    )
                )
            out.append(ModelResponse(parts=response))
        elif role == "tool":
            call_id = str(m["tool_call_id"])
            parts.append(ToolReturnPart(names.get(call_id, ""), str(m["content"]), call_id))
        else:
            parts.append(UserPromptPart(str(m.get("content") or "")))
    if parts:
        out.append(ModelRequest(parts=parts))
    return out


def dump(messages: Sequence[ModelMessage]) -> str:
    """The messages as Pydantic AI's own JSON (for logs and tests)."""
    return json.dumps(ModelMessagesTypeAdapter.dump_python(list(messages), mode="json"))
