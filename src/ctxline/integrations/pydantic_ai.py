"""ctxline inside Pydantic AI: a capability (and a plain history processor) whose model
requests are ctxline's prepared view.

Why: Pydantic AI resends the whole message history on every request. With
:class:`CtxlineCapability` the agent keeps its graph, tools, retries and output
validation, and each request gets ctxline's budget, offload previews, stable prefix,
status bar and a logged, rebuildable request — while the run's own history
(``result.all_messages()``) stays whole: the capability rewrites the *request* only
(``before_model_request``), never ``RunContext.messages``.

- :class:`CtxlineCapability` records the messages not recorded yet, the instructions
  (``instruction_parts``) and the function tool schemas, prepares, and sends the view
  with ctxline's system text as the only instruction part. It also brings ctxline's
  tools (``read_result``, ``search_history``, the todo tools) as a toolset.
- :func:`history_processor` is the same view for ``ProcessHistory``. That capability
  stores what the processor returns as the run's history, and the processor does not
  see the agent's instructions: Pydantic AI sends them beside the view, uncounted. The
  capability above is the one to use.

    ctx = Context(open_store("ctxline.db"), "support-42")
    agent = Agent("openai:gpt-4.1", instructions="Be brief.", capabilities=[CtxlineCapability(ctx)])
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from ctxline.context import Context
from ctxline.integrations._ctxline import run_tool, tool_specs
from ctxline.integrations.core import Bridge, chat_view
from ctxline.integrations.pydantic_ai_messages import (
    FRAMEWORK,
    message_key,
    messages_to_events,
    view_to_messages,
)
from ctxline.record.events import ToolCall
from ctxline.render.neutral import ToolSpec
from ctxline.view.prepare import Preparation

try:
    from pydantic_ai import RunContext, Tool
    from pydantic_ai.capabilities import AbstractCapability
    from pydantic_ai.messages import InstructionPart, ModelMessage, ModelRequest, SystemPromptPart
    from pydantic_ai.models import ModelRequestContext
    from pydantic_ai.toolsets import FunctionToolset
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    from ctxline.models.base import MissingExtra

    raise MissingExtra("pydantic-ai", "pydantic-ai-slim") from exc

__all__ = ["CtxlineCapability", "ctxline_toolset", "history_processor"]


def ctxline_toolset(ctx: Context, *, todo: bool = True) -> FunctionToolset[Any]:
    """ctxline's tools as a Pydantic AI toolset; each call is answered by ctxline."""
    tools: list[Tool[Any]] = []
    for spec in tool_specs(ctx, todo=todo):

        def call(run: RunContext[Any], name: str = spec.name, **kwargs: Any) -> str:
            result = run_tool(ctx, ToolCall(run.tool_call_id or "", name, kwargs))
            assert result is not None
            return result.content

        tools.append(
            Tool.from_schema(
                call, spec.name, spec.description, dict(spec.parameters), takes_ctx=True
            )
        )
    return FunctionToolset(tools)


def _view(
    bridge: Bridge,
    messages: list[ModelMessage],
    instructions: str | None,
    specs: list[ToolSpec],
) -> tuple[Preparation, str, list[ModelMessage]]:
    with bridge.lock:
        new = bridge.new_items(messages, message_key)
        bridge.record(messages_to_events(new, bridge.tool_name), instructions=instructions)
        bridge.set_tools(specs)
        prep = bridge.prepare()
    view = chat_view(prep)
    return prep, view.system, view_to_messages(view.messages)


@dataclass
class CtxlineCapability(AbstractCapability[Any]):
    """Each model request of the agent is ctxline's view of the conversation in ``ctx``.

    One capability per conversation (its Context is one timeline). ``sync_tools=False``
    leaves the tool schemas out of ctxline's request (they are still sent by Pydantic AI).
    """

    ctx: Context
    sync_tools: bool = True
    tools: bool = True
    """Offer ctxline's own tools (read_result, search_history, todo) as a toolset."""
    on_prepare: Callable[[Preparation], None] | None = None
    bridge: Bridge = field(init=False, repr=False)
    last: Preparation | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.bridge = Bridge(self.ctx, FRAMEWORK, sync_tools=self.sync_tools)

    def get_toolset(self) -> FunctionToolset[Any] | None:
        return ctxline_toolset(self.ctx) if self.tools else None

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        params = request_context.model_request_parameters
        instructions = "\n\n".join(p.content for p in params.instruction_parts or () if p.content)
        specs = [
            ToolSpec(t.name, t.description or "", dict(t.parameters_json_schema))
            for t in params.function_tools
        ]
        prep, system, messages = _view(
            self.bridge, list(request_context.messages), instructions or None, specs
        )
        self.last = prep
        if self.on_prepare is not None:
            self.on_prepare(prep)
        parts = [InstructionPart(system)] if system else []
        request_context.messages = messages
        request_context.model_request_parameters = replace(params, instruction_parts=parts)
        return request_context

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None  # holds a live Context


def history_processor(
    ctx: Context, *, on_prepare: Callable[[Preparation], None] | None = None
) -> Callable[[list[ModelMessage]], Any]:
    """A processor for ``ProcessHistory``: the history becomes ctxline's view.

    ctxline's system text comes first as a ``SystemPromptPart``. Tool schemas are not
    visible to a processor, so they are not in ctxline's request.
    """
    bridge = Bridge(ctx, FRAMEWORK, sync_tools=False)

    async def process(messages: list[ModelMessage]) -> list[ModelMessage]:
        prep, system, view = _view(bridge, messages, None, [])
        if on_prepare is not None:
            on_prepare(prep)
        if system:
            head = ModelRequest(parts=[SystemPromptPart(system)])
            view = [head, *view]
        bridge.remember_view([message_key(m) for m in view])
        return view

    return process
