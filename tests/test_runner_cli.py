"""``ctxline run`` and ``ctxline chat`` on the loop; the confined default tools."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ctxline.cli.main import main
from ctxline.record.events import ToolResult
from ctxline.record.store import open_store
from ctxline.runner.workspace import PathRefused, confine, shell_tool, workspace_tools


def _script(path: Path, *replies: dict[str, Any]) -> str:
    path.write_text("\n".join(json.dumps(r) for r in replies) + "\n")
    return f"script:{path}"


def _call(i: str, name: str, **args: Any) -> dict[str, Any]:
    return {"tool_calls": [{"id": i, "name": name, "arguments": args}]}


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "src" / "main.py").write_text("def main():\n    print('hi')\n")
    (root / "notes.txt").write_text("hello\n")
    (tmp_path / "secret.txt").write_text("TOP SECRET\n")
    os.symlink(tmp_path / "secret.txt", root / "escape.txt")
    os.symlink(tmp_path, root / "up")
    os.symlink(root / "notes.txt", root / "inside.txt")
    return root


def test_paths_are_confined_to_the_root(workspace: Path) -> None:
    assert confine(workspace, "src/main.py") == (workspace / "src" / "main.py").resolve()
    assert confine(workspace, "inside.txt").name == "notes.txt"
    for bad in (
        "../secret.txt",
        "escape.txt",
        "up/secret.txt",
        str(workspace.parent / "secret.txt"),
        "src/../../secret.txt",
        "a\x00b",
    ):
        with pytest.raises(PathRefused):
            confine(workspace, bad)
    read_file, list_dir, search_files = (t.fn for t in workspace_tools(workspace))
    assert "    1  def main():" in read_file("src/main.py")
    with pytest.raises(PathRefused, match="outside the root folder"):
        read_file("escape.txt")
    listing = list_dir(".")
    assert "src/" in listing
    assert "escape.txt (link out of the workspace: not followed)" in listing
    assert "up (link out of the workspace" in listing
    found = search_files("SECRET|hello")
    assert "notes.txt:1: hello" in found
    assert "TOP SECRET" not in found


def test_run_json_with_default_tools_and_a_refused_escape(workspace: Path, tmp_path: Path) -> None:
    model = _script(
        tmp_path / "s.jsonl",
        {
            "tool_calls": [
                {"id": "a", "name": "read_file", "arguments": {"path": "../secret.txt"}},
                {"id": "b", "name": "search_files", "arguments": {"pattern": "def main"}},
            ]
        },
        {"text": "main is defined in src/main.py"},
    )
    db = tmp_path / "run.db"
    out = CliRunner().invoke(
        main,
        [
            "run",
            "Where is main?",
            "--model",
            model,
            "--root",
            str(workspace),
            "--db",
            str(db),
            "--session",
            "s1",
            "--json",
        ],
    )
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    assert set(data) >= {
        "session",
        "final",
        "turns",
        "tool_calls",
        "usage",
        "stop_reason",
        "cost_usd",
    }
    assert data["session"] == "s1"
    assert data["final"] == "main is defined in src/main.py"
    assert (data["turns"], data["tool_calls"], data["stop_reason"]) == (2, 2, "final")
    assert set(data["usage"]) == {"input", "cache_read", "cache_write", "output"}
    store = open_store(str(db))
    results = {
        e.event.call_id: e.event for e in store.read("s1") if isinstance(e.event, ToolResult)
    }
    assert results["a"].is_error
    assert "outside the root folder" in results["a"].content
    assert "TOP SECRET" not in results["a"].content
    assert "src/main.py:1: def main():" in results["b"].content
    store.close()


def test_run_tools_from_a_module_and_resume_an_unfinished_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "mytools.py").write_text(
        "def add(a: int, b: int) -> int:\n    'Add.'\n    return a + b\n\n"
        "def mul(a: int, b: int) -> int:\n    'Multiply.'\n    return a * b\n\nTOOLS = [add, mul]\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    model = _script(
        tmp_path / "s.jsonl",
        _call("a", "add", a=2, b=3),
        _call("m", "mul", a=5, b=4),
        {"text": "20"},
    )
    args = [
        "run",
        "compute",
        "--model",
        model,
        "--tools",
        "mytools:TOOLS",
        "--no-default-tools",
        "--db",
        "r.db",
        "--session",
        "calc",
        "--json",
    ]
    first = CliRunner().invoke(main, [*args, "--max-turns", "1"])
    assert first.exit_code == 1, first.output  # stopped by the turn cap, not finished
    assert json.loads(first.stdout)["stop_reason"] == "max_turns"
    second = CliRunner().invoke(
        main,
        [
            "run",
            "--model",
            model,
            "--tools",
            "mytools:TOOLS",
            "--no-default-tools",
            "--db",
            "r.db",
            "--session",
            "calc",
            "--json",
        ],
    )
    assert second.exit_code == 0, second.output
    data = json.loads(second.stdout)
    assert data["final"] == "20"
    assert data["turns"] == 3
    assert data["resumed"] is True
    store = open_store("r.db")
    contents = [e.event.content for e in store.read("calc") if isinstance(e.event, ToolResult)]
    assert contents == ["5", "20"]
    store.close()
    missing = CliRunner().invoke(
        main, ["run", "x", "--model", model, "--tools", "mytools:NOPE", "--db", ":memory:"]
    )
    assert missing.exit_code == 2
    assert "mytools has no attribute 'NOPE'" in missing.output


@pytest.mark.parametrize(("approve", "ran"), [("deny", False), ("auto", True), ("ask", False)])
def test_the_shell_needs_allow_shell_and_approval(
    workspace: Path, tmp_path: Path, approve: str, ran: bool
) -> None:
    model = _script(
        tmp_path / "s.jsonl", _call("x", "shell", command="echo ran > marker"), {"text": "ok"}
    )
    out = CliRunner().invoke(
        main,
        [
            "run",
            "go",
            "--model",
            model,
            "--root",
            str(workspace),
            "--db",
            ":memory:",
            "--allow-shell",
            "--approve",
            approve,
            "--json",
        ],
        input="",
    )
    assert out.exit_code == 0, out.output
    assert (workspace / "marker").exists() is ran
    without = CliRunner().invoke(
        main,
        [
            "run",
            "go",
            "--model",
            model,
            "--root",
            str(workspace),
            "--db",
            ":memory:",
            "--approve",
            "auto",
            "--json",
        ],
    )
    assert json.loads(without.stdout)["final"] == "ok"
    shell = shell_tool(workspace)
    assert shell.meta.requires_approval
    assert "exit code 0" in shell.fn("true")


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "ok"}\n{"tool_calls": [{"name": 3}]}\n')
    out = CliRunner().invoke(main, ["run", "x", "--model", f"script:{bad}", "--db", ":memory:"])
    assert out.exit_code == 2
    assert f"{bad}, line 2, field 'tool_calls[0].name'" in out.output
    good = _script(tmp_path / "good.jsonl", {"text": "ok"})
    nothing = CliRunner().invoke(main, ["run", "--model", good, "--db", ":memory:"])
    assert nothing.exit_code == 2
    assert "give a TASK" in nothing.output
    extra = tmp_path / "extra.jsonl"
    extra.write_text('{"txt": "typo"}\n')
    out = CliRunner().invoke(main, ["run", "x", "--model", f"script:{extra}", "--db", ":memory:"])
    assert out.exit_code == 2
    assert "unknown key 'txt'" in out.output


def test_chat_runs_on_the_loop(tmp_path: Path) -> None:
    model = _script(
        tmp_path / "s.jsonl",
        {"text": "Hello!"},
        _call("s", "search_history", query="hello"),
        {"text": "Found it."},
    )
    out = CliRunner().invoke(
        main,
        ["chat", "--model", model, "--db", str(tmp_path / "c.db")],
        input="hi\nsearch\n/exit\n",
    )
    assert out.exit_code == 0, out.output
    assert "script:" in out.output
    assert "Hello!" in out.output
    assert "Found it." in out.output
    assert "tool search_history" in out.output
    store = open_store(str(tmp_path / "c.db"))
    assert [e.kind for e in store.read("chat")].count("usage") == 3
    store.close()
