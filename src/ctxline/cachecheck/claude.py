"""Claude Code transcripts as a list of model calls, each with its usage and what it was sent.

Why not :mod:`ctxline.importers.claude_code`: the importer rebuilds *events* for a
record; a cache check needs each *call*: its ``message.usage`` (uncached input, cache
read, cache write split into 5-minute and 1-hour, output), its model and time, and the
content blocks it was sent. Those are the records on the call's ``parentUuid`` chain
(a rewind or an edit starts a new branch of the chain; a compaction starts a new chain
at its ``compact_boundary``). One API response is streamed over several ``assistant``
records sharing ``message.id``; they are one call. Side-chain records in a main file
belong to sub-agents and are left out (a file under ``subagents/`` is all side chain:
it is read whole).

    calls = read_calls(Path("session.jsonl"))
    calls[3].usage.cache_read_tokens, calls[3].blocks[:2]
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from ctxline.errors import ValidationError
from ctxline.pricing import BilledUsage
from ctxline.record.codec import parse_at
from ctxline.record.jsonvalue import JsonArray, JsonObject, JsonValue, as_object, get_str

__all__ = ["Call", "ContentBlock", "read_calls"]

_COMMAND = re.compile(r"<command-name>\s*(/[^<\s]{1,40})\s*</command-name>")


@dataclass(frozen=True, slots=True)
class ContentBlock:
    """One content block as the model was sent it (its text is kept short; the digest is whole)."""

    role: str
    type: str
    text: str
    digest: str

    def describe(self, width: int = 100) -> str:
        flat = " ".join(self.text.split())
        return f"{self.role} {self.type}: {flat[:width]}{'…' if len(flat) > width else ''}"


@dataclass(frozen=True, slots=True)
class Call:
    """One model call of a transcript."""

    index: int
    line: int
    message_id: str
    model: str
    at: datetime | None
    usage: BilledUsage
    blocks: tuple[ContentBlock, ...]
    """The input: every block on the call's chain before it."""
    output: tuple[ContentBlock, ...]
    compacted: bool
    """A ``compact_boundary`` record came since the call before."""
    new_turn: bool
    """User content other than tool results (a new turn) came since the call before."""
    thinking_before: bool
    """The input holds thinking blocks of earlier turns."""
    commands: tuple[str, ...] = ()
    """Local commands the user ran since the call before (``/mcp``, ``/model``, …)."""


def _block_text(block: JsonObject) -> str:
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text") or "")
    if kind == "thinking":
        return str(block.get("thinking") or "")
    if kind == "tool_use":
        return f"{block.get('name')}({json.dumps(block.get('input'), sort_keys=True, ensure_ascii=False)})"
    if kind == "tool_result":
        content = block.get("content")
        if isinstance(content, list):
            return "\n".join(str(c.get("text", "")) for c in content if isinstance(c, dict))
        return str(content or "")
    return json.dumps(block, sort_keys=True, ensure_ascii=False)[:2000]


def _blocks(role: str, content: JsonValue) -> list[ContentBlock]:
    items: JsonArray = content if isinstance(content, list) else [{"type": "text", "text": content}]
    out = []
    for raw in items:
        if not isinstance(raw, dict):
            continue
        text = _block_text(raw)
        digest = hashlib.sha256(
            f"{role}\x00{raw.get('type')}\x00{text}".encode("utf-8", "replace")
        ).hexdigest()
        out.append(ContentBlock(role, str(raw.get("type")), text[:4000], digest))
    return out


def _usage(raw: JsonObject, line: int) -> BilledUsage:
    def count(key: str, where: JsonObject = raw) -> int:
        value = where.get(key, 0)
        if value is None:
            return 0
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValidationError(
                f"expected a token count, got {value!r}", field=f"message.usage.{key}", line=line
            )
        return value

    write = count("cache_creation_input_tokens")
    split = raw.get("cache_creation")
    one_hour = count("ephemeral_1h_input_tokens", split) if isinstance(split, dict) else 0
    one_hour = min(one_hour, write)
    return BilledUsage(
        count("input_tokens"),
        count("output_tokens"),
        count("cache_read_input_tokens"),
        write - one_hour,
        one_hour,
    )


def _read(path: Path) -> list[tuple[int, JsonObject]]:
    out = []
    with path.open(encoding="utf-8") as f:
        for n, text in enumerate(f, start=1):
            if not text.strip():
                continue
            try:
                rec: JsonValue = json.loads(text)
            except json.JSONDecodeError as exc:
                raise ValidationError(
                    f"not valid JSON ({exc.msg})", source=str(path), line=n
                ) from None
            if not isinstance(rec, dict):
                raise ValidationError("expected a JSON object", source=str(path), line=n)
            out.append((n, rec))
    return out


def read_calls(path: Path) -> list[Call]:
    """The model calls of one Claude Code transcript, in order (see the module doc)."""
    records = _read(path)
    main = any(
        r.get("type") in ("user", "assistant") and r.get("isSidechain") is not True
        for _, r in records
    )
    kept = [(n, r) for n, r in records if not (main and r.get("isSidechain") is True)]
    by_uuid = {r["uuid"]: (i, r) for i, (_, r) in enumerate(kept) if isinstance(r.get("uuid"), str)}
    blocks_of: dict[int, list[ContentBlock]] = {}
    for i, (_, r) in enumerate(kept):
        message = r.get("message")
        if r.get("type") in ("user", "assistant") and isinstance(message, dict):
            role = "assistant" if r.get("type") == "assistant" else "user"
            blocks_of[i] = _blocks(role, message.get("content"))

    def chain(i: int) -> tuple[ContentBlock, ...]:
        path_: list[int] = []
        parent = kept[i][1].get("parentUuid")
        seen: set[str] = set()
        while isinstance(parent, str) and parent in by_uuid and parent not in seen:
            seen.add(parent)
            j, rec = by_uuid[parent]
            path_.append(j)
            parent = rec.get("parentUuid")
        return tuple(b for j in reversed(path_) for b in blocks_of.get(j, ()))

    calls: list[Call] = []
    firsts: dict[str, int] = {}
    usage_raw: dict[str, JsonObject] = {}
    outputs: dict[str, list[ContentBlock]] = {}
    flags: list[tuple[bool, bool]] = []
    compacted = new_turn = False
    commands: list[str] = []
    commands_of: list[tuple[str, ...]] = []
    order: list[str] = []
    for i, (n, r) in enumerate(kept):
        kind = r.get("type")
        if kind == "system" and r.get("subtype") == "compact_boundary":
            compacted = True
        elif kind == "user" and isinstance(r.get("message"), dict) and not r.get("isMeta"):
            found = [c for b in blocks_of.get(i, ()) for c in _COMMAND.findall(b.text)]
            commands.extend(found)
            if not found and any(b.type != "tool_result" for b in blocks_of.get(i, ())):
                new_turn = True
        elif kind == "assistant" and isinstance(r.get("message"), dict):
            msg = as_object(r["message"], "message")
            mid = get_str(msg, "id", f"line-{n}")
            if mid not in firsts:
                firsts[mid] = i
                order.append(mid)
                flags.append((compacted, new_turn))
                commands_of.append(tuple(commands))
                compacted = new_turn = False
                commands = []
                usage_raw[mid] = {}
            usage = msg.get("usage")
            if isinstance(
                usage, dict
            ):  # streamed records repeat or grow the figures: keep the largest
                for key, value in usage.items():
                    old = usage_raw[mid].get(key)
                    if isinstance(value, int) and not isinstance(value, bool):
                        usage_raw[mid][key] = max(value, old) if isinstance(old, int) else value
                    elif isinstance(value, dict):
                        usage_raw[mid][key] = value
            outputs.setdefault(mid, []).extend(blocks_of.get(i, ()))
    for k, mid in enumerate(order):
        i = firsts[mid]
        n, rec = kept[i]
        msg = as_object(rec["message"], "message")
        at = None
        if isinstance(rec.get("timestamp"), str):
            at = parse_at(rec["timestamp"], where="timestamp", line=n)
        blocks = chain(i)
        calls.append(
            Call(
                k + 1,
                n,
                mid,
                str(msg.get("model") or ""),
                at,
                _usage(usage_raw[mid], n),
                blocks,
                tuple(outputs.get(mid, ())),
                flags[k][0],
                flags[k][1],
                any(b.type == "thinking" for b in blocks),
                commands_of[k],
            )
        )
    return calls
