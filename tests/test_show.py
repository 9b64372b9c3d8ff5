"""``ctxline show`` reads every kind of event a real database holds.

A database that was replayed (with compaction and the status bar persisted), prepared,
branched, and appended to by hand holds every kind ctxline knows, its own records
included, plus a kind from a newer version. ``show`` must list every session and
timeline of it, one line per event, and never crash on a kind.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import get_args

from click.testing import CliRunner

from conftest import REPO
from ctxline.cli.main import main
from ctxline.record.events import EventKind, Slot
from ctxline.record.store import open_store
from ctxline.record.timeline import TimelineWriter


def _run(*args: str, stdin: str | None = None) -> str:
    result = CliRunner(env={"COLUMNS": "240", "NO_COLOR": "1"}).invoke(
        main, list(args), input=stdin, catch_exceptions=False
    )
    assert result.exit_code == 0, (args, result.output)
    return result.stdout


def _jsonl(*objs: object) -> str:
    return "".join(json.dumps(o) + "\n" for o in objs)


def test_show_lists_every_kind_of_a_replayed_and_prepared_database(tmp_path: Path) -> None:
    db = str(tmp_path / "all.db")
    data = REPO / "examples" / "data"
    _run("replay", str(data), "--db", db, "--context-window", "8000",
         "--max-output", "1000", "--status", "append", "--json")  # fmt: skip
    _run("append", "--db", db, "--session", "hand", "--create", stdin=_jsonl(
        {"kind": "user.message", "text": "plan the trip"},
        {"kind": "state", "source": "env/date", "value": "2026-12-01"},
        {"kind": "state", "source": "env/date", "cleared": True},
        {"kind": "rule", "rule_id": "r1", "op": "set", "text": "be brief"},
        {"kind": "notification", "source": "job/1", "text": "done", "ref": "blob:x"},
        {"kind": "todo", "op": "write", "items": [{"id": "1", "content": "book", "status": "pending"}]},
        {"kind": "todo", "op": "update", "id": "1", "status": "completed"},
        {"kind": "compaction", "summary": "earlier work", "trigger": "auto", "pre_tokens": 9000},
        {"kind": "model.error", "model": "openai:qwen", "error": "HTTP 500", "error_type": "ModelError"},
        {"kind": "system.message", "text": "You plan trips."},
        {"kind": "weather.report", "city": "Oslo", "temp": -3},
    ))  # fmt: skip
    # a slot is the app's to write (ctxline append refuses one: docs/trust.md section 5)
    store = open_store(db)
    TimelineWriter(store, "hand").append([Slot("goal", "set", "plan the trip", {"by": "app"})])
    store.close()
    _run("prepare", "--db", db, "--session", "hand", "--status", "append")
    _run("fork", "--db", db, "--session", "hand", "--at", "3", "--name", "alt")
    _run("append", "--db", db, "--session", "hand", "--timeline", "alt",
         stdin=_jsonl({"kind": "user.message", "text": "another plan"}))  # fmt: skip
    _run("prepare", "--db", db, "--session", "hand", "--timeline", "alt")

    shown: set[str] = set()
    rows = json.loads(_run("sessions", "--db", db, "--json"))
    assert len(rows) >= 3
    for row in rows:
        timelines = ["main", "alt"] if row["session"] == "hand" else ["main"]
        for timeline in timelines:
            out = _run("show", "--db", db, "--session", row["session"], "--timeline", timeline)
            shown.update(k for k in (*get_args(EventKind), "weather.report") if f" {k} " in out)
    assert shown == {*get_args(EventKind), "weather.report"}
