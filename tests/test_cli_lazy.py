"""The CLI imports a command's module when the command is looked up, not at start.

Why (issue 25): ``ctxline append`` of a 50 MB line peaked at 3.03x the payload, 21 MB of
it the runner (pydantic, asyncio), ``eval`` and ``replay`` that every command imported
before it read a line. These tests run the real entry point in a fresh interpreter and
look at ``sys.modules``: a record command (append, export, sessions, show) brings none
of the runner, while ``run`` still gets it, and every lazy name is the command it says.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import click
from click.testing import CliRunner

from ctxline.cli.lazy import LazyCommands
from ctxline.cli.main import main
from ctxline.cli.options import FiniteFloat, RememberingContext

SRC = str(Path(__file__).resolve().parents[1] / "src")
HEAVY = ("ctxline.runner", "ctxline.eval", "pydantic", "asyncio", "rich.progress")

_PROBE = """
import json, sys
from ctxline.cli import main
try:
    main(sys.argv[1:])
finally:
    heavy = [m for m in {heavy!r} if m in sys.modules]
    print(json.dumps(heavy), file=sys.stderr)
"""


def _cli(*args: str, stdin: bytes = b"") -> tuple[int, str, list[str]]:
    """Exit code, stdout and the heavy modules imported by a real ``ctxline`` run."""
    done = subprocess.run(
        [sys.executable, "-c", _PROBE.format(heavy=HEAVY), *args],
        input=stdin,
        capture_output=True,
        env={**os.environ, "PYTHONPATH": SRC},
        timeout=120,
        check=False,
    )
    heavy: list[str] = json.loads(done.stderr.decode().splitlines()[-1])
    return done.returncode, done.stdout.decode(), heavy


LINES = (
    b'{"kind": "user.message", "text": "build it"}\n'
    b'{"kind": "assistant.message", "text": "", "tool_calls":'
    b' [{"id": "c1", "name": "build", "arguments": {}}]}\n'
    b'{"kind": "tool.result", "call_id": "c1", "name": "build", "content": "ok"}\n'
)


def test_record_commands_do_not_import_the_runner(tmp_path: Path) -> None:
    db = str(tmp_path / "r.db")
    code, out, heavy = _cli("append", "--session", "s", "--create", "--db", db, stdin=LINES)
    assert code == 0, out
    assert out == "appended 3 event(s) to s/main: seq 1-3\n"
    assert heavy == []
    for args in (
        ("export", "--session", "s", "--db", db),
        ("sessions", "--db", db),
        ("show", "--session", "s", "--db", db),
    ):
        code, out, heavy = _cli(*args)
        assert code == 0, (args, out)
        assert heavy == [], args
    code, out, _ = _cli("export", "--session", "s", "--db", db)
    assert [json.loads(line)["kind"] for line in out.splitlines()][1:] == [
        "user.message",
        "assistant.message",
        "tool.result",
    ]


def test_a_command_that_runs_agents_still_gets_the_runner() -> None:
    code, out, heavy = _cli("run", "--help")
    assert code == 0
    assert "Usage: " in out
    assert "ctxline.runner" in heavy
    assert "pydantic" in heavy


def test_the_top_level_help_lists_every_command() -> None:
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0
    listed = {
        line.split()[0]
        for line in result.output.split("Commands:")[1].splitlines()
        if line.startswith("  ")
    }
    assert listed == set(main.commands)
    assert {"append", "run", "chat", "eval", "memory", "doctor"} <= listed


def test_every_lazy_name_is_the_command_it_names() -> None:
    assert isinstance(main.commands, LazyCommands)
    for name in main.commands:
        command = main.commands[name]
        assert command.name == name
        assert main.commands.loaded(name)
        assert command.context_class is RememberingContext  # hardened like any other


def test_lazy_commands_import_on_lookup_and_harden() -> None:
    @click.command("plain")
    @click.option("--ratio", type=float)
    def plain(ratio: float | None) -> None:
        """A command defined without ctxline's safe types."""

    commands = LazyCommands({"prepare": "ctxline.cli.prepare:prepare_cmd"})
    commands["plain"] = plain
    assert list(commands) == ["prepare", "plain"]
    assert "prepare" in commands
    assert "missing" not in commands
    assert len(commands) == 2
    assert commands.get("missing") is None
    assert commands["prepare"].name == "prepare"
    assert commands.loaded("prepare")
    del commands["plain"]
    assert list(commands) == ["prepare"]

    lazy_plain = LazyCommands({"plain": f"{__name__}:_UNHARDENED"})
    (ratio,) = lazy_plain["plain"].params
    assert isinstance(ratio.type, FiniteFloat)  # nan and inf refused, as everywhere


@click.command("unhardened")
@click.option("--ratio", type=float)
def _UNHARDENED(ratio: float | None) -> None:  # a module attribute for the test
    """A command with click's plain float."""
