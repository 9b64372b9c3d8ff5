"""mini-swe-agent ``.traj.json`` files → one session each.

Why: mini-swe-agent keeps a plain ``messages`` list where the model acts by writing
exactly one fenced ```` ```bash ```` block and the environment answers in the next
user message (``<returncode>N</returncode><output>…</output>``, or a timeout notice).
To a context manager that is a tool loop, so it is imported as one: the block becomes
a ``bash`` tool call (``{"command": …}``, id ``<session>-call-<n>``), the rest of the
assistant text stays the assistant message, and the next user message is the call's
tool.result — ``is_error`` when the return code is not 0, or for a timeout or format
error notice. Output is kept whole, however long.

A reply with no block, or with several (mini-swe-agent rejects those and runs
nothing), stays a plain assistant message, and the format-error notice that follows
is a user message (``meta.format_error``): no tool ran, so none is recorded. Files
written with native tool calling (``tool_calls`` / ``role: tool``) are read like
OpenAI messages. The model name and token usage of each reply go to its meta; the
small ``info`` fields (``exit_status``, ``model_stats``, ``mini_version``) to the
session's::

    {"role": "assistant", "content": "THOUGHT: look\\n\\n```bash\\nls\\n```"}
        → assistant.message "THOUGHT: look" + call bash {"command": "ls"}
    {"role": "user", "content": "<returncode>0</returncode>\\n<output>\\na.py\\n</output>"}
        → tool.result (is_error false, meta.returncode 0)
"""

from __future__ import annotations

import re
from typing import Any

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
from ctxline.record.events import JsonValue

__all__ = ["ACTION_REGEX", "load_mini_swe_agent"]

ACTION_REGEX = re.compile(r"```(?:bash|mswea_bash_command)\s*\n(.*?)\n```", re.DOTALL)
"""mini-swe-agent's action block (``bash``; ``mswea_bash_command`` in later versions).

A file's own ``config.agent.action_regex`` is not used: it is untrusted input, and a
pattern from a file could take unbounded time on a long message."""

_RETURNCODE = re.compile(r"\A\s*<returncode>\s*(-?\d{1,12})\s*</returncode>")
_TIMEOUT = re.compile(r"\A\s*The last command .{0,2000}? timed out", re.DOTALL)
_FORMAT_ERROR = re.compile(r"\A\s*Please always provide EXACTLY ONE action")


def _reply_meta(msg: dict[str, Any]) -> dict[str, JsonValue]:
    """Model name and token usage from ``extra.response`` (OpenAI usage names kept)."""
    extra = msg.get("extra")
    response = extra.get("response") if isinstance(extra, dict) else None
    if not isinstance(response, dict):
        return {}
    meta: dict[str, JsonValue] = {}
    if isinstance(response.get("model"), str):
        meta["model"] = response["model"]
    usage = response.get("usage")
    if isinstance(usage, dict):
        kept: dict[str, JsonValue] = {}
        for key in ("prompt_tokens", "completion_tokens"):
            value = usage.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                kept[key] = value
        details = usage.get("prompt_tokens_details")
        if isinstance(details, dict):
            cached = details.get("cached_tokens")
            if isinstance(cached, int) and not isinstance(cached, bool):
                kept["cached_tokens"] = cached
        if kept:
            meta["usage"] = kept
    return meta


def _observation(text: str) -> tuple[bool, dict[str, JsonValue]]:
    """``(is_error, meta)`` of an observation message."""
    match = _RETURNCODE.match(text)
    if match:
        code = int(match.group(1))
        return code != 0, {"returncode": code}
    if _TIMEOUT.match(text):
        return True, {"timeout": True}
    if _FORMAT_ERROR.match(text):
        return True, {"format_error": True}
    return False, {}


def _convert(builder: SessionBuilder, messages: list[Any], regex: re.Pattern[str]) -> None:
    chat = ChatConverter(builder)
    pending: str | None = None
    for i, item in enumerate(messages):
        where = f"messages[{i}]"
        msg = as_obj(item, where)
        role = opt_str(msg, "role", where) or ""
        if role == "assistant" and not msg.get("tool_calls"):
            text = content_text(msg.get("content"), f"{where}.content")
            meta = _reply_meta(msg)
            blocks = list(regex.finditer(text))
            if len(blocks) == 1:
                block = blocks[0]
                rest = (text[: block.start()] + text[block.end() :]).strip()
                call = builder.call(None, "bash", {"command": block.group(1)})
                builder.assistant(rest, [call], meta)
                pending = call.id
            else:
                builder.assistant(text, (), meta)
                pending = None
        elif role == "user" and pending is not None:
            text = content_text(msg.get("content"), f"{where}.content")
            is_error, meta = _observation(text)
            builder.result(pending, text, is_error=is_error, meta=meta)
            pending = None
        elif role == "user":
            text = content_text(msg.get("content"), f"{where}.content")
            _, meta = _observation(text)
            builder.user(text, {"format_error": True} if meta.get("format_error") else None)
        else:
            pending = None
            chat.add(msg, where, extra_meta=_reply_meta(msg) if role == "assistant" else None)


def load_mini_swe_agent(src: SourceFile) -> list[ImportedSession]:
    doc = as_obj(src.doc(), "")
    info = doc.get("info")
    instance = opt_str(doc, "instance_id") or src.stem
    builder = SessionBuilder(f"mini-swe-agent/{instance}")
    _convert(builder, as_list(doc.get("messages"), "messages"), ACTION_REGEX)
    meta: dict[str, JsonValue] = {
        "format": "mini-swe-agent",
        "file": src.name,
        "instance_id": instance,
    }
    fmt = doc.get("trajectory_format")
    if isinstance(fmt, str):
        meta["trajectory_format"] = fmt
    if isinstance(info, dict):
        extra = small_meta(info, skip=("submission", "config"))
        submission = info.get("submission")
        if isinstance(submission, str):
            extra["submission_chars"] = len(submission)
        config = info.get("config")
        model = config.get("model") if isinstance(config, dict) else None
        if isinstance(model, dict) and isinstance(model.get("model_name"), str):
            extra["model_name"] = model["model_name"]
        if extra:
            meta["info"] = extra
    return [builder.finish(meta)]
