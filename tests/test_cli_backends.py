"""The CLI gives the same answers on SQLite, PostgreSQL and the memory store.

Why: ``--db`` chooses where the record lives, never what ctxline says about it. One
sequence of commands — ``import``, ``sessions --json``, ``export``, ``append``,
``fork``, ``show``, ``prepare --json --now …``, ``requests --json``, ``request --step
1``, ``search --json`` — runs against ``sqlite:///…`` and ``postgresql://…`` (a fresh
schema per test); every output must be identical, exports and prepared bodies byte for
byte. The one field that may differ is ``created_at`` in ``sessions --json``: it is the
time the session was created in *that* store. ``:memory:`` keeps nothing between
commands, so it is compared on single commands (an import, a listing, an error).

    .venv/bin/pytest tests/test_cli_backends.py -q
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

import pg_server
from conftest import REPO
from ctxline.cli.doctor import doctor_cmd
from ctxline.cli.main import main
from ctxline.cli.search import search_cmd

# ``ctxline`` as installed, with ``search`` and ``doctor`` whether or not cli.py lists them yet
CLI = click.Group("ctxline", commands={**main.commands, "search": search_cmd, "doctor": doctor_cmd})

TAU = REPO / "examples" / "data" / "tau-bench" / "gpt-4o-airline-sample.json"
CLAUDE = REPO / "examples" / "data" / "claude-code" / "short.jsonl"
NOW = "2026-11-03T09:30:00+01:00"

EVENTS = [
    {"kind": "ctxline.session", "session": "demo", "timeline": "main", "version": 1},
    {
        "kind": "system.message",
        "text": "You are a billing agent.",
        "id": "e1",
        "at": "2026-11-02T08:00:00Z",
    },
    {
        "kind": "user.message",
        "text": "Cancel my plan, user mia",
        "id": "e2",
        "at": "2026-11-02T08:00:01Z",
    },
    {
        "kind": "assistant.message",
        "text": "",
        "tool_calls": [{"id": "c1", "name": "lookup", "arguments": {"user": "mia"}}],
        "id": "e3",
        "at": "2026-11-02T08:00:02Z",
    },
    {
        "kind": "tool.result",
        "call_id": "c1",
        "name": "lookup",
        "content": "plan: pro\n" + "invoice line\n" * 300,
        "id": "e4",
        "at": "2026-11-02T08:00:03Z",
    },
    {
        "kind": "state",
        "source": "env/plan",
        "value": "pro",
        "id": "e5",
        "at": "2026-11-02T08:00:04Z",
    },
]
MORE = [
    {
        "kind": "assistant.message",
        "text": "Your plan is pro; cancelling.",
        "id": "e6",
        "at": "2026-11-02T08:00:05Z",
    },
    {
        "kind": "user.message",
        "text": "Thanks </ctx-state> bye",
        "id": "e7",
        "at": "2026-11-02T08:00:06Z",
    },
]


def run(args: Sequence[str], stdin: str | None = None) -> Result:
    runner = CliRunner(env={"COLUMNS": "200", "NO_COLOR": "1"})
    return runner.invoke(CLI, list(args), input=stdin, catch_exceptions=False)


def ok(args: Sequence[str], stdin: str | None = None) -> bytes:
    result = run(args, stdin)
    assert result.exit_code == 0, (args, result.stdout, result.stderr)
    return result.stdout_bytes


def jsonl(objs: Sequence[object]) -> str:
    return "".join(json.dumps(o) + "\n" for o in objs)


def sequence(db: str, events_file: Path) -> dict[str, bytes]:
    """Every command of the sequence against ``db``; outputs by step name."""
    out: dict[str, bytes] = {}
    out["import"] = ok(["import", str(events_file), "--db", db, "--json"])
    out["import tau"] = ok(["import", str(TAU), "--db", db, "--json"])
    out["import claude"] = ok(["import", str(CLAUDE), "--db", db, "--json"])
    rows = json.loads(ok(["sessions", "--db", db, "--json"]))
    for row in rows:
        assert row.pop("created_at")
    out["sessions"] = json.dumps(rows).encode()
    out["export"] = ok(["export", "--db", db, "--session", "demo"])
    out["export claude"] = ok(["export", "--db", db, "--session", "claude-code/short"])
    # tau-bench records carry no times, so their events get the time of the import:
    # everything else of the export is the same
    tau = ok(["export", "--db", db, "--session", "tau-bench/airline/1-0"]).splitlines()
    out["export tau"] = b"\n".join(
        json.dumps({k: v for k, v in json.loads(line).items() if k != "at"}).encode()
        for line in tau
    )
    out["append"] = ok(["append", "--db", db, "--session", "demo", "--json"], jsonl(MORE))
    out["append again"] = ok(["append", "--db", db, "--session", "demo"], jsonl(MORE))
    out["conflict"] = run(
        ["append", "--db", db, "--session", "demo", "--expected-seq", "3"],
        jsonl([{"kind": "user.message", "text": "late", "id": "e8", "at": "2026-11-02T08:00:07Z"}]),
    ).stderr_bytes
    out["fork"] = ok(["fork", "--db", db, "--session", "demo", "--at", "4", "--name", "alt"])
    out["append fork"] = ok(
        ["append", "--db", db, "--session", "demo", "--timeline", "alt"],
        jsonl(
            [
                {
                    "kind": "user.message",
                    "text": "Actually keep it",
                    "id": "f1",
                    "at": "2026-11-02T09:00:00Z",
                }
            ]
        ),
    )
    out["show"] = ok(["show", "--db", db, "--session", "demo"])
    out["show fork"] = ok(["show", "--db", db, "--session", "demo", "--timeline", "alt"])
    for timeline in ("main", "alt"):
        for provider in ("openai", "anthropic"):
            out[f"prepare {timeline} {provider}"] = ok(
                [
                    *("prepare", "--db", db, "--session", "demo", "--timeline", timeline),
                    *("--provider", provider, "--json", "--now", NOW, "--tokenizer", "bytes"),
                    *("--context-window", "3000", "--max-output", "500"),
                ]
            )
    out["prepare tau"] = ok(
        ["prepare", "--db", db, "--session", "tau-bench/airline/1-0", "--json", "--now", NOW]
    )
    out["requests"] = ok(["requests", "--db", db, "--session", "demo", "--json"])
    out["request 1"] = ok(["request", "--db", db, "--session", "demo", "--step", "1"])
    out["request 2"] = ok(["request", "--db", db, "--session", "demo", "--step", "2"])
    out["request alt"] = ok(
        ["request", "--db", db, "--session", "demo", "--timeline", "alt", "--step", "1"]
    )
    # search finds the same events with the same snippets and handles everywhere; scores
    # are the backend's own (BM25, ts_rank), so the order of near ties may differ
    for name, timeline, query in (
        ("search", "main", "plan invoice"),
        ("search fork", "alt", "keep thanks"),
    ):
        hits = json.loads(
            ok(["search", "--db", db, "--session", "demo", "--timeline", timeline, "--json", query])
        )
        out[name] = json.dumps(
            sorted(
                ({k: v for k, v in h.items() if k != "score"} for h in hits), key=lambda h: h["seq"]
            )
        ).encode()
    out["missing"] = run(["export", "--db", db, "--session", "nope"]).stderr_bytes
    return out


@pytest.fixture
def events_file(tmp_path: Path) -> Path:
    path = tmp_path / "demo.jsonl"
    path.write_text(jsonl(EVENTS))
    return path


def test_sqlite_and_postgres_give_identical_outputs(tmp_path: Path, events_file: Path) -> None:
    pg_server.require_psycopg()
    sqlite_out = sequence(f"sqlite:///{tmp_path / 'cli.db'}", events_file)
    pg_out = sequence(pg_server.fresh_dsn(), events_file)
    assert sqlite_out.keys() == pg_out.keys()
    for step in sqlite_out:
        assert sqlite_out[step] == pg_out[step], step
    # the sequence did what it says
    assert json.loads(sqlite_out["append"].splitlines()[0])["seq"] == 6
    assert b"appended 2 event(s)" in sqlite_out["append again"]  # a retry, nothing new
    assert b"expected seq 3" in sqlite_out["conflict"]
    for step in ("prepare main openai", "prepare alt anthropic"):
        prepared = json.loads(sqlite_out[step])
        assert prepared["report"]["tokens"]["total"] <= prepared["report"]["budget"]["input_limit"]
    body = json.loads(sqlite_out["prepare main openai"])["request"]
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert sqlite_out["request 1"].rstrip(b"\n") == canonical.encode()
    assert [h["seq"] for h in json.loads(sqlite_out["search fork"])] == [5]
    assert b"no session 'nope'" in sqlite_out["missing"]


def test_memory_matches_on_single_commands(tmp_path: Path, events_file: Path) -> None:
    pg_server.require_psycopg()
    dbs = {
        "memory": ":memory:",
        "sqlite": f"sqlite:///{tmp_path / 'one.db'}",
        "postgres": pg_server.fresh_dsn(),
    }
    outputs: dict[str, list[bytes]] = {}
    for name, db in dbs.items():
        if name != "memory":  # a command that only reads never creates a database
            fresh = run(["sessions", "--db", db, "--json"])
            assert fresh.exit_code == 2, fresh.stderr
            assert "no such database" in fresh.stderr or "no ctxline database" in fresh.stderr
            assert name != "sqlite" or not (tmp_path / "one.db").exists()
        outputs[name] = [
            ok(["import", str(events_file), "--db", db, "--json"]),
            run(["export", "--db", db, "--session", "nope"]).stderr_bytes,
            run(["search", "--db", db, "--session", "nope", "x"]).stderr_bytes,
            run(["prepare", "--db", db, "--session", "nope", "--json"]).stderr_bytes,
        ]
    assert outputs["memory"] == outputs["sqlite"] == outputs["postgres"]
    assert outputs["memory"][0] == b'["demo"]\n'
