"""Render a neutral request as an Anthropic Messages API body.

The Messages API is stricter than Chat Completions, and each rule below answers a
400 that peers have hit in the field:

- Roles alternate and the first message is ``user``: tool results become user
  content, consecutive same-role messages are merged, and a history that starts
  with the assistant gets :data:`CONTINUED` as a first user message.
- All ``tool_result`` blocks of a parallel batch go in the one user message right
  after the calls, before any user text of that turn.
- No empty or whitespace-only text block is sent; the final assistant text loses
  its trailing whitespace ("final assistant content cannot end with trailing
  whitespace"); an error result with no text gets :data:`EMPTY_ERROR` ("content
  cannot be empty if is_error is true"); a non-error empty result has no content.
- ``tool_use.input`` must be an object: arguments that are not a dict (the
  model's raw text when it was not valid JSON) are sent as ``{"_raw": text}``.
- Tool ids must match ``^[a-zA-Z0-9_-]+$`` and be unique: an id that does not is
  replaced, in both the call and its result, by its allowed characters plus a
  short hash of the original (a pure function of the id, so prefixes stay stable).

``system`` is a list of text blocks so that a cache breakpoint can sit on it.
``cache_breakpoints`` are indexes into the rendered ``messages`` (negative ones
count from the end); ``cache_prefix=True`` adds one at the end of the system text
(or of the tools when there is no system text). At most four in all.

    >>> body = to_anthropic(NeutralRequest("Be brief.", (), (NeutralMessage("user", "hi"),)),
    ...                     model="claude-sonnet-4-5", max_tokens=1024, cache_breakpoints=[-1])
    >>> body["messages"][0]["content"][-1]["cache_control"]
    {'type': 'ephemeral'}
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Any

from ctxline.errors import ValidationError
from ctxline.record.events import ToolCall
from ctxline.render.neutral import NeutralMessage, NeutralRequest, ToolSpec, check_pairing
from ctxline.render.openai import arguments_text
from ctxline.text import clean_json, clean_text

__all__ = ["CONTINUED", "EMPTY_ERROR", "MAX_BREAKPOINTS", "to_anthropic", "tool_id"]

CONTINUED = "(conversation continues)"
"""The user message put first when the rendered history starts with the assistant."""
EMPTY_ERROR = "error (no message)"
"""The content of an error result whose recorded content is empty."""
MAX_BREAKPOINTS = 4

_ID_OK = re.compile(r"[A-Za-z0-9_-]+")
_ID_BAD_CHAR = re.compile(r"[^A-Za-z0-9_-]")
_CACHE = {"type": "ephemeral"}

Block = dict[str, Any]


def tool_id(call_id: str) -> str:
    """``call_id`` if Anthropic accepts it, else its allowed characters plus a hash."""
    if _ID_OK.fullmatch(call_id):
        return call_id
    digest = hashlib.sha256(call_id.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    safe = _ID_BAD_CHAR.sub("_", call_id)[:48]
    return f"{safe}_{digest}" if safe.strip("_") else f"id_{digest}"


class _Ids:
    """Maps neutral call ids to distinct Anthropic ids, in order of first use."""

    def __init__(self) -> None:
        self.ids: dict[str, str] = {}
        self.used: set[str] = set()

    def __call__(self, call_id: str) -> str:
        if call_id not in self.ids:
            out = base = tool_id(call_id)
            n = 2
            while out in self.used:
                out, n = f"{base}_{n}", n + 1
            self.ids[call_id] = out
            self.used.add(out)
        return self.ids[call_id]


def _text(text: str) -> list[Block]:
    return [{"type": "text", "text": clean_text(text)}] if text.strip() else []


def _tool_use(call: ToolCall, ids: _Ids) -> Block:
    args = call.arguments
    tool_input = clean_json(args) if isinstance(args, dict) else {"_raw": arguments_text(args)}
    return {
        "type": "tool_use",
        "id": ids(call.id),
        "name": clean_text(call.name),
        "input": tool_input,
    }


def _tool_result(message: NeutralMessage, ids: _Ids) -> Block:
    block: Block = {"type": "tool_result", "tool_use_id": ids(message.call_id)}
    if message.text.strip():
        block["content"] = clean_text(message.text)
    elif message.is_error:
        block["content"] = EMPTY_ERROR
    if message.is_error:
        block["is_error"] = True
    return block


def _blocks(message: NeutralMessage, ids: _Ids) -> list[Block]:
    if message.role == "tool":
        return [_tool_result(message, ids)]
    if message.role == "user":
        return _text(message.text)
    return _text(message.text) + [_tool_use(call, ids) for call in message.tool_calls]


def _messages(request: NeutralRequest) -> list[dict[str, Any]]:
    ids = _Ids()
    out: list[dict[str, Any]] = []
    for message in request.messages:
        blocks = _blocks(message, ids)
        if not blocks:
            continue
        role = "assistant" if message.role == "assistant" else "user"
        if out and out[-1]["role"] == role:
            merged: list[Block] = out[-1]["content"] + blocks
            if role == "user":  # tool results first, as the API requires
                merged.sort(key=lambda block: block["type"] != "tool_result")
            out[-1]["content"] = merged
        else:
            out.append({"role": role, "content": blocks})
    if out and out[-1]["role"] == "assistant":
        last = out[-1]["content"]
        if last[-1]["type"] == "text":
            stripped = last[-1]["text"].rstrip()
            if stripped:
                last[-1] = {"type": "text", "text": stripped}
            else:
                del last[-1]
                if not last:
                    out.pop()
    if out and out[0]["role"] == "assistant":
        out.insert(0, {"role": "user", "content": [{"type": "text", "text": CONTINUED}]})
    return out


def _tool(spec: ToolSpec) -> Block:
    tool: Block = {"name": clean_text(spec.name)}
    if spec.description:
        tool["description"] = clean_text(spec.description)
    schema = (
        clean_json(spec.parameters) if spec.parameters else {"type": "object", "properties": {}}
    )
    tool["input_schema"] = schema
    return tool


def _mark(block: Block) -> None:
    block["cache_control"] = dict(_CACHE)


def to_anthropic(
    request: NeutralRequest,
    *,
    model: str,
    max_tokens: int,
    cache_breakpoints: Sequence[int] = (),
    cache_prefix: bool = False,
) -> dict[str, Any]:
    """The Messages API body for ``request``.

    Raises :class:`~ctxline.errors.ValidationError` when pairing is broken (see
    :func:`~ctxline.render.neutral.check_pairing`), when nothing is left to send, or
    when a breakpoint is out of range, repeated, or one too many.
    """
    check_pairing(request.messages)
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 0:
        raise ValidationError(
            f"expected a non-negative integer, got {max_tokens!r}", field="max_tokens"
        )
    messages = _messages(request)
    if not messages:
        raise ValidationError("a request needs at least one non-empty message", field="messages")
    body: dict[str, Any] = {
        "model": clean_text(model),
        "max_tokens": max_tokens,
        "messages": messages,
    }
    system = _text(request.system)
    if system:
        body["system"] = system
    if request.tools:
        body["tools"] = [_tool(spec) for spec in request.tools]

    if len(cache_breakpoints) + cache_prefix > MAX_BREAKPOINTS:
        raise ValidationError(
            f"at most {MAX_BREAKPOINTS} cache breakpoints, got {len(cache_breakpoints) + cache_prefix}",
            field="cache_breakpoints",
        )
    marked: set[int] = set()
    for index in cache_breakpoints:
        position = index + len(messages) if index < 0 else index
        if not 0 <= position < len(messages):
            raise ValidationError(
                f"no message {index} among {len(messages)} rendered messages",
                field="cache_breakpoints",
            )
        if position in marked:
            raise ValidationError(f"message {position} is marked twice", field="cache_breakpoints")
        marked.add(position)
        _mark(messages[position]["content"][-1])
    if cache_prefix:
        prefix = body.get("system") or body.get("tools")
        if not prefix:
            raise ValidationError(
                "no system text or tools to put a breakpoint on", field="cache_prefix"
            )
        _mark(prefix[-1])
    return body
