"""Claude Code session transcripts (``~/.claude/projects/*/<session>.jsonl``) → sessions.

Why: these are the only logs with the provider's real prompt-cache figures per call
and a real compaction, but they are a UI transcript, not a request log. One API
response is streamed over several ``assistant`` records sharing ``message.id`` (one
content block each), and the ``tool_result`` records of its calls are interleaved
between them. The importer rebuilds what the model saw:

- records sharing ``message.id`` merge into one assistant.message (text blocks
  joined, ``tool_use`` blocks → tool calls with ``input`` as arguments); results that
  arrived in between follow it, one tool.result per ``tool_result`` block. Thinking
  is not visible text: it goes to ``meta.thinking``. ``message.usage`` (input, output,
  cache read, cache creation tokens) and the model go to the assistant meta;
- plain user text → user.message (``isMeta`` reminders are marked ``meta.is_meta``);
- ``{"type": "system", "subtype": "compact_boundary"}`` → a Compaction event
  (``trigger``, ``pre_tokens``), whose ``summary`` is the text of the following user
  record flagged ``isCompactSummary``;
- progress, file snapshots, queue operations, hook summaries … are not model input:
  skipped and counted in ``meta.skipped``. Side-chain records in a main file belong to
  sub-agents and are skipped too.

Record timestamps are kept as ``at`` and record uuids as client ids (a merged message
takes its first record's). Sub-agent transcripts in ``<session>/subagents/*.jsonl``
are separate sessions, loaded with their main file::

    258c….jsonl                        → claude-code/258c…
    258c…/subagents/agent-a881341.jsonl → claude-code/agent-a881341 (meta.parent)
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from ctxline.errors import ValidationError
from ctxline.importers._common import (
    ImportedSession,
    SessionBuilder,
    SourceFile,
    as_obj,
    content_text,
    opt_int,
    opt_str,
    parse_arguments,
    timestamp,
)
from ctxline.record.events import Compaction, JsonValue, ToolCall

__all__ = ["RECORD_TYPES", "USAGE_KEYS", "load_claude_code"]

RECORD_TYPES = frozenset(
    {
        "user",
        "assistant",
        "system",
        "summary",
        "progress",
        "file-history-snapshot",
        "queue-operation",
    }
)
"""Record types Claude Code writes (used to recognise the format)."""

USAGE_KEYS = (
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
)


@dataclass
class _Result:
    call_id: str
    content: str
    is_error: bool
    id: str | None
    at: datetime | None


@dataclass
class _Turn:
    """One assistant response being merged from its records."""

    message_id: str | None
    first_uuid: str | None
    at: datetime | None
    texts: list[str] = field(default_factory=list)
    thinking: list[str] = field(default_factory=list)
    calls: list[ToolCall] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=dict)
    model: str | None = None
    stop_reason: str | None = None
    records: int = 0
    held: list[_Result] = field(default_factory=list)


class _Reader:
    def __init__(self, builder: SessionBuilder) -> None:
        self.b = builder
        self.turn: _Turn | None = None
        self.open_compaction: int | None = None
        self.skipped: Counter[str] = Counter()
        self.models: Counter[str] = Counter()

    # assistant records

    def assistant(self, rec: dict[str, Any], line: int) -> None:
        msg = as_obj(rec.get("message"), "message", line)
        mid = opt_str(msg, "id", "message", line)
        turn = self.turn
        if turn is None or mid is None or turn.message_id != mid:
            self.flush()
            turn = self.turn = _Turn(mid, _uuid(rec, line), timestamp(rec.get("timestamp"), line))
        turn.records += 1
        model = opt_str(msg, "model", "message", line)
        if model:
            turn.model = model
        stop = msg.get("stop_reason")
        if isinstance(stop, str):
            turn.stop_reason = stop
        usage = msg.get("usage")
        if isinstance(usage, dict):
            for key in USAGE_KEYS:
                value = usage.get(key)
                if isinstance(value, int) and not isinstance(value, bool):
                    turn.usage[key] = max(value, turn.usage.get(key, 0))
        content = msg.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        if content is None:
            content = []
        if not isinstance(content, list):
            raise ValidationError(
                "expected a string or a list of blocks", field="message.content", line=line
            )
        for i, raw in enumerate(content):
            where = f"message.content[{i}]"
            block = as_obj(raw, where, line)
            kind = block.get("type")
            if kind == "text":
                text = opt_str(block, "text", where, line)
                if text:
                    turn.texts.append(text)
            elif kind == "tool_use":
                name = opt_str(block, "name", where, line) or ""
                call_id = opt_str(block, "id", where, line)
                turn.calls.append(self.b.call(call_id, name, parse_arguments(block.get("input"))))
            elif kind == "thinking":
                text = opt_str(block, "thinking", where, line)
                if text:
                    turn.thinking.append(text)
            elif kind == "redacted_thinking":
                turn.thinking.append("[redacted thinking]")
            else:
                turn.texts.append(content_text([block], where, line))

    def flush(self) -> None:
        turn, self.turn = self.turn, None
        if turn is None:
            return
        meta: dict[str, JsonValue] = {}
        if turn.model:
            meta["model"] = turn.model
            self.models[turn.model] += 1
        if turn.usage:
            meta["usage"] = dict(turn.usage)
        if turn.message_id:
            meta["message_id"] = turn.message_id
        if turn.stop_reason:
            meta["stop_reason"] = turn.stop_reason
        if turn.thinking:
            meta["thinking"] = "\n".join(turn.thinking)
        if turn.records > 1:
            meta["records"] = turn.records
        self.b.assistant("\n".join(turn.texts), turn.calls, meta, id=turn.first_uuid, at=turn.at)
        for r in turn.held:
            self.b.result(r.call_id, r.content, is_error=r.is_error, id=r.id, at=r.at)

    # user records

    def user(self, rec: dict[str, Any], line: int) -> None:
        msg = as_obj(rec.get("message"), "message", line)
        uuid = _uuid(rec, line)
        at = timestamp(rec.get("timestamp"), line)
        content = msg.get("content")
        if rec.get("isCompactSummary") is True:
            self.flush()
            self.summary(content_text(content, "message.content", line), uuid, at)
            return
        blocks: list[Any] = content if isinstance(content, list) else [content]
        results: list[_Result] = []
        others: list[Any] = []
        for i, raw in enumerate(blocks):
            if isinstance(raw, dict) and raw.get("type") == "tool_result":
                where = f"message.content[{i}]"
                call_id = opt_str(raw, "tool_use_id", where, line) or ""
                is_error = raw.get("is_error")
                if is_error is not None and not isinstance(is_error, bool):
                    raise ValidationError(
                        "expected true or false", field=f"{where}.is_error", line=line
                    )
                text = content_text(raw.get("content"), f"{where}.content", line)
                ident = uuid if not results else (f"{uuid}#{len(results) + 1}" if uuid else None)
                results.append(_Result(call_id, text, bool(is_error), ident, at))
            elif raw is not None:
                others.append(raw)
        if results:
            if self.turn is not None:
                self.turn.held.extend(results)
            else:
                for r in results:
                    self.b.result(r.call_id, r.content, is_error=r.is_error, id=r.id, at=r.at)
        if others:
            self.flush()
            text = content_text(others, "message.content", line)
            meta: dict[str, JsonValue] = {"is_meta": True} if rec.get("isMeta") is True else {}
            ident = f"{uuid}#text" if (results and uuid) else uuid
            self.b.user(text, meta, id=ident, at=at)

    # compaction

    def boundary(self, rec: dict[str, Any], line: int) -> None:
        self.flush()
        cm = rec.get("compactMetadata")
        trigger, pre = "", None
        if isinstance(cm, dict):
            trigger = opt_str(cm, "trigger", "compactMetadata", line) or ""
            pre = opt_int(cm, "preTokens", "compactMetadata", line)
        meta: dict[str, JsonValue] = {}
        parent = rec.get("logicalParentUuid")
        if isinstance(parent, str):
            meta["logical_parent_uuid"] = parent
        self.open_compaction = self.b.compaction(
            trigger=trigger,
            pre_tokens=pre,
            meta=meta,
            id=_uuid(rec, line),
            at=timestamp(rec.get("timestamp"), line),
        )

    def summary(self, text: str, uuid: str | None, at: datetime | None) -> None:
        index, self.open_compaction = self.open_compaction, None
        if index is not None:
            old = self.b.events[index].event
            if isinstance(old, Compaction) and not old.summary:
                meta = dict(old.meta)
                if uuid:
                    meta["summary_uuid"] = uuid
                self.b.replace(index, Compaction(text, old.trigger, old.pre_tokens, meta))
                return
        self.b.compaction(summary=text, id=uuid, at=at)


def _uuid(rec: dict[str, Any], line: int) -> str | None:
    return opt_str(rec, "uuid", line=line) or None


def _read(src: SourceFile, session_id: str) -> tuple[ImportedSession, dict[str, str]]:
    """One transcript; also returns agent id → the parent's call id for its sub-agents."""
    records = list(src.lines())
    builder = SessionBuilder(session_id)
    reader = _Reader(builder)
    agents: dict[str, str] = {}
    main_chain = any(
        r.get("type") in ("user", "assistant") and r.get("isSidechain") is not True
        for _, r in records
    )
    sidechain = 0
    agent_id: str | None = None
    title: str | None = None
    for line, rec in records:
        kind = rec.get("type")
        if not isinstance(kind, str):
            raise ValidationError("required string is missing", field="type", line=line)
        if agent_id is None and isinstance(rec.get("agentId"), str):
            agent_id = rec["agentId"]
        _link_agent(rec, agents)
        if kind in ("user", "assistant") and main_chain and rec.get("isSidechain") is True:
            sidechain += 1
        elif kind == "assistant":
            reader.assistant(rec, line)
        elif kind == "user":
            reader.user(rec, line)
        elif kind == "system" and rec.get("subtype") == "compact_boundary":
            reader.boundary(rec, line)
        else:
            if kind == "summary" and title is None and isinstance(rec.get("summary"), str):
                title = rec["summary"]
            sub = rec.get("subtype")
            reader.skipped[f"{kind}/{sub}" if isinstance(sub, str) else kind] += 1
    reader.flush()
    meta: dict[str, JsonValue] = {"format": "claude-code", "file": src.name}
    sessions = {r.get("sessionId") for _, r in records if isinstance(r.get("sessionId"), str)}
    if len(sessions) == 1:
        meta["claude_session_id"] = sessions.pop()
    if agent_id:
        meta["agent_id"] = agent_id
    if title:
        meta["title"] = title
    if reader.models:
        meta["models"] = [*sorted(reader.models)]
    if reader.skipped:
        meta["skipped"] = dict(sorted(reader.skipped.items()))
    if sidechain:
        meta["sidechain_records_skipped"] = sidechain
    return builder.finish(meta), agents


def _link_agent(rec: dict[str, Any], agents: dict[str, str]) -> None:
    """Remember which tool call of the parent started which sub-agent."""
    data = rec.get("data")
    if isinstance(data, dict) and data.get("type") == "agent_progress":
        agent, call = data.get("agentId"), rec.get("parentToolUseID")
        if isinstance(agent, str) and isinstance(call, str):
            agents.setdefault(agent, call)
    result = rec.get("toolUseResult")
    if isinstance(result, dict) and isinstance(result.get("agentId"), str):
        message = rec.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):
            for block in content:
                if isinstance(block, dict) and isinstance(block.get("tool_use_id"), str):
                    agents.setdefault(result["agentId"], block["tool_use_id"])
                    break


def _subagent_files(path: Path) -> list[Path]:
    folder = path.with_name(
        path.name[: -len(".jsonl")] if path.name.endswith(".jsonl") else path.stem
    )
    sub = folder / "subagents"
    return sorted(sub.glob("*.jsonl")) if sub.is_dir() else []


def load_claude_code(src: SourceFile) -> list[ImportedSession]:
    main_id = f"claude-code/{src.stem}"
    in_subagents = src.path.parent.name == "subagents"
    main, agents = _read(src, main_id)
    if in_subagents:
        parent = f"claude-code/{src.path.parent.parent.name}"
        return [_with_meta(main, {"parent": parent})]
    out = [main]
    for path in _subagent_files(src.path):
        try:
            child, _ = _read(SourceFile(path), f"claude-code/{path.name[: -len('.jsonl')]}")
        except ValidationError as exc:
            raise exc.located(source=str(path)) from None
        extra: dict[str, JsonValue] = {"parent": main_id}
        agent = child.meta.get("agent_id")
        if isinstance(agent, str) and agent in agents:
            extra["parent_call_id"] = agents[agent]
        out.append(_with_meta(child, extra))
    return out


def _with_meta(session: ImportedSession, extra: dict[str, JsonValue]) -> ImportedSession:
    return ImportedSession(session.id, session.events, {**session.meta, **extra})
