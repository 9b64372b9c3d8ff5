"""SWE-agent ``.traj`` files → one session each.

Why: SWE-agent (SWE-agent/SWE-agent) writes ``{environment, history, info,
trajectory}``; ``history`` is the conversation the model saw, in two dialects that
both occur in real files:

- **function calling**: assistant entries carry ``tool_calls`` (a list, or in some
  versions the Python ``repr`` of one, read with ``ast.literal_eval``) and each
  observation is a ``role: tool`` entry naming its ``tool_call_ids``;
- **text actions**: the assistant writes its command in a fenced block (kept apart as
  ``thought`` and ``action``) and the observation is the next ``role: user`` entry.
  Each action becomes a tool call named by the action's first word (``open``,
  ``edit``, ``submit`` …; ``bash`` when there is none) with arguments
  ``{"command": action}`` and a deterministic id ``<session>-call-<n>``; the
  observation is its tool.result, and the assistant text is the ``thought``.

Demonstrations (``is_demo``) stay user messages. When a file has no ``history`` the
``trajectory`` steps (thought, action, observation) are used instead. The small
``info`` fields (``exit_status``, ``model_stats``) go to the session meta::

    ctf__crypto__eps.traj  →  session "swe-agent/ctf__crypto__eps"
    {"role": "assistant", "thought": "List files", "action": "ls -la\\n"}
        → assistant.message "List files" + call ls {"command": "ls -la\\n"}
    {"role": "user", "content": "total 4 ..."}  → tool.result of that call
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

from ctxline.errors import ValidationError
from ctxline.importers._common import (
    ImportedSession,
    SessionBuilder,
    SourceFile,
    as_list,
    as_obj,
    content_text,
    opt_str,
    small_meta,
)
from ctxline.importers.openai_messages import ChatConverter
from ctxline.record.events import JsonValue, ToolCall

__all__ = ["action_name", "load_swe_agent", "parse_tool_calls"]

_FIRST_WORD = re.compile(r"\s*([A-Za-z_][\w.\-]*)")
_MAX_REPR = 1_000_000


def action_name(action: str) -> str:
    """The tool a text action calls: its first word, or ``bash``."""
    match = _FIRST_WORD.match(action)
    return match.group(1) if match else "bash"


def parse_tool_calls(raw: object, where: str) -> list[Any]:
    """``tool_calls`` as a list: given as one, or as a JSON / Python-literal string of one."""
    if isinstance(raw, list):
        return raw
    if isinstance(raw, str):
        text = raw.strip()
        if not text:
            return []
        try:
            value: Any = json.loads(text)
        except (ValueError, RecursionError):
            value = None
            if len(text) <= _MAX_REPR:
                try:
                    value = ast.literal_eval(text)
                except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                    value = None
        if isinstance(value, list | tuple):
            return list(value)
        raise ValidationError("tool_calls is a string that is not a list literal", field=where)
    raise ValidationError(f"expected a list of tool calls, got {type(raw).__name__}", field=where)


def _is_observation(msg: dict[str, Any]) -> bool:
    """A user entry that reports what the last action did (older files have no message_type)."""
    return not msg.get("is_demo") and msg.get("message_type") in (None, "observation")


class _History:
    def __init__(self, builder: SessionBuilder) -> None:
        self.b = builder
        self.chat = ChatConverter(builder)
        self.open_calls: list[str] = []
        """Calls of the latest assistant entry not answered yet, in order."""

    def entry(self, item: object, where: str) -> None:
        msg = as_obj(item, where)
        role = opt_str(msg, "role", where) or ""
        if role == "assistant":
            self.assistant(msg, where)
        elif role == "tool":
            self.tool(msg, where)
        elif role == "user" and self.open_calls and _is_observation(msg):
            text = content_text(msg.get("content"), f"{where}.content")
            call_id = self.open_calls.pop(0)
            self.b.result(call_id, text)
            self.open_calls.clear()
        elif role in ("system", "user"):
            self.open_calls.clear()
            text = content_text(msg.get("content"), f"{where}.content")
            meta: dict[str, JsonValue] = {}
            if msg.get("is_demo"):
                meta["demo"] = True
            mtype = msg.get("message_type")
            if isinstance(mtype, str) and mtype not in ("system_prompt", "observation", "user"):
                meta["message_type"] = mtype
            if role == "system":
                self.b.system(text, meta)
            else:
                self.b.user(text, meta)
        else:
            self.chat.add(msg, where)

    def assistant(self, msg: dict[str, Any], where: str) -> None:
        raw_calls = msg.get("tool_calls")
        calls: list[ToolCall] = []
        if raw_calls is not None:
            items = parse_tool_calls(raw_calls, f"{where}.tool_calls")
            for i, item in enumerate(items):
                calls.append(self.chat.tool_call(item, f"{where}.tool_calls[{i}]"))
        content = content_text(msg.get("content"), f"{where}.content")
        if calls:
            text = content
        else:
            action = opt_str(msg, "action", where)
            thought = opt_str(msg, "thought", where)
            if action and action.strip():
                calls.append(self.b.call(None, action_name(action), {"command": action}))
                text = thought if thought is not None else content
            else:
                text = content
        self.b.assistant(text, calls)
        self.open_calls = [c.id for c in calls]

    def tool(self, msg: dict[str, Any], where: str) -> None:
        text = content_text(msg.get("content"), f"{where}.content")
        ids_raw = msg.get("tool_call_ids")
        if ids_raw is None and isinstance(msg.get("tool_call_id"), str):
            ids_raw = [msg["tool_call_id"]]
        if ids_raw is None:
            ids = self.open_calls[:1]
        else:
            ids = []
            for i, v in enumerate(as_list(ids_raw, f"{where}.tool_call_ids")):
                if not isinstance(v, str):
                    raise ValidationError("expected a string", field=f"{where}.tool_call_ids[{i}]")
                ids.append(v)
        if not ids:
            ids = [""]
        for call_id in ids:
            self.b.result(call_id, text)
            if call_id in self.open_calls:
                self.open_calls.remove(call_id)


def _from_trajectory(builder: SessionBuilder, steps: list[Any]) -> None:
    for i, item in enumerate(steps):
        where = f"trajectory[{i}]"
        step = as_obj(item, where)
        thought = opt_str(step, "thought", where) or ""
        action = opt_str(step, "action", where) or ""
        observation = content_text(step.get("observation"), f"{where}.observation")
        if action.strip():
            call = builder.call(None, action_name(action), {"command": action})
            builder.assistant(thought, [call])
            builder.result(call.id, observation)
        else:
            builder.assistant(thought or content_text(step.get("response"), f"{where}.response"))


def load_swe_agent(src: SourceFile) -> list[ImportedSession]:
    doc = as_obj(src.doc(), "")
    builder = SessionBuilder(f"swe-agent/{src.stem}")
    meta: dict[str, JsonValue] = {"format": "swe-agent", "file": src.name}
    if "history" in doc:
        history = _History(builder)
        for i, item in enumerate(as_list(doc["history"], "history")):
            history.entry(item, f"history[{i}]")
        meta["source"] = "history"
    elif "trajectory" in doc:
        _from_trajectory(builder, as_list(doc["trajectory"], "trajectory"))
        meta["source"] = "trajectory"
    else:
        raise ValidationError("expected a 'history' or 'trajectory' list", field="history")
    env = doc.get("environment")
    if isinstance(env, str):
        meta["environment"] = env
    info = doc.get("info")
    if isinstance(info, dict):
        extra = small_meta(info, skip=("submission",))
        submission = info.get("submission")
        if isinstance(submission, str):
            extra["submission_chars"] = len(submission)
        if extra:
            meta["info"] = extra
    return [builder.finish(meta)]
