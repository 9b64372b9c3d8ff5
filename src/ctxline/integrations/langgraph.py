"""ctxline inside LangGraph and LangChain v1 agents: a pre-model hook and an agent
middleware whose model input is ctxline's prepared view.

Why: a LangGraph agent resends ``state["messages"]`` on every call. These keep the graph,
its checkpointer and tools, and give each call ctxline's budget, offload previews,
stable prefix, status bar and a logged, rebuildable request. Neither changes the state:
the hook answers ``llm_input_messages`` and the middleware overrides the request only.

- :class:`CtxlineMiddleware` for ``langchain.agents.create_agent(middleware=[...])``:
  records the messages, the system message and the tool schemas of each request, and
  hands the model the view; it brings ctxline's tools (``read_result``,
  ``search_history``, the todo tools), each answered on the calling thread's Context, so
  one thread never searches another's history.
- :func:`pre_model_hook` for ``langgraph.prebuilt.create_react_agent`` (deprecated
  upstream in favour of ``create_agent``): give it the agent's prompt as
  ``instructions`` and its tools, and do not pass ``prompt`` to the agent.
- :func:`ctxline_tools`: ctxline's tools as LangChain tools.

Each thread (``config["configurable"]["thread_id"]``) is its own ctxline session when
``contexts`` is a function of the thread id; a single Context serves one conversation.
The logged request offers exactly the tools the model is bound to: a built-in the agent
does not bind (``tools=False``, or a ``pre_model_hook`` whose ``tools`` leave it out) is
not offered.

    agent = create_agent(model, tools=mine, system_prompt="Be brief.",
                         middleware=[CtxlineMiddleware(lambda tid: Context(store, tid))])
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from ctxline.context import Context
from ctxline.integrations._ctxline import run_tool, tool_specs
from ctxline.integrations.core import Bridge, chat_view
from ctxline.integrations.langchain_messages import (
    FRAMEWORK,
    message_key,
    messages_to_events,
    view_to_messages,
)
from ctxline.record.events import ToolCall
from ctxline.render.neutral import ToolSpec
from ctxline.tools.builtin import BUILTIN_TOOLS
from ctxline.view.prepare import Preparation

try:
    from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
    from langchain_core.messages import BaseMessage
    from langchain_core.messages import SystemMessage as LCSystemMessage
    from langchain_core.tools import BaseTool, StructuredTool
    from langchain_core.utils.function_calling import convert_to_openai_tool
    from langgraph.config import get_config
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    from ctxline.models.base import MissingExtra

    raise MissingExtra("langgraph", "langchain") from exc

__all__ = ["Contexts", "CtxlineMiddleware", "ctxline_tools", "pre_model_hook", "tool_spec"]

Contexts = Context | Callable[[str], Context]
"""One Context for one conversation, or thread id → Context."""


def ctxline_tools(ctx: Context, *, todo: bool = True) -> list[BaseTool]:
    """ctxline's tools as LangChain tools, answered on ``ctx`` (one conversation).

    With one Context per thread, use :class:`CtxlineMiddleware`'s own tools instead: they
    answer each call on the calling thread's Context.
    """
    return _tools(tool_specs(ctx, todo=todo), lambda: ctx)


def _tools(specs: Sequence[ToolSpec], current: Callable[[], Context]) -> list[BaseTool]:
    return [
        StructuredTool.from_function(
            func=_runner(current, spec.name),
            name=spec.name,
            description=spec.description,
            args_schema=dict(spec.parameters),
        )
        for spec in specs
    ]


def _runner(current: Callable[[], Context], name: str) -> Callable[..., str]:
    def call(**kwargs: Any) -> str:
        result = run_tool(current(), ToolCall("", name, kwargs))
        if result is None:  # a thread whose Context was made without this built-in
            return f"[{name} is not one of this conversation's tools.]"
        return result.content

    return call


def tool_spec(tool: BaseTool | dict[str, Any]) -> ToolSpec:
    """A LangChain tool (or OpenAI tool dict) as the schema ctxline offers."""
    fn = convert_to_openai_tool(tool)["function"]
    return ToolSpec(
        str(fn["name"]), str(fn.get("description") or ""), dict(fn.get("parameters") or {})
    )


class _Threads:
    """The bridge of each thread (one Context each), made on first use."""

    def __init__(self, contexts: Contexts, sync_tools: bool) -> None:
        self.contexts = contexts
        self.sync_tools = sync_tools
        self.bridges: dict[str, Bridge] = {}
        self.lock = threading.Lock()

    def context(self) -> Context:
        """The calling thread's Context (a tool call runs inside the graph, as a node does)."""
        return self.bridge().ctx

    def bridge(self) -> Bridge:
        if isinstance(self.contexts, Context):
            key, make = "", lambda: self.contexts
        else:
            configurable = get_config().get("configurable") or {}
            thread = configurable.get("thread_id")
            if thread is None:
                raise ValueError(
                    "ctxline needs a thread_id in config['configurable'] to pick the session"
                )
            key = str(thread)
            factory = self.contexts
            make = lambda: factory(key)  # noqa: E731
        with self.lock:
            if key not in self.bridges:
                ctx = make()  # type: ignore[no-untyped-call]
                assert isinstance(ctx, Context)
                self.bridges[key] = Bridge(ctx, FRAMEWORK, sync_tools=self.sync_tools)
            return self.bridges[key]


def _view(
    bridge: Bridge,
    messages: Sequence[BaseMessage],
    instructions: str | None,
    specs: Sequence[ToolSpec],
) -> tuple[Preparation, str, list[BaseMessage]]:
    with bridge.lock:
        new = bridge.new_items(list(messages), message_key)
        bridge.record(messages_to_events(new, bridge.tool_name), instructions=instructions)
        bridge.set_tools(specs)
        prep = bridge.prepare()
    view = chat_view(prep)
    return prep, view.system, view_to_messages(view.messages)


def pre_model_hook(
    contexts: Contexts,
    *,
    instructions: str | None = None,
    tools: Sequence[BaseTool | dict[str, Any]] = (),
    on_prepare: Callable[[Preparation], None] | None = None,
) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A ``pre_model_hook``: ``{"llm_input_messages": view}``, ctxline's system text first."""
    threads = _Threads(contexts, sync_tools=bool(tools))
    specs = [tool_spec(t) for t in tools]

    def hook(state: dict[str, Any]) -> dict[str, Any]:
        bridge = threads.bridge()
        prep, system, view = _view(bridge, state["messages"], instructions, specs)
        if on_prepare is not None:
            on_prepare(prep)
        return {"llm_input_messages": view_to_system(system) + view}

    return hook


def view_to_system(system: str) -> list[BaseMessage]:
    return view_to_messages([], system)


class CtxlineMiddleware(AgentMiddleware[Any, Any, Any]):
    """Agent middleware: each model call of a ``create_agent`` agent sees ctxline's view."""

    def __init__(
        self,
        contexts: Contexts,
        *,
        sync_tools: bool = True,
        tools: bool = True,
        on_prepare: Callable[[Preparation], None] | None = None,
    ) -> None:
        super().__init__()
        self._threads = _Threads(contexts, sync_tools)
        self.on_prepare = on_prepare
        self.last: Preparation | None = None
        # ctxline's tools, registered with the agent; each call runs on its thread's Context
        specs = (
            tool_specs(contexts)
            if isinstance(contexts, Context)
            else tuple(t.spec for t in BUILTIN_TOOLS)
        )
        self.tools = _tools(specs, self._threads.context) if tools else []

    def _request(self, request: ModelRequest[Any]) -> ModelRequest[Any]:
        bridge = self._threads.bridge()
        system = request.system_message
        instructions = None if system is None else str(system.text)
        specs = [tool_spec(t) for t in request.tools] if bridge.sync_tools else []
        prep, text, view = _view(bridge, request.messages, instructions, specs)
        self.last = prep
        if self.on_prepare is not None:
            self.on_prepare(prep)
        messages: list[Any] = view
        return request.override(
            messages=messages, system_message=LCSystemMessage(text) if text else None
        )

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any]:
        return handler(self._request(request))

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any]:
        return await handler(self._request(request))
