"""Rows changed outside ctxline: every read names the seq, no command tracebacks.

Why: the pages of a database can be perfectly healthy while a row says something
ctxline never wrote — a hand edit, a restored backup of one table, a flipped bit
inside a text value. Each case here changes one row with SQL, on SQLite and on
PostgreSQL, and checks that reads raise an :class:`IntegrityError` naming the
session, timeline and seq (or the session), that ``export``, ``show``, ``sessions``
and ``doctor`` say so in one line with exit 2, and that ``doctor`` puts it in the
right check.

    .venv/bin/pytest tests/test_store_damage_rows.py -q
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

import pg_server
from ctxline.cli.main import main
from ctxline.errors import IntegrityError
from ctxline.record.doctor import run_doctor
from ctxline.record.events import AssistantMessage, ToolCall, ToolResult, UserMessage
from ctxline.record.store import SQLiteStore, open_store
from ctxline.record.store.chain import chain_link

Damage = Callable[[Callable[..., object], str], object]


def _sqlite_run(db: str) -> Callable[..., object]:
    conn = sqlite3.connect(db, isolation_level=None)

    def run(sql: str, *params: object) -> object:
        return conn.execute(sql.replace("%s", "?"), params).fetchall()

    return run


def _fill(url: str) -> None:
    store = open_store(url)
    store.create_session("s", meta={"owner": "team"})
    call = AssistantMessage("", (ToolCall("c1", "grep", {"pattern": "invoice"}),))
    store.append("s", [UserMessage("find the invoice"), call, ToolResult("c1", "invoice.pdf")])
    store.append("s", [UserMessage("thanks"), UserMessage("last one")])
    store.blobs.put(b"saved output")
    store.close()


def _relink(run: Callable[..., object], seq: int, body: str, at: str | None = None) -> None:
    """Give event ``seq`` (the last one) ``body`` with a *valid* link, so only parsing fails."""
    rows = run("SELECT id, at FROM events WHERE seq = %s", seq)
    assert isinstance(rows, list)
    (eid, old_at) = rows[0]
    prev_rows = run("SELECT link FROM chain WHERE seq = %s", seq - 1)
    assert isinstance(prev_rows, list)
    prev = prev_rows[0][0]
    digest = "sha256:" + hashlib.sha256(body.encode()).hexdigest()
    link = chain_link(prev, seq, eid, at or old_at, digest)
    run("UPDATE events SET body = %s, at = %s WHERE seq = %s", body, at or old_at, seq)
    run("UPDATE chain SET digest = %s, link = %s WHERE seq = %s", digest, link, seq)
    run("UPDATE timelines SET link = %s WHERE name = 'main'", link)


CASES: list[tuple[str, Damage, str, str]] = [
    (
        "body-not-json",
        lambda run, _: _relink(run, 5, "{not json"),
        "s/main seq 5: the stored event cannot be read",
        "rows",
    ),
    (
        "body-not-an-event",
        lambda run, _: _relink(run, 5, '{"kind":"user.message"}'),
        "seq 5: the stored event cannot be read",
        "rows",
    ),
    (
        "body-huge-int",
        lambda run, _: _relink(
            run, 5, '{"kind":"user.message","text":"x","meta":{"n":' + "9" * 5000 + "}}"
        ),
        "seq 5: the stored event cannot be read",
        "rows",
    ),
    (
        "body-deep",
        lambda run, _: _relink(
            run,
            5,
            '{"kind":"user.message","text":"x","meta":{"d":' + "[" * 3000 + "]" * 3000 + "}}",
        ),
        "seq 5: the stored event cannot be read",
        "rows",
    ),
    (
        "time-not-a-time",
        lambda run, _: _relink(run, 5, '{"kind":"user.message","text":"last one"}', "yesterday"),
        "seq 5: the stored time",
        "rows",
    ),
    (
        "body-edited",
        lambda run, _: run(
            "UPDATE events SET body = replace(body, 'invoice', 'invoise') WHERE seq = 1"
        ),
        "s/main seq 1: the stored event does not match its hash link",
        "chain",
    ),
    (
        "id-edited",
        lambda run, _: run("UPDATE events SET id = 'forged' WHERE seq = 2"),
        "s/main seq 2: the stored event does not match",
        "chain",
    ),
    (
        "time-edited",
        lambda run, _: run("UPDATE events SET at = '2020-01-01T00:00:00.000000Z' WHERE seq = 3"),
        "s/main seq 3: the stored event does not match",
        "chain",
    ),
    (
        "seq-moved",
        lambda run, _: run("UPDATE events SET seq = 9 WHERE seq = 4"),
        "s/main: seq 4 is missing",
        "timelines",
    ),
    (
        "middle-deleted",
        lambda run, _: run("DELETE FROM events WHERE seq = 2"),
        "s/main: seq 2 is missing",
        "chain",
    ),
    (
        "tail-deleted-head-moved",
        lambda run, _: (
            run("DELETE FROM events WHERE seq = 5"),
            run("DELETE FROM chain WHERE seq = 5"),
            run("UPDATE timelines SET head = 4"),
        ),
        "the head link does not match the last event (seq 4)",
        "chain",
    ),
    (
        "link-deleted",
        lambda run, _: run("DELETE FROM chain WHERE seq = 3"),
        "s/main seq 3 has no hash link",
        "chain",
    ),
    (
        "link-edited",
        lambda run, _: run(
            "UPDATE chain SET link = 'sha256:' || substr(link, 8, 63)"
            " || CASE WHEN substr(link, 71, 1) = '0' THEN '1' ELSE '0' END WHERE seq = 2"
        ),
        "seq 2: the stored event does not match",
        "chain",
    ),
    (
        "meta-not-json",
        lambda run, _: run("UPDATE sessions SET meta = '{oops'"),
        "session 's': its stored meta",
        "rows",
    ),
    (
        "created-not-a-time",
        lambda run, _: run("UPDATE sessions SET created_at = 'soon'"),
        "session 's'",
        "rows",
    ),
]
DOCTOR_ONLY: list[tuple[str, Damage, str, str]] = [
    (
        "kind-column",
        lambda run, _: run("UPDATE events SET kind = 'tool.result' WHERE seq = 1"),
        "the kind column says 'tool.result'",
        "rows",
    ),
    (
        "call-index-row-gone",
        lambda run, _: run("DELETE FROM tool_calls"),
        "tool call 'c1' is missing from the call index",
        "calls",
    ),
    (
        "forged-call-index-row",
        lambda run, _: run("INSERT INTO tool_calls VALUES ('s', 'main', 'ghost', 1)"),
        "'ghost'",
        "calls",
    ),
]


def _backend(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> tuple[str, Callable[..., object]]:
    if kind == "sqlite":
        url = str(tmp_path / "rows.db")
        _fill(url)
        return url, _sqlite_run(url)
    pg_server.require_psycopg()
    url = pg_server.fresh_dsn()
    _fill(url)
    admin = pg_server.admin_connect(url)
    request.addfinalizer(admin.close)

    def run(sql: str, *params: object) -> object:
        cur = admin.execute(sql, params)
        return cur.fetchall() if cur.description else None

    return url, run


def _cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
@pytest.mark.parametrize(("name", "damage", "needle", "check"), CASES, ids=[c[0] for c in CASES])
def test_a_changed_row_is_named_everywhere(
    tmp_path: Path,
    request: pytest.FixtureRequest,
    backend: str,
    name: str,
    damage: Damage,
    needle: str,
    check: str,
) -> None:
    url, run = _backend(backend, tmp_path, request)
    damage(run, name)
    store = open_store(url, read_only=True)
    session_level = name.startswith(("meta", "created"))
    with pytest.raises(IntegrityError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        store.session("s") if session_level else store.read("s")
    store.close()
    # sessions lists sessions: it reads no event, so only a damaged session stops it
    listing = _cli("sessions", "--db", url)
    assert listing[0] == (2 if session_level else 0), listing
    commands = [["export", "--session", "s"]]
    if not session_level:
        commands.append(["show", "--session", "s"])
    if session_level:
        commands.append(["sessions"])
    for args in commands:
        code, _out, err = _cli(*args, "--db", url)
        assert code == 2, (args, err)
        assert err.startswith("error: "), err
        assert err.count("\n") == 1, err
        assert needle.split(":")[0] in err, err
    report = run_doctor(url)
    assert not report.healthy
    failed = {c.name: c.problems for c in report.checks if c.problems}
    assert check in failed, failed
    code, out, err = _cli("doctor", "--db", url)
    assert code == 2
    assert "problem(s) found" in err
    assert "Traceback" not in out + err


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
@pytest.mark.parametrize(
    ("name", "damage", "needle", "check"), DOCTOR_ONLY, ids=[c[0] for c in DOCTOR_ONLY]
)
def test_doctor_finds_what_reads_do_not_need(
    tmp_path: Path,
    request: pytest.FixtureRequest,
    backend: str,
    name: str,
    damage: Damage,
    needle: str,
    check: str,
) -> None:
    url, run = _backend(backend, tmp_path, request)
    damage(run, name)
    report = run_doctor(url)
    failed = {c.name: c.problems for c in report.checks if c.problems}
    assert check in failed, failed
    assert any(needle in p for p in failed[check]), failed


def test_a_flipped_byte_inside_a_large_body_is_named(tmp_path: Path) -> None:
    db = tmp_path / "big.db"
    store = SQLiteStore(db)
    store.create_session("s")
    # a huge tool result is stored once, as a blob (tests/test_stored_once.py); any other
    # event with a string over a MiB is a large body
    call = AssistantMessage("", (ToolCall("c", "cat", {}),))
    store.append("s", [call, UserMessage("0123456789" * 300_000)])
    store.close()
    conn = sqlite3.connect(db)
    rowid, kind = conn.execute("SELECT rowid, typeof(body) FROM events WHERE seq = 2").fetchone()
    assert kind == "blob"  # written a piece at a time
    with conn.blobopen("events", "body", rowid) as blob:
        blob.seek(2_000_000)
        blob.write(b"X")
    conn.commit()
    conn.close()
    with pytest.raises(IntegrityError, match="s/main seq 2: the stored event does not match"):
        SQLiteStore(db).read("s")
    report = run_doctor(str(db))
    assert any("seq 2" in p and "its body" in p for p in report.problems)


def test_a_tampered_blob_is_refused_by_the_blob_command(tmp_path: Path) -> None:
    db = str(tmp_path / "b.db")
    _fill(db)
    run = _sqlite_run(db)
    rows = run("SELECT ref FROM blobs")
    assert isinstance(rows, list)
    ref = rows[0][0]
    run("UPDATE blobs SET data = CAST('forged' AS BLOB)")
    code, _out, err = _cli("blob", ref, "--db", db)
    assert code == 2
    assert "corrupt" in err
    assert any("corrupt" in p for p in run_doctor(db).problems)


# --- a read leaves a damaged file exactly as it found it ----------------------------------


def _files(db: str) -> dict[str, bytes]:
    """The database and its WAL files, byte for byte (absent files absent)."""
    return {s: Path(db + s).read_bytes() for s in ("", "-wal", "-shm") if Path(db + s).exists()}


READS = [
    ["doctor"],
    ["export", "--session", "s"],
    ["prepare", "--session", "s", "--no-log"],
    ["sessions"],
]


@pytest.mark.parametrize("leftovers", ["clean", "crashed"])
@pytest.mark.parametrize(
    ("name", "damage", "needle"),
    [
        ("body-not-json", lambda run: _relink(run, 5, "{not json"), "seq 5"),
        ("meta-not-json", lambda run: run("UPDATE sessions SET meta = '{oops'"), "session 's'"),
    ],
)
def test_a_read_leaves_a_damaged_file_byte_identical(
    tmp_path: Path, name: str, damage: Callable[..., object], needle: str, leftovers: str
) -> None:
    db = str(tmp_path / "rows.db")
    _fill(db)
    conn = sqlite3.connect(db, isolation_level=None)
    damage(lambda sql, *p: conn.execute(sql.replace("%s", "?"), p).fetchall())
    if leftovers == "crashed":  # the -wal and -shm of a writer that died: frames not checkpointed
        conn.execute("PRAGMA wal_autocheckpoint = 0")
        conn.execute("UPDATE token_counts SET count = count")
        keep = {s: Path(db + s).read_bytes() for s in ("-wal", "-shm")}
        conn.close()
        for s, data in keep.items():
            Path(db + s).write_bytes(data)
        assert len(keep["-wal"]) > 32
    else:
        conn.close()
    before = _files(db)
    assert set(before) == ({"", "-wal", "-shm"} if leftovers == "crashed" else {""})
    for args in READS:
        if args == ["sessions"] and name == "body-not-json":
            assert _cli(*args, "--db", db)[0] == 0  # lists sessions: reads no event
        else:
            code, _out, err = _cli(*args, "--db", db)
            assert code == 2, (args, err)
            assert err.startswith("error: "), err
            assert err.count("\n") == 1, err
            assert needle in err or "problem(s) found" in err, (args, err)
        after = _files(db)
        assert set(after) == set(before), (args, sorted(before), sorted(after))
        for suffix, data in before.items():
            assert after[suffix] == data, (args, f"{db}{suffix} changed")
    report = run_doctor(db)
    assert any(needle in p for p in report.problems), report.problems
    assert _files(db) == before


def test_doctor_checks_the_search_index_structure_without_writing(tmp_path: Path) -> None:
    db = str(tmp_path / "fts.db")
    _fill(db)
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute(  # a leaf of the FTS5 index cut short: only the structure check sees it
        "UPDATE search_fts_data SET block = CAST(substr(block, 1, length(block) - 8)"
        " || x'ffffffffffffffff' AS BLOB) WHERE id > 1000"
    )
    conn.close()
    before = _files(db)
    report = run_doctor(db)
    search = next(c for c in report.checks if c.name == "search")
    assert "on a copy" in search.detail
    assert any("FTS5 integrity-check failed" in p for p in search.problems), search
    assert _files(db) == before
