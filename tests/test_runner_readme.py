"""The README's agent runs as written (with the scripted model; the README shows real output
of the embedded model and of llama.cpp's server, which tests/test_runner_http.py covers)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def _agent_code() -> str:
    section = README.read_text().split("## Agent runner", 1)[1].split("\n## ", 1)[0]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match is not None, "the README lost its agent example"
    return match.group(1)


def test_the_readme_agent_runs_with_its_two_tools(tmp_path: Path) -> None:
    code = _agent_code()
    assert 15 <= len(code.strip().splitlines()) <= 30  # "an agent of about 20 lines"
    (tmp_path / "agent.py").write_text(code)
    replies = [
        {
            "tool_calls": [
                {"id": "c1", "name": "word_count", "arguments": {"text": "the quick brown fox"}}
            ]
        },
        {"tool_calls": [{"id": "c2", "name": "shout", "arguments": {"text": "four"}}]},
        {"text": "There are 4 words."},
    ]
    (tmp_path / "replies.jsonl").write_text("\n".join(json.dumps(r) for r in replies))
    out = subprocess.run(
        [sys.executable, "agent.py", "script:replies.jsonl"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    first, second = out.stdout.splitlines()
    assert first == "There are 4 words."
    assert second.startswith("final 3 2 {'input': ")
    from ctxline import open_store
    from ctxline.record.events import ToolResult

    store = open_store(str(tmp_path / "agent.db"))
    (session,) = store.sessions()
    results = [e.event.content for e in store.read(session.id) if isinstance(e.event, ToolResult)]
    assert results == ["4", "FOUR"]
    store.close()


def test_the_runner_doc_examples_run() -> None:
    """Every ```python block of docs/runner.md runs as written (offline: ScriptedModel),
    unless the line before it says ``<!-- not-runnable: … -->``."""
    text = (README.parent / "docs" / "runner.md").read_text()
    blocks = re.findall(r"(<!-- not-runnable:[^\n]*-->\n)?```python\n(.*?)```", text, re.S)
    runnable = [code for skip, code in blocks if not skip]
    assert len(runnable) >= 3
    for i, code in enumerate(runnable):
        exec(compile(code, f"docs/runner.md block {i}", "exec"), {"__name__": f"runner_doc_{i}"})
