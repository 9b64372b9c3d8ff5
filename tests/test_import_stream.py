"""A long import streams (issue 25): read, checked and appended a chunk at a time in one
transaction, with progress as it goes — and still all or nothing.

* a bad line deep in a long file (after thousands of events were appended inside the
  transaction) leaves nothing of the import, on every backend, and the error names the
  file and the line;
* a streamed import stores exactly what the batch import (the file loaded whole, one
  atomic append) stores: the same events, times, hash chain and session meta;
* progress is reported while the file still has lines to read, and the CLI prints it
  before its summary.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import FakeClock, counter_ids, make_store
from ctxline import Context
from ctxline.errors import ValidationError
from ctxline.importers import load_tree
from ctxline.importers.ingest import (
    CHUNK,
    FIRST_CHUNK,
    ImportProgress,
    _same_value,
    import_sessions,
    import_stream,
)
from ctxline.importers.stream import StreamedSession, stream_tree
from ctxline.record.blobs import blob_ref
from ctxline.record.codec import canonical_json
from ctxline.record.events import AssistantMessage, Pending, ToolCall, ToolResult, UserMessage
from ctxline.record.store import Batch, MemoryStore, Store, open_store
from ctxline.record.store.writes import write_batches
from ctxline.restore import restore_events, restore_sessions
from ctxline.sources.status import StatusConfig, SystemState
from ctxline.view.options import PrepareOptions
from test_adversarial_restore import _session as own_kinds_session
from test_cli import export, fails, ok

LONG = "a long line of tool output\n" * 60  # over BLOB_MIN_CHARS: saved as a blob


def _lines(n: int, session: str | None = "long", meta: bool = True) -> list[dict[str, Any]]:
    """An export-like file: a header, then ``n`` events (call/result pairs, some long)."""
    out: list[dict[str, Any]] = []
    if session is not None:
        head: dict[str, Any] = {"kind": "ctxline.session", "session": session, "version": 1}
        if meta:
            head["meta"] = {"origin": "test", "steps": n}
        out.append(head)
    out.append({"kind": "user.message", "text": "count the files", "id": f"{session}-u"})
    i = 0
    while len(out) < n + (session is not None):
        call = {"id": f"c{i}", "name": "run", "arguments": {"cmd": f"ls {i}"}}
        tag = f"{session}-{i}"
        out.append({"kind": "assistant.message", "text": "", "tool_calls": [call], "id": f"a{tag}"})
        content = LONG + str(i) if i % 100 == 0 else f"file-{i}.txt"
        out.append({"kind": "tool.result", "call_id": f"c{i}", "content": content, "id": f"r{tag}"})
        i += 1
    return out[: n + (session is not None)]


def _write(path: Path, lines: list[dict[str, Any]], bad: dict[int, str] | None = None) -> Path:
    """``lines`` as JSONL; ``bad`` replaces the given 1-based file lines with raw text."""
    text = [json.dumps(line) for line in lines]
    for number, raw in (bad or {}).items():
        text[number - 1] = raw
    path.write_text("\n".join(text) + "\n", encoding="utf-8")
    return path


def _progress() -> tuple[list[ImportProgress], Any]:
    seen: list[ImportProgress] = []
    return seen, seen.append


# --- a bad line deep in a long import --------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        ('{"kind": "user.message", "text": "cut off', "invalid JSON"),
        ('{"kind": "tool.result", "call_id": "c1", "content": 7}', "content"),
    ],
    ids=["broken-json", "bad-field"],
)
def test_a_bad_line_deep_in_a_long_import_leaves_nothing(
    store: Store, tmp_path: Path, raw: str, says: str
) -> None:
    short = _lines(10, "short")
    long = _lines(3_600)
    bad_line = len(short) + 3_450  # the file line, 3,449 events into the long session
    path = _write(tmp_path / "two.jsonl", short + long, {bad_line: raw})
    seen, hear = _progress()
    with pytest.raises(ValidationError) as caught:
        import_stream(store, stream_tree(path), progress=hear)
    message = str(caught.value)
    assert f"{path}, line {bad_line}" in message, message
    assert says in message
    # it failed after the short session and 3,000 events of the long one were appended
    assert ImportProgress("short", 10, 10, True) in seen
    assert max(p.appended for p in seen if p.session == "long") == 3_000
    assert [p.read for p in seen if p.session == "long"] == [FIRST_CHUNK, 1_000, 2_000, 3_000]
    assert store.sessions() == []
    if not isinstance(store, MemoryStore):  # SQL: blobs are saved inside the transaction
        assert not store.blobs.has(blob_ref((LONG + "0").encode()))
    # nothing is left to collide with: the fixed file imports whole, ids and all
    fixed = _write(tmp_path / "fixed.jsonl", short + long)
    results = import_stream(store, stream_tree(fixed))
    assert [(r.session, r.events, r.appended) for r in results] == [
        ("short", 10, 10),
        ("long", 3_600, 3_600),
    ]
    assert store.verify_chain("long").ok


def test_the_cli_names_file_and_line_of_a_deep_bad_line_and_stores_nothing(
    tmp_path: Path,
) -> None:
    path = _write(tmp_path / "x.jsonl", _lines(2_500), {2_400: "{not json"})
    db = str(tmp_path / "x.db")
    message = fails(["import", str(path), "--db", db, "--trusted"])
    assert "x.jsonl, line 2400" in message
    store = open_store(db)  # the database was opened (past the first chunk), and is empty
    try:
        assert store.sessions() == []
    finally:
        store.close()


def test_a_deep_difference_from_the_stored_session_is_refused_naming_its_seq(
    store: Store, tmp_path: Path
) -> None:
    lines = _lines(2_300)
    import_stream(store, stream_tree(_write(tmp_path / "a.jsonl", lines)))
    changed = [dict(line) for line in lines]
    changed[2_101]["content"] = "not what was stored"  # event 2,101 (line 2,102)
    grown = changed + _lines(40, None)[1:]  # and a tail, which must not be appended
    with pytest.raises(ValidationError, match="first difference at seq 2101"):
        import_stream(store, stream_tree(_write(tmp_path / "b.jsonl", grown)))
    with pytest.raises(ValidationError, match="first difference at seq 2201"):
        import_stream(store, stream_tree(_write(tmp_path / "c.jsonl", lines[:2_201])))
    assert store.head("long") == 2_300


# --- streamed = batch --------------------------------------------------------------------


def _long_export(tmp_path: Path, steps: int) -> Path:
    """A real session written through a Context (every request logged), exported."""
    db = str(tmp_path / "src.db")
    store = open_store(db)
    options = PrepareOptions(tokenizer="bytes/4", context_window=8_000, max_output=500)
    status = StatusConfig(limits={"run": 10_000}, environment=SystemState(cwd="/data"))
    ctx = Context(
        store, "run", options=options, clock=FakeClock(), status=status, status_mode="append"
    )
    ctx.append(UserMessage("Count the files, one folder at a time."))
    for i in range(steps):
        ctx.prepare()
        call = ToolCall(f"c{i}", "run", {"cmd": f"ls /data/{i}"})
        content = LONG if i % 10 == 0 else "\n".join(f"f{i}-{j}" for j in range(5))
        ctx.append(AssistantMessage(f"folder {i}", (call,)), ToolResult(f"c{i}", content, "run"))
    store.close()
    path = tmp_path / "run.jsonl"
    path.write_bytes(export(db, "run"))
    return path


def _batch(store: Store, path: Path, *, trusted: bool) -> None:
    """The batch import: the file loaded whole, checked whole, one atomic append."""
    sessions = restore_sessions(load_tree(path), trusted=trusted)
    batches = []
    for s in sessions:
        restored = s.meta.get("session_meta")
        meta = restored if isinstance(restored, dict) else s.meta
        batches.append(Batch(s.id, s.events, 0, create=True, meta=meta))
    write_batches(store, batches, authority="ctxline" if trusted else "app")


def _streamed(path: Path, trusted: bool) -> Iterator[StreamedSession]:
    for s in stream_tree(path):
        events = restore_events(s.events, trusted=trusted, session=s.id, file=s.file)
        yield StreamedSession(s.id, events, s.meta, s.stored_meta)


def _same_record(a: Store, b: Store, session: str) -> None:
    assert a.read(session) == b.read(session)
    assert a.verify_chain(session).link == b.verify_chain(session).link
    assert a.session(session).meta == b.session(session).meta


@pytest.fixture(scope="module")
def long_export(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _long_export(tmp_path_factory.mktemp("long"), 120)


def test_a_streamed_trusted_restore_is_the_batch_restore(
    store: Store, long_export: Path, tmp_path: Path
) -> None:
    kinds = {json.loads(line)["kind"] for line in long_export.read_text().splitlines()}
    assert {"request", "status", "tools"} <= kinds  # ctxline's own kinds, checked per event
    results = import_stream(store, _streamed(long_export, True), authority="ctxline", chunk=37)
    (result,) = results
    assert result.appended == result.events > 37 * 5
    reference = MemoryStore(clock=FakeClock(), new_id=counter_ids())
    _batch(reference, long_export, trusted=True)
    _same_record(store, reference, "run")
    db = str(tmp_path / "cli.db")  # and the CLI's own import exports the file byte for byte
    ok(["import", str(long_export), "--db", db, "--trusted"])
    assert export(db, "run") == long_export.read_bytes()


def test_a_streamed_plain_import_is_the_batch_import_meta_and_times_too(
    store: Store, tmp_path: Path
) -> None:
    # no header: the meta counts the events, known only at the end (set then); no times:
    # every event gets the one clock reading, as in a batch
    lines = [{k: v for k, v in line.items() if k != "id"} for line in _lines(500, None)]
    path = _write(tmp_path / "plain.jsonl", lines)
    import_stream(store, _streamed(path, False), chunk=64)
    twin_dir = tmp_path / "twin"
    twin_dir.mkdir()
    kind = {"MemoryStore": "memory", "SQLiteStore": "sqlite", "PostgresStore": "postgres"}
    twin = make_store(kind[type(store).__name__], twin_dir)
    try:
        _batch(twin, path, trusted=False)
        _same_record(store, twin, "plain")
        assert store.session("plain").meta["events"] == 500
        assert len({e.at for e in store.read("plain")}) == 1
    finally:
        twin.close()


def test_reimporting_streams_the_comparison_and_appends_only_the_tail(
    store: Store, tmp_path: Path
) -> None:
    lines = _lines(2_100)
    path = _write(tmp_path / "a.jsonl", lines)
    assert import_sessions(store, load_tree(path))[0].appended == 2_100
    seen, hear = _progress()
    again = import_stream(store, stream_tree(path), progress=hear)
    assert [(r.events, r.appended) for r in again] == [(2_100, 0)]
    assert [p.read for p in seen] == [FIRST_CHUNK, 1_000, 2_000, 2_100]
    grown = _write(tmp_path / "b.jsonl", lines + _lines(1_500, None)[1:])
    (result,) = import_stream(store, stream_tree(grown))
    assert (result.events, result.appended) == (3_599, 1_499)
    assert store.verify_chain("long").ok


# --- progress ----------------------------------------------------------------------------


def test_progress_is_heard_while_the_file_still_has_lines(store: Store) -> None:
    read = [0]

    def events() -> Iterator[tuple[Pending, int | None]]:
        yield Pending(UserMessage("start"), "u"), 1
        for i in range(2_600):
            read[0] += 1
            yield Pending(UserMessage(f"m{i}"), f"m{i}"), i + 2

    session = StreamedSession("s", events(), lambda: {"format": "test"}, {"format": "test"})
    heard: list[tuple[int, int, int]] = []
    import_stream(store, [session], progress=lambda p: heard.append((p.read, p.appended, read[0])))
    # after the first, small chunk: 2,501 lines still unread
    assert heard[0] == (FIRST_CHUNK, FIRST_CHUNK, FIRST_CHUNK - 1)
    assert heard[1] == (CHUNK, CHUNK, CHUNK - 1)
    assert heard[-1] == (2_601, 2_601, 2_600)
    assert [h[0] for h in heard] == [FIRST_CHUNK, 1_000, 2_000, 2_601]


def test_the_cli_prints_progress_before_its_summary(tmp_path: Path) -> None:
    path = _write(tmp_path / "p.jsonl", _lines(2_200))
    db = str(tmp_path / "p.db")
    cli = Path(sys.executable).with_name("ctxline")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [str(cli), "import", str(path), "--db", db, "--progress"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,  # one pipe: the order they were written in
        env=env,
        check=True,
        timeout=300,
    )
    lines = done.stdout.decode().splitlines()
    assert lines[0] == "long: 100 events read (100 new so far)..."
    assert lines[1] == "long: 2,200 events read, 2,200 new"
    assert lines[2].startswith("long  2200 events (2200 new)")
    quiet = subprocess.run(
        [str(cli), "import", str(path), "--db", db, "--json"],
        capture_output=True,
        env=env,
        check=True,
        timeout=300,
    )
    assert json.loads(quiet.stdout) == ["long"]
    assert quiet.stderr == b""  # a pipe is not a terminal: no progress unless asked


def test_an_own_kinds_export_still_refuses_a_plain_import_at_its_line(tmp_path: Path) -> None:
    db = str(tmp_path / "a.db")
    own_kinds_session(db)
    path = tmp_path / "s.jsonl"
    path.write_bytes(export(db, "s"))
    message = fails(["import", str(path), "--db", str(tmp_path / "b.db")])
    assert "s.jsonl, line " in message
    assert "--trusted" in message
    assert not (tmp_path / "b.db").exists()  # within the first chunk: no database is made


# --- the comparison's fast path ------------------------------------------------------------

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3), inner, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(_json, _json)
def test_a_strict_match_always_writes_the_same_json(a: Any, b: Any) -> None:
    """The re-import compares events by a strict walk before encoding them: a match must
    mean the same canonical JSON (1 and 1.0, True and 1, 0.0 and -0.0 are no match)."""
    for x, y in ((a, b), (a, a), (a, json.loads(json.dumps(a)))):
        if _same_value(x, y):
            assert canonical_json(x) == canonical_json(y)
    assert _same_value(a, json.loads(json.dumps(a)))  # what a parse gives back matches
