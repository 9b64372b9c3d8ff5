"""The mistakes a newcomer makes, and the one line that says what to do instead.

Why: an error that only says what is wrong (``no session 's1'``, ``NotFoundError: 404``,
``Connection error.``) leaves someone new guessing; each error here must also name the
fix — ``--create``, the session id they meant, the base URL with ``/v1``, the type
annotation a tool lacks. Every case runs the real command in-process against a real
SQLite file; the model-server cases use a real local HTTP server that answers 404 and
a port nobody listens on.

    .venv/bin/pytest tests/test_newcomer_errors.py -q
"""

from __future__ import annotations

import socket
import sys
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from click.testing import CliRunner

from ctxline.cli.hints import close_matches, explain_model_error
from ctxline.cli.main import main
from ctxline.cli.tool_loader import load_tools
from ctxline.errors import ValidationError
from ctxline.record.events import UserMessage
from ctxline.record.store import SQLiteStore

REPLAYED = "mini-swe-agent/psf__requests-2317@replay1"
USER = '{"kind": "user.message", "text": "hi"}\n'


def error_line(args: Sequence[str], stdin: str = "", code: int = 2) -> str:
    """Run ``ctxline ARGS``: it must fail with ``code`` and one ``error:`` line. The line."""
    result = CliRunner(env={"COLUMNS": "200"}).invoke(
        main, list(args), input=stdin, catch_exceptions=False
    )
    assert result.exit_code == code, (args, result.exit_code, result.stderr, result.stdout)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: "), lines
    assert "Traceback" not in result.stderr
    return lines[0]


@pytest.fixture
def db(tmp_path: Path) -> str:
    path = tmp_path / "work.db"
    store = SQLiteStore(path)
    for name in ("demo", REPLAYED, "support-42"):
        store.create_session(name)
        store.append(name, [UserMessage("hello")])
    store.close()
    return str(path)


# --- the four the issue names ------------------------------------------------------


def test_append_to_a_new_session_names_create(tmp_path: Path) -> None:
    db = str(tmp_path / "new.db")
    SQLiteStore(db).close()
    line = error_line(["append", "--session", "s1", "--db", db], USER)
    assert "no session 's1'" in line
    assert "--create" in line, line


def test_show_a_replayed_session_by_its_original_id_says_did_you_mean(db: str) -> None:
    line = error_line(["show", "--session", "mini-swe-agent/psf__requests-2317", "--db", db])
    assert f"did you mean {REPLAYED!r}?" in line, line


@pytest.mark.parametrize(
    "command",
    [
        ["show"],
        ["export"],
        ["requests"],
        ["prepare", "--no-log"],
        ["request", "--step", "1"],
        ["fork", "--at", "0", "--name", "b"],
        ["search", "hello"],
        ["append"],
    ],
)
def test_a_typo_in_a_session_id_says_did_you_mean(command: list[str], db: str) -> None:
    line = error_line([*command, "--session", "dmeo", "--db", db], USER)
    assert "no session 'dmeo'" in line
    assert "did you mean 'demo'?" in line, line


def test_a_session_nothing_resembles_points_at_the_listing(db: str) -> None:
    line = error_line(["show", "--session", "zzzzzzzz", "--db", db])
    assert "did you mean" not in line
    assert "ctxline sessions` with the same --db" in line, line
    assert db not in line  # a database URL may hold a password: never echoed


class NotFound(BaseHTTPRequestHandler):
    """A server that answers 404 to everything, as a server without /v1 routes does."""

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        body = b'{"error": "Not Found"}'
        self.send_response(404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer

    def log_message(self, format: str, *args: object) -> None:  # keep test output quiet
        pass


@pytest.fixture
def not_found_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), NotFound)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def closed_url() -> str:
    """The URL of a port that was just free: nothing listens there."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return f"http://127.0.0.1:{port}/v1"


def test_a_base_url_without_v1_says_add_v1(not_found_url: str) -> None:
    line = error_line(["chat", "--model", "openai:gpt-4.1", "--base-url", not_found_url], "hello\n")
    assert not_found_url in line
    assert f"--base-url {not_found_url}/v1" in line, line
    assert "404" in line


def test_eval_against_a_base_url_without_v1_stops_at_once(not_found_url: str) -> None:
    line = error_line(
        ["eval", "--model", "openai:gpt-4.1", "--base-url", not_found_url, "--n", "1"]
    )
    assert f"--base-url {not_found_url}/v1" in line, line


def test_a_dead_port_names_the_url(closed_url: str) -> None:
    line = error_line(["chat", "--model", "openai:gpt-4.1", "--base-url", closed_url], "hello\n")
    assert closed_url in line, line
    assert "cannot connect" in line
    assert "--base-url" in line


def test_the_model_error_explanations() -> None:
    assert "try --base-url http://h:1/v1" in explain_model_error(
        "openai:m: NotFoundError: Error code: 404", "http://h:1/"
    )
    assert "serves this model" in explain_model_error(
        "openai:m: NotFoundError: Error code: 404", "http://h:1/v1"
    )
    assert "$OPENAI_API_KEY" in explain_model_error(
        "openai:m: AuthenticationError: Error code: 401", None
    )
    assert explain_model_error("openai:m: the reply has no choices", "http://h") == (
        "openai:m: the reply has no choices"
    )


@pytest.fixture
def tool_modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "untyped.py").write_text(
        "def word_count(text):\n    return len(text.split())\n\n"
        "def typed(text: str) -> int:\n    return len(text)\n\n"
        "def half(text: str, n):\n    return text\n"
    )
    (tmp_path / "syntaxbad.py").write_text("def f(:\n")
    (tmp_path / "raises.py").write_text("raise RuntimeError('needs $TOKEN')\n")
    (tmp_path / "exits.py").write_text("import sys\nsys.exit(3)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("untyped", "syntaxbad", "raises", "exits"):
        sys.modules.pop(name, None)
    return tmp_path


def test_an_untyped_tool_parameter_is_refused_with_the_fix(tool_modules: Path) -> None:
    with pytest.raises(ValidationError) as caught:
        load_tools("untyped:word_count")
    message = str(caught.value)
    assert "'text'" in message
    assert "word_count" in message
    assert "annotation" in message
    assert "text: str" in message, message
    with pytest.raises(ValidationError, match="'n'"):
        load_tools("untyped:half")
    (tool,) = load_tools("untyped:typed")
    assert tool.name == "typed"


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ("syntaxbad:f", "syntaxbad.py, line 1"),
        ("raises:f", "needs $TOKEN"),
        ("exits:f", "sys.exit"),
        ("nosuchmodule:f", "nosuchmodule"),
        ("untyped:nothing", "no attribute 'nothing'"),
        ("untyped", "module:attr"),
        ("os:path", "a function or a list of functions"),
    ],
)
def test_a_tools_module_that_fails_is_a_validation_error(
    spec: str, needle: str, tool_modules: Path
) -> None:
    with pytest.raises(ValidationError) as caught:
        load_tools(spec)
    assert needle in str(caught.value), str(caught.value)
    assert caught.value.field == "tools"


# --- the other mistakes, one per command -------------------------------------------


@dataclass(frozen=True)
class Mistake:
    args: tuple[str, ...]
    needles: tuple[str, ...]
    stdin: str = ""


MISTAKES: dict[str, Mistake] = {
    "db-typo-names-the-near-file": Mistake(
        ("sessions", "--db", "{dir}/wrok.db"), ("no such database", "did you mean", "work.db")
    ),
    "db-missing-says-how-to-create": Mistake(
        ("show", "--session", "demo", "--db", "{dir}/elsewhere/x.db"),
        ("no such database", "ctxline import"),
    ),
    "import-file-typo": Mistake(
        ("import", "{dir}/trajectroy.json", "--db", "{db}"),
        ("no such file", "did you mean", "trajectory.json"),
    ),
    "import-format-typo": Mistake(
        ("import", "{dir}/trajectory.json", "--format", "opnai", "--db", "{db}"),
        ("unknown format 'opnai'", "did you mean 'openai'?"),
    ),
    "replay-format-typo": Mistake(
        ("replay", "{dir}/trajectory.json", "--format", "tau_bench", "--db", ":memory:"),
        ("did you mean 'tau-bench'?",),
    ),
    "model-kind-typo": Mistake(
        ("eval", "--model", "opneai:gpt-4.1"), ("did you mean 'openai:gpt-4.1'?",)
    ),
    "model-without-kind": Mistake(
        ("chat", "--model", "gpt-4.1"), ("kind:name", "did you mean 'openai:gpt-4.1'?")
    ),
    "provider-typo": Mistake(
        ("prepare", "--session", "demo", "--provider", "openia", "--db", "{db}"),
        ("'openia' is not one of", "Did you mean 'openai'?"),
    ),
    "step-not-logged": Mistake(
        ("request", "--session", "demo", "--step", "7", "--db", "{db}"),
        ("no request step 7", "ctxline requests --session demo` with the same --db"),
    ),
    "step-zero": Mistake(
        ("request", "--session", "demo", "--step", "0", "--db", "{db}"), ("steps start at 1",)
    ),
    "timeline-typo": Mistake(
        ("show", "--session", "demo", "--timeline", "mian", "--db", "{db}"),
        ("no timeline 'mian'", "did you mean 'main'?"),
    ),
    "skills-folder-typo": Mistake(
        ("skills", "list", "--dir", "{dir}/skils"), ("no such skills folder", "did you mean")
    ),
    "tools-catalog-typo": Mistake(
        ("tools", "search", "git", "--catalog", "{dir}/catalgo.json"),
        ("no such catalog", "did you mean", "catalog.json"),
    ),
    "command-typo": Mistake(("sesions",), ("No such command", "sessions")),
    "memory-unknown-id": Mistake(
        ("memory", "show", "m-nope", "--db", "{db}"), ("no memory", "ctxline memory list")
    ),
}


@pytest.mark.parametrize("name", sorted(MISTAKES))
def test_each_mistake_says_what_to_do(name: str, db: str, tmp_path: Path) -> None:
    mistake = MISTAKES[name]
    (tmp_path / "trajectory.json").write_text('[{"role": "user", "content": "hi"}]')
    (tmp_path / "catalog.json").write_text('[{"name": "git_status"}]')
    (tmp_path / "skills").mkdir()
    args = [a.replace("{db}", db).replace("{dir}", str(tmp_path)) for a in mistake.args]
    line = error_line(args, mistake.stdin)
    for needle in mistake.needles:
        assert needle in line, (needle, line)


def test_close_matches_prefers_the_ids_the_typed_one_starts() -> None:
    known = ["run-1@replay1", "run-1@replay2", "run-2", "other"]
    assert close_matches(known, "run-1") == ["run-1@replay1", "run-1@replay2", "run-2"]
    assert close_matches(known, "nothing-like-it") == []
    assert close_matches([], "") == []


def test_run_refuses_an_untyped_tool_and_a_module_that_fails(
    tool_modules: Path, tmp_path: Path
) -> None:
    """``ctxline run --tools`` uses the same loader: exit 2 and the fix, not exit 1."""
    dbpath = str(tmp_path / "run.db")
    for spec, expected in (("untyped:word_count", "'text'"), ("raises:f", "needs $TOKEN")):
        line = error_line(
            ["run", "hi", "--model", "openai:gpt-4.1", "--tools", spec, "--db", dbpath]
        )
        assert expected in line, line


def test_run_against_a_base_url_without_v1_says_add_v1(not_found_url: str, tmp_path: Path) -> None:
    """A run prints its session line and summary first; it ends with exit 2 and the fix."""
    args = ["run", "hi", "--model", "openai:gpt-4.1", "--base-url", not_found_url,
            "--db", str(tmp_path / "run.db")]  # fmt: skip
    result = CliRunner(env={"COLUMNS": "200"}).invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 2, result.stderr
    last = [line for line in result.stderr.splitlines() if line.strip()][-1]
    assert last.startswith("error: "), result.stderr
    assert f"--base-url {not_found_url}/v1" in last, last
