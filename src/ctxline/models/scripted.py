"""A scripted model: replies read from a list (or a JSONL file), for testing agents offline.

Why: an agent's loop, tools, limits and permissions deserve tests that do not depend on
a model's mood. A :class:`ScriptedModel` answers each request with the next reply of
its script — deterministically, and without state: the reply is chosen by the number
of assistant messages already in the request, so the same request always gets the same
reply, and a run killed mid-way and resumed from the record continues with the right
line. (A compaction that drops assistant messages changes that count: script runs
that compact are not supported.)

One reply per line, in the CLI's ``--model script:FILE.jsonl``::

    {"text": "Let me look.", "tool_calls": [{"id": "c1", "name": "read_file", "arguments": {"path": "a.txt"}}]}
    {"text": "The file says hello."}

``id`` may be left out (``call_<line>_<n>``; ``""`` imitates a model that sends none); ``usage`` may give the reported figures,
otherwise they are counted with o200k over the request and the reply.

    >>> model = ScriptedModel([{"text": "hi"}])
    >>> model.complete({"messages": [{"role": "user", "content": "hello"}]}, provider="openai").text
    'hi'
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ctxline.errors import ValidationError
from ctxline.models.base import ModelError, ModelReply, Provider, Usage
from ctxline.record.codec import canonical_json
from ctxline.record.events import ToolCall
from ctxline.tokens.counters import TokenCounter, get_counter

__all__ = ["ScriptedModel", "ScriptedReply", "load_script", "parse_reply"]

_KEYS = {"text", "tool_calls", "usage"}
_USAGE_KEYS = ("input", "cache_read", "cache_write", "output")


@dataclass(frozen=True, slots=True)
class ScriptedReply:
    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage | None = None


def _fail(message: str, *, field: str, line: int | None, source: str | None) -> ValidationError:
    return ValidationError(message, field=field, line=line, source=source)


def parse_reply(
    obj: object, *, line: int | None = None, source: str | None = None
) -> ScriptedReply:
    """One script line's object as a reply; the error names the line and the field."""
    if isinstance(obj, ScriptedReply):
        return obj
    if not isinstance(obj, Mapping):
        raise _fail("expected a JSON object", field="reply", line=line, source=source)
    unknown = sorted(set(obj) - _KEYS)
    if unknown:
        raise _fail(
            f"unknown key {unknown[0]!r} (a reply has text, tool_calls, usage)",
            field=unknown[0],
            line=line,
            source=source,
        )
    text = obj.get("text", "")
    if not isinstance(text, str):
        raise _fail("expected a string", field="text", line=line, source=source)
    raw_calls = obj.get("tool_calls", [])
    if not isinstance(raw_calls, list):
        raise _fail("expected a list", field="tool_calls", line=line, source=source)
    calls = []
    for i, raw in enumerate(raw_calls):
        where = f"tool_calls[{i}]"
        if not isinstance(raw, Mapping):
            raise _fail("expected an object", field=where, line=line, source=source)
        name = raw.get("name")
        if not isinstance(name, str) or not name:
            raise _fail(
                "required string is missing", field=f"{where}.name", line=line, source=source
            )
        ident = raw.get("id", f"call_{line or 0}_{i + 1}")
        if not isinstance(ident, str):  # "" imitates a model that sends no id
            raise _fail("expected a string", field=f"{where}.id", line=line, source=source)
        arguments = raw.get("arguments", {})
        if not isinstance(arguments, dict | str):
            raise _fail(
                "expected an object (or the raw text of invalid JSON)",
                field=f"{where}.arguments",
                line=line,
                source=source,
            )
        calls.append(ToolCall(ident, name, arguments))
    usage: Usage | None = None
    if "usage" in obj:
        raw_usage = obj["usage"]
        if not isinstance(raw_usage, Mapping):
            raise _fail("expected an object", field="usage", line=line, source=source)
        values = {}
        for key in _USAGE_KEYS:
            value = raw_usage.get(key, 0)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise _fail("expected a count >= 0", field=f"usage.{key}", line=line, source=source)
            values[key] = value
        usage = {
            "input": values["input"],
            "cache_read": values["cache_read"],
            "cache_write": values["cache_write"],
            "output": values["output"],
        }
    return ScriptedReply(text, tuple(calls), usage)


def load_script(path: str | Path) -> list[ScriptedReply]:
    """The replies of a JSONL script (blank lines skipped); errors name the file and line."""
    source = str(path)
    try:
        text = Path(path).read_text("utf-8")
    except UnicodeDecodeError as exc:
        raise ValidationError(f"not UTF-8 ({exc.reason})", source=source) from None
    replies = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValidationError(
                f"not valid JSON ({exc.msg})", source=source, line=number
            ) from None
        replies.append(parse_reply(obj, line=number, source=source))
    if not replies:
        raise ValidationError("the script has no replies", source=source)
    return replies


def _turns(body: Mapping[str, Any]) -> int:
    return sum(
        1
        for m in body.get("messages", [])
        if isinstance(m, Mapping) and m.get("role") == "assistant"
    )


class ScriptedModel:
    """A :class:`~ctxline.models.base.ModelClient` that plays a script (see the module doc)."""

    provider: Provider = "openai"

    def __init__(
        self,
        replies: Sequence[ScriptedReply | Mapping[str, Any]],
        *,
        label: str = "script",
        counter: TokenCounter | None = None,
        provider: Provider = "openai",
        name: str | None = None,
    ) -> None:
        """``name`` is what the client reports (default ``script:<label>``): give a priced
        model's name (``openai:gpt-4.1``) to test cost accounting and budgets."""
        self._name = name
        self.replies = [parse_reply(r, line=i + 1, source=label) for i, r in enumerate(replies)]
        self.label = label
        self.provider = provider
        self.counter = counter or get_counter("o200k_base")
        self.calls = 0

    @classmethod
    def from_file(cls, path: str | Path, **kwargs: Any) -> ScriptedModel:
        model = cls(load_script(path), label=str(path), **kwargs)
        return model

    @property
    def name(self) -> str:
        return self._name or f"script:{self.label}"

    def complete(self, body: Mapping[str, Any], *, provider: Provider = "openai") -> ModelReply:
        self.calls += 1
        turn = _turns(body)
        if turn >= len(self.replies):
            raise ModelError(
                f"{self.name}: the script has {len(self.replies)} replies and this request is "
                f"turn {turn + 1} (it already holds {turn} assistant messages)"
            )
        reply = self.replies[turn]
        usage = reply.usage
        if usage is None:
            request = {k: body.get(k) for k in ("system", "messages", "tools") if k in body}
            calls = [{"name": c.name, "arguments": c.arguments} for c in reply.tool_calls]
            usage = {
                "input": self.counter.count(canonical_json(request).decode()),
                "cache_read": 0,
                "cache_write": 0,
                "output": self.counter.count(reply.text + (json.dumps(calls) if calls else "")),
            }
        return ModelReply(
            reply.text,
            reply.tool_calls,
            usage,
            self.label,
            "tool_calls" if reply.tool_calls else "stop",
        )
