"""ChatML prompts with tools (the Qwen2.5 / Hermes format) and the tool calls in a reply.

Local models that call tools in ChatML (Qwen2.5-Instruct, Qwen2.5-Coder-Instruct,
Hermes) read the tool schemas inside ``<tools></tools>`` in the system message and
answer a call as ``<tool_call>{"name": …, "arguments": {…}}</tool_call>``; results
come back as ``<tool_response>`` in a user turn. :func:`chatml_prompt` renders a Chat
Completions body that way, byte for byte as Qwen2.5's own chat template does, for a
server that takes a raw prompt (``llama_cpp.server``'s ``/v1/completions``: its
``chatml-function-calling`` chat handler HTML-escapes every message, so ``<ctx-…>``
arrives as ``&lt;ctx-…&gt;``, drops ``tool`` messages from the prompt and cannot
answer text when tools are offered). :func:`parse_tool_calls` reads the calls back
out of the generated text, for that route, for the in-process ``local:`` model and
for any server that returns them as text.

    prompt = chatml_prompt(body["messages"], body.get("tools"))
    text, calls = parse_tool_calls(generated, {"read_file", "write_file"})
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from ctxline.record.events import JsonValue, ToolCall

__all__ = [
    "CHATML_STOP",
    "chatml_messages",
    "chatml_prompt",
    "merge_tail",
    "parse_tool_calls",
    "template_foot",
]

CHATML_STOP = ("<|im_end|>", "<|endoftext|>")
"""Where a ChatML turn ends: generation stops at either."""

_DEFAULT_SYSTEM = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."
_TOOLS_HEAD = (
    "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>"
)
_TOOLS_FOOT = (
    "\n</tools>\n\nFor each function call, return a json object with function name and "
    "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n"
    '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n'
)
_CALL = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)
_FENCE = re.compile(r"\A```(?:json)?\s*(.*?)\s*```\Z", re.DOTALL)


def _text(content: object) -> str:
    """A message's content as one string: None is "", text parts are joined."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        return "\n".join(
            str(part["text"])
            for part in content
            if isinstance(part, Mapping) and isinstance(part.get("text"), str)
        )
    return str(content)


def _arguments(value: JsonValue) -> JsonValue:
    """A call's arguments as an object (Chat Completions sends them as a JSON string)."""
    if isinstance(value, str):
        try:
            parsed: JsonValue = json.loads(value) if value.strip() else {}
        except ValueError:
            return value
        return parsed
    return value


def chatml_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Chat Completions messages as a tool-aware chat template wants them.

    Content is always a string (never null), ``developer`` becomes ``system``, and a
    call's ``arguments`` is an object rather than a JSON string (HF templates apply
    ``tojson`` to it, which would quote the string once more).
    """
    out: list[dict[str, Any]] = []
    for message in messages:
        role = str(message.get("role", "user"))
        item: dict[str, Any] = {
            "role": "system" if role == "developer" else role,
            "content": _text(message.get("content")),
        }
        calls = message.get("tool_calls")
        if role == "assistant" and calls:
            item["tool_calls"] = [
                {
                    "id": str(call.get("id", "")),
                    "type": "function",
                    "function": {
                        "name": str(call["function"]["name"]),
                        "arguments": _arguments(call["function"].get("arguments")),
                    },
                }
                for call in calls
            ]
        if role == "tool":
            item["tool_call_id"] = str(message.get("tool_call_id", ""))
        out.append(item)
    return out


def _call_text(call: Mapping[str, Any]) -> str:
    function = call.get("function", call)
    arguments = json.dumps(_arguments(function.get("arguments")), ensure_ascii=False)
    return (
        f'\n<tool_call>\n{{"name": "{function["name"]}", "arguments": {arguments}}}\n</tool_call>'
    )


def _runtime_note(item: Mapping[str, Any], before: Mapping[str, Any]) -> bool:
    """A user message of ctxline's own blocks (the tail: status bar, time) right after
    tool results. Text ctxline did not write never starts with ``<ctx-`` (it is escaped:
    :func:`ctxline.tags.escape`), so only the runtime's blocks are taken for one."""
    return before["role"] == "tool" and _ctx_note(item)


def _ctx_note(item: Mapping[str, Any]) -> bool:
    return item["role"] == "user" and str(item["content"]).startswith("<ctx-")


def merge_tail(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Plain chat messages with ctxline's tail, when it is the last message and right after
    a user message, joined to that message after a blank line (for a chat template rendered
    elsewhere; :func:`chatml_prompt` renders the same). On Qwen2.5-Coder-1.5B the tail as a
    turn of its own after a question was read as the request (the status bar's counts and
    repeat warning answered with one more call: 7 of 10 ``counters`` probes right); in the
    question's own turn, after it, 10 of 10 (docs/eval.md, "The tail in the question's turn")."""
    out = [dict(m) for m in messages]
    if len(out) > 1 and out[-2]["role"] == "user" and _ctx_note(out[-1]):
        note = out.pop()
        out[-1]["content"] = f"{out[-1]['content']}\n\n{note['content']}"
    return out


def chatml_prompt(
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] | None = None,
    *,
    tools_foot: str | None = None,
) -> str:
    """The ChatML prompt of a Chat Completions body, as Qwen2.5's chat template renders it,
    but for one thing: ctxline's tail after tool results (``<ctx-status>`` …) goes in the
    results' own user turn, after the last ``</tool_response>``, not in a turn of its own
    (and a tail right after the user's request goes in the request's turn, after it).
    Qwen reads a user turn of its own as a new request: on the 1.5B the status bar after a
    read turned the next step's ``write_text`` call into a description of the task, and
    the same bar in the results' turn left the call as it was (docs/runner.md). Only the
    tail changes place; the prefix up to the last result is the template's, byte for byte,
    so the next step's prompt (where the tail has moved on) shares it. An empty assistant
    turn (no text, no call) is left out: after one, the 1.5B answered nothing again, and
    with the status bar's note in a turn of its own in its place it said what it had done.
    ``tools_foot`` is the text from ``</tools>`` to the first user turn, where a template
    words it otherwise (Qwen2.5-Coder's doubles the braces of its call format)."""
    items = merge_tail(chatml_messages(messages))
    first_system = bool(items) and items[0]["role"] == "system"
    parts: list[str] = []
    if tools:
        parts.append("<|im_start|>system\n")
        parts.append(items[0]["content"] if first_system else _DEFAULT_SYSTEM)
        parts.append(_TOOLS_HEAD)
        parts.extend("\n" + json.dumps(tool, ensure_ascii=False) for tool in tools)
        parts.append(_TOOLS_FOOT if tools_foot is None else tools_foot)
    elif first_system:
        parts.append(f"<|im_start|>system\n{items[0]['content']}<|im_end|>\n")
    else:
        parts.append(f"<|im_start|>system\n{_DEFAULT_SYSTEM}<|im_end|>\n")
    for index, item in enumerate(items):
        role = item["role"]
        if index == 0 and role == "system":
            continue
        if role == "assistant" and not item["content"] and not item.get("tool_calls"):
            continue  # an empty turn says nothing, and the model reads it as how turns end
        if index and _runtime_note(item, items[index - 1]):
            parts.append(f"\n{item['content']}<|im_end|>\n")  # in the results' own turn
        elif role in ("user", "system") or (role == "assistant" and not item.get("tool_calls")):
            parts.append(f"<|im_start|>{role}\n{item['content']}<|im_end|>\n")
        elif role == "assistant":
            parts.append("<|im_start|>assistant")
            if item["content"]:
                parts.append("\n" + item["content"])
            parts.extend(_call_text(call) for call in item["tool_calls"])
            parts.append("<|im_end|>\n")
        elif role == "tool":
            if index == 0 or items[index - 1]["role"] != "tool":
                parts.append("<|im_start|>user")
            parts.append(f"\n<tool_response>\n{item['content']}\n</tool_response>")
            after = items[index + 1] if index + 1 < len(items) else None
            if after is None or (after["role"] != "tool" and not _runtime_note(after, item)):
                parts.append("<|im_end|>\n")
    parts.append("<|im_start|>assistant\n")
    return "".join(parts)


def template_foot(
    rendered: str, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]
) -> tuple[bool, str | None]:
    """Whether :func:`chatml_prompt` reproduces ``rendered`` (a chat template's prompt of
    ``messages`` and ``tools``, without a tail after tool results), and with which
    ``tools_foot`` (None: Qwen2.5's own). A template that differs anywhere else is not
    ChatML as :func:`chatml_prompt` writes it."""
    start = rendered.find("\n</tools>")
    end = rendered.find("<|im_start|>", max(start, 0))
    foot = rendered[start:end] if 0 <= start < end else None
    if foot == _TOOLS_FOOT:
        foot = None
    return rendered == chatml_prompt(messages, tools, tools_foot=foot), foot


def _call_id(text: str, index: int) -> str:
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"call_{digest}_{index}"


_NAME = re.compile(r"[A-Za-z_][\w.\-]{0,63}\Z")


def _attempted(obj: dict[str, object]) -> bool:
    """An object shaped only like a call — an identifier-like name and its arguments,
    nothing else —, whatever the name: what a small model writes when it invents a tool.
    A name that could open a tag or break a line (``<``, a newline) is never one."""
    name = obj.get("name")
    return (
        isinstance(name, str)
        and _NAME.match(name) is not None
        and ("arguments" in obj or "parameters" in obj)
        and set(obj) <= {"name", "arguments", "parameters"}
    )


def _as_call(
    obj: object, names: Collection[str], text: str, index: int, any_name: bool = False
) -> ToolCall | None:
    if not isinstance(obj, dict):
        return None
    if obj.get("name") not in names and not (any_name and _attempted(obj)):
        return None
    arguments = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(arguments, str):
        arguments = _arguments(arguments)
    return ToolCall(_call_id(text, index), str(obj["name"]), arguments)


def _leading_json(body: str) -> list[object]:
    """The JSON values at the start of ``body``, one after another (whitespace or commas
    between them), up to the first text that is not one. A last object missing only its
    final ``}`` (its arguments closed: small models drop it) is closed."""
    decoder = json.JSONDecoder()
    values: list[object] = []
    pos = 0
    while True:
        while pos < len(body) and body[pos] in " \t\r\n,":
            pos += 1
        if pos >= len(body) or body[pos] not in "{[":
            return values
        try:
            value, pos = decoder.raw_decode(body, pos)
        except ValueError:
            with contextlib.suppress(ValueError):  # the rest is one brace short of an object
                values.append(json.loads(body[pos:].rstrip() + "}"))
            return values
        values.append(value)


def _bare_calls(text: str, names: Collection[str], any_name: bool) -> tuple[ToolCall, ...]:
    """A reply that starts with a call's JSON (fenced or not), as small models write it:
    the leading run of calls, each to a known tool; what follows the first value that is
    not one (an imagined result, a truncated repeat) is dropped, and a call repeated
    word for word right after itself counts once."""
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1)
    if not body.startswith(("{", "[")):
        return ()
    calls: list[ToolCall] = []
    last: tuple[str, str] | None = None
    for value in _leading_json(body):
        items = value if isinstance(value, list) else [value]
        for item in items:
            call = _as_call(item, names, text, len(calls), any_name)
            if call is None:
                return tuple(calls)
            key = (call.name, json.dumps(call.arguments, sort_keys=True))
            if key != last:
                calls.append(call)
            last = key
    return tuple(calls)


def parse_tool_calls(
    text: str, names: Collection[str], *, any_name: bool = False
) -> tuple[str, tuple[ToolCall, ...]]:
    """The text outside ``<tool_call>`` blocks and the calls inside them.

    A block counts only when it holds a JSON object with a ``name`` among ``names``
    (an unclosed last block, cut by the token limit, counts if its JSON is whole);
    anything else stays in the text. A reply with no block that starts with such a JSON
    object (or a list of them), in a code fence or not, is a call too — small models
    answer so, often repeating the call or imagining its result after it; see
    :func:`_bare_calls`. Call ids are derived from the reply, so the same reply always
    gets the same ids.

    With ``any_name``, a call to a name that is no offered tool counts too when its
    object holds only ``name`` and ``arguments`` (an identifier-like name): the runner
    then refuses it and names the tools there are, where the reply would otherwise end
    the run as a final answer made of JSON — how small models fail when they invent a
    tool (``"save_note"`` for ``add_note``).
    """
    calls: list[ToolCall] = []
    kept: list[str] = []
    last = 0
    for match in _CALL.finditer(text):
        try:
            obj = json.loads(match.group(1))
        except ValueError:
            continue
        call = _as_call(obj, names, text, len(calls), any_name)
        if call is None:
            continue
        kept.append(text[last : match.start()])
        last = match.end()
        calls.append(call)
    if not calls:
        bare = _bare_calls(text, names, any_name)
        return ("", bare) if bare else (text, ())
    kept.append(text[last:])
    return "".join(kept).strip(), tuple(calls)
