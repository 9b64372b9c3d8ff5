"""The ``ctxline`` command end to end: import, export round trips, append, bad input.

Why: the CLI is how people meet the record, and every promise of the foundation
(nothing lost, nothing duplicated, one-line errors with exit 2, nothing half-written)
must hold at that boundary too. Most tests drive ``ctxline.cli.main.main`` in-process with
click's ``CliRunner`` against a temporary SQLite file; one runs the real command in a
subprocess.

    .venv/bin/pytest tests/test_cli.py -q
"""

from __future__ import annotations

import collections
import json
import sqlite3
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from conftest import REPO, shared_data
from ctxline import __version__
from ctxline.cli.main import main
from ctxline.importers import FORMATS

# --- helpers -----------------------------------------------------------------------


def run(args: Sequence[str], stdin: str | bytes | None = None, *, columns: int = 200) -> Result:
    """``ctxline ARGS`` in-process; a wide terminal so rich does not wrap ids."""
    runner = CliRunner(env={"COLUMNS": str(columns), "NO_COLOR": "1"})
    return runner.invoke(main, list(args), input=stdin, catch_exceptions=False)


def ok(args: Sequence[str], stdin: str | bytes | None = None) -> Result:
    result = run(args, stdin)
    assert result.exit_code == 0, (args, result.stdout, result.stderr)
    return result


def fails(args: Sequence[str], stdin: str | bytes | None = None) -> str:
    """Run a command that must fail: exit 2, one line on stderr, nothing on stdout. The line."""
    result = run(args, stdin)
    assert result.exit_code == 2, (args, result.exit_code, result.stdout, result.stderr)
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def jsonl(*objs: object) -> str:
    return "".join(json.dumps(o) + "\n" for o in objs)


def sessions(db: str) -> dict[str, int]:
    rows = json.loads(ok(["sessions", "--db", db, "--json"]).stdout)
    assert isinstance(rows, list)
    return {row["session"]: row["events"] for row in rows}


def export(db: str, session: str, timeline: str = "main") -> bytes:
    return ok(["export", "--db", db, "--session", session, "--timeline", timeline]).stdout_bytes


def export_lines(db: str, session: str, timeline: str = "main") -> list[dict[str, object]]:
    return [json.loads(line) for line in export(db, session, timeline).splitlines()]


USER = {"kind": "user.message", "text": "Help me cancel my plan"}
CALL = {
    "kind": "assistant.message",
    "text": "",
    "tool_calls": [{"id": "c1", "name": "lookup", "arguments": {"user": "mia"}}],
}
RESULT = {"kind": "tool.result", "call_id": "c1", "name": "lookup", "content": "plan: pro"}
REPLY = {"kind": "assistant.message", "text": "Your plan is pro; cancelling it now."}
NOTE = {"kind": "notification", "source": "exec/job-7", "text": "build finished, exit 0"}


@pytest.fixture
def db(tmp_path: Path) -> str:
    return str(tmp_path / "ctxline.db")


@pytest.fixture
def demo(db: str) -> str:
    """A database holding session ``demo`` with 4 events (user, call, result, reply)."""
    ok(["append", "--db", db, "--session", "demo", "--create"], jsonl(USER, CALL, RESULT, REPLY))
    return db


# --- the shared real data ----------------------------------------------------------


EXPECTED_CLAUDE = {
    "claude-code/258c7280-ae70-4798-800f-63464d01a85d",
    "claude-code/agent-a881341",
    "claude-code/agent-acompact-fffbd0",
    "claude-code/4d5611e5-241a-462a-8d15-5122611a9569",
    "claude-code/agent-a2898e3",
    "claude-code/agent-acompact-e1f845",
    "claude-code/short",
    "claude-code/subagent",
    "claude-code/tool_heavy",
}


def trajectory_files(root: Path) -> list[Path]:
    """Every trajectory file of the shared data (main and sub-agent Claude Code files too)."""
    files = [
        *sorted((root / "tau-bench").glob("*.json")),
        *sorted((root / "swe-agent").glob("*.traj")),
        *sorted((root / "mini-swe-agent").glob("*.traj.json")),
        *sorted((root / "claude-code").rglob("*.jsonl")),
    ]
    assert files
    return files


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, list[str]]:
    """All of ../shared/data imported into one database, file by file: (db, ids printed)."""
    root = shared_data()
    db = str(tmp_path_factory.mktemp("shared") / "all.db")
    ids: list[str] = []
    for path in trajectory_files(root):
        printed = json.loads(ok(["import", str(path), "--db", db, "--json"]).stdout)
        assert isinstance(printed, list)
        assert printed, path
        ids.extend(printed)
    return db, ids


def test_import_every_shared_file(imported: tuple[str, list[str]]) -> None:
    db, ids = imported
    stored = sessions(db)
    by_format = collections.Counter(sid.split("/")[0] for sid in stored)
    assert by_format["tau-bench"] == 100
    assert by_format["swe-agent"] == 22
    assert by_format["mini-swe-agent"] == 31
    assert {sid for sid in stored if sid.startswith("claude-code/")} == EXPECTED_CLAUDE
    assert len(stored) == 162
    assert "tau-bench/airline/0-0" in stored
    assert "mini-swe-agent/psf__requests-1142" in stored
    # --json printed every stored id (sub-agents twice: with their main file and alone)
    assert set(ids) == set(stored)
    assert all(count > 0 for count in stored.values())


def test_sub_agents_know_their_parent(imported: tuple[str, list[str]]) -> None:
    db, _ = imported
    header = export_lines(db, "claude-code/agent-a881341")[0]
    meta = header["meta"]
    assert isinstance(meta, dict)
    assert meta["parent"] == "claude-code/258c7280-ae70-4798-800f-63464d01a85d"


def test_importing_the_same_file_twice_appends_nothing(
    imported: tuple[str, list[str]],
) -> None:
    db, _ = imported
    before = sessions(db)
    root = shared_data()
    for path in (
        root / "tau-bench" / "gpt-4o-airline-tasks-00-24.json",
        root / "mini-swe-agent" / "psf__requests-1142.traj.json",
        root / "claude-code" / "258c7280-ae70-4798-800f-63464d01a85d.jsonl",
    ):
        out = ok(["import", str(path), "--db", db]).stdout
        assert "0 event(s) appended" in out
        assert "already imported" in out
    assert sessions(db) == before


def test_import_a_whole_folder(db: str) -> None:
    """A folder imports every trajectory in it once, and skips what is not one, saying so."""
    root = shared_data()
    result = run(["import", str(root), "--db", db, "--json"])
    assert result.exit_code == 0, result.stderr
    ids = json.loads(result.stdout)
    assert len(ids) == len(set(ids)) == 162
    assert "sb-cli-report.json" in result.stderr  # not a trajectory: skipped, not fatal
    stored = sessions(db)
    assert set(stored) == set(ids)
    again = run(["import", str(root), "--db", db, "--json"])
    assert again.exit_code == 0
    assert sessions(db) == stored


def test_export_import_export_is_byte_identical_for_every_session(
    imported: tuple[str, list[str]], tmp_path: Path
) -> None:
    db, _ = imported
    ids = sorted(sessions(db))
    first = {sid: export(db, sid) for sid in ids}
    # one events file holding every session, each behind its header line
    bundle = tmp_path / "all.events.jsonl"
    bundle.write_bytes(b"".join(first[sid] for sid in ids))
    fresh = str(tmp_path / "fresh.db")
    printed = json.loads(
        ok(["import", str(bundle), "--db", fresh, "--format", "events", "--json"]).stdout
    )
    assert printed == ids
    for sid in ids:
        assert export(fresh, sid) == first[sid], sid
    # and one session on its own, through a file of its own
    single = tmp_path / "one.jsonl"
    single.write_bytes(first["claude-code/short"])
    other = str(tmp_path / "other.db")
    ok(["import", str(single), "--db", other, "--format", "events"])
    assert export(other, "claude-code/short") == first["claude-code/short"]


def test_exported_tool_results_pair_with_their_calls(imported: tuple[str, list[str]]) -> None:
    db, _ = imported
    for sid in ("tau-bench/airline/3-1", "swe-agent/function_calling_simple"):
        calls: set[str] = set()
        results = 0
        for obj in export_lines(db, sid)[1:]:
            if obj["kind"] == "assistant.message":
                tool_calls = obj.get("tool_calls", [])
                assert isinstance(tool_calls, list)
                calls.update(c["id"] for c in tool_calls)
            elif obj["kind"] == "tool.result":
                assert obj["call_id"] in calls
                results += 1
        assert results > 0, sid


def test_show_a_real_session(imported: tuple[str, list[str]]) -> None:
    db, _ = imported
    out = ok(["show", "--db", db, "--session", "tau-bench/airline/0-0"]).stdout
    assert "tau-bench/airline/0-0" in out
    assert "Airline Agent Policy" in out
    assert "mia_li_3668" in out
    assert "tool.result" in out


# --- export and import of crafted sessions --------------------------------------------


def test_export_shape(demo: str) -> None:
    lines = export_lines(demo, "demo")
    header, *events = lines
    assert header["kind"] == "ctxline.session"
    assert header["session"] == "demo"
    assert header["timeline"] == "main"
    assert [e["seq"] for e in events] == [1, 2, 3, 4]
    assert [e["kind"] for e in events] == [
        "user.message",
        "assistant.message",
        "tool.result",
        "assistant.message",
    ]
    assert all(isinstance(e["id"], str) and isinstance(e["at"], str) for e in events)
    raw = export(demo, "demo")
    for line in raw.splitlines():  # canonical: sorted keys, compact separators
        obj = json.loads(line)
        canon = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        assert line == canon.encode()


def test_round_trip_of_a_crafted_session(demo: str, tmp_path: Path) -> None:
    first = export(demo, "demo")
    path = tmp_path / "demo.jsonl"
    path.write_bytes(first)
    fresh = str(tmp_path / "fresh.db")
    assert json.loads(ok(["import", str(path), "--db", fresh, "--json"]).stdout) == ["demo"]
    assert export(fresh, "demo") == first
    # twice is once
    assert "already imported" in ok(["import", str(path), "--db", fresh]).stdout
    assert sessions(fresh) == {"demo": 4}


# --- append ------------------------------------------------------------------------


def test_append_reads_jsonl_from_stdin(demo: str) -> None:
    out = ok(["append", "--db", demo, "--session", "demo", "--expected-seq", "4"], jsonl(NOTE))
    assert "seq 5-5" in out.stdout
    stored = ok(["append", "--db", demo, "--session", "demo", "--json"], jsonl(USER)).stdout
    (line,) = stored.splitlines()
    assert json.loads(line)["seq"] == 6
    assert sessions(demo) == {"demo": 6}


def test_append_malformed_line_appends_nothing(demo: str) -> None:
    lines = [
        json.dumps(USER),
        json.dumps(NOTE),
        '{"kind": "user.message", "text": ',
        json.dumps(USER),
        json.dumps(NOTE),
    ]
    message = fails(["append", "--db", demo, "--session", "demo"], "\n".join(lines) + "\n")
    assert "line 3" in message
    assert sessions(demo) == {"demo": 4}


def test_append_invalid_event_names_line_and_field(demo: str) -> None:
    bad = {"kind": "tool.result", "call_id": "c1", "content": 7}
    message = fails(["append", "--db", demo, "--session", "demo"], jsonl(USER, NOTE, USER, bad))
    assert "line 4" in message
    assert "content" in message
    assert sessions(demo) == {"demo": 4}


def test_append_orphan_result_names_the_call_id(demo: str) -> None:
    orphan = {"kind": "tool.result", "call_id": "call-nowhere-42", "content": "?"}
    message = fails(["append", "--db", demo, "--session", "demo"], jsonl(USER, orphan, NOTE))
    assert "call-nowhere-42" in message
    assert sessions(demo) == {"demo": 4}
    assert [e.get("seq") for e in export_lines(demo, "demo")[1:]] == [1, 2, 3, 4]


def test_append_expected_seq_conflict(demo: str) -> None:
    message = fails(
        ["append", "--db", demo, "--session", "demo", "--expected-seq", "2"], jsonl(NOTE)
    )
    assert "conflict" in message
    assert "2" in message
    assert "4" in message
    assert sessions(demo) == {"demo": 4}


def test_refused_append_with_create_makes_no_session(db: str) -> None:
    orphan = {"kind": "tool.result", "call_id": "c9", "content": "?"}
    assert "c9" in fails(
        ["append", "--db", db, "--session", "new", "--create"], jsonl(USER, orphan)
    )
    assert "conflict" in fails(
        ["append", "--db", db, "--session", "new", "--create", "--expected-seq", "3"], jsonl(USER)
    )
    assert "line 2" in fails(
        ["append", "--db", db, "--session", "new", "--create"], jsonl(USER) + "[\n"
    )
    assert sessions(db) == {}
    ok(["append", "--db", db, "--session", "new", "--create", "--expected-seq", "0"], jsonl(USER))
    assert sessions(db) == {"new": 1}


def test_append_to_unknown_session_fails(db: str) -> None:
    assert "nope" in fails(["append", "--db", db, "--session", "nope"], jsonl(USER))


def test_append_retry_is_not_duplicated(demo: str) -> None:
    with_id = {**NOTE, "id": "client-1"}
    ok(["append", "--db", demo, "--session", "demo"], jsonl(with_id))
    ok(["append", "--db", demo, "--session", "demo"], jsonl(with_id))
    assert sessions(demo) == {"demo": 5}


def test_lone_surrogate_is_stored_as_replacement_character(demo: str) -> None:
    raw = '{"kind": "user.message", "text": "bad \\ud800 half"}\n'
    assert "\\ud800" in raw
    ok(["append", "--db", demo, "--session", "demo"], raw)
    last = export_lines(demo, "demo")[-1]
    assert last["text"] == "bad \ufffd half"
    # invalid UTF-8 bytes on stdin are replaced too
    ok(
        ["append", "--db", demo, "--session", "demo"],
        b'{"kind": "user.message", "text": "x\xff y"}\n',
    )
    assert export_lines(demo, "demo")[-1]["text"] == "x\ufffd y"


def test_surrogate_in_an_imported_file(db: str, tmp_path: Path) -> None:
    path = tmp_path / "chat.json"
    path.write_text(
        '[{"role": "user", "content": "hi \\udc80 there"},'
        ' {"role": "assistant", "content": "hello"}]',
        encoding="utf-8",
    )
    (sid,) = json.loads(ok(["import", str(path), "--db", db, "--json"]).stdout)
    texts = [e.get("text") for e in export_lines(db, sid)[1:]]
    assert "hi \ufffd there" in texts


# --- bad input -----------------------------------------------------------------------


def test_unknown_format_lists_the_known_ones(db: str, tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text(jsonl(USER), encoding="utf-8")
    message = fails(["import", str(path), "--db", db, "--format", "not-a-format"])
    assert "not-a-format" in message
    for fmt in FORMATS:
        assert fmt in message
    assert not Path(db).exists()


def test_undetectable_file_lists_the_known_formats(db: str, tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    path.write_text('{"resolved": ["a"], "total": 1}', encoding="utf-8")
    message = fails(["import", str(path), "--db", db])
    assert "report.json" in message
    assert "tau-bench" in message


def test_missing_file(db: str, tmp_path: Path) -> None:
    assert "no-such.json" in fails(["import", str(tmp_path / "no-such.json"), "--db", db])


def test_not_a_database_is_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    content = b"these are my notes, not a database\n" * 50
    path.write_bytes(content)
    for args in (["sessions"], ["show", "--session", "x"], ["import", str(path)]):
        message = fails([*args, "--db", str(path)])
        assert "notes.db" in message
    fails(["append", "--session", "x", "--create", "--db", str(path)], jsonl(USER))
    assert path.read_bytes() == content
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.db"]


def test_damaged_database_is_left_untouched(demo: str) -> None:
    path = Path(demo)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    data = path.read_bytes()
    assert len(data) > 4100
    broken = data[:100] + b"\xff" * 4000 + data[4100:]  # the header kept, the schema smashed
    path.write_bytes(broken)
    for args in (["sessions"], ["export", "--session", "demo"]):
        message = fails([*args, "--db", demo])
        assert str(path) in message
    fails(["append", "--session", "demo", "--db", demo], jsonl(USER))
    assert path.read_bytes() == broken


def test_unknown_session_and_timeline(demo: str) -> None:
    assert "ghost" in fails(["export", "--db", demo, "--session", "ghost"])
    assert "ghost" in fails(["show", "--db", demo, "--session", "ghost"])
    assert "nowhere" in fails(["show", "--db", demo, "--session", "demo", "--timeline", "nowhere"])


def test_unknown_db_url(tmp_path: Path) -> None:
    assert "mysql" in fails(["sessions", "--db", "mysql://host/db"])


# --- sessions, show, fork --------------------------------------------------------------


def test_sessions_json(demo: str) -> None:
    ok(["append", "--db", demo, "--session", "other", "--create"], jsonl(USER, NOTE))
    rows = json.loads(ok(["sessions", "--db", demo, "--json"]).stdout)
    assert {r["session"]: r["events"] for r in rows} == {"demo": 4, "other": 2}
    for row in rows:
        assert row["timelines"] == 1
        assert isinstance(row["created_at"], str)
    table = ok(["sessions", "--db", demo]).stdout
    assert "demo" in table
    assert "other" in table


def test_show(demo: str) -> None:
    out = ok(["show", "--db", demo, "--session", "demo"]).stdout
    assert "demo / main: 4 events" in out
    assert "Help me cancel my plan" in out
    assert "lookup" in out
    assert "plan: pro" in out


def test_fork_then_show_timeline(demo: str) -> None:
    out = ok(["fork", "--db", demo, "--session", "demo", "--at", "2", "--name", "alt"]).stdout
    assert "alt" in out
    assert "seq 2" in out
    alt_result = {**RESULT, "content": "plan: free"}
    ok(
        ["append", "--db", demo, "--session", "demo", "--timeline", "alt", "--expected-seq", "2"],
        jsonl(alt_result),
    )
    shown = ok(["show", "--db", demo, "--session", "demo", "--timeline", "alt"]).stdout
    assert "demo / alt: 3 events (forked from main at seq 2)" in shown
    assert "plan: free" in shown
    assert "Help me cancel my plan" in shown
    assert "Your plan is pro" not in shown
    # the parent is unaffected
    main_shown = ok(["show", "--db", demo, "--session", "demo"]).stdout
    assert "plan: pro" in main_shown
    assert "plan: free" not in main_shown
    assert [e["seq"] for e in export_lines(demo, "demo", "alt")[1:]] == [1, 2, 3]
    rows = json.loads(ok(["sessions", "--db", demo, "--json"]).stdout)
    assert rows[0]["timelines"] == 2
    assert (
        "past" in fails(["fork", "--db", demo, "--session", "demo", "--at", "99", "--name", "past"])
        or "99"
        in run(["fork", "--db", demo, "--session", "demo", "--at", "99", "--name", "past"]).stderr
    )


# --- database URLs --------------------------------------------------------------------


def test_memory_database(tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    path.write_text(jsonl(USER, CALL, RESULT), encoding="utf-8")
    assert json.loads(ok(["import", str(path), "--db", ":memory:", "--json"]).stdout) == ["chat"]
    out = ok(["append", "--db", ":memory:", "--session", "m", "--create"], jsonl(USER)).stdout
    assert "seq 1-1" in out
    assert json.loads(ok(["sessions", "--db", ":memory:", "--json"]).stdout) == []  # not kept
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chat.jsonl"]


def test_sqlite_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    absolute = tmp_path / "abs.db"
    url = f"sqlite:///{absolute}"  # sqlite:////tmp/... : an absolute path
    assert url.startswith("sqlite:////")
    ok(["append", "--db", url, "--session", "u", "--create"], jsonl(USER, NOTE))
    assert absolute.is_file()
    assert sessions(str(absolute)) == {"u": 2}
    assert sessions(url) == {"u": 2}
    monkeypatch.chdir(tmp_path)
    ok(["append", "--db", "sqlite:///rel.db", "--session", "r", "--create"], jsonl(USER))
    assert (tmp_path / "rel.db").is_file()
    assert sessions("rel.db") == {"r": 1}


def test_default_db_is_ctxline_db_in_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    ok(["append", "--session", "d", "--create"], jsonl(USER))
    assert (tmp_path / "ctxline.db").is_file()
    assert sessions("ctxline.db") == {"d": 1}


# --- the real command ----------------------------------------------------------------


def test_version_in_process() -> None:
    out = ok(["--version"]).stdout
    assert __version__ in out
    assert "ctxline" in out


def test_version_subprocess() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "ctxline.cli.main", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"ctxline, version {__version__}"


def test_console_script_errors_are_one_line(tmp_path: Path) -> None:
    script = Path(sys.executable).with_name("ctxline")
    if not script.is_file():
        pytest.skip(f"no console script at {script}")
    lines = [json.dumps(USER), json.dumps(NOTE), "not json", json.dumps(USER), json.dumps(NOTE)]
    db = tmp_path / "sub.db"
    proc = subprocess.run(
        [str(script), "append", "--session", "s", "--create", "--db", str(db)],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    (line,) = proc.stderr.splitlines()
    assert "line 3" in line
    assert not db.exists() or sessions(str(db)) == {}


def test_prepare_exits_3_when_the_task_alone_does_not_fit(tmp_path: Path) -> None:
    db = str(tmp_path / "overflow.db")
    lines = json.dumps({"kind": "user.message", "text": "word " * 3000}) + "\n"
    created = CliRunner().invoke(main, ["append", "--db", db, "--session", "big", "--create"], input=lines)
    assert created.exit_code == 0, created.output
    result = CliRunner().invoke(
        main,
        ["prepare", "--db", db, "--session", "big", "--context-window", "2000", "--max-output", "500"],
    )
    assert result.exit_code == 3
    assert "original task" in result.stderr
    assert "input limit is 1,500" in result.stderr
