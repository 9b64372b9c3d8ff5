"""OpenTelemetry GenAI spans for the agent, model and tool calls (the SDK's in-memory exporter)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from ctxline import MemoryStore
from ctxline.models.scripted import ScriptedModel
from ctxline.runner import Agent, SubAgents, otel_tracer, tool


@pytest.fixture
def exporter() -> Iterator[tuple[InMemorySpanExporter, TracerProvider]]:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    yield memory, provider
    provider.shutdown()


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    if key == "missing":
        raise KeyError(key)
    return f"value of {key}"


def test_spans_follow_the_genai_conventions(
    exporter: tuple[InMemorySpanExporter, TracerProvider],
) -> None:
    memory, provider = exporter
    child = ScriptedModel(
        [
            {"tool_calls": [{"id": "k", "name": "lookup", "arguments": {"key": "b"}}]},
            {"text": "b is fine"},
        ],
        label="child",
    )
    model = ScriptedModel(
        [
            {
                "tool_calls": [
                    {"id": "c1", "name": "lookup", "arguments": {"key": "a"}},
                    {"id": "c2", "name": "lookup", "arguments": {"key": "missing"}},
                ]
            },
            {"tool_calls": [{"id": "s", "name": "spawn_agent", "arguments": {"task": "check b"}}]},
            {"text": "done"},
        ],
        name="openai:gpt-4.1",
    )
    agent = Agent(
        model,
        [lookup],
        store=MemoryStore(),
        session="traced",
        tracer=otel_tracer(provider),
        subagents=SubAgents(model=child),
        name="demo",
    )
    agent.run("look things up")
    spans: list[ReadableSpan] = list(memory.get_finished_spans())
    by_name: dict[str, list[ReadableSpan]] = {}
    for span in spans:
        by_name.setdefault(span.name, []).append(span)
    (root,) = by_name["invoke_agent demo"]
    assert root.attributes is not None
    assert root.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert root.attributes["gen_ai.conversation.id"] == "traced"
    chats = by_name["chat gpt-4.1"]
    assert len(chats) == 3
    first = chats[0]
    assert first.kind == SpanKind.CLIENT
    assert first.attributes is not None
    assert first.attributes["gen_ai.operation.name"] == "chat"
    assert first.attributes["gen_ai.provider.name"] == "openai"
    assert first.attributes["gen_ai.request.model"] == "gpt-4.1"
    tokens_in = first.attributes["gen_ai.usage.input_tokens"]
    tokens_out = first.attributes["gen_ai.usage.output_tokens"]
    assert isinstance(tokens_in, int)
    assert isinstance(tokens_out, int)
    assert tokens_in > 0
    assert tokens_out > 0
    assert first.attributes["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert all(c.parent is not None and c.parent.span_id == root.context.span_id for c in chats)
    tools = by_name["execute_tool lookup"]
    assert len(tools) == 3  # two in the parent, one in the child
    failed = [t for t in tools if t.attributes and t.attributes["gen_ai.tool.call.id"] == "c2"]
    assert failed[0].status.status_code == StatusCode.ERROR
    assert failed[0].attributes is not None
    assert failed[0].attributes["error.type"] == "tool_error"
    ok = next(t for t in tools if t.attributes and t.attributes["gen_ai.tool.call.id"] == "c1")
    assert ok.attributes is not None
    assert ok.attributes["gen_ai.tool.type"] == "function"
    assert ok.status.status_code == StatusCode.UNSET
    # the sub-agent's spans nest under the tool call that spawned it
    (spawn,) = by_name["execute_tool spawn_agent"]
    (child_root,) = by_name["invoke_agent demo/agent"]
    assert child_root.parent is not None
    assert child_root.parent.span_id == spawn.context.span_id
    child_chat = by_name["chat child"]
    assert child_chat[0].attributes is not None
    assert child_chat[0].attributes["gen_ai.conversation.id"] == "traced/agent-1"
    assert child_chat[0].attributes["gen_ai.provider.name"] == "ctxline.script"
