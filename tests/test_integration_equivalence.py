"""Build item 6: a bundled session replayed through each integration gives the same requests.

Each recorded session is driven through the framework's own loop: the model replies
exactly what was recorded, the tools return the recorded outputs. At every model call
ctxline's prepared body must hash the same as ``ctxline.replay.replay_session`` over
the same session and options, the replay figures (``ReplayStats``) must be equal, and
the messages the framework actually sends must be ctxline's messages:

- OpenAI Agents SDK and Pydantic AI: their real OpenAI Chat Completions model classes
  over an in-process HTTP transport, so the comparison is with the request body on
  the wire (the provider mapping is the framework's own);
- LangChain: ``convert_to_openai_messages``, LangChain's own mapping.

The window is small (8,000 tokens) so the long mini-swe-agent session goes through
the reduction ladder (trims and compactions) on every side. Tool schemas are not
synced here (``replay`` offers only ctxline's built-in tools); test_integration_tools
checks the synced case.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from ctxline import (
    AssistantMessage,
    Context,
    MemoryStore,
    PrepareOptions,
    SystemMessage,
    ToolResult,
    UserMessage,
    canonical_json,
)
from ctxline.importers import ImportedSession, load
from ctxline.record.jsonvalue import JsonValue
from ctxline.replay import ReplayStats, ReplayStep, measured, replay_session
from ctxline.tags import escape
from ctxline.view.prepare import Preparation

DATA = Path(__file__).resolve().parent.parent / "examples" / "data"
FILES = [
    "tau-bench/gpt-4o-airline-sample.json",
    "swe-agent/function_calling_simple.traj",
    "mini-swe-agent/psf__requests-2317.traj.json",
]
OPTIONS = PrepareOptions(model="gpt-4.1", context_window=8_000, max_output=1_000)


def sessions() -> list[ImportedSession]:
    return [s for f in FILES for s in load(DATA / f)]


@dataclass
class Run:
    user: str
    replies: list[AssistantMessage] = field(default_factory=list)


@dataclass
class Script:
    """A recorded session as framework runs: one per user message."""

    system: str
    runs: list[Run]
    outputs: dict[str, ToolResult]
    tools: list[str]


def script_of(session: ImportedSession) -> Script:
    systems: list[str] = []
    runs: list[Run] = []
    outputs: dict[str, ToolResult] = {}
    tools: list[str] = []
    for pending in session.events:
        e = pending.event
        if isinstance(e, SystemMessage):
            systems.append(e.text)
        elif isinstance(e, UserMessage):
            runs.append(Run(e.text))
        elif isinstance(e, AssistantMessage):
            runs[-1].replies.append(e)
            tools += [c.name for c in e.tool_calls if c.name not in tools]
        elif isinstance(e, ToolResult):
            outputs[e.call_id] = e
        else:
            raise AssertionError(f"not a chat session: {e.kind}")
    return Script("\n\n".join(systems), runs, outputs, tools)


@dataclass
class Expected:
    hashes: list[str]
    summary: dict[str, Any]


def _figures(stats: ReplayStats) -> dict[str, Any]:
    out = stats.summary()
    for key in ("prepare_ms_p50", "prepare_ms_p95"):
        out.pop(key)
    return out


def replayed(session: ImportedSession) -> Expected:
    stats = ReplayStats()
    stats.trajectories = 1
    hashes = []
    for step in replay_session(MemoryStore(), session, options=OPTIONS):
        assert step.prep is not None, step.overflow
        stats.add(step)
        hashes.append(step.prep.sha256)
    return Expected(hashes, _figures(stats))


class Observed:
    """What the integration prepared, step by step, as ``replay`` measures it."""

    def __init__(self, ctx: Callable[[], Context], task: str | None) -> None:
        self.ctx = ctx
        self.task = None if task is None else escape(task)
        self.steps: list[ReplayStep] = []

    def __call__(self, prep: Preparation) -> None:
        self.steps.append(measured(self.ctx(), "s", prep, 0.0, self.task))


class Wire:
    """An in-process OpenAI endpoint: records each request body, answers the script."""

    def __init__(self, script: Script) -> None:
        self.replies: Iterator[AssistantMessage] = iter(
            r for run in script.runs for r in run.replies
        )
        self.bodies: list[dict[str, Any]] = []
        self.run_left = 0

    def handler(self, request: httpx.Request) -> httpx.Response:
        self.bodies.append(json.loads(request.content))
        if self.run_left == 0:
            return httpx.Response(400, json={"error": {"message": "end of the recorded run"}})
        self.run_left -= 1
        reply = next(self.replies)
        message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
        if reply.tool_calls:
            message["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
                }
                for c in reply.tool_calls
            ]
        body = {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 0,
            "model": OPTIONS.model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if reply.tool_calls else "stop",
                }
            ],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }
        return httpx.Response(200, json=body)

    def client(self) -> Any:
        from openai import AsyncOpenAI

        http = httpx.AsyncClient(transport=httpx.MockTransport(self.handler))
        return AsyncOpenAI(api_key="test", http_client=http, max_retries=0)  # type: ignore[arg-type]


# --- drivers -----------------------------------------------------------------------


def drive_agents(session: ImportedSession, script: Script) -> tuple[Observed, list[Any]]:
    from agents import Agent, FunctionTool, OpenAIChatCompletionsModel, RunConfig, Runner

    from ctxline.integrations.agents_sdk import CtxlineSession

    wire = Wire(script)
    store = MemoryStore()
    holder: dict[str, CtxlineSession] = {}
    task = next((r.user for r in script.runs), None)
    observed = Observed(lambda: holder["s"].ctx, task)
    holder["s"] = CtxlineSession(
        session.id, store, options=OPTIONS, sync_tools=False, on_prepare=observed
    )

    def recorded_tool(name: str) -> FunctionTool:
        async def invoke(tool_ctx: Any, _args: str) -> str:
            return script.outputs[tool_ctx.tool_call_id].content

        return FunctionTool(
            name=name,
            description=f"recorded {name}",
            params_json_schema={"type": "object", "properties": {}, "additionalProperties": True},
            on_invoke_tool=invoke,
            strict_json_schema=False,
        )

    model = OpenAIChatCompletionsModel(OPTIONS.model, openai_client=wire.client())
    agent = Agent(
        name="replay",
        instructions=script.system,
        model=model,
        tools=[recorded_tool(n) for n in script.tools],
    )
    config = RunConfig(call_model_input_filter=holder["s"].input_filter, tracing_disabled=True)

    async def main() -> None:
        for run in script.runs:
            wire.run_left = len(run.replies)
            if not run.replies:
                continue
            try:
                await Runner.run(
                    agent, run.user, session=holder["s"], run_config=config, max_turns=500
                )
            except Exception as exc:  # the framework's next call after the recorded run
                if "end of the recorded run" not in str(exc):
                    raise

    asyncio.run(main())
    return observed, [b["messages"] for b in wire.bodies]


def drive_pydantic(session: ImportedSession, script: Script) -> tuple[Observed, list[Any]]:
    from pydantic_ai import Agent, ModelRetry, RunContext, Tool, capture_run_messages
    from pydantic_ai.messages import ModelMessage
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    from ctxline.integrations.pydantic_ai import CtxlineCapability

    wire = Wire(script)
    ctx = Context(MemoryStore(), session.id, options=OPTIONS)
    task = next((r.user for r in script.runs), None)
    observed = Observed(lambda: ctx, task)
    cap = CtxlineCapability(ctx, sync_tools=False, tools=False, on_prepare=observed)

    def recorded_tool(name: str) -> Tool[Any]:
        def call(run: RunContext[Any], **_kwargs: Any) -> str:
            result = script.outputs[run.tool_call_id or ""]
            if result.is_error:
                raise ModelRetry(result.content)
            return result.content

        schema = {"type": "object", "properties": {}, "additionalProperties": True}
        tool = Tool.from_schema(call, name, f"recorded {name}", schema, takes_ctx=True)
        tool.max_retries = 1_000
        return tool

    model = OpenAIChatModel(OPTIONS.model, provider=OpenAIProvider(openai_client=wire.client()))
    agent = Agent(
        model,
        system_prompt=script.system,  # Pydantic AI strips instructions; a system prompt is verbatim
        tools=[recorded_tool(n) for n in script.tools],
        capabilities=[cap],
    )

    async def main() -> None:
        history: list[ModelMessage] = []
        for run in script.runs:
            wire.run_left = len(run.replies)
            if not run.replies:
                continue
            with capture_run_messages() as messages:
                try:
                    result = await agent.run(run.user, message_history=history)
                    history = result.all_messages()
                except Exception as exc:
                    if "end of the recorded run" not in str(exc):
                        raise
                    history = list(messages)

    asyncio.run(main())
    return observed, [b["messages"] for b in wire.bodies]


def drive_langchain(session: ImportedSession, script: Script) -> tuple[Observed, list[Any]]:
    from langchain.agents import create_agent
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, BaseMessage, convert_to_openai_messages
    from langchain_core.tools import StructuredTool
    from langgraph.checkpoint.memory import InMemorySaver

    from ctxline.integrations.langgraph import CtxlineMiddleware

    ctx = Context(MemoryStore(), session.id, options=OPTIONS)
    task = next((r.user for r in script.runs), None)
    observed = Observed(lambda: ctx, task)
    sent: list[list[dict[str, Any]]] = []
    replies = iter(r for run in script.runs for r in run.replies)
    left = {"n": 0}

    class Scripted(GenericFakeChatModel):
        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

        def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
            sent.append(convert_to_openai_messages(messages))
            if left["n"] == 0:
                raise RuntimeError("end of the recorded run")
            left["n"] -= 1
            return super()._generate(messages, *args, **kwargs)

    def reply(a: AssistantMessage) -> AIMessage:
        calls = [{"name": c.name, "args": c.arguments, "id": c.id} for c in a.tool_calls]
        return AIMessage(content=a.text, tool_calls=calls)

    queue: dict[str, list[ToolResult]] = {}
    for call_id, result in script.outputs.items():
        queue.setdefault(call_id, []).append(result)

    def recorded_tool(name: str) -> StructuredTool:
        from langchain_core.messages import ToolMessage

        def call(**kwargs: Any) -> Any:
            raise AssertionError("called through the ToolCall path only")

        async def acall(**kwargs: Any) -> Any:
            raise AssertionError("called through the ToolCall path only")

        tool = StructuredTool.from_function(
            func=call,
            name=name,
            description=f"recorded {name}",
            args_schema={"type": "object", "properties": {}, "additionalProperties": True},
        )

        def run_call(tool_input: Any, **kwargs: Any) -> Any:
            call_id = str(kwargs.get("tool_call_id") or "")
            result = script.outputs[call_id]
            return ToolMessage(
                content=result.content,
                tool_call_id=call_id,
                name=name,
                status="error" if result.is_error else "success",
            )

        object.__setattr__(tool, "run", run_call)
        return tool

    mw = CtxlineMiddleware(ctx, sync_tools=False, tools=False, on_prepare=observed)
    model = Scripted(messages=(reply(r) for r in (next(replies) for _ in iter(int, 1))))
    agent = create_agent(
        model,
        tools=[recorded_tool(n) for n in script.tools],
        system_prompt=script.system,
        middleware=[mw],
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "t"}, "recursion_limit": 1_000}
    for run in script.runs:
        left["n"] = len(run.replies)
        if not run.replies:
            continue
        try:
            agent.invoke({"messages": [{"role": "user", "content": run.user}]}, config)  # type: ignore[call-overload]
        except RuntimeError as exc:
            if "end of the recorded run" not in str(exc):
                raise
    return observed, sent


DRIVERS = {"agents": drive_agents, "pydantic-ai": drive_pydantic, "langchain": drive_langchain}


@pytest.mark.parametrize("framework", sorted(DRIVERS))
def test_same_requests_as_replay(framework: str) -> None:
    total = 0
    for session in sessions():
        script = script_of(session)
        expected = replayed(session)
        observed, sent = DRIVERS[framework](session, script)
        n = len(expected.hashes)
        steps = observed.steps[:n]
        assert [s.prep.sha256 for s in steps if s.prep is not None] == expected.hashes, session.id
        stats = ReplayStats()
        stats.trajectories = 1
        for step in steps:
            stats.add(step)
        assert _figures(stats) == expected.summary, session.id
        for step, messages in zip(steps, sent[:n], strict=True):
            assert step.prep is not None
            mine = step.prep.body["messages"]
            if framework == "langchain":  # LangChain re-serializes arguments (see below)
                messages, mine = _parsed_arguments(messages), _parsed_arguments(mine)
            assert canonical_json(messages) == canonical_json(mine), (
                session.id,
                step.prep.header.step,
            )
        total += n
    assert total == 5 + 6 + 5 + 4 + 5 + 33  # every model call of the six sessions


def _parsed_arguments(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages as LangChain can carry them. It keeps arguments as dicts and its OpenAI
    mapping writes them with ``json.dumps`` (", " and ": "), and an ``AIMessage`` has no
    null content: so on its wire the arguments text differs from ctxline's compact form in
    whitespace only, and a call-only assistant message says ``""`` where ctxline says null."""
    out = []
    for m in messages:
        calls = [
            {
                **c,
                "function": {**c["function"], "arguments": json.loads(c["function"]["arguments"])},
            }
            for c in m.get("tool_calls") or ()
        ]
        if calls:
            m = {**m, "tool_calls": calls, "content": m.get("content") or None}
        out.append(m)
    return out


def test_langchain_wire_differs_only_in_argument_whitespace_and_null() -> None:
    """The two things LangChain cannot carry, shown on one call-only message."""
    from langchain_core.messages import AIMessage, convert_to_openai_messages

    from ctxline.integrations.langchain_messages import view_to_messages

    ours: dict[str, JsonValue] = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "ls", "arguments": '{"a":1,"b":[2]}'},
            }
        ],
    }
    (message,) = view_to_messages([ours])
    assert isinstance(message, AIMessage)
    (wire,) = convert_to_openai_messages([message])
    assert wire["tool_calls"][0]["function"]["arguments"] == '{"a": 1, "b": [2]}'
    assert wire["content"] == ""
    assert canonical_json(wire) != canonical_json(ours)
    assert _parsed_arguments([wire]) == _parsed_arguments([ours])
