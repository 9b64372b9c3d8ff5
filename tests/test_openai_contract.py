"""What ctxline sends a local OpenAI-compatible server: the contract, against a recording fake.

The fake (:mod:`fake_openai_server`) is a real HTTP server on 127.0.0.1 that records
each request and answers canned completions, tool calls included; it plays
llama-cpp-python's server (with and without the ``chatml-function-calling`` handler),
llama.cpp's ``llama-server``, vLLM, or a server that says nothing. ctxline's own
runner drives two tools through it; the tests check the bodies — ``tool_choice`` with
tools, ``max_tokens`` and never ``max_completion_tokens``, no null content, ``<ctx-…>``
tags intact, no streaming — and validate them with the ``openai`` SDK's own request
types. Real models are checked in benchmarks/ and docs/eval.md, not here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pydantic
import pytest
from openai.types import completion_create_params
from openai.types.chat import completion_create_params as chat_params

from ctxline import MemoryStore
from ctxline.models import ModelError, make_client
from ctxline.models.openai_client import OpenAIClient, WindowWarning
from ctxline.record.events import ToolResult
from ctxline.runner import Agent, tool
from ctxline.view.options import PrepareOptions
from fake_openai_server import Flavor, Reply, fake_openai_server

OPTIONS = PrepareOptions(model="qwen", context_window=8_192, max_output=200)
CHAT = pydantic.TypeAdapter(chat_params.CompletionCreateParamsNonStreaming)
TEXT = pydantic.TypeAdapter(completion_create_params.CompletionCreateParamsNonStreaming)


def _tools(folder: Path) -> list[Any]:
    @tool
    def read_file(path: str) -> str:
        """Read a text file of the folder."""
        return (folder / path).read_text()

    @tool
    def write_file(path: str, text: str) -> str:
        """Write a text file in the folder."""
        (folder / path).write_text(text)
        return f"wrote {len(text)} characters"

    return [read_file, write_file]


SCRIPT = [
    Reply(calls=(("read_file", {"path": "notes.txt"}),)),
    Reply(calls=(("write_file", {"path": "upper.txt", "text": "BUY MILK"}),)),
    Reply("Done: upper.txt holds BUY MILK."),
]


def _run(client: OpenAIClient, folder: Path) -> Agent:
    (folder / "notes.txt").write_text("buy milk")
    agent = Agent(
        client,
        _tools(folder),
        store=MemoryStore(),
        session="contract",
        system="You are an agent in a folder. Use the tools.",
        options=OPTIONS,
        builtin_tools=(),
    )
    result = agent.run("Copy notes.txt to upper.txt in upper case.")
    assert result.error == "", result.error
    assert result.stop_reason == "final"
    assert result.final == "Done: upper.txt holds BUY MILK."
    assert result.tool_calls == 2
    assert (folder / "upper.txt").read_text() == "BUY MILK"
    return agent


def _no_nulls(value: object) -> bool:
    if value is None:
        return False
    if isinstance(value, dict):
        return all(_no_nulls(v) for v in value.values())
    if isinstance(value, list):
        return all(_no_nulls(v) for v in value)
    return True


@pytest.mark.parametrize("flavor", ["llama-cpp-python", "llama.cpp", "vllm", "plain"])
def test_chat_bodies_a_local_server_gets(flavor: Flavor, tmp_path: Path) -> None:
    with fake_openai_server(flavor, SCRIPT) as fake:
        _run(OpenAIClient("qwen", base_url=fake.base_url), tmp_path)
    bodies = fake.completions()
    assert len(bodies) == 3
    assert not [r for r in fake.requests if r.path == "/v1/completions"]
    for body in bodies:
        CHAT.validate_python(body)  # the official SDK's request type
        assert body["tools"]
        assert body["tool_choice"] == "auto"
        assert body["max_tokens"] == 200
        assert "max_completion_tokens" not in body
        assert body.get("stream") in (None, False)
        assert _no_nulls(body["messages"])  # content "" where ctxline's body had null
        assert body["model"] == "qwen"
        assert body["temperature"] == 0
        assert body["seed"] == 0
    turns = [m for m in bodies[-1]["messages"] if m["role"] in ("assistant", "tool")]
    assert [m["role"] for m in turns] == ["assistant", "tool", "assistant", "tool"]
    assert [m["content"] for m in turns] == ["", "buy milk", "", "wrote 8 characters"]
    text = json.dumps(bodies)
    assert "<ctx-" in text
    assert "&lt;ctx" not in text


TEXT_CALLS = [  # what Qwen2.5-Coder-0.5B wrote through llama.cpp's chat route (agent_real)
    Reply('```json\n{\n  "name": "read_file",\n  "arguments": {"path": "notes.txt"}\n}\n```'),
    Reply('{"name": "write_file", "arguments": {"path": "upper.txt", "text": "BUY MILK"}}'),
    Reply("Done: upper.txt holds BUY MILK."),
]


@pytest.mark.parametrize("flavor", ["llama-cpp-python", "llama.cpp", "vllm", "plain"])
def test_a_local_models_call_written_as_text_is_run(flavor: Flavor, tmp_path: Path) -> None:
    with fake_openai_server(flavor, TEXT_CALLS) as fake:
        _run(OpenAIClient("qwen", base_url=fake.base_url), tmp_path)
    turns = [m for m in fake.completions()[-1]["messages"] if m["role"] == "assistant"]
    assert [c["function"]["name"] for m in turns for c in m["tool_calls"]] == [
        "read_file",
        "write_file",
    ]


def test_a_call_to_an_invented_tool_is_answered_with_the_tools_there_are(
    tmp_path: Path,
) -> None:
    script = [
        Reply('```json\n{"name": "copy_file", "arguments": {"path": "notes.txt"}}\n```'),
        Reply(calls=(("read_file", {"path": "notes.txt"}),)),
        Reply(calls=(("write_file", {"path": "upper.txt", "text": "BUY MILK"}),)),
        Reply("Done: upper.txt holds BUY MILK."),
    ]
    (tmp_path / "notes.txt").write_text("buy milk")
    with fake_openai_server("llama.cpp", script) as fake:
        agent = Agent(
            OpenAIClient("qwen", base_url=fake.base_url),
            _tools(tmp_path),
            store=MemoryStore(),
            session="invented",
            options=OPTIONS,
            builtin_tools=(),
        )
        result = agent.run("Copy notes.txt to upper.txt in upper case.")
    assert result.final == "Done: upper.txt holds BUY MILK."
    assert (tmp_path / "upper.txt").read_text() == "BUY MILK"
    second = fake.completions()[1]["messages"]
    refusal = next(m for m in second if m["role"] == "tool")
    assert "copy_file" in refusal["content"]
    assert "read_file" in refusal["content"]
    assert "write_file" in refusal["content"]


def test_openai_base_url_means_what_base_url_means(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with fake_openai_server("vllm", SCRIPT) as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        client = make_client("openai:qwen")  # no base_url: the variable names the server
        assert isinstance(client, OpenAIClient)
        _run(client, tmp_path)
    for body in fake.completions():
        assert body["max_tokens"] == 200
        assert "max_completion_tokens" not in body
        assert body["tool_choice"] == "auto"


def test_chatml_function_calling_server_gets_ctxlines_own_prompt(tmp_path: Path) -> None:
    """llama-cpp-python's chatml-function-calling handler escapes tags and drops tool
    results: ctxline renders the ChatML prompt itself and sends it as a text completion."""
    with fake_openai_server("llama-cpp-python-fc", SCRIPT) as fake:
        client = OpenAIClient("qwen", base_url=fake.base_url)
        agent = _run(client, tmp_path)
    assert client.server.raw_prompt
    bodies = fake.completions()
    assert len(bodies) == 3
    assert all(r.path != "/v1/chat/completions" or r.body["max_tokens"] == 1 for r in fake.requests)
    for body in bodies:
        TEXT.validate_python(body)
        assert body["max_tokens"] == 200
        assert "max_completion_tokens" not in body
        assert body["stop"] == ["<|im_end|>", "<|endoftext|>"]
        prompt = body["prompt"]
        assert prompt.startswith("<|im_start|>system\nYou are an agent in a folder.")
        assert '"name": "read_file"' in prompt.split("\n</tools>")[0]  # the schemas are shown
        assert prompt.endswith("<|im_start|>assistant\n")
        assert "<ctx-" in prompt
        assert "&lt;" not in prompt
    last = bodies[-1]["prompt"]
    assert "<tool_response>\nbuy milk\n</tool_response>" in last  # results reach the model
    second = bodies[1]["prompt"]  # the status bar is read in the results' turn, not its own
    assert "buy milk\n</tool_response>\n<ctx-status>\ntool calls:" in second
    assert second.count("<|im_start|>user") == 2
    assert '<tool_call>\n{"name": "read_file", "arguments": {"path": "notes.txt"}}' in last
    results = [e.event for e in agent.ctx.events if isinstance(e.event, ToolResult)]
    assert [r.content for r in results] == ["buy milk", "wrote 8 characters"]


@pytest.mark.parametrize(("flavor", "window"), [("vllm", 8_192), ("llama.cpp", 8_192)])
def test_the_window_comes_from_the_server(flavor: Flavor, window: int) -> None:
    with fake_openai_server(flavor) as fake:
        assert OpenAIClient("qwen", base_url=fake.base_url).context_window == window


@pytest.mark.parametrize("flavor", ["llama-cpp-python", "plain"])
def test_a_server_that_does_not_say_gets_a_warning(flavor: Flavor) -> None:
    with fake_openai_server(flavor) as fake:
        client = OpenAIClient("qwen", base_url=fake.base_url)
        with pytest.warns(WindowWarning, match=r"does not report its context window"):
            assert client.context_window is None


def test_model_errors_name_the_url_the_status_and_the_servers_words() -> None:
    boom = Reply(status=500, error="Requested tokens (9000) exceed context window of 8192")
    with fake_openai_server("plain", [boom]) as fake:
        client = OpenAIClient("qwen", base_url=fake.base_url, max_retries=0)
        with pytest.raises(ModelError) as caught:
            client.complete({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 5})
    message = str(caught.value)
    assert message == (
        f"openai:qwen at {fake.base_url}: HTTP 500: "
        "Requested tokens (9000) exceed context window of 8192"
    )


def test_an_unreachable_server_is_named() -> None:
    with fake_openai_server("plain") as fake:
        url = fake.base_url
    client = OpenAIClient("qwen", base_url=url, max_retries=0, server=None)
    with pytest.raises(ModelError) as caught:
        client.complete({"messages": [{"role": "user", "content": "hi"}]})
    assert str(caught.value).startswith(f"openai:qwen at {url}: cannot connect: ")
