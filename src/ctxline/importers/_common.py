"""Shared pieces of the importers: reading a file, typed field access, the session builder.

Every importer turns one file into :class:`ImportedSession` values through a
:class:`SessionBuilder`, which is where the rules all formats share live:

- strings pass through :func:`ctxline.text.clean_text` (lone surrogates become U+FFFD);
- a tool result answers an earlier call of the same session, or it is kept as an
  opaque ``import.orphan_result`` event and counted in ``meta["orphan_results"]``;
- every event gets a deterministic client id (the source's own id when it has one and
  it is unique in the session, else ``<session>#<n>``), so re-importing is idempotent.

    b = SessionBuilder("demo")
    b.user("hi")
    b.assistant("", [b.call("c1", "ls", {})])
    b.result("c1", "a.txt")
    session = b.finish({"format": "openai"})
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from ctxline.errors import ValidationError
from ctxline.importers.jsonread import (
    MAX_DEPTH,
    MAX_FILE_BYTES,
    MAX_INT_DIGITS,
    MAX_LINE_BYTES,
    LongInteger,
    json_depth,
    parse_int,
    parse_json,
)
from ctxline.record.codec import canonical_json, parse_at
from ctxline.record.events import (
    AssistantMessage,
    Compaction,
    Event,
    JsonValue,
    Pending,
    SystemMessage,
    ToolCall,
    ToolResult,
    UnknownEvent,
    UserMessage,
)
from ctxline.text import clean_json, clean_text, decode_bytes

__all__ = [
    "FORMATS",
    "MAX_DEPTH",
    "MAX_FILE_BYTES",
    "MAX_INT_DIGITS",
    "MAX_LINE_BYTES",
    "ORPHAN_KIND",
    "ImportedSession",
    "SessionBuilder",
    "SourceFile",
    "as_list",
    "as_obj",
    "content_text",
    "opt_int",
    "opt_str",
    "parse_arguments",
    "parse_json",
    "req_str",
    "small_meta",
]

FORMATS = ("events", "openai", "tau-bench", "swe-agent", "mini-swe-agent", "claude-code")
ORPHAN_KIND = "import.orphan_result"


@dataclass(frozen=True)
class ImportedSession:
    """One session read from a file: its id, the events to append, and what the file said about it."""

    id: str
    events: list[Pending]
    meta: dict[str, JsonValue]
    lines: tuple[int, ...] = ()
    """The file line of each event, where the format has lines (``events``), for errors."""


# --- reading -----------------------------------------------------------------------


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


class SourceFile:
    """A file's text, decoded once (UTF-8 with replacement), parsed on demand."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            size = path.stat().st_size
            if size > MAX_FILE_BYTES:
                raise ValidationError(
                    f"the file is {size:,} bytes; ctxline reads at most {MAX_FILE_BYTES:,} bytes"
                    " per file (split it)"
                )
            data = path.read_bytes()
        except OSError as exc:
            raise ValidationError(f"cannot read the file: {exc.strerror or exc}") from None
        text = decode_bytes(data)
        del data
        self.text = text[1:] if text.startswith("\ufeff") else text
        self._doc: Any = None
        self._parsed = False

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def stem(self) -> str:
        """The file name without its format suffix (``x.traj.json`` → ``x``)."""
        return self.stem_of(self.path)

    @staticmethod
    def stem_of(path: Path) -> str:
        name = path.name
        for suffix in (".traj.json", ".jsonl", ".json", ".traj"):
            if name.endswith(suffix) and len(name) > len(suffix):
                return name[: -len(suffix)]
        return path.stem or name

    def doc(self) -> Any:
        """The whole file as one JSON document."""
        if not self._parsed:
            self._doc = parse_json(self.text)
            self._parsed = True
        return self._doc

    def lines(self) -> Iterator[tuple[int, dict[str, Any]]]:
        """JSONL: ``(line number, object)`` for each non-blank line."""
        for n, raw in enumerate(self.text.split("\n"), start=1):
            if not raw.strip():
                continue
            value = parse_json(raw, line=n)
            if not isinstance(value, dict):
                raise ValidationError(f"expected a JSON object, got {type(value).__name__}", line=n)
            yield n, value


def parse_arguments(raw: object) -> JsonValue:
    """Tool-call arguments: a JSON string is parsed; one that is not valid JSON is kept as text."""
    if raw is None:
        return {}
    if isinstance(raw, str):
        try:
            value: JsonValue = json.loads(raw, parse_constant=_reject_constant, parse_int=parse_int)
        except (ValueError, RecursionError, LongInteger):
            return clean_text(raw)
        if json_depth(value, MAX_DEPTH) is not None:
            return clean_text(raw)  # kept as the text it was, like any arguments JSON cannot hold
        return clean_json(value)
    try:
        return clean_json(raw)
    except TypeError:
        return clean_text(str(raw))


# --- typed field access ------------------------------------------------------------


def _field(where: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{where}[{key}]"
    return f"{where}.{key}" if where else key


def as_obj(value: object, where: str, line: int | None = None) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValidationError(
            f"expected an object, got {type(value).__name__}", field=where or None, line=line
        )
    return value


def as_list(value: object, where: str, line: int | None = None) -> list[Any]:
    if not isinstance(value, list):
        raise ValidationError(
            f"expected a list, got {type(value).__name__}", field=where or None, line=line
        )
    return value


def opt_str(obj: dict[str, Any], key: str, where: str = "", line: int | None = None) -> str | None:
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValidationError(
            f"expected a string, got {type(value).__name__}", field=_field(where, key), line=line
        )
    return clean_text(value)


def req_str(obj: dict[str, Any], key: str, where: str = "", line: int | None = None) -> str:
    value = opt_str(obj, key, where, line)
    if value is None:
        raise ValidationError("required string is missing", field=_field(where, key), line=line)
    return value


def opt_int(obj: dict[str, Any], key: str, where: str = "", line: int | None = None) -> int | None:
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValidationError(
            f"expected an integer, got {type(value).__name__}", field=_field(where, key), line=line
        )
    return value


_IMAGE_PARTS = frozenset({"image", "image_url", "input_image", "image_file"})
_TEXT_PARTS = frozenset({"text", "input_text", "output_text"})


def content_text(value: object, where: str, line: int | None = None) -> str:
    """Message content as text: a string, or a list of parts whose texts are joined by newlines.

    Images become ``[image]``; any other part is kept as its canonical JSON so nothing
    the model saw is lost.
    """
    if value is None:
        return ""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list):
        raise ValidationError(
            f"expected a string or a list of parts, got {type(value).__name__}",
            field=where,
            line=line,
        )
    out: list[str] = []
    for part in value:
        if isinstance(part, str):
            text = part
        elif isinstance(part, dict):
            kind = part.get("type")
            if kind in _TEXT_PARTS and isinstance(part.get("text"), str):
                text = part["text"]
            elif kind in _IMAGE_PARTS:
                text = "[image]"
            else:
                text = _json_text(part)
        else:
            text = _json_text(part)
        if text:
            out.append(text)
    return clean_text("\n".join(out))


def _json_text(value: object) -> str:
    try:
        return canonical_json(clean_json(value)).decode()
    except (TypeError, ValueError):
        return clean_text(str(value))


def small_meta(
    info: object, *, limit: int = 1000, skip: Sequence[str] = ()
) -> dict[str, JsonValue]:
    """The entries of ``info`` whose canonical JSON is at most ``limit`` characters."""
    out: dict[str, JsonValue] = {}
    if not isinstance(info, dict):
        return out
    for key, value in info.items():
        if not isinstance(key, str) or key in skip:
            continue
        try:
            cleaned = clean_json(value)
            size = len(canonical_json(cleaned))
        except (TypeError, ValueError):
            continue
        if size <= limit:
            out[clean_text(key)] = cleaned
    return out


# --- building a session ------------------------------------------------------------


class SessionBuilder:
    """Collects the events of one session and enforces the rules every importer shares."""

    def __init__(self, session_id: str) -> None:
        self.id = clean_text(session_id)
        self.events: list[Pending] = []
        self.calls: dict[str, str] = {}
        """Call ids seen so far → tool name."""
        self.orphans = 0
        self.count = 0
        """Events added (a streamed reader takes each one out of ``events`` as it comes)."""
        self._ids: set[str] = set()
        self._synthetic = 0

    # ids

    def synthetic_call_id(self) -> str:
        """A deterministic call id for formats whose calls have none."""
        self._synthetic += 1
        return f"{self.id}-call-{self._synthetic}"

    def _client_id(self, wanted: str | None) -> str:
        if wanted and wanted not in self._ids:
            return wanted
        base = f"{self.id}#{self.count + 1}"
        candidate, k = base, 1
        while candidate in self._ids:
            k += 1
            candidate = f"{base}.{k}"
        return candidate

    # events

    def add(self, event: Event, *, id: str | None = None, at: datetime | None = None) -> int:
        """Append ``event``; a tool result without an earlier call becomes an orphan record."""
        if isinstance(event, ToolResult) and event.call_id not in self.calls:
            self.orphans += 1
            data: dict[str, JsonValue] = {"call_id": event.call_id, "content": event.content}
            if event.name:
                data["name"] = event.name
            if event.is_error:
                data["is_error"] = True
            if event.meta:
                data["meta"] = event.meta
            event = UnknownEvent(ORPHAN_KIND, data)
        elif isinstance(event, AssistantMessage):
            for call in event.tool_calls:
                self.calls.setdefault(call.id, call.name)
        client_id = self._client_id(clean_text(id) if id else None)
        self._ids.add(client_id)
        self.events.append(Pending(event, client_id, at))
        self.count += 1
        return len(self.events) - 1

    def replace(self, index: int, event: Event) -> None:
        """Swap the event at ``index`` (same id and time), e.g. to fill in a compaction summary."""
        self.events[index] = replace(self.events[index], event=event)

    def call(self, call_id: str | None, name: str, arguments: JsonValue) -> ToolCall:
        ident = clean_text(call_id) if call_id else self.synthetic_call_id()
        return ToolCall(ident, clean_text(name), arguments)

    def system(
        self,
        text: str,
        meta: dict[str, JsonValue] | None = None,
        id: str | None = None,
        at: datetime | None = None,
    ) -> int:
        return self.add(SystemMessage(clean_text(text), _meta(meta)), id=id, at=at)

    def user(
        self,
        text: str,
        meta: dict[str, JsonValue] | None = None,
        id: str | None = None,
        at: datetime | None = None,
    ) -> int:
        return self.add(UserMessage(clean_text(text), _meta(meta)), id=id, at=at)

    def assistant(
        self,
        text: str,
        calls: Sequence[ToolCall] = (),
        meta: dict[str, JsonValue] | None = None,
        id: str | None = None,
        at: datetime | None = None,
    ) -> int:
        return self.add(AssistantMessage(clean_text(text), tuple(calls), _meta(meta)), id=id, at=at)

    def result(
        self,
        call_id: str,
        content: str,
        *,
        name: str = "",
        is_error: bool = False,
        meta: dict[str, JsonValue] | None = None,
        id: str | None = None,
        at: datetime | None = None,
    ) -> int:
        call_id = clean_text(call_id)
        name = clean_text(name) or self.calls.get(call_id, "")
        event = ToolResult(call_id, clean_text(content), name, is_error, _meta(meta))
        return self.add(event, id=id, at=at)

    def compaction(
        self,
        *,
        summary: str = "",
        trigger: str = "",
        pre_tokens: int | None = None,
        meta: dict[str, JsonValue] | None = None,
        id: str | None = None,
        at: datetime | None = None,
    ) -> int:
        event = Compaction(clean_text(summary), clean_text(trigger), pre_tokens, _meta(meta))
        return self.add(event, id=id, at=at)

    def unknown(
        self,
        kind: str,
        data: dict[str, JsonValue],
        id: str | None = None,
        at: datetime | None = None,
    ) -> int:
        return self.add(UnknownEvent(clean_text(kind), clean_json(data)), id=id, at=at)

    def finish(self, meta: dict[str, JsonValue]) -> ImportedSession:
        return ImportedSession(self.id, self.events, self.final_meta(meta))

    def final_meta(self, meta: dict[str, JsonValue]) -> dict[str, JsonValue]:
        """The session's meta: ``meta`` with its event and orphan counts."""
        out = dict(clean_json(meta))
        out["events"] = self.count
        out["orphan_results"] = self.orphans
        return out


def _meta(meta: dict[str, JsonValue] | None) -> dict[str, JsonValue]:
    if not meta:
        return {}
    cleaned: dict[str, JsonValue] = clean_json(meta)
    return cleaned


def timestamp(value: object, line: int | None, where: str = "timestamp") -> datetime | None:
    """An optional ISO-8601 time; a present but invalid one is an error naming the line."""
    if value is None:
        return None
    return parse_at(value, where=where, line=line)


def unique_id(wanted: str, taken: set[str]) -> str:
    """``wanted``, or ``wanted-2``, ``wanted-3``… when a file holds the same id twice."""
    candidate, k = wanted, 1
    while candidate in taken:
        k += 1
        candidate = f"{wanted}-{k}"
    taken.add(candidate)
    return candidate
