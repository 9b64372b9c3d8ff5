"""The loop over real HTTP: llama.cpp's OpenAI-compatible server, started by the test.

Plain-text turns go to SmolLM2 through ctxline's OpenAI client; tool turns come from the
scripted model (SmolLM2-135M does not call tools reliably), in the same session, so the
HTTP model answers over a history that holds real tool calls and results. Needs the
``local`` extra and llama-cpp-python's ``server`` extra (both in ``dev``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from ctxline import MemoryStore
from ctxline.models.base import ModelReply, Provider
from ctxline.models.openai_client import OpenAIClient
from ctxline.models.scripted import ScriptedModel
from ctxline.record.events import ModelUsage, ToolResult
from ctxline.runner import Agent, tool
from ctxline.view.options import PrepareOptions
from llama_server import llama_server as start_llama_server


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with start_llama_server() as base:
        yield base


OPTIONS = PrepareOptions(model="smollm2", context_window=4_096, max_output=48)


def test_plain_text_turns_through_the_loop_over_http(server: str) -> None:
    client = OpenAIClient("smollm2", base_url=server)
    agent = Agent(
        client,
        store=MemoryStore(),
        session="http",
        system="Answer in one short sentence.",
        options=OPTIONS,
        builtin_tools=(),
    )
    first = agent.run("What is the capital of France?")
    assert first.stop_reason == "final"
    assert first.final.strip()
    assert "paris" in first.final.lower()
    second = agent.run("And of Italy?")
    assert second.stop_reason == "final"
    assert second.final.strip()
    assert second.turns == 1  # figures are per task
    usages = [e.event for e in agent.ctx.events if isinstance(e.event, ModelUsage)]
    assert len(usages) == 2
    assert all(u.model == "openai:smollm2" and u.input > 10 and 0 < u.output <= 48 for u in usages)
    assert all(u.estimated_input is not None and u.estimated_input > 0 for u in usages)
    assert usages[1].input > usages[0].input  # the second request holds the first turn
    assert second.calibration["n"] == 1  # ctxline's count beside the server's, reported


class ToolTurnsScripted:
    """Tool turns from the script, the rest from the HTTP model: one session, two models."""

    provider: Provider = "openai"

    def __init__(self, script: ScriptedModel, http: OpenAIClient) -> None:
        self.script, self.http = script, http

    @property
    def name(self) -> str:
        return self.http.name

    def complete(self, body: Mapping[str, Any], *, provider: Provider) -> ModelReply:
        turns = sum(1 for m in body["messages"] if m.get("role") == "assistant")
        if turns < len(self.script.replies):
            return self.script.complete(body, provider=provider)
        return self.http.complete(body, provider=provider)


def test_tool_turns_scripted_and_the_answer_over_http(server: str) -> None:
    @tool
    def capital(country: str) -> str:
        """The capital city of a country."""
        return {"France": "Paris", "Japan": "Tokyo"}.get(country, "unknown")

    script = ScriptedModel(
        [{"tool_calls": [{"id": "c1", "name": "capital", "arguments": {"country": "Japan"}}]}]
    )
    model = ToolTurnsScripted(script, OpenAIClient("smollm2", base_url=server))
    agent = Agent(
        model,
        [capital],
        store=MemoryStore(),
        session="mixed",
        system="Answer in one short sentence.",
        options=OPTIONS,
        builtin_tools=(),
    )
    result = agent.run("What is the capital of Japan? Use the tool.")
    assert result.error == ""
    assert result.stop_reason == "final"
    assert result.final.strip()
    assert result.turns == 2
    assert result.tool_calls == 1
    (answer,) = [e.event for e in agent.ctx.events if isinstance(e.event, ToolResult)]
    assert answer.content == "Tokyo"
    print(f"SmolLM2 over HTTP answered: {result.final!r}")
