"""``show``, ``requests`` and ``export`` on a long timeline: printed as read, paged, and the
same table as before for a short one (issue 25: 129 s of table layout before a first line)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from ctxline import (
    AssistantMessage,
    Context,
    PrepareOptions,
    RequestHeader,
    ToolCall,
    ToolResult,
    UserMessage,
)
from ctxline.cli.main import main
from ctxline.cli.stream import TABLE_ROWS
from ctxline.record.store import SQLiteStore
from json_reads_a import dig

STEPS = TABLE_ROWS + 20
ESC = "\x1b[2J\x1b]0;owned\x07"


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("reads") / "long.db"
    store = SQLiteStore(path)
    ctx = Context(store, "long", options=PrepareOptions(model="gpt-4.1", context_window=8_000))
    ctx.append(UserMessage(f"Count the files {ESC} one folder at a time."))
    for i in range(STEPS):
        ctx.prepare()
        ctx.append(
            AssistantMessage("", (ToolCall(f"c{i}", "ls", {"path": f"/d/{i}"}),)),
            ToolResult(f"c{i}", f"{i} files", "ls"),
        )
    store.close()
    return str(path)


def head(db: str) -> int:
    store = SQLiteStore(db)
    try:
        return store.head("long")
    finally:
        store.close()


def table_column(out: str) -> list[int]:
    """The first column of a rich table's rows (a folded row's other lines have none)."""
    cells = [line.split("│")[1].strip() for line in out.splitlines() if line.startswith("│")]
    return [int(c) for c in cells if c]


def run(*args: str) -> str:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def test_a_long_show_is_one_line_per_event_in_order(db: str) -> None:
    out = run("show", "--db", db, "--session", "long").splitlines()
    events = head(db)
    assert events > TABLE_ROWS
    assert out[0] == f"long / main: {events} events"
    assert out[1].split() == ["seq", "at", "kind", "text"]
    rows = out[2:]
    assert len(rows) == events
    assert [int(r.split()[0]) for r in rows] == list(range(1, events + 1))
    assert rows[0].split()[3] == "user.message"
    assert "\x1b" not in "\n".join(out)  # a terminal escape in the record is shown inert
    assert "\ufffd[2J" in rows[0]
    assert "┃" not in "\n".join(out)  # no table was laid out


def test_show_pages_with_since_and_limit(db: str) -> None:
    out = run("show", "--db", db, "--session", "long", "--since", "10", "--limit", "5")
    assert f"long / main: 5 events after seq 10 (of {head(db)})" in out
    assert table_column(out) == [11, 12, 13, 14, 15]  # a short page is the table it always was
    last = head(db)
    tail = run("show", "--db", db, "--session", "long", "--since", str(last - 2))
    assert table_column(tail) == [last - 1, last]


def test_a_long_requests_listing_and_its_pages(db: str) -> None:
    out = run("requests", "--db", db, "--session", "long").splitlines()
    assert out[0].split() == ["step", "upto", "seq", "provider", "tokens", "sha256"]
    rows = [line.split() for line in out[1:]]
    assert [int(r[0]) for r in rows] == list(range(1, STEPS + 1))
    store = SQLiteStore(db)
    headers = [e.event for e in store.read("long") if isinstance(e.event, RequestHeader)]
    store.close()
    assert [r[4] for r in rows] == [h.sha256 for h in headers]
    assert [int(r[1]) for r in rows] == [h.upto_seq for h in headers]
    listed = json.loads(run("requests", "--db", db, "--session", "long", "--json"))
    assert [r["step"] for r in listed] == list(range(1, STEPS + 1))
    assert listed[0] == {
        "step": 1,
        "upto_seq": headers[0].upto_seq,
        "sha256": headers[0].sha256,
        "tokens": dig(headers[0].report["tokens"], "total"),
        "provider": "openai",
    }
    page = run("requests", "--db", db, "--session", "long", "--since", "5", "--limit", "3")
    assert table_column(page) == [6, 7, 8]
    paged = json.loads(
        run("requests", "--db", db, "--session", "long", "--json", "--since", str(STEPS - 2))
    )
    assert [r["step"] for r in paged] == [STEPS - 1, STEPS]


def test_export_streams_every_event_and_checks_the_timeline_first(db: str) -> None:
    lines = run("export", "--db", db, "--session", "long").splitlines()
    assert json.loads(lines[0])["kind"] == "ctxline.session"
    assert [json.loads(line)["seq"] for line in lines[1:]] == list(range(1, head(db) + 1))
    result = CliRunner().invoke(
        main, ["export", "--db", db, "--session", "long", "--timeline", "nope"]
    )
    assert result.exit_code == 2
    assert result.stdout == ""  # nothing printed before the error
    assert "nope" in result.stderr


def test_bad_paging_values_are_usage_errors(db: str) -> None:
    for args in (["--since", "-1"], ["--limit", "0"], ["--limit", "many"]):
        for command in ("show", "requests"):
            result = CliRunner().invoke(main, [command, "--db", db, "--session", "long", *args])
            assert result.exit_code == 2, (command, args)
            assert args[0] in result.output, (command, args)


def test_the_streamed_lines_escape_what_a_table_cell_escapes() -> None:
    """A listing too long for a table must not print a line separator or a bidi override
    raw either (issue 24: ``skills list`` printed U+2028 raw)."""
    from ctxline.cli.common import BIDI_CONTROLS
    from ctxline.cli.stream import plain

    forged = "ok\u2028seq 99 forged\u2029\u202eevil\x85\x1b[2J"
    shown = plain(forged)
    assert shown == "ok\ufffdseq 99 forged\ufffd\ufffdevil\ufffd\ufffd[2J"
    assert not any(ch in shown for ch in BIDI_CONTROLS)
    assert shown.splitlines() == [shown]  # one line, whatever the record held
