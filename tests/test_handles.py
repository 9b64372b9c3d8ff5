"""Every handle a view shows reads back, whichever path appended the result.

A preview says "the full output is saved; read it with read_result(handle=…)". That
promise must hold for results appended by ``Context.append``, by ``ctxline append``,
by ``ctxline import`` of every format, and by ``ctxline replay`` — and for results the
ladder trims later, which may be short. The tests enumerate the ``sha256:`` handles in
the rendered views and read each one back through the ``read_result`` tool and through
``ctxline blob``.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from conftest import REPO
from ctxline import AssistantMessage, Context, PrepareOptions, ToolCall, ToolResult, UserMessage
from ctxline.cli.main import main
from ctxline.importers import load_tree
from ctxline.record.events import ToolResult as Result
from ctxline.record.store import SQLiteStore, Store
from json_reads_b import at, at_array

HANDLE = re.compile(r"sha256:[0-9a-f]{64}")
SMALL = PrepareOptions(context_window=6_000, max_output=1_000, offload_tokens=200, fresh_tokens=200)
LONG = "\n".join(f"line {i}: " + "payload " * 12 for i in range(400))


def _cli(*args: str, stdin: str | None = None) -> str:
    result = CliRunner(env={"COLUMNS": "200"}).invoke(main, list(args), input=stdin, catch_exceptions=False)
    assert result.exit_code == 0, (args, result.output)
    return result.stdout


def _handles(store: Store, session: str, *, options: PrepareOptions = SMALL) -> set[str]:
    """The handles in the view of the session's next request (logged, then a dry run)."""
    ctx = Context(store, session, options=options, create=False)
    body = json.dumps(ctx.prepare().body) + json.dumps(ctx.prepare(log=False).body)
    return set(HANDLE.findall(body))


def _reads_back(store: Store, db: str, session: str, handles: set[str]) -> None:
    assert handles, f"{session}: no preview in the view, the test proves nothing"
    ctx = Context(store, session, create=False)
    for handle in handles:
        result = ctx.run_builtin(ToolCall("r", "read_result", {"handle": handle, "page": 1}))
        assert result is not None
        assert not result.is_error, (session, result)
        assert "material unavailable" not in result.content
        assert _cli("blob", handle, "--db", db, "--page", "1").strip()


def _lengthen(value: Any, contents: set[str]) -> Any:
    """``value`` (parsed JSON) with every string equal to a recorded result made long."""
    if isinstance(value, str):
        return value + "\n" + LONG if value.strip() and value.strip() in contents else value
    if isinstance(value, list):
        return [_lengthen(v, contents) for v in value]
    if isinstance(value, dict):
        return {k: _lengthen(v, contents) for k, v in value.items()}
    return value


def _long_copy(src: Path, dst: Path) -> Path:
    contents = {
        e.event.content.strip()
        for s in load_tree(src, "auto", skipped=lambda _f, _e: None)
        for e in s.events
        if isinstance(e.event, Result) and e.event.content.strip()
    }
    assert contents, src
    if src.suffix == ".jsonl":
        lines = [json.loads(line) for line in src.read_text().splitlines() if line.strip()]
        dst.write_text("".join(json.dumps(_lengthen(x, contents)) + "\n" for x in lines))
    else:
        dst.write_text(json.dumps(_lengthen(json.loads(src.read_text()), contents)))
    return dst


def _tau_bench(dst: Path) -> Path:
    traj = [
        {"role": "system", "content": "You are an airline agent."},
        {"role": "user", "content": "Find my booking."},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "t1", "type": "function", "function": {"name": "get_reservation", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "t1", "name": "get_reservation", "content": LONG},
        {"role": "assistant", "content": "Found it."},
    ]  # fmt: skip
    dst.write_text(json.dumps([{"task_id": 1, "reward": 1.0, "info": {}, "traj": traj, "trial": 0}]))
    return dst


def _openai(dst: Path) -> Path:
    dst.write_text(json.dumps([
        {"role": "user", "content": "list it"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "o1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "o1", "content": LONG},
        {"role": "assistant", "content": "done"},
    ]))  # fmt: skip
    return dst


def _events(dst: Path) -> Path:
    lines = [
        {"kind": "user.message", "text": "go"},
        {"kind": "assistant.message", "text": "", "tool_calls": [{"id": "e1", "name": "cat", "arguments": {}}]},
        {"kind": "tool.result", "call_id": "e1", "content": LONG},
    ]  # fmt: skip
    dst.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return dst


def _sources(tmp: Path) -> dict[str, Path]:
    data = REPO / "examples" / "data"
    return {
        "claude-code": _long_copy(data / "claude-code" / "short.jsonl", tmp / "cc.jsonl"),
        "swe-agent": _long_copy(data / "swe-agent" / "function_calling_simple.traj", tmp / "fc.traj"),
        "mini-swe-agent": Path(shutil.copy(data / "mini-swe-agent" / "psf__requests-2317.traj.json", tmp / "m.traj.json")),
        "tau-bench": _tau_bench(tmp / "gpt-4o-airline-x.json"),
        "openai": _openai(tmp / "chat.json"),
        "events": _events(tmp / "ev.jsonl"),
    }  # fmt: skip


@pytest.mark.parametrize("fmt", ["claude-code", "swe-agent", "mini-swe-agent", "tau-bench", "openai", "events"])
def test_imported_long_results_read_back(tmp_path: Path, fmt: str) -> None:
    db = str(tmp_path / "h.db")
    path = _sources(tmp_path)[fmt]
    ids = json.loads(_cli("import", str(path), "--db", db, "--format", fmt, "--json"))
    store = SQLiteStore(db)
    try:
        for session in ids:
            _reads_back(store, db, session, _handles(store, session))
    finally:
        store.close()


def test_context_and_cli_append_read_back(tmp_path: Path) -> None:
    db = str(tmp_path / "a.db")
    store = SQLiteStore(db)
    ctx = Context(store, "ctx", options=SMALL)
    ctx.append(UserMessage("go"), AssistantMessage("", (ToolCall("c1", "cat", {}),)), ToolResult("c1", LONG))
    lines = [
        {"kind": "user.message", "text": "go"},
        {"kind": "assistant.message", "text": "", "tool_calls": [{"id": "c1", "name": "cat", "arguments": {}}]},
        {"kind": "tool.result", "call_id": "c1", "content": LONG},
    ]  # fmt: skip
    _cli("append", "--db", db, "--session", "cli", "--create", stdin="".join(json.dumps(x) + "\n" for x in lines))
    try:
        for session in ("ctx", "cli"):
            _reads_back(store, db, session, _handles(store, session))
    finally:
        store.close()


def test_replayed_and_trimmed_results_read_back(tmp_path: Path) -> None:
    db = str(tmp_path / "r.db")
    data = REPO / "examples" / "data"
    _cli("replay", str(data), "--db", db, "--context-window", "8000", "--max-output", "1000", "--json")
    store = SQLiteStore(db)
    try:
        found = 0
        for info in store.sessions():
            events = store.read(info.id)
            handles = {h for e in events if e.kind == "request" for h in HANDLE.findall(json.dumps(
                Context(store, info.id, create=False).rebuild(e.event.step).decode()))}  # type: ignore[union-attr]
            found += len(handles)
            if handles:
                _reads_back(store, db, info.id, handles)
        assert found > 0
        # short results trimmed by the ladder (under the writer's blob threshold) read back too
        ctx = Context(  # defer=False: trim at the pressure line (by default it waits, this fits)
            store, "trim", options=PrepareOptions(context_window=6_000, max_output=200, offload_tokens=0, defer=False)
        )
        ctx.append(UserMessage("task"))
        for i in range(8):
            ctx.append(
                AssistantMessage(f"step {i}", (ToolCall(f"t{i}", "cat", {"i": i}),)),
                ToolResult(f"t{i}", f"result {i}: " + "word " * 500),
            )
        prep = ctx.prepare()
        assert [at(a, "action") for a in at_array(prep.report, "actions")] == ["trim"]
        handles = set(HANDLE.findall(json.dumps(prep.body)))
        _reads_back(store, db, "trim", handles)
    finally:
        store.close()
