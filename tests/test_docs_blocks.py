"""Every code block of README.md and docs/*.md runs as written, or says why not (issue 23).

A newcomer copies a block and runs it. So each fenced block is extracted and checked:

- ```python blocks run as a script (the repo's Python, a fresh temporary folder holding
  links to the clone's ``examples/``, ``benchmarks/``, ``docs/`` and ``tests/``, a timeout, no API
  key in the environment); a model, where one is needed, is the scripted one;
- ```bash / sh / console / shell blocks: each ``ctxline …`` command names commands and
  options the CLI has (``--help``-level validity), each ``python FILE`` names a file of
  the clone, each ``pip install`` names extras ``pyproject.toml`` declares;
- ```json blocks parse (as one value, or as JSON Lines);
- blocks without a language (or ``text``) are output and diagrams: shown, not run.

A block that cannot run as written is preceded by an HTML comment line
``<!-- not-runnable: REASON -->`` and, right above it, the same reason shown to the
reader: ``*Not runnable as written: REASON*``. Such a block is not collected as a test;
:func:`test_every_block_that_does_not_run_says_why_to_the_reader` checks its reason.

    pytest tests/test_docs_blocks.py -k memory.md     # the blocks of docs/memory.md
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import click
import pytest

from ctxline.cli.main import main

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
LINKED = ("examples", "benchmarks", "docs", "tests")
"""Folders of the clone a block may read (relative paths work as from the clone's root)."""
TIMEOUT = 60

_FENCE = re.compile(r"^(`{3,}|~{3,})\s*([\w+-]*)")
_MARK = re.compile(r"^<!--\s*not-runnable:\s*(.*?)\s*-->\s*$")
_SHOWN = re.compile(r"^\*Not runnable as written: (.+)\*\s*$")
SHELL = ("bash", "sh", "console", "shell")
SCRIPTS = {"agent.py"}
"""Scripts a doc shows whole before running them (the README's agent)."""


@dataclass(frozen=True, slots=True)
class Block:
    path: Path
    line: int
    """The line of the opening fence (1-based)."""
    lang: str
    code: str
    reason: str | None = None
    """The reason given in ``<!-- not-runnable: … -->`` (None: the block must run)."""
    shown: str | None = None
    """The reason shown to the reader on the line above the comment."""

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(REPO)}:{self.line}"


def blocks(path: Path) -> list[Block]:
    lines = path.read_text(encoding="utf-8").split("\n")
    found: list[Block] = []
    i = 0
    while i < len(lines):
        match = _FENCE.match(lines[i])
        if match is None:
            i += 1
            continue
        fence, lang = match.group(1), match.group(2).lower()
        end = i + 1
        while end < len(lines) and not lines[end].startswith(fence):
            end += 1
        mark = _MARK.match(lines[i - 1]) if i >= 1 else None
        shown = _SHOWN.match(lines[i - 2]) if mark is not None and i >= 2 else None
        found.append(
            Block(
                path,
                i + 1,
                lang,
                "\n".join(lines[i + 1 : end]) + "\n",
                mark.group(1) if mark else None,
                shown.group(1) if shown else None,
            )
        )
        i = end + 1
    return found


ALL = [b for path in DOCS for b in blocks(path)]
RUN = [b for b in ALL if b.reason is None]


def _ids(kind: tuple[str, ...]) -> list[Block]:
    return [b for b in RUN if b.lang in kind]


def test_the_docs_have_blocks_and_most_run() -> None:
    assert len(ALL) >= 40, [b.where for b in ALL]
    assert len(_ids(("python",))) >= 8


def test_every_block_that_does_not_run_says_why_to_the_reader() -> None:
    for block in ALL:
        if block.reason is None:
            continue
        assert block.reason, f"{block.where}: <!-- not-runnable: --> gives no reason"
        assert block.shown == block.reason, (
            f"{block.where}: the line above <!-- not-runnable: {block.reason} --> must show"
            f" the reason to the reader: *Not runnable as written: {block.reason}*"
        )


# --- python ----------------------------------------------------------------------------


def _environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    src = str(REPO / "src")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH", "")) if p)
    env["PYTHONWARNINGS"] = "error"
    return env


@pytest.mark.parametrize("block", _ids(("python", "py")), ids=lambda b: b.where)
def test_a_python_block_runs_as_written(block: Block, tmp_path: Path) -> None:
    for name in LINKED:
        (tmp_path / name).symlink_to(REPO / name, target_is_directory=True)
    script = tmp_path / "block.py"
    script.write_text(block.code, encoding="utf-8")
    try:
        done = subprocess.run(
            [sys.executable, script.name],
            cwd=tmp_path,
            env=_environment(),
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{block.where}: the block ran for more than {TIMEOUT} s")
    if done.returncode != 0:
        error = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        pytest.fail(f"{block.where}: exit {done.returncode}: {error}\n{done.stderr[-3000:]}")


# --- shell -----------------------------------------------------------------------------


def _commands(code: str) -> list[list[str]]:
    """The commands of a shell block: prompts and comments dropped, continuations joined,
    split at ``&&``, ``||``, ``|`` and ``;``."""
    joined = re.sub(r"\\\n", " ", code)
    out: list[list[str]] = []
    for raw in joined.split("\n"):
        line = raw.strip()
        if line.startswith("$ "):
            line = line[2:]
        if not line or line.startswith("#"):
            continue
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        lexer.commenters = "#"
        words: list[str] = []
        for token in lexer:
            if token in ("&&", "||", "|", ";", ">", ">>", "<", "2>", "&"):
                if words:
                    out.append(words)
                words = []
            else:
                words.append(token)
        if words:
            out.append(words)
    return out


def _env_prefix(words: list[str]) -> list[str]:
    while words and re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]):
        words = words[1:]
    return words


def _check_ctxline(words: list[str]) -> str | None:
    """What is wrong with a ``ctxline …`` command line (None: the CLI accepts its shape)."""
    command: click.Command = main
    args = words[1:]
    path = ["ctxline"]
    while isinstance(command, click.Group) and args and not args[0].startswith("-"):
        sub = command.get_command(click.Context(command), args[0])
        if sub is None:
            return f"{' '.join(path)} has no command {args[0]!r}"
        path.append(args[0])
        command, args = sub, args[1:]
    known = {opt for p in command.params for opt in (*p.opts, *p.secondary_opts)}
    known.add("--help")
    for arg in args:
        if arg.startswith("-") and arg != "-" and not re.match(r"^-\d", arg):
            name = arg.split("=", 1)[0]
            if name not in known:
                return f"{' '.join(path)} has no option {name} (it has {sorted(known)})"
    return None


def _extras() -> set[str]:
    data = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    return set(data["project"].get("optional-dependencies", {}))


def _check(words: list[str]) -> str | None:
    words = _env_prefix(words)
    if not words:
        return None
    exe = words[0].rsplit("/", 1)[-1]
    if exe == "ctxline":
        return _check_ctxline(words)
    script = words[1] if exe in ("python", "python3") and len(words) > 1 else ""
    if script.endswith(".py") and not (REPO / script).exists() and script not in SCRIPTS:
        return f"{script} is not a file of the clone"
    if exe == "pip" and "install" in words:
        extras = _extras()
        for word in words:
            for group in re.findall(r"\[([\w,-]+)\]", word):
                unknown = set(group.split(",")) - extras
                if unknown:
                    return f"pyproject.toml declares no extra {sorted(unknown)}"
    return None


@pytest.mark.parametrize("block", _ids(SHELL), ids=lambda b: b.where)
def test_a_shell_block_names_commands_and_options_that_exist(block: Block) -> None:
    problems = [p for words in _commands(block.code) if (p := _check(words)) is not None]
    assert not problems, f"{block.where}: " + "; ".join(problems)


# --- json ------------------------------------------------------------------------------


@pytest.mark.parametrize("block", _ids(("json",)), ids=lambda b: b.where)
def test_a_json_block_parses(block: Block) -> None:
    decoder, text, at = json.JSONDecoder(), block.code, 0
    while text[at:].strip():  # one value, or several one after the other (JSON Lines)
        at += len(text[at:]) - len(text[at:].lstrip())
        try:
            at = decoder.raw_decode(text, at)[1]
        except ValueError as exc:
            line = block.line + text.count("\n", 0, at) + 1
            pytest.fail(f"{block.path.relative_to(REPO)}:{line}: not JSON: {exc}")
