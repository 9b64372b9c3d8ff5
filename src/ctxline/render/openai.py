"""Render a neutral request as an OpenAI Chat Completions body: one renderer, incremental.

:class:`OpenAIAssembler` is the renderer: it keeps the canonical bytes of every frozen
message and renders only the open messages and the tail on each step, so a step costs
O(new) at any history length. :func:`to_openai` is the same assembler from an empty
cache, returning the body as a dict: the same request always gives the same bytes, so
the prompt prefix stays byte-stable for OpenAI's automatic prefix cache. Every string
goes through :func:`ctxline.text.clean_text`, so no lone surrogate is ever sent.

Choices made here:

- The system text is the first message (role ``system``), left out when empty.
- Dict arguments are sent as canonical compact JSON (sorted keys); a ``str``
  argument (the model's own text that was not valid JSON) is sent unchanged.
- An assistant message with calls and no text has ``content: null``; without
  calls its content is always a string.
- Chat Completions has no error flag on tool messages: an error result is sent as
  its text (the repair text :data:`~ctxline.render.neutral.INTERRUPTED` says so).
- ``max_tokens`` is sent as ``max_completion_tokens`` (the current name; reasoning
  models refuse ``max_tokens``). A server that only knows the old name can get it
  through ``extra={"max_tokens": n}``.
- An empty ``parameters`` schema becomes ``{"type": "object", "properties": {}}``.
- Tool names (of calls and of specs), descriptions and every string of a schema are
  escaped (:func:`ctxline.tags.escape`): they come from outside too. Call ids are sent
  in the pattern providers accept (:mod:`ctxline.render.ids`), mapped the same way in
  the call and in its result; :attr:`OpenAIAssembler.ids` says which ones changed.

    >>> body = to_openai(NeutralRequest("Be brief.", (), (NeutralMessage("user", "hi"),)), model="gpt-4.1")
    >>> [m["role"] for m in body["messages"]]
    ['system', 'user']
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ctxline.errors import ValidationError
from ctxline.record.codec import canonical_json
from ctxline.record.events import JsonValue, ToolCall
from ctxline.record.jsonvalue import JsonArray, JsonObject
from ctxline.render.ids import ID_LIMITS, IdMap, OverlayIds
from ctxline.render.neutral import (
    NeutralMessage,
    NeutralRequest,
    ToolSpec,
    check_pairing,
    escape_json,
)
from ctxline.render.stream import TOOLS_SLOT, BodyParts, Stream, ToolsBytes, split_body
from ctxline.tags import escape
from ctxline.text import clean_json, clean_text

__all__ = ["OpenAIAssembler", "arguments_text", "spec_text", "to_openai"]

_OWN_KEYS = ("model", "messages", "tools")


def arguments_text(arguments: JsonValue) -> str:
    """The ``arguments`` string of a call: a ``str`` as is, anything else as compact JSON."""
    if isinstance(arguments, str):
        return clean_text(arguments)
    return canonical_json(clean_json(arguments)).decode()


def spec_text(value: str) -> str:
    """A tool's name or description as sent: cleaned and escaped."""
    return escape(clean_text(value))


def schema(parameters: Mapping[str, JsonValue]) -> dict[str, JsonValue]:
    """A tool's JSON schema as sent: cleaned, every string escaped (keys included)."""
    if not parameters:
        return {"type": "object", "properties": {}}
    cleaned: dict[str, JsonValue] = escape_json(clean_json(parameters), escape)
    return cleaned


def _tool(spec: ToolSpec) -> JsonObject:
    function: JsonObject = {"name": spec_text(spec.name)}
    if spec.description:
        function["description"] = spec_text(spec.description)
    function["parameters"] = schema(spec.parameters)
    return {"type": "function", "function": function}


def _tools(tools: Sequence[ToolSpec], marked: bool) -> JsonArray:
    return [_tool(spec) for spec in tools]


def _call(call: ToolCall, ids: IdMap) -> JsonObject:
    return {
        "id": ids(call.id),
        "type": "function",
        "function": {"name": spec_text(call.name), "arguments": arguments_text(call.arguments)},
    }


def _message(message: NeutralMessage, ids: IdMap) -> JsonObject:
    if message.role == "tool":
        return {
            "role": "tool",
            "tool_call_id": ids(message.call_id),
            "content": clean_text(message.text),
        }
    if message.role == "user":
        return {"role": "user", "content": clean_text(message.text)}
    if not message.tool_calls:
        return {"role": "assistant", "content": clean_text(message.text)}
    return {
        "role": "assistant",
        "content": clean_text(message.text) if message.text else None,
        "tool_calls": [_call(call, ids) for call in message.tool_calls],
    }


class OpenAIAssembler:
    """Chat Completions bodies; caches the bytes of frozen messages by position."""

    def __init__(self) -> None:
        self._stream = Stream()
        self._fed = 0
        self._ids = IdMap(ID_LIMITS["openai"])
        self.ids: IdMap = self._ids
        """The ids of the last body: ``self.ids(call_id)`` is the id it sent for a call."""
        """The call ids of the last body that are not sent as they are: (view id, sent id)."""
        self._head_key: tuple[object, ...] | None = None
        self._head_foot = (b"", b"")
        self._tools = ToolsBytes(_tools)

    def _head(
        self,
        tools: Sequence[ToolSpec],
        model: str,
        max_tokens: int | None,
        extra: Mapping[str, JsonValue] | None,
    ) -> tuple[bytes, bytes]:
        key = (tuple(tools), model, max_tokens, canonical_json(dict(extra or {})))
        if key != self._head_key:
            body: JsonObject = {"model": clean_text(model)}
            tools_bytes = b""
            if tools:  # rendered once per offered set, whatever else changes
                body["tools"] = TOOLS_SLOT
                tools_bytes = self._tools.get(tools)
            if max_tokens is not None:
                body["max_completion_tokens"] = max_tokens
            for name, value in (extra or {}).items():
                if name in _OWN_KEYS:
                    raise ValidationError(
                        "set by the renderer; it cannot come from extra", field=name
                    )
                body[clean_text(name)] = clean_json(value)
            self._head_key, self._head_foot = key, split_body(body, tools_bytes)
        return self._head_foot

    def assemble(
        self,
        *,
        system: str,
        tools: Sequence[ToolSpec],
        frozen: Sequence[NeutralMessage],
        live: Sequence[NeutralMessage],
        model: str,
        max_tokens: int | None = None,
        extra: Mapping[str, JsonValue] | None = None,
    ) -> BodyParts:
        """The body; ``live`` are the open history messages and the tail."""
        self._stream.extend([canonical_json(_message(m, self._ids)) for m in frozen[self._fed :]])
        self._fed = len(frozen)
        head, foot = self._head(tools, model, max_tokens, extra)
        lead = head
        if system:
            lead += canonical_json({"role": "system", "content": clean_text(system)})
        if not system and not frozen and not live:
            raise ValidationError("a request needs at least one message", field="messages")
        ids = OverlayIds(self._ids)
        items = [canonical_json(_message(m, ids)) for m in live]
        self.ids = ids
        return self._stream.body(lead, bool(system), items, foot)

    def patch(self, frozen: Sequence[NeutralMessage], indexes: Sequence[int]) -> None:
        """Frozen messages at ``indexes`` were replaced (a view edit): re-serialize those."""
        self._stream.replace(
            {i: canonical_json(_message(frozen[i], self._ids)) for i in indexes if i < self._fed}
        )



def to_openai(
    request: NeutralRequest,
    *,
    model: str,
    max_tokens: int | None = None,
    extra: Mapping[str, JsonValue] | None = None,
) -> dict[str, Any]:
    """The Chat Completions body for ``request`` (the assembler from an empty cache).

    ``extra`` adds top-level keys (``tool_choice``, ``temperature``, …); it may not
    replace ``model``, ``messages`` or ``tools``. Raises
    :class:`~ctxline.errors.ValidationError` when pairing is broken (see
    :func:`~ctxline.render.neutral.check_pairing`) or there is nothing to send.
    """
    check_pairing(request.messages)
    if max_tokens is not None and (
        isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1
    ):
        raise ValidationError(f"expected a positive integer, got {max_tokens!r}", field="max_tokens")
    parts = OpenAIAssembler().assemble(
        system=request.system,
        tools=request.tools,
        frozen=(),
        live=request.messages,
        model=model,
        max_tokens=max_tokens,
        extra=extra,
    )
    body: dict[str, Any] = json.loads(parts.join())
    return body
