"""OpenAI Chat Completions message lists → events.

Why: the Chat Completions ``messages`` list is the lingua franca of agent logs —
tau-bench trajectories, SWE-agent's function-calling history and many home-grown
loggers use it — so one converter (:class:`ChatConverter`) serves them all. Roles map
one to one: ``system``/``developer`` → system.message, ``user`` → user.message,
``assistant`` → assistant.message (``tool_calls`` with their JSON-string arguments
parsed; arguments that are not valid JSON are kept as the raw string), ``tool`` →
tool.result. The legacy ``function_call`` / ``role: function`` pair gets a synthetic
call id (``<session>-call-<n>``). Content given as a list of parts has its text parts
joined. A role this version does not know is kept as an opaque ``import.message``.

A file holds either the list itself or ``{"messages": [...]}``; the session id is
the file stem::

    [{"role": "user", "content": "What is in a.txt?"},
     {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
      "function": {"name": "read", "arguments": "{\\"path\\": \\"a.txt\\"}"}}]},
     {"role": "tool", "tool_call_id": "c1", "content": "hello"}]
"""

from __future__ import annotations

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
    parse_arguments,
    req_str,
    small_meta,
)
from ctxline.record.events import JsonValue, ToolCall

__all__ = ["ChatConverter", "load_openai"]

_SYSTEM_ROLES = ("system", "developer")


class ChatConverter:
    """Feeds Chat Completions messages, one at a time, into a :class:`SessionBuilder`."""

    def __init__(self, builder: SessionBuilder, *, line: int | None = None) -> None:
        self.b = builder
        self.line = line
        self.legacy_open: list[tuple[str, str]] = []
        """Legacy ``function_call`` calls not yet answered: (call id, name)."""

    def add(
        self, message: object, where: str, *, extra_meta: dict[str, JsonValue] | None = None
    ) -> None:
        msg = as_obj(message, where, self.line)
        role = req_str(msg, "role", where, self.line)
        text = content_text(msg.get("content"), f"{where}.content", self.line)
        meta = self._meta(msg)
        if extra_meta:
            meta.update(extra_meta)
        if role in _SYSTEM_ROLES:
            self.b.system(text, meta)
        elif role == "user":
            self.b.user(text, meta)
        elif role == "assistant":
            self.b.assistant(text, self.tool_calls(msg, where), meta)
        elif role == "tool":
            call_id = opt_str(msg, "tool_call_id", where, self.line) or ""
            name = opt_str(msg, "name", where, self.line) or ""
            self.b.result(call_id, text, name=name, meta=meta)
        elif role == "function":
            self._legacy_result(msg, text, where)
        else:
            data: dict[str, JsonValue] = {"role": role, "content": text}
            if meta:
                data["meta"] = meta
            self.b.unknown("import.message", data)

    def tool_calls(self, msg: dict[str, Any], where: str) -> list[ToolCall]:
        calls: list[ToolCall] = []
        raw = msg.get("tool_calls")
        if raw is not None:
            for i, item in enumerate(as_list(raw, f"{where}.tool_calls", self.line)):
                calls.append(self.tool_call(item, f"{where}.tool_calls[{i}]"))
        legacy = msg.get("function_call")
        if legacy is not None:
            fn = as_obj(legacy, f"{where}.function_call", self.line)
            name = req_str(fn, "name", f"{where}.function_call", self.line)
            call = self.b.call(None, name, parse_arguments(fn.get("arguments")))
            self.legacy_open.append((call.id, call.name))
            calls.append(call)
        return calls

    def tool_call(self, item: object, where: str) -> ToolCall:
        """One call, nested (``{"function": {"name", "arguments"}}``) or flat (``{"name", "arguments"}``)."""
        obj = as_obj(item, where, self.line)
        fn_raw = obj.get("function")
        if fn_raw is not None:
            fn = as_obj(fn_raw, f"{where}.function", self.line)
            name = req_str(fn, "name", f"{where}.function", self.line)
            args = fn.get("arguments")
        else:
            name = req_str(obj, "name", where, self.line)
            args = obj.get("arguments", obj.get("input"))
        call_id = opt_str(obj, "id", where, self.line)
        return self.b.call(call_id, name, parse_arguments(args))

    def _legacy_result(self, msg: dict[str, Any], text: str, where: str) -> None:
        name = opt_str(msg, "name", where, self.line) or ""
        match = next((i for i, (_, n) in enumerate(self.legacy_open) if n == name), None)
        if match is None and self.legacy_open and not name:
            match = 0
        if match is None:
            self.b.result(f"{self.b.id}-unmatched-{name or 'function'}", text, name=name)
            return
        call_id, call_name = self.legacy_open.pop(match)
        self.b.result(call_id, text, name=call_name)

    def _meta(self, msg: dict[str, Any]) -> dict[str, JsonValue]:
        meta: dict[str, JsonValue] = {}
        name = msg.get("name")
        if isinstance(name, str) and msg.get("role") in ("user", "system", "assistant"):
            meta["name"] = name
        refusal = msg.get("refusal")
        if isinstance(refusal, str) and refusal:
            meta["refusal"] = refusal
        for key in ("reasoning_content", "reasoning"):
            value = msg.get(key)
            if isinstance(value, str) and value:
                meta["reasoning"] = value
                break
        return meta


def convert_messages(
    builder: SessionBuilder, messages: object, where: str, *, line: int | None = None
) -> None:
    """Every message of a Chat Completions list, in order."""
    conv = ChatConverter(builder, line=line)
    for i, message in enumerate(as_list(messages, where, line)):
        conv.add(message, f"{where}[{i}]")


def load_openai(src: SourceFile) -> list[ImportedSession]:
    doc = src.doc()
    meta: dict[str, JsonValue] = {"format": "openai", "file": src.name}
    if isinstance(doc, dict):
        if "messages" not in doc:
            raise ValidationError(
                "expected a message list or an object with 'messages'", field="messages"
            )
        messages, where = doc["messages"], "messages"
        meta.update(small_meta({k: v for k, v in doc.items() if k in ("model", "id", "metadata")}))
        tools = doc.get("tools")
        if isinstance(tools, list):
            meta["tools"] = len(tools)
    else:
        messages, where = doc, ""
    builder = SessionBuilder(src.stem)
    convert_messages(builder, messages, where)
    return [builder.finish(meta)]
