"""The part every integration shares: a framework's history in, ctxline's view out.

Why: each framework hands its model the whole conversation on every call (Agents SDK
input items, Pydantic AI messages, LangChain messages). ctxline's record is append-only,
so a :class:`Bridge` appends only what it has not recorded yet, then prepares the view.
It keeps one short key per framework item it recorded (in the event's ``meta``, so a new
process on the same store resumes), and finds the new items in O(new) per step by
checking the ends of the overlap:

- the framework's list starts with what was recorded (the usual case);
- or it starts with the last view ctxline handed back (frameworks whose hook replaces
  the stored history with the view, e.g. Pydantic AI's ``ProcessHistory``);
- or it is a window on the end of the record (a session that reads only the last N items).

Anything else means the framework rewrote history that ctxline already recorded: that
is refused with a :class:`~ctxline.errors.ValidationError` naming the item, and nothing
is appended. Framework input may only become user, assistant, tool, system and opaque
events (plus the ``instructions`` state, see :meth:`Bridge.instructions`): never one of
ctxline's own kinds.

    bridge = Bridge(ctx, "langchain")
    new = bridge.new_items(messages, key=message_key)
    bridge.record(convert(new), instructions=system_text)
    prep = bridge.prepare()
    view = chat_view(prep)          # system text, Chat Completions messages, tool schemas
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, TypeVar

from ctxline.context import Context
from ctxline.errors import ValidationError
from ctxline.record.codec import canonical_json
from ctxline.record.events import (
    AssistantMessage,
    Event,
    JsonValue,
    State,
    StoredEvent,
    SystemMessage,
    ToolResult,
    UnknownEvent,
    UserMessage,
)
from ctxline.record.jsonvalue import get_array
from ctxline.render.neutral import ToolSpec
from ctxline.view.prepare import Preparation

__all__ = [
    "INSTRUCTIONS_SOURCE",
    "META_KEY",
    "Bridge",
    "ChatView",
    "Converted",
    "chat_view",
    "framework_info",
    "item_key",
    "parse_arguments",
]

META_KEY = "ctxline.framework"
"""The ``meta`` key of an event converted from framework input: ``{"name", "keys", "raw"?}``."""

INSTRUCTIONS_SOURCE = "instructions"
"""The state source of instructions that changed after the first system message."""

T = TypeVar("T")


def item_key(value: JsonValue) -> str:
    """A short, stable key of a framework item's JSON form (16 hex digits of its sha256)."""
    return hashlib.sha256(canonical_json(value)).hexdigest()[:16]


def parse_arguments(raw: JsonValue) -> JsonValue:
    """Call arguments as ctxline keeps them: parsed JSON, or the raw text when it is not JSON."""
    import json

    if raw is None or raw == "":
        return {}
    if not isinstance(raw, str):
        return raw
    try:
        parsed: JsonValue = json.loads(raw)
    except ValueError:
        return raw
    return parsed


@dataclass(frozen=True, slots=True)
class Converted:
    """One event made from framework input, with the keys of the items it stands for.

    ``raw`` holds, per key, the framework item when ctxline's default reconstruction of
    it would differ (so a session backend can give the items back unchanged), else None.
    """

    event: Event
    keys: tuple[str, ...]
    raw: tuple[JsonValue, ...] = ()


def framework_info(event: Event) -> Mapping[str, JsonValue] | None:
    """The integration's note on an event converted from framework input, or None."""
    meta = event.data.get("meta") if isinstance(event, UnknownEvent) else event.meta
    info = meta.get(META_KEY) if isinstance(meta, dict) else None
    return info if isinstance(info, dict) else None


def _tagged(event: Event, info: dict[str, JsonValue]) -> Event:
    if isinstance(event, UnknownEvent):
        meta = event.data.get("meta")
        meta = {**meta, META_KEY: info} if isinstance(meta, dict) else {META_KEY: info}
        return UnknownEvent(event.kind, {**event.data, "meta": meta})
    return replace(event, meta={**event.meta, META_KEY: info})


def _check_untrusted(event: Event, framework: str) -> None:
    """Framework input never becomes one of ctxline's own kinds (guide, tools, request, …)."""
    if isinstance(event, SystemMessage | UserMessage | AssistantMessage | ToolResult):
        return
    if isinstance(event, State) and event.source == INSTRUCTIONS_SOURCE:
        return
    if isinstance(event, UnknownEvent) and event.kind.startswith(f"{framework}."):
        return
    raise ValidationError(f"{framework} input may not become a {event.kind!r} event", field="kind")


@dataclass(frozen=True, slots=True)
class ChatView:
    """A prepared request in Chat Completions shape: what each integration maps back."""

    system: str
    messages: tuple[Mapping[str, Any], ...]
    tools: tuple[ToolSpec, ...]


def chat_view(prep: Preparation) -> ChatView:
    """The system text, the other messages and the tool schemas of an OpenAI-shaped body."""
    body = prep.body
    messages = list(body["messages"])
    system = ""
    if messages and messages[0].get("role") == "system":
        system = str(messages.pop(0)["content"])
    tools = tuple(
        ToolSpec(
            str(t["function"]["name"]),
            str(t["function"].get("description", "")),
            dict(t["function"].get("parameters") or {}),
        )
        for t in body.get("tools", [])
    )
    return ChatView(system, tuple(messages), tools)


def call_names(messages: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Call id → tool name over the assistant messages of a Chat Completions list."""
    names: dict[str, str] = {}
    for m in messages:
        for call in m.get("tool_calls") or ():
            names[str(call["id"])] = str(call["function"]["name"])
    return names


class Bridge:
    """One conversation of one framework, recorded into one ctxline timeline.

    Thread-safe: a framework may call its hooks from worker threads (LangGraph runs sync
    nodes in an executor under ``ainvoke``); each call holds the bridge's lock.
    """

    def __init__(self, ctx: Context, framework: str, *, sync_tools: bool = True) -> None:
        if ctx.options.provider != "openai":
            raise ValidationError(
                "the integrations map ctxline's OpenAI-shaped view to the framework's types;"
                " prepare with provider='openai' (the framework maps to its own provider)",
                field="provider",
            )
        self.ctx = ctx
        self.framework = framework
        self.sync_tools = sync_tools
        self.lock = threading.RLock()
        self._keys: list[str] = []
        self._positions: dict[str, list[int]] = {}
        self._view: list[str] = []
        self._instructions: str | None = None
        self._names: dict[str, str] = {}
        self._builtins = ctx.builtin_tools
        """ctxline's built-in tools as the Context had them (each request offers those the
        framework binds, see :meth:`set_tools`)."""
        self._load(ctx.events)

    # --- what was recorded ---------------------------------------------------------

    def _load(self, events: Sequence[StoredEvent]) -> None:
        for stored in events:
            self._note(stored.event)

    def _note(self, event: Event) -> None:
        info = framework_info(event)
        if isinstance(event, AssistantMessage):
            self._names.update((c.id, c.name) for c in event.tool_calls)
        if info is None or info.get("name") != self.framework:
            return
        for key in get_array(info, "keys"):
            self._positions.setdefault(str(key), []).append(len(self._keys))
            self._keys.append(str(key))
        if info.get("instructions"):
            if isinstance(event, SystemMessage):
                self._instructions = event.text
            elif isinstance(event, State):
                self._instructions = str(event.value)

    @property
    def recorded(self) -> int:
        """How many framework items this timeline holds."""
        return len(self._keys)

    def tool_name(self, call_id: str) -> str:
        """The tool name of a recorded call ('' when unknown)."""
        return self._names.get(call_id, "")

    # --- new items ------------------------------------------------------------------

    def new_items(self, items: Sequence[T], key: Callable[[T], str]) -> Sequence[T]:
        """The items of the framework's full list that are not recorded yet."""
        keys = self._keys
        n = len(keys)
        if n == 0 or not items:
            return items
        first = key(items[0])
        if len(items) >= n and first == keys[0] and key(items[n - 1]) == keys[-1]:
            return items[n:]
        view = self._view
        if (
            view
            and len(items) >= len(view)
            and first == view[0]
            and key(items[len(view) - 1]) == view[-1]
        ):
            return items[len(view) :]
        for p in reversed(self._positions.get(first, [])):
            m = n - p
            if m <= len(items) and key(items[m - 1]) == keys[-1]:
                return items[m:]
        raise ValidationError(
            f"the {self.framework} history no longer matches what ctxline recorded for session"
            f" {self.ctx.session!r} ({n} items; the framework gave {len(items)}): an item was"
            " changed or removed. ctxline's record is append-only: start a new conversation,"
            " or fork the timeline",
            field="messages",
        )

    def remember_view(self, keys: Sequence[str]) -> None:
        """The keys of the view handed back, for frameworks that store it as history."""
        self._view = list(keys)

    # --- appending ------------------------------------------------------------------

    def instructions(self, text: str | None) -> list[Event]:
        """The event recording the framework's instructions, when they changed.

        The first become a system message (the persona); later changes are a state event
        in history at the point they changed, so the cached prefix is not rewritten.
        """
        if not text or text == self._instructions:
            return []
        info: dict[str, JsonValue] = {"name": self.framework, "instructions": True}
        if self._instructions is None:
            return [_tagged(SystemMessage(text), info)]
        return [_tagged(State(INSTRUCTIONS_SOURCE, text), info)]

    def record(
        self, converted: Sequence[Converted], *, instructions: str | None = None
    ) -> list[StoredEvent]:
        """Append the instructions (if changed) and the converted items, in one batch."""
        events = self.instructions(instructions)
        for c in converted:
            info: dict[str, JsonValue] = {"name": self.framework, "keys": list(c.keys)}
            if any(r is not None for r in c.raw):
                info["raw"] = list(c.raw)
            events.append(_tagged(c.event, info))
        for event in events:
            _check_untrusted(event, self.framework)
        if not events:
            return []
        stored = self.ctx.append(*events)
        for ev in stored:
            self._note(ev.event)
        return stored

    def set_tools(self, specs: Sequence[ToolSpec]) -> None:
        """Offer exactly the tools the framework sends: ``specs`` is every tool it binds.

        ctxline's own tools among them (``read_result``, ``search_history``, the todo
        tools) are offered with ctxline's schemas; a built-in the framework does not bind is
        not offered, so the logged request lists the tools the model really has and no
        view points the model at a tool it cannot call. With ``sync_tools=False`` nothing
        changes (the Context offers its built-ins, as ``ctxline replay`` does).
        """
        if not self.sync_tools:
            return
        bound = {s.name for s in specs}
        self.ctx.builtin_tools = tuple(t for t in self._builtins if t.name in bound)
        ours = {t.name for t in self._builtins} | {t.name for t in self.ctx.tools}
        self.ctx.set_tools([s for s in specs if s.name not in ours])

    def prepare(self, *, now: datetime | None = None) -> Preparation:
        return self.ctx.prepare(now=now)
