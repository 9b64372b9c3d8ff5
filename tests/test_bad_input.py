"""Bad input to every command: one clear line, exit 2, no traceback, nothing written.

Why: the CLI is where hostile and careless input arrives — integers of 5,000 digits,
JSON nested a thousand deep, lines too long to hold, names with terminal escapes, a
two-session import whose second session conflicts, a mistyped ``--db``. Every case
here runs a real command in-process (``catch_exceptions=False``: an exception that
escaped would fail the test) against a copy of a small record, and checks: the exit
code (2; 3 for a request that cannot fit), one line on stderr starting ``error:``, no
``Traceback``, and the record byte-for-byte what it was (no partial write; no
database created at a mistyped path).

    .venv/bin/pytest tests/test_bad_input.py -q
"""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
from dataclasses import dataclass
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from ctxline.cli.main import main
from ctxline.cli.options import MAX_INT, FiniteFloat
from ctxline.record.events import AssistantMessage, ToolCall, ToolResult, UserMessage
from ctxline.record.store import SQLiteStore
from storage_env import ctxline

BIG = "9" * 5000
DEEP = "[" * 1000 + "]" * 1000
DEEP_100K = "[" * 100_000 + "]" * 100_000
DEEP_250 = "[" * 250 + "]" * 250
USER = '{"kind": "user.message", "text": "hi"}'


@dataclass(frozen=True)
class Case:
    args: tuple[str, ...]
    stdin: str | bytes = ""
    file: str | bytes | None = None
    needle: str = ""
    code: int = 2


def _line(extra: str) -> str:
    return '{"kind": "user.message", "text": "x", "meta": {"n": ' + extra + "}}\n"


F = "{file}"
FORMAT_BIG = {
    "openai": '[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok", "n": '
    + BIG
    + "}]",
    "tau-bench": '[{"task_id": 0, "reward": 1, "traj": [{"role": "user", "content": "hi", "n": '
    + BIG
    + "}]}]",
    "swe-agent": '{"history": [{"role": "user", "content": "x", "n": ' + BIG + "}]}",
    "mini-swe-agent": '{"trajectory_format": "mini-swe-agent-1", "info": {}, "messages": [{"role": "user", "content": "x", "n": '
    + BIG
    + "}]}",
    "claude-code": '{"type": "user", "uuid": "u1", "sessionId": "s", "message": {"role": "user", "content": "hi"}, "n": '
    + BIG
    + "}\n",
    "events": _line(BIG),
}
FORMAT_DEEP = {fmt: text.replace(BIG, DEEP) for fmt, text in FORMAT_BIG.items()} | {
    fmt + "-250": text.replace(BIG, DEEP_250) for fmt, text in FORMAT_BIG.items()
}

# fmt: off
CASES: dict[str, Case] = {}
for fmt, text in FORMAT_BIG.items():
    CASES[f"import-{fmt}-huge-integer"] = Case(("import", F, "--format", fmt), file=text, needle="5,000 digits")
    CASES[f"import-auto-{fmt}-huge-integer"] = Case(("import", F), file=text, needle="digits")
for fmt, text in FORMAT_DEEP.items():
    CASES[f"import-{fmt}-deep"] = Case(("import", F, "--format", fmt.removesuffix("-250")), file=text, needle="levels deep")
H = '{"kind": "ctxline.session", "session": "%s", "timeline": "main", "version": 1}\n'
OPENAI = "http://127.0.0.1:9"
CASES |= {
    "import-missing-file": Case(("import", "{missing}"), needle="no such file"),
    "import-empty-file": Case(("import", F), file="", needle="empty"),
    "import-not-json": Case(("import", F), file="hello there", needle="not JSON"),
    "import-broken-json": Case(("import", F, "--format", "openai"), file='[{"role": "user"', needle="invalid JSON"),
    "import-unknown-format": Case(("import", F, "--format", "yaml"), file="[]", needle="unknown format"),
    "import-events-bad-line": Case(("import", F, "--format", "events"), file=USER + "\n{oops\n", needle="line 2"),
    "import-events-array-line": Case(("import", F, "--format", "events"), file="[1, 2]\n", needle="JSON object"),
    "import-events-text-not-string": Case(("import", F, "--format", "events"), file='{"kind": "user.message", "text": 5}\n', needle="'text'"),
    "import-events-duplicate-id": Case(("import", F, "--format", "events"), file='{"kind": "user.message", "text": "a", "id": "x"}\n{"kind": "user.message", "text": "b", "id": "x"}\n', needle="twice"),
    "import-events-empty-session": Case(("import", F, "--format", "events"), file=H % "" + USER, needle="session"),
    "import-events-bad-version": Case(("import", F, "--format", "events"), file='{"kind": "ctxline.session", "session": "v", "version": -1}\n' + USER, needle="version"),
    "import-events-meta-not-object": Case(("import", F, "--format", "events"), file='{"kind": "ctxline.session", "session": "v", "meta": 3}\n' + USER, needle="meta"),
    "import-events-time-without-zone": Case(("import", F, "--format", "events"), file='{"kind": "user.message", "text": "a", "at": "2024-01-01T00:00:00"}\n', needle="zone"),
    "import-events-empty-kind": Case(("import", F, "--format", "events"), file='{"kind": "", "text": "a"}\n', needle="kind"),
    "import-events-bad-rule-op": Case(("import", F, "--format", "events"), file='{"kind": "rule", "rule_id": "r", "op": "delete"}\n', needle="'op'"),
    "import-events-bad-todo-status": Case(("import", F, "--format", "events"), file='{"kind": "todo", "op": "write", "items": [{"id": "1", "content": "c", "status": "maybe"}]}\n', needle="status"),
    "import-events-bad-expiry": Case(("import", F, "--format", "events"), file='{"kind": "rule", "rule_id": "r", "op": "set", "expires_at": "soon"}\n', needle="expires_at"),
    "import-events-empty-id": Case(("import", F, "--format", "events"), file='{"kind": "user.message", "text": "a", "id": ""}\n', needle="'id'"),
    "import-events-long-id": Case(("import", F, "--format", "events"), file='{"kind": "user.message", "text": "a", "id": "' + "i" * 2000 + '"}\n', needle="bytes"),
    "import-events-long-session": Case(("import", F, "--format", "events"), file=H % ("s" * 600) + USER, needle="bytes"),
    "import-events-escape-in-session": Case(("import", F, "--format", "events"), file=H % "\\u001b[31mred" + USER, needle="session name"),
    "import-events-long-call-id": Case(("import", F, "--format", "events"), file='{"kind": "assistant.message", "text": "", "tool_calls": [{"id": "' + "c" * 2000 + '", "name": "f", "arguments": {}}]}\n', needle="call_id"),
    "import-events-tool-calls-not-list": Case(("import", F, "--format", "events"), file='{"kind": "assistant.message", "text": "", "tool_calls": 7}\n', needle="tool_calls"),
    "import-second-session-conflicts": Case(("import", F, "--format", "events"), file=H % "fresh" + USER + "\n" + H % "demo" + '{"kind": "user.message", "text": "not what demo holds"}\n', needle="nothing was imported"),
    "import-folder-same-id-twice": Case(("import", "{dir}", "--format", "events"), needle="appears twice"),
    "import-file-over-the-limit": Case(("import", F, "--format", "events"), file=USER * 40, needle="per file"),
    "import-into-a-directory-db": Case(("import", F, "--db", "{dir}"), file=USER + "\n"),
    "import-into-a-text-file-db": Case(("import", F, "--db", "{notes}"), file=USER + "\n", needle="not a SQLite database"),
    "append-nothing": Case(("append", "--session", "demo"), needle="no events"),
    "append-only-blank-lines": Case(("append", "--session", "demo"), stdin="\n \n\t\n", needle="no events"),
    "append-only-a-header": Case(("append", "--session", "demo"), stdin=H % "demo", needle="no events"),
    "append-invalid-json": Case(("append", "--session", "demo"), stdin="{oops\n", needle="stdin, line 1"),
    "append-array": Case(("append", "--session", "demo"), stdin="[1]\n", needle="JSON object"),
    "append-huge-integer": Case(("append", "--session", "demo"), stdin=_line(BIG), needle="field 'n'"),
    "append-huge-negative-integer": Case(("append", "--session", "demo"), stdin=_line("-" + BIG), needle="digits"),
    "append-huge-integer-in-a-list": Case(("append", "--session", "demo"), stdin=_line("[1, 2, " + BIG + "]"), needle="digits"),
    "append-deep-1000": Case(("append", "--session", "demo"), stdin=_line(DEEP), needle="levels deep"),
    "append-deep-250": Case(("append", "--session", "demo"), stdin=_line(DEEP_250), needle="meta.n"),
    "append-deep-objects": Case(("append", "--session", "demo"), stdin=_line('{"a": ' * 300 + "1" + "}" * 300), needle="levels deep"),
    "append-second-line-bad": Case(("append", "--session", "demo"), stdin=USER + "\n" + _line(BIG), needle="line 2"),
    "append-last-of-many-bad": Case(("append", "--session", "demo"), stdin=(USER + "\n") * 50 + "{\n", needle="line 51"),
    "append-line-over-the-limit": Case(("append", "--session", "demo"), stdin='{"kind": "user.message", "text": "' + "x" * 5000 + '"}\n', needle="longer than"),
    "append-binary-garbage": Case(("append", "--session", "demo"), stdin=bytes(range(256)) + b"\n", needle="invalid JSON"),
    "append-unknown-session": Case(("append", "--session", "nope"), stdin=USER, needle="no session 'nope'"),
    "append-unknown-timeline": Case(("append", "--session", "demo", "--timeline", "nope"), stdin=USER, needle="no timeline"),
    "append-create-unknown-timeline": Case(("append", "--session", "new", "--create", "--timeline", "alt"), stdin=USER, needle="no timeline"),
    "append-stale-expected-seq": Case(("append", "--session", "demo", "--expected-seq", "1"), stdin=USER, needle="conflict"),
    "append-huge-expected-seq": Case(("append", "--session", "demo", "--expected-seq", "9" * 40), stdin=USER, needle="--expected-seq"),
    "append-expected-seq-not-a-number": Case(("append", "--session", "demo", "--expected-seq", "x"), stdin=USER, needle="--expected-seq"),
    "append-orphan-result": Case(("append", "--session", "demo"), stdin='{"kind": "tool.result", "call_id": "ghost", "content": "x"}\n', needle="ghost"),
    "append-reused-id": Case(("append", "--session", "demo"), stdin='{"kind": "user.message", "text": "other", "id": "u-1"}\n', needle="already stored"),
    "append-same-id-twice": Case(("append", "--session", "demo"), stdin='{"kind": "user.message", "text": "a", "id": "z"}\n{"kind": "user.message", "text": "b", "id": "z"}\n', needle="twice"),
    "append-no-kind": Case(("append", "--session", "demo"), stdin='{"text": "a"}\n', needle="kind"),
    "append-text-not-string": Case(("append", "--session", "demo"), stdin='{"kind": "user.message", "text": ["a"]}\n', needle="'text'"),
    "append-bad-time": Case(("append", "--session", "demo"), stdin='{"kind": "user.message", "text": "a", "at": "noon"}\n', needle="'at'"),
    "append-nul-in-id": Case(("append", "--session", "demo"), stdin='{"kind": "user.message", "text": "a", "id": "a\\u0000b"}\n', needle="NUL"),
    "append-nul-in-kind": Case(("append", "--session", "demo"), stdin='{"kind": "x\\u0000y"}\n', needle="kind"),
    "append-long-id": Case(("append", "--session", "demo"), stdin='{"kind": "user.message", "text": "a", "id": "' + "é" * 600 + '"}\n', needle="bytes"),
    "append-empty-session-name": Case(("append", "--session", "", "--create"), stdin=USER, needle="session"),
    "append-session-with-newline": Case(("append", "--session", "a\nb", "--create"), stdin=USER, needle="session"),
    "append-session-with-escape": Case(("append", "--session", "\x1b[31mred", "--create"), stdin=USER, needle="\\x1b"),
    "append-session-too-long": Case(("append", "--session", "s" * 600, "--create"), stdin=USER, needle="bytes"),
    "append-bad-db-url": Case(("append", "--session", "demo", "--db", "mysql://x"), stdin=USER, needle="unknown database URL"),
    "append-empty-db": Case(("append", "--session", "demo", "--db", ""), stdin=USER, needle="empty"),
    "append-db-is-a-directory": Case(("append", "--session", "demo", "--db", "{dir}"), stdin=USER),
    "append-db-is-a-text-file": Case(("append", "--session", "demo", "--db", "{notes}"), stdin=USER, needle="not a SQLite database"),
    "append-db-in-missing-folder": Case(("append", "--session", "x", "--create", "--db", "{missing}/sub/x.db"), stdin=USER),
    "sessions-missing-db": Case(("sessions", "--db", "{missing}"), needle="no such database"),
    "run-no-model": Case(("run", "hello"), needle="--model"),
    "run-unknown-model-kind": Case(("run", "hello", "--model", "nosuch:x"), needle="nosuch"),
    "run-missing-script": Case(("run", "hello", "--model", "script:{missing}/s.jsonl")),
    "run-bad-tools-spec": Case(("run", "hello", "--model", "script:{file}", "--tools", "no_such_module:attr"), file='{"text": "ok"}\n', needle="no_such_module"),
    "run-zero-turns": Case(("run", "hello", "--model", "script:{file}", "--max-turns", "0"), file='{"text": "ok"}\n', needle="0"),
    "run-bad-script-line": Case(("run", "hello", "--model", "script:{file}"), file="{oops\n", needle="line 1"),
    "mcp-missing-db": Case(("mcp", "--session", "demo", "--db", "{missing}")),
    "mcp-unknown-session": Case(("mcp", "--session", "nobody")),
    "mcp-no-session": Case(("mcp",), needle="--session"),
    "serve-missing-db": Case(("serve", "--db", "{missing}")),
    "serve-bad-port": Case(("serve", "--port", "70000"), needle="70000"),
    "serve-port-not-a-number": Case(("serve", "--port", "eighty"), needle="eighty"),
    "sessions-db-is-a-directory": Case(("sessions", "--db", "{dir}")),
    "sessions-db-is-a-text-file": Case(("sessions", "--db", "{notes}"), needle="not a SQLite database"),
    "sessions-bad-url": Case(("sessions", "--db", "postgres:/"), needle="no such database"),
    "export-unknown-session": Case(("export", "--session", "nope"), needle="no session"),
    "export-unknown-timeline": Case(("export", "--session", "demo", "--timeline", "nope"), needle="no timeline"),
    "export-missing-db": Case(("export", "--session", "demo", "--db", "{missing}"), needle="no such database"),
    "show-unknown-session": Case(("show", "--session", "nope"), needle="no session"),
    "show-unknown-timeline": Case(("show", "--session", "demo", "--timeline", "nope"), needle="no timeline"),
    "show-missing-db": Case(("show", "--session", "demo", "--db", "{missing}"), needle="no such database"),
    "show-width-not-a-number": Case(("show", "--session", "demo", "--width", "wide"), needle="--width"),
    "fork-beyond-the-head": Case(("fork", "--session", "demo", "--at", "99", "--name", "f"), needle="fork point"),
    "fork-negative": Case(("fork", "--session", "demo", "--at", "-1", "--name", "f"), needle="at_seq"),
    "fork-huge": Case(("fork", "--session", "demo", "--at", "9" * 30, "--name", "f"), needle="--at"),
    "fork-empty-name": Case(("fork", "--session", "demo", "--at", "1", "--name", ""), needle="timeline"),
    "fork-name-taken": Case(("fork", "--session", "demo", "--at", "1", "--name", "main"), needle="already exists"),
    "fork-unknown-session": Case(("fork", "--session", "nope", "--at", "0", "--name", "f"), needle="no session"),
    "fork-unknown-parent": Case(("fork", "--session", "demo", "--timeline", "nope", "--at", "0", "--name", "f"), needle="no timeline"),
    "prepare-unknown-session": Case(("prepare", "--session", "nope"), needle="no session"),
    "prepare-bad-now": Case(("prepare", "--session", "demo", "--now", "yesterday"), needle="--now"),
    "prepare-now-without-zone": Case(("prepare", "--session", "demo", "--now", "2026-01-01T00:00:00"), needle="zone"),
    "prepare-unknown-zone": Case(("prepare", "--session", "demo", "--tz", "Mars/Phobos"), needle="Mars/Phobos"),
    "prepare-negative-window": Case(("prepare", "--session", "demo", "--context-window", "-5"), needle="context_window"),
    "prepare-output-over-window": Case(("prepare", "--session", "demo", "--context-window", "1000", "--max-output", "5000")),
    "prepare-unknown-tokenizer": Case(("prepare", "--session", "demo", "--tokenizer", "nope"), needle="nope"),
    "prepare-window-too-small": Case(("prepare", "--session", "demo", "--context-window", "300", "--max-output", "10", "--tokenizer", "bytes"), code=3),
    "prepare-missing-db": Case(("prepare", "--session", "demo", "--db", "{missing}")),
    "requests-unknown-session": Case(("requests", "--session", "nope"), needle="no session"),
    "requests-missing-db": Case(("requests", "--session", "demo", "--db", "{missing}"), needle="no such database"),
    "request-step-0": Case(("request", "--session", "demo", "--step", "0"), needle="step"),
    "request-step-not-logged": Case(("request", "--session", "demo", "--step", "99"), needle="no request step 99"),
    "request-step-negative": Case(("request", "--session", "demo", "--step", "-3"), needle="step"),
    "request-unknown-session": Case(("request", "--session", "nope", "--step", "1"), needle="no session"),
    "request-missing-db": Case(("request", "--session", "demo", "--step", "1", "--db", "{missing}"), needle="no such database"),
    "blob-malformed-handle": Case(("blob", "md5:abc"), needle="malformed"),
    "blob-bad-hex": Case(("blob", "sha256:" + "g" * 64), needle="malformed"),
    "blob-missing": Case(("blob", "sha256:" + "0" * 64), needle="missing"),
    "blob-page-0": Case(("blob", "{ref}", "--page", "0"), needle="--page"),
    "blob-page-past-the-end": Case(("blob", "{ref}", "--page", "999")),
    "blob-missing-db": Case(("blob", "{ref}", "--db", "{missing}"), needle="no such database"),
    "search-no-words": Case(("search", "--session", "demo", "!!! ..."), needle="no words"),
    "search-empty": Case(("search", "--session", "demo", ""), needle="no words"),
    "search-limit-0": Case(("search", "--session", "demo", "plan", "--limit", "0"), needle="limit"),
    "search-limit-huge": Case(("search", "--session", "demo", "plan", "--limit", "1000"), needle="limit"),
    "search-unknown-session": Case(("search", "--session", "nope", "plan"), needle="no session"),
    "search-unknown-timeline": Case(("search", "--session", "demo", "--timeline", "nope", "plan"), needle="no timeline"),
    "search-missing-db": Case(("search", "--session", "demo", "plan", "--db", "{missing}"), needle="no such database"),
    "doctor-missing-db": Case(("doctor", "--db", "{missing}"), needle="no such database"),
    "doctor-bad-url": Case(("doctor", "--db", "mysql://x"), needle="unknown database URL"),
    "doctor-text-file": Case(("doctor", "--db", "{notes}"), needle="problem"),
    "doctor-directory": Case(("doctor", "--db", "{dir}")),
    "replay-missing-path": Case(("replay", "{missing}", "--db", ":memory:"), needle="no such file"),
    "replay-empty-file": Case(("replay", F, "--db", ":memory:"), file="", needle="empty"),
    "replay-unknown-format": Case(("replay", F, "--format", "yaml", "--db", ":memory:"), file="[]", needle="format"),
    "replay-huge-integer": Case(("replay", F, "--format", "openai", "--db", ":memory:"), file=FORMAT_BIG["openai"], needle="digits"),
    "replay-deep": Case(("replay", F, "--format", "openai", "--db", ":memory:"), file=FORMAT_DEEP["openai"], needle="deep"),
    "replay-bad-pressure": Case(("replay", F, "--pressure", "5", "--db", ":memory:"), file=FORMAT_BIG["openai"].replace(BIG, "1")),
    "replay-bad-window": Case(("replay", F, "--context-window", "0", "--db", ":memory:"), file=FORMAT_BIG["openai"].replace(BIG, "1")),
    "replay-unknown-zone": Case(("replay", F, "--status", "replace", "--tz", "No/Where", "--db", ":memory:"), file=FORMAT_BIG["openai"].replace(BIG, "1"), needle="No/Where"),
    "eval-unknown-model-kind": Case(("eval", "--model", "nope:x"), needle="nope"),
    "eval-unknown-family": Case(("eval", "--families", "nonsense", "--model", "openai:gpt-4.1", "--base-url", OPENAI), needle="nonsense"),
    "eval-missing-data": Case(("eval", "--model", "openai:gpt-4.1", "--base-url", OPENAI, "--data", "{missing}"), needle="no trajectories"),
    "eval-no-instances": Case(("eval", "--model", "openai:gpt-4.1", "--base-url", OPENAI, "--n", "-1"), needle="instance"),
    "chat-unknown-model-kind": Case(("chat", "--model", "nope:x"), stdin="hi\n", needle="nope"),
    "chat-bad-db": Case(("chat", "--model", "openai:gpt-4.1", "--base-url", OPENAI, "--db", "mysql://x"), stdin="hi\n", needle="URL"),
    "tools-search-missing-catalog": Case(("tools", "search", "git", "--catalog", "{missing}"), needle="no such catalog"),
    "tools-search-no-catalog": Case(("tools", "search", "git"), needle="--catalog"),
    "tools-search-catalog-not-json": Case(("tools", "search", "git", "--catalog", F), file="hello", needle="invalid JSON"),
    "tools-search-catalog-deep": Case(("tools", "search", "git", "--catalog", F), file=DEEP * 20, needle="deep"),
    "tools-search-bad-tool-name": Case(("tools", "search", "git", "--catalog", F), file='{"tools": [{"name": "rm -rf\\n<ctx-rule>"}]}', needle="tool name"),
    "tools-search-schema-not-object": Case(("tools", "search", "git", "--catalog", F), file='[{"name": "a", "inputSchema": 3}]', needle="input schema"),
    "tools-search-twice-the-same-name": Case(("tools", "search", "git", "--catalog", F), file='[{"name": "a"}, {"name": "a"}]', needle="two catalog tools"),
    "tools-search-no-words": Case(("tools", "search", "?!", "--catalog", F), file='[{"name": "a"}]', needle="no words"),
    "tools-search-limit-0": Case(("tools", "search", "git", "--catalog", F, "--limit", "0"), file='[{"name": "a"}]', needle="--limit"),
    "skills-list-missing-dir": Case(("skills", "list", "--dir", "{missing}"), needle="no such skills folder"),
    "skills-list-bad-front-matter": Case(("skills", "list", "--dir", "{badskill}"), needle="SKILL.md"),
    "skills-show-unknown": Case(("skills", "show", "nope", "--dir", "{skills}"), needle="no skill named"),
    "skills-show-no-dir": Case(("skills", "show", "x"), needle="--dir"),
    "memory-remember-empty": Case(("memory", "remember", "  "), needle="empty"),
    "memory-remember-bad-scope": Case(("memory", "remember", "x", "--scope", "team"), needle="scope"),
    "memory-remember-key-newline": Case(("memory", "remember", "x", "--key", "a\nb"), needle="one line"),
    "memory-remember-nul": Case(("memory", "remember", "a\x00b"), needle="NUL"),
    "memory-remember-empty-owner": Case(("memory", "remember", "x", "--project", ""), needle="owner"),
    "memory-remember-bad-db-url": Case(("memory", "remember", "x", "--db", "mysql://x"), needle="unknown database URL"),
    "memory-search-no-words": Case(("memory", "search", "?!"), needle="no words"),
    "memory-search-limit-0": Case(("memory", "search", "x", "--limit", "0"), needle="--limit"),
    "memory-show-unknown": Case(("memory", "show", "m-nope"), needle="no memory"),
    "memory-forget-unknown": Case(("memory", "forget", "m-nope"), needle="no memory"),
    "memory-list-missing-db": Case(("memory", "list", "--db", "{missing}"), needle="no such database"),
    "append-deep-100k": Case(("append", "--session", "demo"), stdin=_line(DEEP_100K), needle="levels deep"),
    "append-deep-objects-100k": Case(("append", "--session", "demo"), stdin=_line('{"a": ' * 100_000 + "1" + "}" * 100_000), needle="levels deep"),
    "import-events-deep-100k": Case(("import", F, "--format", "events"), file=_line(DEEP_100K), needle="levels deep"),
    "import-openai-deep-100k": Case(("import", F, "--format", "openai"), file=FORMAT_BIG["openai"].replace(BIG, DEEP_100K), needle="deep"),
    "replay-deep-100k": Case(("replay", F, "--db", ":memory:"), file=FORMAT_BIG["openai"].replace(BIG, DEEP_100K), needle="deep"),
    "tools-search-catalog-deep-100k": Case(("tools", "search", "git", "--catalog", F), file='[{"name": "a", "inputSchema": ' + '{"a": ' * 100_000 + "1" + "}" * 100_000 + "}]", needle="deep"),
    "run-script-deep-100k": Case(("run", "hello", "--model", "script:{file}"), file='{"text": ' + DEEP_100K + "}\n", needle="--model script:"),
    "chat-script-deep-100k": Case(("chat", "--model", "script:{file}"), file='{"text": ' + DEEP_100K + "}\n", needle="nested too deeply"),
    "eval-script-deep-100k": Case(("eval", "--model", "script:{file}"), file='{"text": ' + DEEP_100K + "}\n", needle="nested too deeply"),
    "doctor-cache-claude-deep-100k": Case(("doctor", "--cache", F), file='{"type": "assistant", "message": ' + DEEP_100K + "}\n", needle="deep"),
    "skills-list-deep-yaml": Case(("skills", "list", "--dir", "{deepskill}"), needle="nested too deeply"),
    "run-max-cost-nan": Case(("run", "hello", "--model", "script:{file}", "--max-cost", "nan"), file='{"text": "ok"}\n', needle="--max-cost"),
    "run-max-cost-inf": Case(("run", "hello", "--model", "script:{file}", "--max-cost", "inf"), file='{"text": "ok"}\n', needle="--max-cost"),
    "run-huge-turns": Case(("run", "hello", "--model", "script:{file}", "--max-turns", BIG[:40]), file='{"text": "ok"}\n', needle="--max-turns"),
    "replay-write-premium-huge": Case(("replay", F, "--write-premium", "1e308", "--db", ":memory:"), file=FORMAT_BIG["openai"].replace(BIG, "1"), needle="--write-premium"),
    "replay-alpha-nan": Case(("replay", F, "--alpha", "nan", "--db", ":memory:"), file=FORMAT_BIG["openai"].replace(BIG, "1"), needle="--alpha"),
    "replay-pressure-nan": Case(("replay", F, "--pressure", "nan", "--db", ":memory:"), file=FORMAT_BIG["openai"].replace(BIG, "1"), needle="--pressure"),
    "eval-huge-n": Case(("eval", "--model", "script:{file}", "--n", "10000000000"), file='{"text": "ok"}\n', needle="--n"),
    "show-huge-width": Case(("show", "--session", "demo", "--width", BIG[:30]), needle="--width"),
    "unknown-command": Case(("frobnicate",), needle="No such command"),
    "unknown-option": Case(("sessions", "--frob"), needle="No such option"),
}
# fmt: on


def _digest(db: Path) -> str:
    """Every row of the record, hashed (the same digest means nothing was written)."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    h = hashlib.sha256()
    for (table,) in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
    ):
        for row in sorted(repr(r) for r in conn.execute(f'SELECT * FROM "{table}"')):
            h.update(row.encode())
    conn.close()
    return h.hexdigest()


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    folder = tmp_path_factory.mktemp("template")
    db = folder / "demo.db"
    store = SQLiteStore(db)
    store.create_session("demo")
    call = AssistantMessage("", (ToolCall("c1", "lookup", {"user": "mia"}),))
    from ctxline.record.events import Pending

    output = "plan: pro\n" * 300
    ref = store.blobs.put(output.encode())
    store.append(
        "demo", [Pending(UserMessage("Cancel my plan"), id="u-1"), call, ToolResult("c1", output)]
    )
    store.close()
    result = CliRunner().invoke(
        main, ["prepare", "--session", "demo", "--db", str(db), "--tokenizer", "bytes"]
    )
    assert result.exit_code == 0, result.stderr
    return db, ref


@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_input_is_one_line_exit_2_and_writes_nothing(
    name: str, template: tuple[Path, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    case = CASES[name]
    db = tmp_path / "demo.db"
    shutil.copyfile(template[0], db)
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "a.jsonl").write_text(H % "twin" + USER + "\n")
    (folder / "b.jsonl").write_text(H % "twin" + '{"kind": "user.message", "text": "other"}\n')
    notes = tmp_path / "notes.txt"
    notes.write_text("my precious notes\n")
    file = tmp_path / ("input.jsonl" if "events" in name or "claude" in name else "input.json")
    if case.file is not None:
        file.write_bytes(case.file.encode() if isinstance(case.file, str) else case.file)
    if "over-the-limit" in name:  # the real limits are hundreds of MB: lower them for the test
        monkeypatch.setattr("ctxline.importers._common.MAX_FILE_BYTES", 100)
        monkeypatch.setattr("ctxline.cli.common.MAX_LINE_BYTES", 1000)
    deep_skill = tmp_path / "deepskills" / "deep"
    deep_skill.mkdir(parents=True)
    (deep_skill / "SKILL.md").write_text(
        "---\nname: deep\ndescription: " + "[" * 5000 + "1" + "]" * 5000 + "\n---\nbody\n"
    )
    broken = tmp_path / "badskills" / "broken"
    broken.mkdir(parents=True)
    (broken / "SKILL.md").write_text("---\nname: broken\ndescription: [unclosed\n---\nbody\n")
    fill = {
        "{badskill}": str(broken.parent),
        "{deepskill}": str(deep_skill.parent),
        "{skills}": str(Path(__file__).parent / "data" / "skills"),
        "{file}": str(file),
        "{missing}": str(tmp_path / "typo"),
        "{dir}": str(folder),
        "{notes}": str(notes),
        "{ref}": template[1],
    }
    args = []
    for a in case.args:
        for key, value in fill.items():
            a = a.replace(key, value)
        args.append(a)
    if "--db" not in args and args[0] not in ("eval", "frobnicate", "tools", "skills"):
        args += ["--db", str(db)]
    before = _digest(db)
    stdin = case.stdin.encode() if isinstance(case.stdin, str) else case.stdin
    result = CliRunner(env={"COLUMNS": "200"}).invoke(
        main, args, input=stdin, catch_exceptions=False
    )
    err = result.stderr
    assert result.exit_code == case.code, (args[:6], result.exit_code, err, result.stdout[-300:])
    assert "Traceback" not in err + result.stdout
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("error: "), err
    assert case.needle in err, (case.needle, err)
    assert _digest(db) == before, "the record changed"  # a refused step writes nothing
    assert notes.read_text() == "my precious notes\n"
    assert not (tmp_path / "typo").exists(), "a database was created at a mistyped path"


def test_there_are_enough_cases_over_every_command() -> None:
    commands = {c.args[0] for c in CASES.values() if not c.args[0].startswith("{")}
    listed = set(main.commands)
    assert listed <= commands | {"frobnicate"}, listed - commands
    assert len(CASES) >= 100


def test_the_real_command_never_shows_a_traceback_and_debug_does(tmp_path: Path) -> None:
    db = tmp_path / "x.db"
    for stdin in (_line(BIG), _line(DEEP), _line(DEEP_250)):
        result = ctxline(
            "append", "--session", "s", "--create", "--db", str(db), stdin=stdin.encode()
        )
        assert result.returncode == 2, result.stderr
        assert b"Traceback" not in result.stderr
        assert result.stderr.count(b"\n") == 1
    assert not db.exists()
    debug = ctxline("--debug", "export", "--session", "s", "--db", str(db))
    assert debug.returncode == 2
    assert b"Traceback" in debug.stderr
    assert b"(nothing was created)" in debug.stderr.splitlines()[-1]
    env = ctxline("export", "--session", "s", "--db", str(db), env={"CTXLINE_DEBUG": "1"})
    assert b"Traceback" in env.stderr


def test_an_unexpected_error_is_one_line_exit_1(
    template: tuple[Path, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bug (here: a store method that breaks) is still one line, with the --debug hint."""
    db = tmp_path / "demo.db"
    shutil.copyfile(template[0], db)

    def broken(*_args: object, **_kwargs: object) -> None:
        raise ZeroDivisionError("simulated bug")

    monkeypatch.setattr(SQLiteStore, "sessions", broken)
    result = CliRunner().invoke(main, ["sessions", "--db", str(db)], catch_exceptions=False)
    assert result.exit_code == 1
    assert result.stderr.startswith("error: unexpected ZeroDivisionError: simulated bug")
    assert "--debug" in result.stderr
    assert result.stderr.count("\n") == 1
    assert "--debug" in CliRunner().invoke(main, ["--help"]).stdout


# --- hostile numbers in every numeric option -----------------------------------------

HOSTILE_FLOATS = ("nan", "NaN", "-nan", "inf", "-inf", "Infinity", "1e400", "-1e400", "9" * 400)
HOSTILE_INTS = ("9" * 20, "-" + "9" * 20, "9" * 5000, "nan", "inf", "1e3", "0x10", "1.5", "")


def _numeric_options() -> list[tuple[tuple[str, ...], str, str]]:
    """(command path, option, kind) for every numeric option of every command."""
    out: list[tuple[tuple[str, ...], str, str]] = []

    def walk(command: click.Command, path: tuple[str, ...]) -> None:
        if isinstance(command, click.Group):
            for name, sub in sorted(command.commands.items()):
                walk(sub, (*path, name))
            return
        for param in command.params:
            if not isinstance(param, click.Option):
                continue
            if isinstance(param.type, click.types.FloatParamType | click.FloatRange):
                out.append((path, param.opts[0], "float"))
            elif isinstance(param.type, click.types.IntParamType | click.IntRange):
                out.append((path, param.opts[0], "int"))

    walk(main, ())
    return out


NUMERIC = _numeric_options()


def test_every_numeric_option_is_finite_and_bounded() -> None:
    """Every float option refuses NaN and infinities and every integer option has both
    bounds: the class of 'hostile number → exit 1' is closed for options added later too."""
    assert len(NUMERIC) >= 30
    for path, option, kind in NUMERIC:
        command: click.Command = main
        for name in path:
            assert isinstance(command, click.Group)
            command = command.commands[name]
        (param,) = [
            p for p in command.params if isinstance(p, click.Option) and p.opts[0] == option
        ]
        if kind == "float":
            assert isinstance(param.type, FiniteFloat), (path, option, param.type)
        else:
            assert isinstance(param.type, click.IntRange), (path, option, param.type)
            assert param.type.min is not None, (path, option)
            assert param.type.max is not None, (path, option)
            assert param.type.max <= MAX_INT, (path, option)


@pytest.mark.parametrize(
    ("path", "option", "value"),
    [
        (path, option, value)
        for path, option, kind in NUMERIC
        for value in (HOSTILE_FLOATS if kind == "float" else HOSTILE_INTS)
    ],
)
def test_a_hostile_number_is_exit_2_naming_the_option(
    path: tuple[str, ...], option: str, value: str
) -> None:
    """The option comes first on the line, so click checks it before anything else."""
    result = CliRunner().invoke(main, [*path, option, value], catch_exceptions=False)
    assert result.exit_code == 2, (path, option, value, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    assert f"'{option}'" in lines[0], lines[0]


def test_a_tools_module_with_a_syntax_error_is_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "broken_tools.py").write_text("def f(:\n")
    (tmp_path / "s.jsonl").write_text('{"text": "ok"}\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    result = CliRunner().invoke(
        main,
        [
            "run",
            "hi",
            "--model",
            f"script:{tmp_path / 's.jsonl'}",
            "--db",
            ":memory:",
            "--tools",
            "broken_tools:f",
        ],
        catch_exceptions=False,
    )
    assert result.exit_code == 2, result.stderr
    assert "broken_tools.py, line 1" in result.stderr
    assert result.stderr.count("\n") == 1


# --- damaged metadata, untrusted text in tables, skills confinement -----------------


def test_show_on_corrupt_session_metadata_is_exit_2_naming_it(
    template: tuple[Path, str], tmp_path: Path
) -> None:
    db = tmp_path / "demo.db"
    shutil.copyfile(template[0], db)
    conn = sqlite3.connect(db)
    conn.execute("UPDATE sessions SET meta = '{not json' WHERE id = 'demo'")
    conn.commit()
    conn.close()
    for command in (["show"], ["export"]):
        result = CliRunner().invoke(
            main, [*command, "--session", "demo", "--db", str(db)], catch_exceptions=False
        )
        assert result.exit_code == 2, (command, result.exit_code, result.stdout[:300])
        assert "session 'demo'" in result.stderr
        assert "doctor" in result.stderr
        assert result.stderr.count("\n") == 1


SEPARATORS = ("\u2028", "\u2029", "\x85", "\x1b[31m", "\u202e", "\x07")


@pytest.mark.parametrize("sep", SEPARATORS)
def test_skills_list_escapes_line_separators_and_controls(sep: str, tmp_path: Path) -> None:
    skill = tmp_path / "skills" / "notes"
    skill.mkdir(parents=True)
    escaped = "".join(f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}" for c in sep)
    (skill / "SKILL.md").write_text(
        f'---\nname: notes\ndescription: "first{escaped}second"\n---\nbody\n'
    )
    result = CliRunner().invoke(main, ["skills", "list", "--dir", str(tmp_path / "skills")])
    assert result.exit_code == 0, result.stderr
    assert sep not in result.stdout
    assert sep[0] not in result.stdout
    assert result.stdout.count("\n") == 1
    assert "first\\" in result.stdout


@pytest.mark.parametrize("sep", SEPARATORS)
def test_tables_escape_untrusted_text(sep: str, tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    store = SQLiteStore(db)
    store.create_session("s")
    store.append("s", [UserMessage(f"one{sep}two [bold]markup[/bold]")])
    store.close()
    result = CliRunner(env={"COLUMNS": "200"}).invoke(
        main, ["show", "--session", "s", "--db", str(db)]
    )
    assert result.exit_code == 0, result.stderr
    assert sep[0] not in result.stdout
    assert "[bold]markup[/bold]" in result.stdout  # shown as typed, not read as markup


def _skill(folder: Path, name: str) -> None:
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: d\n---\nsecret body\n")


def test_a_skill_folder_symlinked_out_of_the_skills_folder_is_refused(tmp_path: Path) -> None:
    _skill(tmp_path / "outside" / "leak", "leak")
    skills = tmp_path / "skills"
    _skill(skills / "fine", "fine")
    (skills / "leak").symlink_to(tmp_path / "outside" / "leak", target_is_directory=True)
    result = CliRunner().invoke(main, ["skills", "show", "leak", "--dir", str(skills)])
    assert result.exit_code == 2, result.stdout
    assert "secret body" not in result.stdout
    assert "symlink" in result.stderr
    assert "outside" in result.stderr
    assert result.stderr.count("\n") == 1


def test_a_skill_file_symlinked_out_of_its_folder_is_refused(tmp_path: Path) -> None:
    _skill(tmp_path / "outside" / "leak", "leak")
    skills = tmp_path / "skills"
    (skills / "leak").mkdir(parents=True)
    (skills / "leak" / "SKILL.md").symlink_to(tmp_path / "outside" / "leak" / "SKILL.md")
    for args in (["skills", "list"], ["skills", "show", "leak"]):
        result = CliRunner().invoke(main, [*args, "--dir", str(skills)])
        assert result.exit_code == 2, (args, result.stdout)
        assert "secret body" not in result.stdout
        assert "symlink" in result.stderr


def test_a_symlink_inside_the_skills_folder_still_loads(tmp_path: Path) -> None:
    skills = tmp_path / "skills"
    _skill(skills / "real", "real")
    (skills / "store").mkdir()
    _skill(skills / "store" / "alias", "alias")
    (skills / "alias").symlink_to(skills / "store" / "alias", target_is_directory=True)
    result = CliRunner().invoke(main, ["skills", "list", "--dir", str(skills)])
    assert result.exit_code == 0, result.stderr
    assert "alias: d" in result.stdout
    assert "real: d" in result.stdout


def test_no_help_text_prints_the_64_bit_bounds_an_option_did_not_ask_for() -> None:
    """Unbounded integer options are held to 64 bits quietly: their help shows INTEGER and
    no range; an option's own bound still shows, without the 64-bit side."""
    for path in {p for p, _, _ in NUMERIC}:
        result = CliRunner().invoke(
            main, [*path, "--help"], catch_exceptions=False, terminal_width=200
        )
        assert result.exit_code == 0, path
        assert str(MAX_INT)[:10] not in result.output, path
    shown = CliRunner().invoke(main, ["show", "--help"], terminal_width=200).output
    assert "--limit INTEGER RANGE" in shown
    assert "[x>=1]" in shown
    prepared = CliRunner().invoke(main, ["prepare", "--help"], terminal_width=200).output
    assert "--context-window INTEGER " in prepared
    assert "[default: 128000]" in prepared


def test_an_integer_past_64_bits_is_refused_with_what_was_expected() -> None:
    result = CliRunner().invoke(
        main, ["prepare", "--context-window", str(2**63), "--session", "x"], catch_exceptions=False
    )
    assert result.exit_code == 2
    assert f"{2**63} is not a 64-bit integer" in result.output
    assert "--context-window" in result.output
