"""A body as cached bytes: frozen messages serialized and hashed once, the rest per step.

Canonical JSON sorts keys, and in both providers' bodies ``messages`` sorts before
``model``, ``system`` and ``tools``: a body is ``head + messages + foot``, where head and
foot come from rendering the body with a unique placeholder for the messages. A
:class:`Stream` keeps the bytes of every frozen message (one that can never change
again) joined and hashed incrementally, so a step costs O(new messages), not O(history).

The tools array is the same from step to step (it changes with a ``tools`` event): a
:class:`ToolsBytes` keeps its canonical bytes, rendered once per offered set, and
:func:`split_body` splices them in where the body holds :data:`TOOLS_SLOT` — the same
bytes as serializing the array inside the body (compact JSON is context-free), so a step
with 2,000 tools neither renders nor serializes a schema.

    head, foot = split_body({"model": "gpt-4.1", "messages": []})
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ctxline.record.codec import canonical_json
from ctxline.record.jsonvalue import JsonArray, JsonObject

if TYPE_CHECKING:
    from ctxline.render.neutral import ToolSpec

__all__ = ["TOOLS_SLOT", "BodyParts", "Stream", "ToolsBytes", "split_body"]

_PLACEHOLDER = "ctxline-messages-" + secrets.token_hex(16)
TOOLS_SLOT = "ctxline-tools-" + secrets.token_hex(16)
"""Put in a body's ``tools`` (a random token no input can know): :func:`split_body`
replaces it with the ``tools`` bytes it is given."""


def split_body(body: JsonObject, tools: bytes = b"") -> tuple[bytes, bytes]:
    """(bytes before the messages array's items, bytes after them); a ``tools`` value of
    :data:`TOOLS_SLOT` becomes the ``tools`` bytes (canonical JSON of the array)."""
    body = {**body, "messages": _PLACEHOLDER}
    raw = canonical_json(body)
    head, _, foot = raw.partition(f'"{_PLACEHOLDER}"'.encode())
    if body.get("tools") == TOOLS_SLOT:  # spliced into the short parts: one copy
        slot = f'"{TOOLS_SLOT}"'.encode()
        if slot in foot:
            foot = foot.replace(slot, tools, 1)
        else:
            head = head.replace(slot, tools, 1)
    return head + b"[", b"]" + foot


class ToolsBytes:
    """The canonical bytes of a rendered tools array, kept while the offered set holds.

    ``render(tools, marked)`` makes the array (``marked``: the last tool carries the
    cache breakpoint). The key is the tuple of specs: the record's fold keeps one tuple
    per ``tools`` event, so a step compares it by identity, item by item.
    """

    def __init__(self, render: Callable[[Sequence[ToolSpec], bool], JsonArray]) -> None:
        self._render = render
        self._key: tuple[tuple[ToolSpec, ...], bool] | None = None
        self._bytes = b""

    def get(self, tools: Sequence[ToolSpec], marked: bool = False) -> bytes:
        key = (tuple(tools), marked)
        if key != self._key:
            self._bytes = canonical_json(self._render(key[0], marked))
            self._key = key
        return self._bytes


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


class Stream:
    """The frozen items of the messages array: joined and hashed incrementally after a lead.

    The lead is everything before the first frozen item (the head of the body, and the
    system message for OpenAI); when it changes, the parts and the hash are rebuilt once.
    """

    MARK_EVERY = 64
    """Parts between two saved states of the hash (an edit hashes again from the last one)."""

    def __init__(self) -> None:
        self.items: list[bytes] = []
        self.lead: bytes | None = None
        self.parts: list[bytes] = []
        self.digest = hashlib.sha256()
        self.has_item = False
        self.marks: list[tuple[int, Any]] = []
        """(parts hashed, the hash state then), every :attr:`MARK_EVERY` parts."""

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
            if len(self.parts) % self.MARK_EVERY == 0:
                self.marks.append((len(self.parts), self.digest.copy()))

    def replace(self, changes: dict[int, bytes]) -> None:
        """Items ``index → bytes`` changed (an edit of frozen history): new lists, so the
        bodies already returned keep theirs; the hash is made again."""
        if not changes:
            return
        items = list(self.items)
        for index, item in changes.items():
            items[index] = item
        self.items = items
        if self.lead is None:
            return
        parts = list(self.parts)
        for index, item in changes.items():
            parts[index + 1] = b"," + item if parts[index + 1][:1] == b"," else item
        self.parts = parts
        first = min(changes) + 1  # the first part that changed
        self.marks = [m for m in self.marks if m[0] <= first]
        done, digest = self.marks[-1] if self.marks else (1, hashlib.sha256(parts[0]))
        digest = digest.copy()
        for n in range(done, len(parts)):  # hash again from the last state before the change
            digest.update(parts[n])
            if (n + 1) % self.MARK_EVERY == 0 and n + 1 > done:
                self.marks.append((n + 1, digest.copy()))
        self.digest = digest

    def body(
        self, lead: bytes, lead_has_item: bool, live: Sequence[bytes], foot: bytes
    ) -> BodyParts:
        if lead != self.lead:
            self.lead = lead
            self.parts = [lead]
            self.digest = hashlib.sha256(lead)
            self.marks = []
            self.has_item = lead_has_item
            self._add(self.items)
        joined = b",".join(live)
        suffix = (b"," + joined if self.has_item else joined) if live else b""
        suffix += foot
        digest = self.digest.copy()
        digest.update(suffix)
        return BodyParts(self.parts, len(self.parts), suffix, "sha256:" + digest.hexdigest())
