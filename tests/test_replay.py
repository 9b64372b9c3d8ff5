"""The main job on real data: replays of every recorded session at 200k, 32k and 8k windows."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import shared_data
from ctxline.cli.main import main
from ctxline.importers import ImportedSession, load_tree
from ctxline.record.events import AssistantMessage, Pending, Rule, State, ToolResult, UserMessage
from ctxline.record.jsonvalue import as_int
from ctxline.record.store import MemoryStore
from ctxline.replay import ReplayStats, replay_session
from ctxline.sources.rules import render_rule, valid_rules
from ctxline.sources.state import current_state, render_state
from ctxline.tags import escape
from ctxline.tokens.counters import get_counter
from ctxline.view.options import PrepareOptions
from json_reads_a import dig, num, objects

COUNTER = get_counter("o200k")
WINDOWS = [(200_000, 32_000), (32_000, 4_000), (8_000, 1_000)]
DATASETS = ["tau-bench", "swe-agent", "mini-swe-agent", "claude-code"]


@pytest.mark.parametrize(("window", "max_output"), WINDOWS, ids=["200k", "32k", "8k"])
@pytest.mark.parametrize("dataset", DATASETS)
def test_replay_stays_valid_at_every_window(dataset: str, window: int, max_output: int) -> None:
    options = PrepareOptions(context_window=window, max_output=max_output)
    stats = ReplayStats()
    sessions = load_tree(shared_data() / dataset, "auto")
    for session in sessions:
        stats.trajectories += 1
        for step in replay_session(MemoryStore(), session, options=options, counter=COUNTER):
            stats.add(step)
            if step.overflow is not None:
                # refused only when the original task alone cannot fit
                assert "original task" in step.overflow
                task = next(p.event for p in session.events if isinstance(p.event, UserMessage))
                assert COUNTER.count(escape(task.text)) + 4 > options.input_limit * 0.5
    summary = stats.summary()
    assert summary["trajectories"] == len(sessions) > 0
    assert summary["steps"] > 0
    assert summary["over_limit_steps"] == 0
    assert summary["pairing_errors"] == 0
    assert summary["empty_views"] == 0
    assert summary["task_kept"] == 1.0
    assert summary["peak_tokens"] <= options.input_limit
    if window >= 32_000:
        assert summary["context_overflows"] == 0
    assert summary["compaction_failures"] == 0
    # the newest history message is in the view whole whenever it fits the fresh limit
    # (in the smallest window the newest group alone may not fit beside the task)
    assert summary["latest_kept_within_fresh_limit"] >= (1.0 if window >= 32_000 else 0.99)
    # the two pricing styles, from the same sums
    reused, total = stats.reused_tokens, stats.total_tokens
    assert summary["billed_input_tokens_anthropic"] == round(0.1 * reused + 1.25 * (total - reused))
    assert summary["billed_input_tokens"] == round(0.1 * reused + (total - reused))


def _with_rules_and_state(session: ImportedSession) -> ImportedSession:
    """The session with rules and state set, replaced, revoked and cleared along the way."""
    out: list[Pending] = []
    results = 0
    for p in session.events:
        out.append(p)
        if isinstance(p.event, ToolResult):
            results += 1
            n = results
            if n == 2:
                out += [
                    Pending(
                        Rule(
                            "tests",
                            "set",
                            scope="session",
                            text="Run the tests before every commit",
                        )
                    ),
                    Pending(Rule("style", "set", scope="path:src/**", text="Use 4-space indents")),
                    Pending(Rule("net", "set", scope="session", text="No network access")),
                    Pending(State("env/date", "2026-11-02")),
                    Pending(State("env/branch", "main")),
                ]
            elif n == 5:
                out += [
                    Pending(
                        Rule(
                            "tests",
                            "replace",
                            scope="session",
                            text="Run the fast tests before every commit",
                        )
                    ),
                    Pending(Rule("net", "revoke", scope="session")),
                    Pending(State("env/date", "2026-11-03")),
                    Pending(State("env/branch", cleared=True)),
                ]
    return ImportedSession(session.id, out, session.meta)


def test_compaction_reaffirms_exactly_what_is_still_in_force() -> None:
    sessions = load_tree(shared_data() / "mini-swe-agent", "auto")[:8]
    options = PrepareOptions(context_window=16_000, max_output=2_000)
    compactions = 0
    for session in sessions:
        injected = _with_rules_and_state(session)
        task = escape(
            next(p.event.text for p in injected.events if isinstance(p.event, UserMessage))
        )
        store = MemoryStore()
        for step in replay_session(store, injected, options=options, counter=COUNTER):
            assert step.prep is not None
            if not any(a["action"] == "compact" for a in objects(step.prep.report["actions"])):
                continue
            compactions += 1
            messages = step.prep.body["messages"]
            assert any(m["role"] == "user" and m["content"] == task for m in messages)
            block = next(
                m["content"]
                for m in messages
                if m["role"] == "user" and "<ctx-reaffirm>" in m["content"]
            )
            reaffirm = block.split("<ctx-reaffirm>", 1)[1].split("</ctx-reaffirm>", 1)[0]
            compact = next(a for a in objects(step.prep.report["actions"]) if a["action"] == "compact")
            upto = as_int(compact["upto_seq"])
            record = store.read(step.session)[:upto]
            for rule in valid_rules(record).values():
                assert render_rule(rule) in reaffirm
            for state in current_state(record).values():
                assert render_state(state) in reaffirm
            assert 'id="net"' not in reaffirm  # revoked
            assert "env/branch" not in reaffirm or 'cleared="true"' not in reaffirm
            assert 'source="env/branch"' not in reaffirm  # cleared
            assert "2026-11-02" not in reaffirm  # replaced by a later value
            if "Run the fast tests" in reaffirm:
                assert "Run the tests before every commit" not in reaffirm
    assert compactions > 0


def test_replay_cli_json_and_html_report(tmp_path: Path) -> None:
    data = Path(__file__).resolve().parents[1] / "examples" / "data"
    report = tmp_path / "report.html"
    db = tmp_path / "replay.db"
    args = [
        "replay",
        str(data),
        "--db",
        str(db),
        "--context-window",
        "8000",
        "--max-output",
        "1000",
    ]
    result = CliRunner().invoke(main, [*args, "--json", "--report", str(report)])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    for key in (
        "trajectories",
        "steps",
        "peak_tokens",
        "mean_request_tokens",
        "over_limit_steps",
        "pairing_errors",
        "empty_views",
        "task_kept",
        "prefix_reuse",
        "cache_breaks_per_100_steps",
        "billed_input",
        "billed_input_tokens",
        "billed_input_tokens_per_step_anthropic",
        "latest_kept",
        "latest_kept_within_fresh_limit",
        "actions",
        "compactions",
        "offloads",
        "prepare_ms_p50",
        "prepare_ms_p95",
    ):
        assert key in summary
    assert summary["trajectories"] == 8
    assert summary["over_limit_steps"] == 0
    assert report.read_text().lstrip().lower().startswith("<!doctype html")
    # a second replay into the same database goes under new session ids
    again = CliRunner().invoke(main, [*args, "--json"])
    assert again.exit_code == 0, again.output
    sessions = json.loads(CliRunner().invoke(main, ["sessions", "--db", str(db), "--json"]).output)
    assert sum(s["session"].endswith("@replay2") for s in sessions) == 8
    # every logged request of a replayed session rebuilds through the CLI to its sha256
    sid = "mini-swe-agent/psf__requests-2317@replay1"
    listed = CliRunner().invoke(main, ["requests", "--db", str(db), "--session", sid, "--json"])
    rows = json.loads(listed.output)
    assert len(rows) > 20
    for row in rows[:: max(1, len(rows) // 8)] + rows[-1:]:
        rebuilt = CliRunner().invoke(
            main, ["request", "--db", str(db), "--session", sid, "--step", str(row["step"])]
        )
        assert rebuilt.exit_code == 0, rebuilt.output
        assert "sha256:" + hashlib.sha256(rebuilt.stdout_bytes).hexdigest() == row["sha256"]


def test_assistant_only_history_is_never_an_empty_view() -> None:
    session = ImportedSession(
        "odd",
        [
            Pending(UserMessage("start")),
            Pending(AssistantMessage("one")),
            Pending(AssistantMessage("two")),
        ],
        {},
    )
    stats = ReplayStats()
    for step in replay_session(MemoryStore(), session, options=PrepareOptions(), counter=COUNTER):
        stats.add(step)
    assert stats.summary()["empty_views"] == 0
    assert stats.steps == 2


def test_a_new_context_on_a_compacted_session_keeps_its_guide() -> None:
    from ctxline.context import Context

    session = load_tree(shared_data() / "mini-swe-agent", "auto")[0]
    store = MemoryStore()
    options = PrepareOptions(context_window=8_000, max_output=1_000)
    steps = list(replay_session(store, session, options=options, counter=COUNTER))
    assert any(
        s.prep and any(a["action"] == "compact" for a in objects(s.prep.report["actions"])) for s in steps
    )
    guides_before = sum(e.kind == "guide" for e in store.read(session.id))
    fresh = Context(store, session.id, options=options, counter=COUNTER)
    prep = fresh.prepare(log=False)
    assert sum(e.kind == "guide" for e in store.read(session.id)) == guides_before
    assert "<ctx-reaffirm>" in prep.body["messages"][0]["content"]


def _long_session(n: int) -> list[Pending]:
    from ctxline.record.events import ToolCall

    events = [Pending(UserMessage("fix the bug"))]
    for i in range(n):
        events.append(
            Pending(AssistantMessage(f"step {i}", (ToolCall(f"c{i}", "bash", {"i": i}),)))
        )
        # failed results are never trimmed, so only a compaction can make room
        events.append(Pending(ToolResult(f"c{i}", f"output {i} " + "x " * 300, is_error=True)))
    return events


def test_a_failing_summarizer_writes_nothing_and_says_so() -> None:
    from ctxline.context import Context
    from ctxline.errors import CompactionError

    def broken(*_: object) -> str:
        raise RuntimeError("model unavailable")

    store = MemoryStore()
    options = PrepareOptions(context_window=6_000, max_output=1_000, offload_tokens=0)
    ctx = Context(store, "s", options=options, counter=COUNTER, summarizer=broken)
    ctx.append(*_long_session(8))
    ctx.prepare()  # fits: nothing to compact yet
    ctx.append(*_long_session(24)[17:])
    before = store.read("s")
    with pytest.raises(CompactionError, match="model unavailable"):
        ctx.prepare()
    after = store.read("s")
    assert [e for e in after if e.kind == "reduction" and "compact" in str(e.event)] == []
    assert len(after) - len(before) <= 2  # at most the folds/trims of the first rung and a guide
    assert all(e.kind != "request" for e in after[len(before) :])


def test_a_compaction_that_saves_too_little_is_not_applied_but_reported() -> None:
    from ctxline.context import Context

    store = MemoryStore()
    # the window fits the whole session (built-in tools included) without a compaction
    # defer=False: reduce as soon as the pressure line is crossed (by default the view
    # waits while waiting is cheaper, and this request fits, so nothing would be tried)
    options = PrepareOptions(
        context_window=6_400,
        max_output=1_000,
        offload_tokens=0,
        min_compaction_saving=0.9,
        defer=False,
    )
    ctx = Context(store, "s", options=options, counter=COUNTER)
    ctx.append(*_long_session(14))
    prep = ctx.prepare()
    assert num(dig(prep.report["tokens"], "total")) <= options.input_limit
    assert any(a["action"] == "compact_failed" for a in objects(prep.report["actions"]))
    assert not any(e.kind == "reduction" and "compact" in str(e.event) for e in store.read("s"))
