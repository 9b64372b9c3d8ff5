"""The importers: real files (../shared/data or tests/data, and examples/data), plus crafted inputs."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import DATA, expected_claude_sessions, expected_sessions, shared_data
from ctxline import event_from_json
from ctxline.errors import ValidationError
from ctxline.importers import FORMATS, ImportedSession, detect_format, load
from ctxline.record.codec import canonical_json, event_to_json
from ctxline.record.events import (
    AssistantMessage,
    Compaction,
    Event,
    SystemMessage,
    ToolResult,
    UnknownEvent,
    UserMessage,
)
from ctxline.record.jsonvalue import as_object
from ctxline.record.store import Store
from ctxline.record.store.base import check_pairing

ORPHAN = "import.orphan_result"
PROJECT = Path(__file__).resolve().parents[1]
EXAMPLES = PROJECT / "examples" / "data"


# --- helpers -----------------------------------------------------------------------


def sample_files(root: Path) -> Iterator[tuple[str, Path]]:
    """(expected format, file) for every trajectory file under a data folder."""
    for path in sorted((root / "tau-bench").glob("*.json")):
        yield "tau-bench", path
    for path in sorted((root / "swe-agent").glob("*.traj")):
        yield "swe-agent", path
    for path in sorted((root / "mini-swe-agent").glob("*.traj.json")):
        yield "mini-swe-agent", path
    for path in sorted((root / "claude-code").glob("*.jsonl")):
        yield "claude-code", path


def assert_valid(session: ImportedSession) -> None:
    """Store-valid: results pair with earlier calls, ids unique, events serialise and round-trip."""
    calls: set[str] = set()
    ids: set[str] = set()
    orphans = 0
    for pending in session.events:
        ev = pending.event
        if isinstance(ev, AssistantMessage):
            calls.update(c.id for c in ev.tool_calls)
        elif isinstance(ev, ToolResult):
            assert ev.call_id in calls, f"{session.id}: result {ev.call_id} before its call"
        elif isinstance(ev, UnknownEvent) and ev.kind == ORPHAN:
            orphans += 1
        assert pending.id, f"{session.id}: event without a client id"
        assert pending.id not in ids, f"{session.id}: duplicate client id {pending.id}"
        ids.add(pending.id)
        obj = event_to_json(ev)
        canonical_json(obj).decode("utf-8")
        assert event_from_json(json.loads(canonical_json(obj))) == ev
    assert session.meta["orphan_results"] == orphans
    assert session.meta["events"] == len(session.events)
    check_pairing(session.events, lambda _call: False)


def load_all(root: Path) -> dict[str, list[ImportedSession]]:
    out: dict[str, list[ImportedSession]] = {fmt: [] for fmt in FORMATS}
    for fmt, path in sample_files(root):
        out[fmt].extend(load(path))
    return out


def kinds(session: ImportedSession) -> list[type[Event]]:
    return [type(p.event) for p in session.events]


@pytest.fixture(scope="module")
def data() -> Path:
    return shared_data()


@pytest.fixture(scope="module")
def loaded(data: Path) -> dict[str, list[ImportedSession]]:
    return load_all(data)


def write(tmp_path: Path, name: str, content: str | bytes) -> Path:
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def jsonl(*objs: object) -> str:
    return "".join(json.dumps(o) + "\n" for o in objs)


# --- the shared real data ----------------------------------------------------------


def test_counts(data: Path, loaded: dict[str, list[ImportedSession]]) -> None:
    expected = expected_sessions(data)  # counted from the raw files
    for fmt in ("tau-bench", "swe-agent", "mini-swe-agent"):
        assert len(loaded[fmt]) == expected[fmt] > 0, fmt
    # each main file loads as itself and the sub-agent files in <stem>/subagents/, once each
    mains = sorted((data / "claude-code").glob("*.jsonl"))
    subagents = [p for m in mains for p in (m.parent / m.stem / "subagents").glob("*.jsonl")]
    claude = {s.id for s in loaded["claude-code"]}
    assert claude == {f"claude-code/{p.stem}" for p in [*mains, *subagents]}
    assert len(loaded["claude-code"]) == len(claude)
    assert claude <= expected_claude_sessions(data)
    tau_ids = [s.id for s in loaded["tau-bench"]]
    assert len(set(tau_ids)) == len(tau_ids)
    assert "tau-bench/airline/0-0" in tau_ids


def test_the_repo_subset_holds_what_the_tests_need() -> None:
    """tests/data, the subset a plain clone tests with: every format, with its license."""
    assert expected_sessions(DATA) == {
        "tau-bench": 24,
        "swe-agent": 8,
        "mini-swe-agent": 4,
        "claude-code": 7,
    }
    for folder in ("tau-bench", "swe-agent", "mini-swe-agent", "claude-code"):
        assert list((DATA / folder).glob("LICENSE*")), folder
    total = sum(p.stat().st_size for p in DATA.rglob("*") if p.is_file())
    assert total < 8_000_000


def test_every_session_is_store_valid(loaded: dict[str, list[ImportedSession]]) -> None:
    for sessions in loaded.values():
        for session in sessions:
            assert_valid(session)


def test_detects_each_sample(data: Path) -> None:
    for fmt, path in sample_files(data):
        assert detect_format(path) == fmt, path.name
    for path in sorted((data / "claude-code").glob("*/subagents/*.jsonl")):
        assert detect_format(path) == "claude-code"


def test_not_a_trajectory_is_refused(data: Path) -> None:
    report = data / "mini-swe-agent" / "sb-cli-report.json"
    with pytest.raises(ValidationError) as err:
        detect_format(report)
    assert str(report) in str(err.value)
    for fmt in FORMATS:
        assert fmt in str(err.value)


def test_reload_is_deterministic(data: Path) -> None:
    for _fmt, path in sample_files(data):
        assert load(path) == load(path), path.name


def test_store_accepts_every_session_and_reimport_is_idempotent(
    loaded: dict[str, list[ImportedSession]], store: Store
) -> None:
    sessions = [s for group in loaded.values() for s in group]
    for session in sessions:
        store.create_session(session.id, meta=session.meta)
        store.append(session.id, session.events, expected_seq=0)
    for session in sessions:
        again = store.append(session.id, session.events)  # a retry: same ids, same content
        assert len(again) == len(session.events)
        assert store.head(session.id) == len(session.events)


def test_all_data_loads_fast(data: Path) -> None:
    start = time.perf_counter()
    load_all(data)
    assert time.perf_counter() - start < 10


def test_mini_swe_agent_long_output_kept_whole(data: Path) -> None:
    path = data / "mini-swe-agent" / "psf__requests-1142.traj.json"
    raw = json.loads(path.read_text(encoding="utf-8"))
    longest = max(m["content"] for m in raw["messages"] if m["role"] == "user")
    assert len(longest) > 860_000
    (session,) = load(path)
    assert session.id == "mini-swe-agent/psf__requests-1142"
    contents = [p.event.content for p in session.events if isinstance(p.event, ToolResult)]
    assert longest in contents


def test_mini_swe_agent_shape(loaded: dict[str, list[ImportedSession]]) -> None:
    for session in loaded["mini-swe-agent"]:
        assert session.id == f"mini-swe-agent/{session.meta['instance_id']}"
        info = session.meta["info"]
        assert isinstance(info, dict)
        assert "exit_status" in info
        assert "submission" not in info
        assert "config" not in info
        calls = [
            c
            for p in session.events
            if isinstance(p.event, AssistantMessage)
            for c in p.event.tool_calls
        ]
        assert calls
        assert all(c.name == "bash" and set(as_object(c.arguments)) == {"command"} for c in calls)
        assert all(
            "```bash" not in (p.event.text)
            for p in session.events
            if isinstance(p.event, AssistantMessage) and p.event.tool_calls
        )
    errors = [
        p.event
        for s in loaded["mini-swe-agent"]
        for p in s.events
        if isinstance(p.event, ToolResult) and p.event.is_error
    ]
    assert errors
    assert all(e.meta.get("returncode", 1) != 0 for e in errors)
    format_errors = [
        p.event
        for s in loaded["mini-swe-agent"]
        for p in s.events
        if isinstance(p.event, UserMessage) and p.event.meta.get("format_error")
    ]
    assert format_errors


def test_swe_agent_both_dialects(loaded: dict[str, list[ImportedSession]]) -> None:
    by_id = {s.id: s for s in loaded["swe-agent"]}
    fc = by_id["swe-agent/function_calling_simple"]
    calls = [
        c for p in fc.events if isinstance(p.event, AssistantMessage) for c in p.event.tool_calls
    ]
    assert [c.name for c in calls][:2] == ["find_file", "open"]
    assert calls[0].arguments == {"file_name": "missing_colon.py"}
    text = by_id["swe-agent/ctf__crypto__eps"]
    first = next(p.event for p in text.events if isinstance(p.event, AssistantMessage))
    assert first.tool_calls[0].id == "swe-agent/ctf__crypto__eps-call-1"
    assert first.tool_calls[0].arguments == {"command": "file ~/ctf_files/*\n"}
    assert sum(isinstance(p.event, ToolResult) for p in text.events) >= 10
    # \x08 in pip output survives
    assert any(
        isinstance(p.event, ToolResult) and "\x08" in p.event.content
        for s in loaded["swe-agent"]
        for p in s.events
    )


def test_tau_bench_meta(loaded: dict[str, list[ImportedSession]]) -> None:
    first = loaded["tau-bench"][0]
    assert first.id == "tau-bench/airline/0-0"
    assert first.meta["task_id"] == 0
    assert first.meta["trial"] == 0
    assert first.meta["reward"] == 0.0
    assert first.meta["domain"] == "airline"
    assert isinstance(first.events[0].event, SystemMessage)


def test_claude_code_merges_and_compaction(data: Path) -> None:
    sessions = load(data / "claude-code" / "258c7280-ae70-4798-800f-63464d01a85d.jsonl")
    main = sessions[0]
    assert main.id == "claude-code/258c7280-ae70-4798-800f-63464d01a85d"
    assert [s.meta["parent"] for s in sessions[1:]] == [main.id, main.id]
    assistants = [p for p in main.events if isinstance(p.event, AssistantMessage)]
    multi = [p for p in assistants if len(p.event.tool_calls) > 1]  # type: ignore[union-attr]
    assert multi, "records sharing message.id merge into one message"
    msg_ids = [p.event.meta.get("message_id") for p in assistants]  # type: ignore[union-attr]
    assert len(msg_ids) == len(set(msg_ids))
    usage = as_object(assistants[0].event.meta["usage"])  # type: ignore[union-attr]
    assert set(usage) >= {"input_tokens", "output_tokens", "cache_read_input_tokens"}
    assert assistants[0].event.meta["model"] == "claude-opus-4-6"  # type: ignore[union-attr]
    assert all(p.at is not None for p in main.events)
    compactions = [p for p in main.events if isinstance(p.event, Compaction)]
    assert len(compactions) == 1
    comp = compactions[0]
    assert isinstance(comp.event, Compaction)
    assert comp.id == "d46d6800-2f43-4360-ba84-c1de9c1ecbae"
    assert comp.event.trigger == "auto"
    assert comp.event.pre_tokens == 167094
    assert comp.event.summary.startswith("This session is being continued")
    assert not any(
        isinstance(p.event, UserMessage)
        and p.event.text.startswith("This session is being continued")
        for p in main.events
    )
    by_id = {s.id: s for s in sessions}
    assert (
        by_id["claude-code/agent-a881341"].meta["parent_call_id"]
        == "toolu_01VmaERAwhb19LGUwu9GenaK"
    )


def test_claude_code_subagent_file_alone(data: Path) -> None:
    path = (
        data
        / "claude-code"
        / "4d5611e5-241a-462a-8d15-5122611a9569"
        / "subagents"
        / "agent-a2898e3.jsonl"
    )
    (session,) = load(path)
    assert session.id == "claude-code/agent-a2898e3"
    assert session.meta["parent"] == "claude-code/4d5611e5-241a-462a-8d15-5122611a9569"
    assert_valid(session)


# --- examples/data -------------------------------------------------------------------


def test_examples_load() -> None:
    files = list(sample_files(EXAMPLES))
    assert {fmt for fmt, _ in files} == {"tau-bench", "swe-agent", "mini-swe-agent", "claude-code"}
    for fmt, path in files:
        assert detect_format(path) == fmt
        sessions = load(path)
        assert sessions
        for session in sessions:
            assert_valid(session)
    tau = load(EXAMPLES / "tau-bench" / "gpt-4o-airline-sample.json")
    assert 3 <= len(tau) <= 5
    for folder in ("tau-bench", "swe-agent", "mini-swe-agent", "claude-code"):
        assert list((EXAMPLES / folder).glob("LICENSE*")), folder
    total = sum(p.stat().st_size for p in EXAMPLES.rglob("*") if p.is_file())
    assert total < 1_000_000


# --- errors --------------------------------------------------------------------------


def test_unknown_format_lists_known(tmp_path: Path) -> None:
    path = write(tmp_path, "a.json", "[]")
    with pytest.raises(ValidationError) as err:
        load(path, format="langchain")
    for fmt in FORMATS:
        assert fmt in str(err.value)


def test_undetectable_lists_known(tmp_path: Path) -> None:
    for name, content in [("a.json", '{"hello": 1}'), ("b.txt", "plain text"), ("c.json", "")]:
        path = write(tmp_path, name, content)
        with pytest.raises(ValidationError) as err:
            detect_format(path)
        assert str(path) in str(err.value)
        assert "claude-code" in str(err.value)


def test_malformed_jsonl_line_fails_whole_load(tmp_path: Path) -> None:
    good = jsonl(
        {"kind": "user.message", "text": "hi"}, {"kind": "assistant.message", "text": "yo"}
    )
    path = write(tmp_path, "s.jsonl", good + '{"kind": "user.message", "text": \n')
    with pytest.raises(ValidationError) as err:
        load(path, "events")
    assert err.value.line == 3
    assert "line 3" in str(err.value)
    assert str(path) in str(err.value)
    with pytest.raises(ValidationError) as err:
        load(path)  # auto: detected as events from the first lines, then fails on line 3
    assert err.value.line == 3


def test_malformed_claude_code_line(tmp_path: Path) -> None:
    rec = {
        "type": "user",
        "uuid": "u1",
        "sessionId": "s",
        "message": {"role": "user", "content": "hi"},
    }
    path = write(tmp_path, "c.jsonl", jsonl(rec) + "{oops\n")
    with pytest.raises(ValidationError) as err:
        load(path)
    assert err.value.line == 2
    assert str(path) in str(err.value)


def test_wrong_types_name_the_field(tmp_path: Path) -> None:
    path = write(tmp_path, "m.json", json.dumps([{"role": "user", "content": 5}]))
    with pytest.raises(ValidationError) as err:
        load(path)
    assert err.value.field == "[0].content"
    assert err.value.source == str(path)
    path = write(
        tmp_path, "t.json", json.dumps([{"task_id": 1, "reward": "x", "traj": [], "trial": 0}])
    )
    with pytest.raises(ValidationError) as err:
        load(path, "tau-bench")
    assert err.value.field == "[0].reward"
    path = write(tmp_path, "w.json", json.dumps({"history": [{"role": "user", "content": "x"}, 7]}))
    with pytest.raises(ValidationError) as err:
        load(path)
    assert err.value.field == "history[1]"
    rec = {"type": "assistant", "uuid": "u", "sessionId": "s", "message": {"id": "m", "content": 3}}
    path = write(
        tmp_path, "c.jsonl", jsonl({"type": "progress", "uuid": "p", "sessionId": "s"}, rec)
    )
    with pytest.raises(ValidationError) as err:
        load(path)
    assert err.value.line == 2
    assert err.value.field == "message.content"
    # a format asked for explicitly but not matching the content
    with pytest.raises(ValidationError):
        load(path, "tau-bench")


def test_odd_inputs_never_crash(tmp_path: Path) -> None:
    odd: list[object] = [
        None,
        1,
        "x",
        [],
        {},
        [None],
        [{}],
        {"messages": None},
        {"history": {}},
        [{"traj": 1, "task_id": 0}],
        {"messages": [{"role": 1}]},
    ]
    for i, value in enumerate(odd):
        path = write(tmp_path, f"odd{i}.json", json.dumps(value))
        for fmt in ("auto", *FORMATS):
            with contextlib.suppress(ValidationError):
                load(path, fmt)


# --- crafted inputs per format -------------------------------------------------------


def test_lone_surrogate_becomes_replacement(tmp_path: Path) -> None:
    path = write(tmp_path, "m.json", '[{"role": "user", "content": "ok \\ud83d end"}]')
    (session,) = load(path)
    assert isinstance(session.events[0].event, UserMessage)
    assert session.events[0].event.text == "ok \ufffd end"
    rec = {
        "type": "user",
        "uuid": "u1",
        "sessionId": "s",
        "message": {"role": "user", "content": "x"},
    }
    text = jsonl(rec).replace('"x"', '"a\\udc00b"')
    (cc,) = load(write(tmp_path, "c.jsonl", text))
    assert cc.events[0].event == UserMessage("a\ufffdb")
    events = write(tmp_path, "e.jsonl", '{"kind": "user.message", "text": "\\ud800"}\n')
    assert load(events)[0].events[0].event == UserMessage("\ufffd")
    raw = write(tmp_path, "b.json", b'[{"role": "user", "content": "bad \xff byte \\u0008"}]')
    assert load(raw)[0].events[0].event == UserMessage("bad \ufffd byte \x08")


def test_openai_messages(tmp_path: Path) -> None:
    messages = [
        {"role": "system", "content": "be brief"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "a"},
                {"type": "image_url", "image_url": {}},
                {"type": "text", "text": "b"},
            ],
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "f", "arguments": '{"x": 1}'},
                },
                {
                    "id": "c2",
                    "type": "function",
                    "function": {"name": "g", "arguments": "{not json"},
                },
                {
                    "id": "c3",
                    "type": "function",
                    "function": {"name": "g", "arguments": '{"x": NaN}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "one"},
        {"role": "tool", "tool_call_id": "c2", "name": "g", "content": "two"},
        {"role": "tool", "tool_call_id": "zz", "content": "orphan"},
        {"role": "assistant", "content": "", "function_call": {"name": "h", "arguments": "{}"}},
        {"role": "function", "name": "h", "content": "legacy"},
    ]
    path = write(tmp_path, "chat.json", json.dumps({"messages": messages}))
    assert detect_format(path) == "openai"
    (session,) = load(path)
    assert session.id == "chat"
    evs = [p.event for p in session.events]
    assert evs[1] == UserMessage("a\n[image]\nb")
    assert isinstance(evs[2], AssistantMessage)
    assert [c.arguments for c in evs[2].tool_calls] == [{"x": 1}, "{not json", '{"x": NaN}']
    assert evs[3] == ToolResult("c1", "one", "f")
    assert isinstance(evs[5], UnknownEvent)
    assert evs[5].kind == ORPHAN
    assert evs[5].data["call_id"] == "zz"
    assert evs[5].data["content"] == "orphan"
    assert session.meta["orphan_results"] == 1
    assert isinstance(evs[6], AssistantMessage)
    assert evs[6].tool_calls[0].id == "chat-call-1"
    assert evs[7] == ToolResult("chat-call-1", "legacy", "h")
    assert [p.id for p in session.events][:2] == ["chat#1", "chat#2"]
    assert_valid(session)
    bare = write(tmp_path, "bare.json", json.dumps(messages[:2]))
    assert detect_format(bare) == "openai"


def test_tau_bench_domain_and_ids(tmp_path: Path) -> None:
    run = {
        "task_id": 3,
        "reward": 1.0,
        "info": {"user_cost": 0.1},
        "trial": 1,
        "traj": [{"role": "user", "content": "hi"}],
    }
    named = write(tmp_path, "sonnet-retail.json", json.dumps([run, run]))
    assert detect_format(named) == "tau-bench"
    ids = [s.id for s in load(named)]
    assert ids == ["tau-bench/retail/3-1", "tau-bench/retail/3-1-2"]
    nan = write(tmp_path, "nan-airline.json", json.dumps([{**run, "reward": float("nan")}]))
    (odd,) = load(nan)
    assert odd.meta["reward"] == "NaN"  # Python writes NaN; the canonical form cannot hold it
    assert_valid(odd)
    canonical_json(odd.meta)
    other = write(tmp_path, "my-run.json", json.dumps([run]))
    (session,) = load(other)
    assert session.id == "tau-bench/my-run/3-1"
    assert session.meta["reward"] == 1.0
    assert session.meta["task_id"] == 3


def test_swe_agent_repr_tool_calls_and_text_actions(tmp_path: Path) -> None:
    history = [
        {"role": "system", "content": "sys", "message_type": "system_prompt"},
        {"role": "user", "content": "task", "message_type": "observation"},
        {
            "role": "assistant",
            "content": "look",
            "thought": "look",
            "action": "ls",
            "message_type": "action",
            "tool_calls": "[{'function': {'name': 'bash', 'arguments': '{\"command\": \"ls\"}'}, 'id': 'c1'}]",
        },
        {
            "role": "tool",
            "content": [{"type": "text", "text": "a.py"}],
            "tool_call_ids": ["c1"],
            "message_type": "observation",
        },
        {
            "role": "assistant",
            "content": "open it\n```\nopen a.py\n```",
            "thought": "open it",
            "action": "open a.py",
        },
        {"role": "user", "content": "[File: a.py]"},
        {"role": "assistant", "content": "done", "thought": "done", "action": ""},
        {"role": "user", "content": "more please"},
    ]
    path = write(tmp_path, "run.traj", json.dumps({"history": history}))
    assert detect_format(path) == "swe-agent"
    (session,) = load(path)
    assert session.id == "swe-agent/run"
    evs = [p.event for p in session.events]
    assert kinds(session) == [
        SystemMessage,
        UserMessage,
        AssistantMessage,
        ToolResult,
        AssistantMessage,
        ToolResult,
        AssistantMessage,
        UserMessage,
    ]
    assert isinstance(evs[2], AssistantMessage)
    assert evs[2].tool_calls[0].arguments == {"command": "ls"}
    assert evs[3] == ToolResult("c1", "a.py", "bash")
    assert isinstance(evs[4], AssistantMessage)
    assert evs[4].text == "open it"
    assert evs[4].tool_calls[0].name == "open"
    assert evs[4].tool_calls[0].id == "swe-agent/run-call-1"
    assert evs[5] == ToolResult("swe-agent/run-call-1", "[File: a.py]", "open")
    assert_valid(session)
    bad = write(
        tmp_path,
        "bad.traj",
        json.dumps(
            {"history": [{"role": "assistant", "content": "x", "tool_calls": "[{'function': oops"}]}
        ),
    )
    with pytest.raises(ValidationError) as err:
        load(bad)
    assert err.value.field == "history[0].tool_calls"


def test_mini_swe_agent_crafted(tmp_path: Path) -> None:
    messages = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "task"},
        {"role": "assistant", "content": "THOUGHT: run\n\n```bash\nfalse\n```"},
        {"role": "user", "content": "<returncode>1</returncode>\n<output>\n</output>"},
        {"role": "assistant", "content": "two\n```bash\na\n```\n```bash\nb\n```"},
        {"role": "user", "content": "Please always provide EXACTLY ONE action in triple backticks"},
        {"role": "assistant", "content": "```bash\nsleep 99\n```"},
        {
            "role": "user",
            "content": "The last command <command>sleep 99</command> timed out and has been killed.",
        },
    ]
    doc = {
        "info": {"exit_status": "Submitted", "submission": "x" * 5000},
        "messages": messages,
        "trajectory_format": "mini-swe-agent-1",
        "instance_id": "a__b-1",
    }
    path = write(tmp_path, "a__b-1.traj.json", json.dumps(doc))
    assert detect_format(path) == "mini-swe-agent"
    (session,) = load(path)
    assert session.id == "mini-swe-agent/a__b-1"
    evs = [p.event for p in session.events]
    assert kinds(session) == [
        SystemMessage,
        UserMessage,
        AssistantMessage,
        ToolResult,
        AssistantMessage,
        UserMessage,
        AssistantMessage,
        ToolResult,
    ]
    assert isinstance(evs[2], AssistantMessage)
    assert evs[2].text == "THOUGHT: run"
    assert evs[2].tool_calls[0].arguments == {"command": "false"}
    assert isinstance(evs[3], ToolResult)
    assert evs[3].is_error
    assert evs[3].meta == {"returncode": 1}
    assert isinstance(evs[4], AssistantMessage)
    assert not evs[4].tool_calls
    assert evs[5] == UserMessage(messages[5]["content"], {"format_error": True})
    assert isinstance(evs[7], ToolResult)
    assert evs[7].is_error
    assert evs[7].meta == {"timeout": True}
    assert session.meta["info"] == {"exit_status": "Submitted", "submission_chars": 5000}
    assert_valid(session)


def test_claude_code_crafted(tmp_path: Path) -> None:
    base = {"sessionId": "s", "isSidechain": False}

    def asst(uuid: str, mid: str, block: dict[str, object], out: int) -> dict[str, object]:
        usage = {
            "input_tokens": 3,
            "output_tokens": out,
            "cache_read_input_tokens": 100,
            "cache_creation_input_tokens": 7,
        }
        return {
            **base,
            "type": "assistant",
            "uuid": uuid,
            "timestamp": "2026-01-01T00:00:01Z",
            "message": {
                "id": mid,
                "model": "m1",
                "role": "assistant",
                "content": [block],
                "usage": usage,
            },
        }

    def user(uuid: str, content: object, **extra: object) -> dict[str, object]:
        return {
            **base,
            "type": "user",
            "uuid": uuid,
            "timestamp": "2026-01-01T00:00:02Z",
            "message": {"role": "user", "content": content},
            **extra,
        }

    records = [
        {"type": "file-history-snapshot", "messageId": "x", "snapshot": {}},
        user("u1", "do it"),
        asst("a1", "m", {"type": "thinking", "thinking": "hmm", "signature": "sig"}, 5),
        asst("a2", "m", {"type": "text", "text": "ok"}, 5),
        asst(
            "a3",
            "m",
            {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}},
            5,
        ),
        user("u2", [{"type": "tool_result", "tool_use_id": "t1", "content": "a.txt"}]),
        {**base, "type": "progress", "uuid": "p1", "data": {"type": "hook_progress"}},
        asst(
            "a4", "m", {"type": "tool_use", "id": "t2", "name": "Read", "input": {"path": "a"}}, 40
        ),
        user(
            "u3",
            [
                {
                    "type": "tool_result",
                    "tool_use_id": "t2",
                    "is_error": True,
                    "content": [{"type": "text", "text": "no"}, {"type": "text", "text": "such"}],
                }
            ],
        ),
        user("u4", [{"type": "tool_result", "tool_use_id": "gone", "content": "lost"}]),
        {
            **base,
            "type": "system",
            "subtype": "compact_boundary",
            "uuid": "b1",
            "timestamp": "2026-01-01T00:00:03Z",
            "compactMetadata": {"trigger": "manual", "preTokens": 900},
        },
        user("u5", "Summary: did it", isCompactSummary=True),
        user("u6", [{"type": "text", "text": "thanks"}]),
        user("u7", "sub", isSidechain=True),
    ]
    path = write(tmp_path, "sess.jsonl", jsonl(*records))
    assert detect_format(path) == "claude-code"
    (session,) = load(path)
    assert session.id == "claude-code/sess"
    evs = [p.event for p in session.events]
    assert [p.id for p in session.events] == ["u1", "a1", "u2", "u3", "u4", "b1", "u6"]
    assert kinds(session) == [
        UserMessage,
        AssistantMessage,
        ToolResult,
        ToolResult,
        UnknownEvent,
        Compaction,
        UserMessage,
    ]
    msg = evs[1]
    assert isinstance(msg, AssistantMessage)
    assert msg.text == "ok"
    assert [c.id for c in msg.tool_calls] == ["t1", "t2"]
    assert msg.meta["usage"] == {
        "input_tokens": 3,
        "output_tokens": 40,
        "cache_read_input_tokens": 100,
        "cache_creation_input_tokens": 7,
    }
    assert msg.meta["model"] == "m1"
    assert msg.meta["thinking"] == "hmm"
    assert evs[3] == ToolResult("t2", "no\nsuch", "Read", True)
    assert isinstance(evs[4], UnknownEvent)
    assert evs[4].data["call_id"] == "gone"
    assert evs[5] == Compaction("Summary: did it", "manual", 900, {"summary_uuid": "u5"})
    assert session.meta["orphan_results"] == 1
    assert session.meta["sidechain_records_skipped"] == 1
    assert session.events[0].at is not None
    assert session.events[0].at.year == 2026
    assert_valid(session)


def test_events_format(tmp_path: Path) -> None:
    header = {"kind": "ctxline.session", "session": "demo", "timeline": "main", "version": 1}
    lines = [
        header,
        {"kind": "user.message", "text": "hi", "id": "e1", "at": "2026-01-01T00:00:00Z"},
        {
            "kind": "assistant.message",
            "text": "",
            "tool_calls": [{"id": "c1", "name": "ls", "arguments": {}}],
        },
        {"kind": "tool.result", "call_id": "c1", "content": "a"},
        {"kind": "tool.result", "call_id": "nope", "content": "b"},
        {"kind": "future.kind", "x": 1},
        {**header, "session": "second"},
        {"kind": "user.message", "text": "again"},
    ]
    path = write(tmp_path, "export.jsonl", jsonl(*lines))
    assert detect_format(path) == "events"
    first, second = load(path)
    assert first.id == "demo"
    assert second.id == "second"
    assert first.events[0].id == "e1"
    assert first.events[0].at is not None
    assert [p.id for p in first.events][1:] == ["demo#2", "demo#3", "demo#4", "demo#5"]
    assert isinstance(first.events[3].event, UnknownEvent)
    assert first.events[3].event.kind == ORPHAN
    assert first.events[4].event == UnknownEvent("future.kind", {"x": 1})
    assert first.meta["orphan_results"] == 1
    assert second.events[0].event == UserMessage("again")
    plain = write(tmp_path, "plain.jsonl", jsonl({"kind": "user.message", "text": "solo"}))
    (only,) = load(plain)
    assert only.id == "plain"
    assert only.events[0].id == "plain#1"
    dup = write(
        tmp_path,
        "dup.jsonl",
        jsonl(
            {"kind": "user.message", "text": "a", "id": "x"},
            {"kind": "user.message", "text": "b", "id": "x"},
        ),
    )
    with pytest.raises(ValidationError) as err:
        load(dup)
    assert err.value.line == 2
    bad = write(tmp_path, "bad.jsonl", jsonl({"kind": "user.message"}))
    with pytest.raises(ValidationError) as err:
        load(bad)
    assert err.value.line == 1
    assert err.value.field == "text"
