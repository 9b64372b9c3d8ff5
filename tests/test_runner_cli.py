"""``ctxline run`` and ``ctxline chat`` on the loop; the confined default tools."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from ctxline.cli.main import main
from ctxline.cli.run import run_cmd
from ctxline.context import Context
from ctxline.record.events import ModelFailure, RequestHeader, ToolResult, UserMessage
from ctxline.record.store import open_store
from ctxline.runner.workspace import PathRefused, confine, shell_tool, workspace_tools
from ctxline.web.views import summarize


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
    again = CliRunner().invoke(main, ["run", "--db", "r.db", "--session", "calc", "--json"])
    assert again.exit_code == 1, again.output  # the recorded cap: it stops again at once
    assert json.loads(again.stdout)["stop_reason"] == "max_turns"
    second = CliRunner().invoke(  # the session id alone, and a higher cap given again
        main, ["run", "--db", "r.db", "--session", "calc", "--max-turns", "5", "--json"]
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


def _bodies(db: str, session: str) -> list[dict[str, Any]]:
    store = open_store(db)
    ctx = Context(store, session, create=False)
    out = [json.loads(ctx.rebuild(h.step)) for h in ctx.requests()]
    store.close()
    return out


def test_resume_from_the_session_id_alone_with_the_recorded_options(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("alpha\n")
    model = _script(
        tmp_path / "s.jsonl", _call("r", "read_file", path="a.txt"), {"text": "it says alpha"}
    )
    db = str(tmp_path / "r.db")
    args = ["--db", db, "--session", "tz", "--json"]
    first = CliRunner().invoke(
        main,
        ["run", "read a.txt", "--model", model, "--root", str(tmp_path), "--tz", "Asia/Tokyo",
         "--status", "tail", "--no-builtin", "search_history", "--max-turns", "1", *args],
    )  # fmt: skip
    assert first.exit_code == 1, first.output
    store = open_store(db)
    task = next(e.event for e in store.read("tz") if isinstance(e.event, UserMessage))
    store.close()
    recorded = task.meta["run"]
    assert isinstance(recorded, dict)
    assert recorded["model"] == model
    assert recorded["tz"] == "Asia/Tokyo"
    assert recorded["max_turns"] == 1
    assert recorded["root"] == str(tmp_path.resolve())
    second = CliRunner().invoke(main, ["run", "--max-turns", "3", *args])
    assert second.exit_code == 0, second.output
    data = json.loads(second.stdout)
    assert (data["final"], data["resumed"]) == ("it says alpha", True)
    last = _bodies(db, "tz")[-1]
    assert "it says alpha" not in json.dumps(last)  # (the request before the final answer)
    tail = last["messages"][-1]["content"]
    assert "(Asia/Tokyo)" in tail  # the recorded zone, the recorded tail status
    assert "read_file invoked 1 time" in tail
    names = [t["function"]["name"] for t in last["tools"]]
    assert "search_history" not in names
    assert "read_result" in names
    assert "read_file" in names  # the recorded root's file tools
    assert '"run"' not in json.dumps(last)  # the logged options are never sent to the model


def test_a_bad_recorded_option_is_one_line_and_exit_2(tmp_path: Path) -> None:
    db = str(tmp_path / "r.db")
    store = open_store(db)
    store.create_session("bad")
    store.append("bad", [UserMessage("go", {"run": {"model": "script:x", "max_turns": "many"}})])
    store.close()
    out = CliRunner().invoke(main, ["run", "--db", db, "--session", "bad"])
    assert out.exit_code == 2
    assert "the recorded option 'max_turns' of session 'bad' is invalid" in out.output


def test_status_off_and_no_builtin_tools(tmp_path: Path) -> None:
    model = _script(tmp_path / "s.jsonl", _call("l", "list_dir", path="."), {"text": "done"})
    db = str(tmp_path / "r.db")
    out = CliRunner().invoke(
        main,
        ["run", "list", "--model", model, "--root", str(tmp_path), "--db", db, "--session", "q",
         "--status", "off", "--no-builtin-tools", "--json"],
    )  # fmt: skip
    assert out.exit_code == 0, out.output
    bodies = _bodies(db, "q")
    assert len(bodies) == 2
    for body in bodies:
        names = [t["function"]["name"] for t in body["tools"]]
        assert names == ["read_file", "list_dir", "search_files"]
        assert "ctx-status" not in json.dumps(body["messages"])
    on = CliRunner().invoke(
        main,
        ["run", "list", "--model", model, "--root", str(tmp_path), "--db", db, "--session", "q2",
         "--json"],
    )  # fmt: skip
    assert on.exit_code == 0, on.output
    assert "<ctx-status>" in _bodies(db, "q2")[-1]["messages"][-1]["content"]


def test_a_model_error_is_a_recorded_event_that_show_displays(tmp_path: Path) -> None:
    model = _script(tmp_path / "s.jsonl", _call("l", "list_dir", path="."))
    db = str(tmp_path / "r.db")
    out = CliRunner().invoke(
        main, ["run", "list", "--model", model, "--root", str(tmp_path), "--db", db,
               "--session", "e", "--json"],
    )  # fmt: skip
    assert out.exit_code == 1
    data = json.loads(out.stdout)
    assert data["stop_reason"] == "model_error"
    assert "the script has 1 replies" in data["error"]
    store = open_store(db)
    events = store.read("e")
    store.close()
    last = events[-1].event
    assert isinstance(last, ModelFailure)
    assert last.error == data["error"]
    assert last.model == model
    assert isinstance(events[-2].event, RequestHeader)
    assert last.request_step == events[-2].event.step
    shown = CliRunner().invoke(
        main, ["show", "--db", db, "--session", "e", "--width", "400"], env={"COLUMNS": "600"}
    )
    assert shown.exit_code == 0, shown.output
    assert "model.error" in shown.stdout
    assert "the script has 1 replies" in shown.stdout
    assert "ModelError: " in summarize(last)  # the inspector's line for the event
    assert "the script has 1 replies" in summarize(last)


def test_every_run_option_has_help_and_shows_its_default() -> None:
    for param in run_cmd.params:
        if not isinstance(param, click.Option) or param.name == "help":
            continue
        assert param.help, param.name
        assert param.show_default, param.name
    text = CliRunner().invoke(main, ["run", "--help"]).stdout
    assert "--context-window" in text
    assert "[default: (the server's, else 8,192 for local:, 128,000);" in " ".join(text.split())


def test_a_bad_zone_is_one_line_and_exit_2(tmp_path: Path) -> None:
    model = _script(tmp_path / "s.jsonl", {"text": "ok"})
    out = CliRunner().invoke(
        main, ["run", "x", "--model", model, "--db", ":memory:", "--tz", "Mars/Base"]
    )
    assert out.exit_code == 2
    assert "Mars/Base" in out.output


def test_tool_choice_is_sent_recorded_and_checked(tmp_path: Path) -> None:
    model = _script(tmp_path / "s.jsonl", _call("l", "list_dir", path="."), {"text": "done"})
    db = str(tmp_path / "r.db")
    base = ["--model", model, "--root", str(tmp_path), "--db", db, "--json", "--max-turns", "2"]
    out = CliRunner().invoke(
        main, ["run", "list", "--session", "c", "--tool-choice", "list_dir", *base]
    )
    assert out.exit_code == 0, out.output  # (a scripted model answers as scripted)
    bodies = _bodies(db, "c")
    assert len(bodies) == 2
    for body in bodies:
        assert body["tool_choice"] == {"type": "function", "function": {"name": "list_dir"}}
    store = open_store(db)
    task = next(e.event for e in store.read("c") if isinstance(e.event, UserMessage))
    store.close()
    recorded = task.meta["run"]
    assert isinstance(recorded, dict)
    assert recorded["tool_choice"] == "list_dir"
    auto = CliRunner().invoke(main, ["run", "list", "--session", "a", *base])
    assert auto.exit_code == 0, auto.output
    assert all("tool_choice" not in b for b in _bodies(db, "a"))  # auto: the client says it
    required = CliRunner().invoke(
        main, ["run", "list", "--session", "r", "--tool-choice", "required", *base]
    )
    assert required.exit_code == 0, required.output
    assert {b["tool_choice"] for b in _bodies(db, "r")} == {"required"}


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ("list_dri", "did you mean 'list_dir'?"),
        ("nope", "expected auto, required, none or one of: list_dir, read_file, read_result"),
        ("read_result", None),  # a built-in tool is a tool of the run
    ],
)
def test_a_tool_choice_naming_no_tool_is_one_line_and_exit_2(
    tmp_path: Path, given: str, said: str | None
) -> None:
    model = _script(tmp_path / "s.jsonl", {"text": "done"})
    out = CliRunner().invoke(
        main,
        ["run", "x", "--model", model, "--root", str(tmp_path), "--db", str(tmp_path / "r.db"),
         "--tool-choice", given, "--json", "--max-turns", "1"],
    )  # fmt: skip
    if said is None:
        assert out.exit_code in (0, 1), out.output
        assert "--tool-choice" not in out.output
    else:
        assert out.exit_code == 2, out.output
        assert said in out.output
        assert len(out.output.strip().splitlines()) == 1
