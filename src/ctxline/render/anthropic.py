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
- Tool ids must match ``^[a-zA-Z0-9_-]+$`` and be unique: an id that does not (or is
  longer than 64) is replaced, in both the call and its result, by its allowed
  characters plus a short hash of the original (:mod:`ctxline.render.ids`: a pure
  function of the id, so prefixes stay stable); :attr:`AnthropicAssembler.ids` says
  which ones changed.
- Tool names (of calls and of specs), descriptions and schema strings are escaped.

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

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ctxline.errors import ValidationError
from ctxline.record.codec import canonical_json
from ctxline.record.events import JsonValue, ToolCall
from ctxline.record.jsonvalue import JsonArray, JsonObject, as_object, as_str
from ctxline.render.ids import ID_LIMITS, IdMap, OverlayIds, provider_id
from ctxline.render.neutral import NeutralMessage, NeutralRequest, ToolSpec, check_pairing
from ctxline.render.openai import arguments_text, schema, spec_text
from ctxline.render.stream import TOOLS_SLOT, BodyParts, Stream, ToolsBytes, split_body
from ctxline.text import clean_json, clean_text

__all__ = [
    "CONTINUED",
    "EMPTY_ERROR",
    "MAX_BREAKPOINTS",
    "AnthropicAssembler",
    "to_anthropic",
    "tool_id",
]

CONTINUED = "(conversation continues)"
"""The user message put first when the rendered history starts with the assistant."""
EMPTY_ERROR = "error (no message)"
"""The content of an error result whose recorded content is empty."""
MAX_BREAKPOINTS = 4

_CACHE = {"type": "ephemeral"}

AnthropicBlock = JsonObject


def tool_id(call_id: str) -> str:
    """``call_id`` if Anthropic accepts it, else its allowed characters plus a hash."""
    return provider_id(call_id, ID_LIMITS["anthropic"])


def _ids() -> IdMap:
    return IdMap(ID_LIMITS["anthropic"])


def _text(text: str) -> list[AnthropicBlock]:
    return [{"type": "text", "text": clean_text(text)}] if text.strip() else []


def _tool_use(call: ToolCall, ids: IdMap) -> AnthropicBlock:
    args = call.arguments
    tool_input: JsonObject = clean_json(args) if isinstance(args, dict) else {"_raw": arguments_text(args)}
    return {
        "type": "tool_use",
        "id": ids(call.id),
        "name": spec_text(call.name),
        "input": tool_input,
    }


def _tool_result(message: NeutralMessage, ids: IdMap) -> AnthropicBlock:
    block: AnthropicBlock = {"type": "tool_result", "tool_use_id": ids(message.call_id)}
    if message.text.strip():
        block["content"] = clean_text(message.text)
    elif message.is_error:
        block["content"] = EMPTY_ERROR
    if message.is_error:
        block["is_error"] = True
    return block


def _blocks(message: NeutralMessage, ids: IdMap) -> list[AnthropicBlock]:
    if message.role == "tool":
        return [_tool_result(message, ids)]
    if message.role == "user":
        return _text(message.text)
    return _text(message.text) + [_tool_use(call, ids) for call in message.tool_calls]


def _tool(spec: ToolSpec) -> AnthropicBlock:
    tool: AnthropicBlock = {"name": spec_text(spec.name)}
    if spec.description:
        tool["description"] = spec_text(spec.description)
    tool["input_schema"] = schema(spec.parameters)
    return tool


def _tools(tools: Sequence[ToolSpec], marked: bool) -> JsonArray:
    """The tools array; ``marked``: the last tool carries the prefix's cache breakpoint."""
    out = [_tool(spec) for spec in tools]
    if marked and out:
        out[-1] = {**out[-1], "cache_control": dict(_CACHE)}
    return list(out)


def _mark(block: AnthropicBlock) -> None:
    block["cache_control"] = dict(_CACHE)


def _merge(groups: list[tuple[str, list[AnthropicBlock]]], role: str, blocks: list[AnthropicBlock]) -> None:
    if groups and groups[-1][0] == role:
        merged = groups[-1][1] + blocks
        if role == "user":  # tool results first, as the API requires
            merged.sort(key=lambda block: block["type"] != "tool_result")
        groups[-1] = (role, merged)
    else:
        groups.append((role, blocks))


def _role(message: NeutralMessage) -> str:
    return "assistant" if message.role == "assistant" else "user"


def _message_bytes(role: str, blocks: list[AnthropicBlock]) -> bytes:
    return canonical_json({"role": role, "content": list(blocks)})


class AnthropicAssembler:
    """Messages API bodies; merged messages that can no longer grow are cached as bytes."""

    def __init__(self) -> None:
        self._tools = ToolsBytes(_tools)
        self._head_key: tuple[object, ...] | None = None
        self._head_foot = (b"", b"")
        self.reset()

    def reset(self) -> None:
        self._ids = _ids()
        self.ids: IdMap = self._ids
        """The ids of the last body: ``self.ids(call_id)`` is the id it sent for a call."""
        """The call ids of the last body that are not sent as they are: (view id, sent id)."""
        self._stream = Stream()
        self._first_role: str | None = None
        self._pending: tuple[str, list[AnthropicBlock]] | None = None
        self._fed = 0
        self._members: list[list[int]] = [[]]
        """The frozen indexes merged into each cached message; the last: the pending one."""
        self._where: dict[int, int] = {}

    def _feed_frozen(self, frozen: Sequence[NeutralMessage]) -> None:
        for index in range(self._fed, len(frozen)):
            message = frozen[index]
            blocks = _blocks(message, self._ids)
            if not blocks:
                continue
            role = _role(message)
            self._first_role = self._first_role or role
            if self._pending is not None and self._pending[0] != role:
                self._stream.extend([_message_bytes(*self._pending)])
                self._pending = None
                self._members.append([])
            groups = [] if self._pending is None else [self._pending]
            _merge(groups, role, blocks)
            self._pending = groups[0]
            self._members[-1].append(index)
            self._where[index] = len(self._members) - 1
        self._fed = len(frozen)

    def patch(self, frozen: Sequence[NeutralMessage], indexes: Sequence[int]) -> None:
        """Frozen messages at ``indexes`` were replaced (a view edit): re-render the merged
        messages that hold them (the same roles and ids; their blocks only change)."""
        if any(i < self._fed and i not in self._where for i in indexes):
            self.reset()  # a message that rendered to nothing now renders: merge again
            return
        touched = sorted({self._where[i] for i in indexes if i in self._where})
        changes: dict[int, bytes] = {}
        for item in touched:
            groups: list[tuple[str, list[AnthropicBlock]]] = []
            for index in self._members[item]:
                blocks = _blocks(frozen[index], self._ids)
                if not blocks:  # the merge itself would change: render everything again
                    self.reset()
                    return
                _merge(groups, _role(frozen[index]), blocks)
            if item == len(self._members) - 1:
                self._pending = groups[0]
            else:
                changes[item] = _message_bytes(*groups[0])
        self._stream.replace(changes)

    def _head(
        self,
        system: str,
        tools: Sequence[ToolSpec],
        model: str,
        max_tokens: int,
        cache: bool,
        extra: Mapping[str, JsonValue] | None,
    ) -> tuple[bytes, bytes]:
        """The bytes around the messages, made again only when what they hold changes."""
        key = (system, tuple(tools), model, max_tokens, cache, canonical_json(dict(extra or {})))
        if key == self._head_key:
            return self._head_foot
        body: JsonObject = {"model": clean_text(model), "max_tokens": max_tokens}
        system_blocks: JsonArray = [*_text(system)]  # body["system"] is this list, marked below
        if system_blocks:
            body["system"] = system_blocks
        tools_bytes = b""
        if tools:  # rendered once per offered set (see ToolsBytes)
            body["tools"] = TOOLS_SLOT
            tools_bytes = self._tools.get(tools, cache and not system_blocks)
        for name, value in (extra or {}).items():
            if name in ("model", "max_tokens", "messages", "system", "tools"):
                raise ValidationError("set by the renderer; it cannot come from extra", field=name)
            body[clean_text(name)] = clean_json(value)
        if cache and system_blocks:  # else the breakpoint is on the last tool
            system_blocks[-1] = {**as_object(system_blocks[-1]), "cache_control": dict(_CACHE)}
        self._head_key, self._head_foot = key, split_body(body, tools_bytes)
        return self._head_foot

    def assemble(
        self,
        *,
        system: str,
        tools: Sequence[ToolSpec],
        frozen: Sequence[NeutralMessage],
        live: Sequence[NeutralMessage],
        history_end: int,
        model: str,
        max_tokens: int,
        cache: bool = True,
        extra: Mapping[str, JsonValue] | None = None,
    ) -> BodyParts:
        """The body.

        ``live`` are the open history messages followed by the tail; the first
        ``history_end`` of them are history. With ``cache``, breakpoints go on the end of
        the system text (or tools) and on the last block of history.
        """
        self._feed_frozen(frozen)
        ids = OverlayIds(self._ids)
        groups: list[tuple[str, list[AnthropicBlock]]] = []
        if self._pending is not None:
            groups.append((self._pending[0], list(self._pending[1])))
        first_role = self._first_role
        # the block that ends history: (group index, block object)
        mark: tuple[int, AnthropicBlock] | None = None
        if history_end == 0 and groups:
            mark = (0, groups[0][1][-1])
        for i, message in enumerate(live):
            blocks = _blocks(message, ids)
            if blocks:
                role = _role(message)
                first_role = first_role or role
                _merge(groups, role, blocks)
            if i == history_end - 1 and groups:
                mark = (len(groups) - 1, groups[-1][1][-1])
        if groups and groups[-1][0] == "assistant":
            last = groups[-1][1]
            if last[-1]["type"] == "text":
                stripped = as_str(last[-1]["text"]).rstrip()
                replaced: AnthropicBlock = {"type": "text", "text": stripped}
                if mark is not None and mark[1] is last[-1]:
                    mark = (mark[0], replaced)
                if stripped:
                    last[-1] = replaced
                else:
                    del last[-1]
                    if not last:
                        groups.pop()
        if not self._stream.items and not groups:
            raise ValidationError(
                "a request needs at least one non-empty message", field="messages"
            )
        if cache and mark is not None and mark[0] < len(groups):
            index, block = mark
            blocks_of = groups[index][1]
            for j, candidate in enumerate(blocks_of):
                if candidate is block:
                    blocks_of[j] = {**candidate, "cache_control": dict(_CACHE)}
        head, foot = self._head(system, tools, model, max_tokens, cache, extra)
        lead = head
        if first_role == "assistant":
            lead += _message_bytes("user", [{"type": "text", "text": CONTINUED}])
        live_items = [_message_bytes(role, blocks) for role, blocks in groups]
        self.ids = ids
        return self._stream.body(lead, first_role == "assistant", live_items, foot)


def to_anthropic(
    request: NeutralRequest,
    *,
    model: str,
    max_tokens: int,
    cache_breakpoints: Sequence[int] = (),
    cache_prefix: bool = False,
) -> dict[str, Any]:
    """The Messages API body for ``request`` (the assembler from an empty cache).

    ``cache_breakpoints`` and ``cache_prefix`` put ``cache_control`` marks where the
    caller says (a step's body gets its marks from the assembler itself).

    Raises :class:`~ctxline.errors.ValidationError` when pairing is broken (see
    :func:`~ctxline.render.neutral.check_pairing`), when nothing is left to send, or
    when a breakpoint is out of range, repeated, or one too many.
    """
    check_pairing(request.messages)
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 0:
        raise ValidationError(
            f"expected a non-negative integer, got {max_tokens!r}", field="max_tokens"
        )
    parts = AnthropicAssembler().assemble(
        system=request.system,
        tools=request.tools,
        frozen=(),
        live=request.messages,
        history_end=len(request.messages),
        model=model,
        max_tokens=max_tokens,
        cache=False,
    )
    body: dict[str, Any] = json.loads(parts.join())
    messages: list[dict[str, Any]] = body["messages"]

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
