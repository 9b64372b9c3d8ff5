"""ctxline inside the OpenAI Agents SDK: a ``Session`` backed by the record, and a
``call_model_input_filter`` that sends ctxline's prepared view instead of the raw history.

Why: the SDK's own sessions replay every item on every call; with these two the SDK
keeps its loop, tools and tracing, and each model call gets ctxline's budget, stable
prefix, offload previews, status bar and a logged, rebuildable request.

- :class:`CtxlineSession` implements the SDK's ``Session`` protocol on a ctxline
  timeline: ``add_items`` appends (as events), ``get_items`` gives the items back as
  they were stored. The record is append-only, so ``pop_item`` and ``clear_session``
  fork the timeline (``<timeline>~1``, ``~2``, …) and go on there; the old branch stays.
- :meth:`CtxlineSession.input_filter` (or :func:`input_filter` without a session)
  records whatever the input holds that is not recorded yet, the agent's tool schemas
  and instructions, prepares, and returns the view as input items plus ctxline's system
  text as the instructions.
- :func:`ctxline_tools` are ctxline's own tools as ``FunctionTool`` s (``read_result``,
  ``search_history``, ``todo_write``, ``todo_update``).

The SDK gives a session no way to install its filter, and without it the session only
stores items: ctxline would prepare nothing. So a :class:`CtxlineSession` refuses a run
whose model calls bypassed ``session.input_filter``: when the SDK saves the model's
output and no model call of that turn went through the filter, the items are stored and
a ``UserError`` says what to pass (``storage_only=True`` keeps the session as storage).

    session = CtxlineSession("support-42", open_store("ctxline.db"))
    agent = Agent(name="support", instructions="Be brief.", tools=[*mine, *session.tools])
    await Runner.run(agent, "Cancel my plan", session=session,
                     run_config=RunConfig(call_model_input_filter=session.input_filter))
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ctxline.context import Context
from ctxline.integrations._ctxline import run_tool, tool_specs
from ctxline.integrations.agents_items import (
    FRAMEWORK,
    events_to_items,
    items_to_events,
    responses_key,
    view_to_items,
)
from ctxline.integrations.core import Bridge, chat_view, framework_info
from ctxline.models.base import MissingExtra
from ctxline.record.events import Event, JsonValue, StoredEvent, ToolCall
from ctxline.record.store import MAIN, Store
from ctxline.render.neutral import ToolSpec
from ctxline.view.options import PrepareOptions
from ctxline.view.prepare import Preparation

try:
    from agents import FunctionTool, RunContextWrapper
    from agents.exceptions import UserError
    from agents.memory.session_settings import SessionSettings
    from agents.run_config import CallModelData, ModelInputData
    from agents.tool_context import ToolContext
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingExtra("agents", "openai-agents") from exc

__all__ = ["CtxlineInputFilter", "CtxlineSession", "ctxline_tools", "input_filter"]

ContextFactory = Callable[[str], Context]
"""Builds the Context of a timeline name (used again after a fork)."""


def ctxline_tools(ctx: Context | Callable[[], Context], *, todo: bool = True) -> list[FunctionTool]:
    """ctxline's tools for an agent's ``tools``; each call is answered by ctxline.

    Pass a callable when the context may change (a session that forked).
    """
    current = ctx if callable(ctx) and not isinstance(ctx, Context) else (lambda: ctx)
    out = []
    for spec in tool_specs(current(), todo=todo):

        async def invoke(tool_ctx: ToolContext[Any], arguments: str, name: str = spec.name) -> str:
            try:
                args: JsonValue = json.loads(arguments) if arguments else {}
            except ValueError:
                args = arguments
            result = run_tool(current(), ToolCall(tool_ctx.tool_call_id, name, args))
            assert result is not None
            return result.content

        out.append(
            FunctionTool(
                name=spec.name,
                description=spec.description,
                params_json_schema=dict(spec.parameters),
                on_invoke_tool=invoke,
                strict_json_schema=False,
            )
        )
    return out


async def _agent_tools(data: CallModelData[Any]) -> list[ToolSpec]:
    tools = await data.agent.get_all_tools(RunContextWrapper(context=data.context))
    return [
        ToolSpec(t.name, t.description or "", dict(t.params_json_schema))
        for t in tools
        if isinstance(t, FunctionTool)
    ]


class CtxlineInputFilter:
    """``RunConfig.call_model_input_filter``: the model sees ctxline's prepared view.

    ``on_prepare`` is called with each :class:`~ctxline.Preparation` (its report, body
    bytes and logged header) before the model call.
    """

    def __init__(
        self,
        bridge: Bridge | Callable[[], Bridge],
        on_prepare: Callable[[Preparation], None] | None = None,
    ) -> None:
        self._bridge = (
            bridge if callable(bridge) and not isinstance(bridge, Bridge) else (lambda: bridge)
        )
        self.on_prepare = on_prepare
        self.last: Preparation | None = None
        self.calls = 0
        """How many model calls went through this filter."""

    async def __call__(self, data: CallModelData[Any]) -> ModelInputData:
        self.calls += 1
        bridge = self._bridge()
        specs = await _agent_tools(data) if bridge.sync_tools else []
        with bridge.lock:
            new = bridge.new_items(list(data.model_data.input), responses_key)
            converted = items_to_events(new, bridge.tool_name)
            bridge.record(converted, instructions=data.model_data.instructions)
            bridge.set_tools(specs)
            prep = bridge.prepare()
        self.last = prep
        if self.on_prepare is not None:
            self.on_prepare(prep)
        view = chat_view(prep)
        items: list[Any] = view_to_items(view.messages)
        return ModelInputData(input=items, instructions=view.system or None)


def input_filter(
    ctx: Context,
    *,
    sync_tools: bool = True,
    on_prepare: Callable[[Preparation], None] | None = None,
) -> CtxlineInputFilter:
    """A filter for one conversation recorded in ``ctx`` (no session needed)."""
    return CtxlineInputFilter(Bridge(ctx, FRAMEWORK, sync_tools=sync_tools), on_prepare)


def _raw_of(event: Event) -> list[JsonValue]:
    info = framework_info(event)
    raw = info.get("raw") if info is not None else None
    return list(raw) if isinstance(raw, list) else []


class CtxlineSession:
    """The Agents SDK ``Session`` protocol on a ctxline timeline (one per conversation)."""

    session_settings: SessionSettings | None = None

    def __init__(
        self,
        session_id: str,
        store: Store,
        *,
        timeline: str = MAIN,
        options: PrepareOptions | None = None,
        make_context: ContextFactory | None = None,
        sync_tools: bool = True,
        on_prepare: Callable[[Preparation], None] | None = None,
        session_settings: SessionSettings | None = None,
        storage_only: bool = False,
    ) -> None:
        self.session_id = session_id
        self.storage_only = storage_only
        """Keep items without ctxline's view (no error when the filter is not installed)."""
        self.store = store
        self.base_timeline = timeline
        self.session_settings = session_settings
        self._make = make_context or (
            lambda name: Context(store, session_id, name, options=options)
        )
        self._sync_tools = sync_tools
        store.create_session(session_id, exist_ok=True)
        self._switch(self._latest_fork())
        self.input_filter = CtxlineInputFilter(lambda: self.bridge, on_prepare)
        self.tools = ctxline_tools(lambda: self.ctx)
        self._filtered = 0  # the filter's call count when model output was last saved

    @classmethod
    def from_context(cls, ctx: Context, **kwargs: Any) -> CtxlineSession:
        """A session on an existing Context (forks get a Context with its options)."""
        options = ctx.options
        return cls(
            ctx.session,
            ctx.store,
            timeline=ctx.timeline,
            make_context=lambda name: (
                ctx
                if name == ctx.timeline
                else Context(ctx.store, ctx.session, name, options=options, counter=ctx.counter)
            ),
            **kwargs,
        )

    def _latest_fork(self) -> str:
        prefix = f"{self.base_timeline}~"
        forks = [
            int(t.name[len(prefix) :])
            for t in self.store.timelines(self.session_id)
            if t.name.startswith(prefix) and t.name[len(prefix) :].isdigit()
        ]
        return f"{prefix}{max(forks)}" if forks else self.base_timeline

    def _switch(self, timeline: str) -> None:
        self.ctx = self._make(timeline)
        self.bridge = Bridge(self.ctx, FRAMEWORK, sync_tools=self._sync_tools)
        self._cursor = self.bridge.recorded

    def _framework_events(self) -> list[StoredEvent]:
        self.ctx.refresh()
        return [
            ev
            for ev in self.ctx.events
            if (info := framework_info(ev.event)) is not None
            and info.get("name") == FRAMEWORK
            and info.get("keys")
        ]

    async def get_items(self, limit: int | None = None) -> list[Any]:
        with self.bridge.lock:
            items = events_to_items(
                [(ev.event, _raw_of(ev.event)) for ev in self._framework_events()]
            )
        if limit is not None:
            items = items[-limit:] if limit > 0 else []
        return items

    async def add_items(self, items: list[Any]) -> None:
        bridge = self.bridge
        with bridge.lock:
            # items the input filter recorded before the SDK saved them are not added twice
            ahead = bridge.recorded - self._cursor
            skip = 0
            while (
                skip < min(ahead, len(items))
                and responses_key(items[skip]) == bridge._keys[self._cursor + skip]
            ):
                skip += 1
            bridge.record(items_to_events(items[skip:], bridge.tool_name))
            self._cursor = bridge.recorded
        if any(_model_output(i) for i in items):
            filtered, self._filtered = self._filtered, self.input_filter.calls
            if filtered == self.input_filter.calls and not self.storage_only:
                raise UserError(
                    f"CtxlineSession {self.session_id!r}: the model was called without"
                    " ctxline's input filter, so ctxline prepared nothing (the session only"
                    " stored the items). Run with"
                    " run_config=RunConfig(call_model_input_filter=session.input_filter),"
                    " or make the session with storage_only=True to keep items only"
                )

    async def pop_item(self) -> Any | None:
        with self.bridge.lock:
            events = self._framework_events()
            if not events:
                return None
            last = events[-1]
            items = events_to_items([(last.event, _raw_of(last.event))])
            keep = items[:-1]
            self._fork(last.seq - 1, after=last.seq)
            if keep:
                self.bridge.record(items_to_events(keep, self.bridge.tool_name))
                self._cursor = self.bridge.recorded
            return items[-1]

    async def clear_session(self) -> None:
        with self.bridge.lock:
            self._fork(0, after=None, parent=self._root())

    def _root(self) -> str:
        """The first timeline of this one's ancestry (a fork at 0 of it holds nothing)."""
        info = self.store.timeline(self.session_id, self.ctx.timeline)
        while info.parent is not None:
            info = self.store.timeline(self.session_id, info.parent)
        return info.name

    def _fork(self, at_seq: int, *, after: int | None, parent: str | None = None) -> None:
        """Go on in a new fork at ``at_seq``; the app's own events after ``after`` follow."""
        carried = [
            ev.event
            for ev in self.ctx.events
            if after is not None and ev.seq > after and _app_event(ev.event)
        ]
        n = 1
        names = {t.name for t in self.store.timelines(self.session_id)}
        while f"{self.base_timeline}~{n}" in names:
            n += 1
        name = f"{self.base_timeline}~{n}"
        self.store.fork(self.session_id, parent or self.ctx.timeline, at_seq, name)
        self._switch(name)
        if carried:
            self.ctx.append(*carried)


def _model_output(item: Any) -> bool:
    """Whether a saved item is the model's (its text, a call or reasoning), not input."""
    if not isinstance(item, dict):
        item = getattr(item, "model_dump", lambda **_: {})(exclude_unset=True)
    kind = item.get("type")
    return kind in ("function_call", "reasoning") or item.get("role") == "assistant"


def _app_event(event: Event) -> bool:
    """Events the app appended itself (state, rules, notifications, todo), kept across a pop."""
    return event.kind in ("state", "rule", "notification", "todo") and framework_info(event) is None
