"""Provider bodies assembled from cached per-message bytes, so a step costs O(new).

:func:`~ctxline.render.to_openai` and :func:`~ctxline.render.to_anthropic` build a
whole body from scratch; over a long history that is the O(n) per step — O(n²) per
session — that peers are criticised for. The assemblers here keep the canonical
bytes of every *frozen* message (one that can never change again, see
:class:`~ctxline.render.neutral.HistoryBuilder`) and render only the open messages
and the tail on each step. Their output is byte-identical to
``render_bytes(to_openai(...))`` / ``render_bytes(to_anthropic(...))`` — the tests
hold them to that.

Canonical JSON sorts keys, and in both bodies ``messages`` sorts before ``model``,
``system`` and ``tools``: a body is ``head + messages + foot``, where head and foot
come from rendering the body with a unique placeholder for the messages.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ctxline.errors import ValidationError
from ctxline.record.codec import canonical_json
from ctxline.record.events import JsonValue
from ctxline.render import anthropic as anth
from ctxline.render import openai as oai
from ctxline.render.neutral import NeutralMessage, ToolSpec
from ctxline.text import clean_json, clean_text

__all__ = ["AnthropicAssembler", "BodyParts", "OpenAIAssembler"]

_PLACEHOLDER = "ctxline-messages-" + secrets.token_hex(16)


def _split(body: dict[str, Any]) -> tuple[bytes, bytes]:
    """(bytes before the messages array's items, bytes after them)."""
    body = {**body, "messages": _PLACEHOLDER}
    raw = canonical_json(body)
    head, _, foot = raw.partition(f'"{_PLACEHOLDER}"'.encode())
    return head + b"[", b"]" + foot


@dataclass(frozen=True, slots=True)
class BodyParts:
    """A body as ``b"".join(parts[:count]) + suffix``, with its sha256 already computed.

    ``parts`` is the assembler's own growing list (shared, never rewritten in place), so
    a step neither copies nor rehashes the frozen history.
    """

    parts: list[bytes]
    count: int
    suffix: bytes
    sha256: str

    def join(self) -> bytes:
        return b"".join(self.parts[: self.count]) + self.suffix


class _Stream:
    """The frozen items of the messages array: joined and hashed incrementally after a lead.

    The lead is everything before the first frozen item (the head of the body, and the
    system message for OpenAI); when it changes, the parts and the hash are rebuilt once.
    """

    def __init__(self) -> None:
        self.items: list[bytes] = []
        self.lead: bytes | None = None
        self.parts: list[bytes] = []
        self.digest = hashlib.sha256()
        self.has_item = False

    def extend(self, items: Sequence[bytes]) -> None:
        self.items.extend(items)
        if self.lead is not None:
            self._add(items)

    def _add(self, items: Sequence[bytes]) -> None:
        for item in items:
            part = b"," + item if self.has_item else item
            self.has_item = True
            self.parts.append(part)
            self.digest.update(part)

    def body(
        self, lead: bytes, lead_has_item: bool, live: Sequence[bytes], foot: bytes
    ) -> BodyParts:
        if lead != self.lead:
            self.lead = lead
            self.parts = [lead]
            self.digest = hashlib.sha256(lead)
            self.has_item = lead_has_item
            self._add(self.items)
        joined = b",".join(live)
        suffix = (b"," + joined if self.has_item else joined) if live else b""
        suffix += foot
        digest = self.digest.copy()
        digest.update(suffix)
        return BodyParts(self.parts, len(self.parts), suffix, "sha256:" + digest.hexdigest())


class OpenAIAssembler:
    """Chat Completions bodies; caches the bytes of frozen messages by position."""

    def __init__(self) -> None:
        self._stream = _Stream()
        self._fed = 0
        self._head_key: tuple[object, ...] | None = None
        self._head_foot = (b"", b"")

    def _head(
        self,
        tools: Sequence[ToolSpec],
        model: str,
        max_tokens: int | None,
        extra: Mapping[str, JsonValue] | None,
    ) -> tuple[bytes, bytes]:
        key = (tuple(tools), model, max_tokens, canonical_json(dict(extra or {})))
        if key != self._head_key:
            body: dict[str, Any] = {"model": clean_text(model)}
            if tools:
                body["tools"] = [oai._tool(spec) for spec in tools]
            if max_tokens is not None:
                body["max_completion_tokens"] = max_tokens
            for name, value in (extra or {}).items():
                if name in oai._OWN_KEYS:
                    raise ValidationError(
                        "set by the renderer; it cannot come from extra", field=name
                    )
                body[clean_text(name)] = clean_json(value)
            self._head_key, self._head_foot = key, _split(body)
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
        self._stream.extend([canonical_json(oai._message(m)) for m in frozen[self._fed :]])
        self._fed = len(frozen)
        head, foot = self._head(tools, model, max_tokens, extra)
        lead = head
        if system:
            lead += canonical_json({"role": "system", "content": clean_text(system)})
        if not system and not frozen and not live:
            raise ValidationError("a request needs at least one message", field="messages")
        return self._stream.body(
            lead, bool(system), [canonical_json(oai._message(m)) for m in live], foot
        )


class _OverlayIds(anth._Ids):
    """Tool ids for one step: new ids go to this overlay, the base stays untouched."""

    def __init__(self, base: anth._Ids) -> None:
        super().__init__()
        self.base = base

    def __call__(self, call_id: str) -> str:
        known = self.base.ids.get(call_id)
        if known is not None:
            return known
        if call_id not in self.ids:
            out = candidate = anth.tool_id(call_id)
            n = 2
            while out in self.used or out in self.base.used:
                out, n = f"{candidate}_{n}", n + 1
            self.ids[call_id] = out
            self.used.add(out)
        return self.ids[call_id]


def _merge(groups: list[tuple[str, list[anth.Block]]], role: str, blocks: list[anth.Block]) -> None:
    if groups and groups[-1][0] == role:
        merged = groups[-1][1] + blocks
        if role == "user":  # tool results first, as the API requires
            merged.sort(key=lambda block: block["type"] != "tool_result")
        groups[-1] = (role, merged)
    else:
        groups.append((role, blocks))


def _role(message: NeutralMessage) -> str:
    return "assistant" if message.role == "assistant" else "user"


def _message_bytes(role: str, blocks: list[anth.Block]) -> bytes:
    return canonical_json({"role": role, "content": blocks})


class AnthropicAssembler:
    """Messages API bodies; merged messages that can no longer grow are cached as bytes."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self._ids = anth._Ids()
        self._stream = _Stream()
        self._first_role: str | None = None
        self._pending: tuple[str, list[anth.Block]] | None = None
        self._fed = 0

    def _feed_frozen(self, frozen: Sequence[NeutralMessage]) -> None:
        for message in frozen[self._fed :]:
            blocks = anth._blocks(message, self._ids)
            if not blocks:
                continue
            role = _role(message)
            self._first_role = self._first_role or role
            if self._pending is not None and self._pending[0] != role:
                self._stream.extend([_message_bytes(*self._pending)])
                self._pending = None
            groups = [] if self._pending is None else [self._pending]
            _merge(groups, role, blocks)
            self._pending = groups[0]
        self._fed = len(frozen)

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
        ids = _OverlayIds(self._ids)
        groups: list[tuple[str, list[anth.Block]]] = []
        if self._pending is not None:
            groups.append((self._pending[0], list(self._pending[1])))
        first_role = self._first_role
        # the block that ends history: (group index, block object)
        mark: tuple[int, anth.Block] | None = None
        if history_end == 0 and groups:
            mark = (0, groups[0][1][-1])
        for i, message in enumerate(live):
            blocks = anth._blocks(message, ids)
            if blocks:
                role = _role(message)
                first_role = first_role or role
                _merge(groups, role, blocks)
            if i == history_end - 1 and groups:
                mark = (len(groups) - 1, groups[-1][1][-1])
        if groups and groups[-1][0] == "assistant":
            last = groups[-1][1]
            if last[-1]["type"] == "text":
                stripped = last[-1]["text"].rstrip()
                replaced = {"type": "text", "text": stripped}
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
                    blocks_of[j] = {**candidate, "cache_control": dict(anth._CACHE)}
        body: dict[str, Any] = {"model": clean_text(model), "max_tokens": max_tokens}
        system_blocks = anth._text(system)
        if system_blocks:
            body["system"] = system_blocks
        if tools:
            body["tools"] = [anth._tool(spec) for spec in tools]
        for name, value in (extra or {}).items():
            if name in ("model", "max_tokens", "messages", "system", "tools"):
                raise ValidationError("set by the renderer; it cannot come from extra", field=name)
            body[clean_text(name)] = clean_json(value)
        if cache:
            prefix = body.get("system") or body.get("tools")
            if prefix:
                prefix[-1] = {**prefix[-1], "cache_control": dict(anth._CACHE)}
        head, foot = _split(body)
        lead = head
        if first_role == "assistant":
            lead += _message_bytes("user", [{"type": "text", "text": anth.CONTINUED}])
        live_items = [_message_bytes(role, blocks) for role, blocks in groups]
        return self._stream.body(lead, first_role == "assistant", live_items, foot)
