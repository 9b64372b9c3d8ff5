"""The README's Python example runs as written, with the SDK call checked against the SDK's types."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter

README = Path(__file__).resolve().parents[1] / "README.md"


def _python_example() -> str:
    text = README.read_text()
    section = text.split("## Use it from Python", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match is not None, "the README lost its Python example"
    return match.group(1)


class _Completions:
    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    def create(self, **body: Any) -> str:
        from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming

        TypeAdapter(CompletionCreateParamsNonStreaming).validate_python(body, strict=True)
        self.bodies.append(body)
        return "ok"


class FakeOpenAI:
    """Stands in for ``openai.OpenAI()``: validates the body instead of sending it."""

    def __init__(self) -> None:
        self.completions = _Completions()
        self.chat = self


def test_readme_python_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code = _python_example()
    assert "client = OpenAI()" in code
    code = code.replace("client = OpenAI()", "client = FakeOpenAI()")
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {"FakeOpenAI": FakeOpenAI}
    exec(compile(code, str(README), "exec"), namespace)
    client = namespace["client"]
    assert isinstance(client, FakeOpenAI)
    (body,) = client.completions.bodies
    assert body["model"] == "gpt-4.1-mini"
    contents = [m["content"] for m in body["messages"]]
    assert '<ctx-state source="env/date">2026-11-02</ctx-state>' in contents
    assert contents[-1] == "Cancel my flight to Seattle"
    assert (tmp_path / "agent.db").exists()
