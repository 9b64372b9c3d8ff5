"""The same record and inputs give the same request and the same report, cold or warm.

A long-running worker keeps its caches; a fresh process (a CLI call, a restarted worker)
starts cold. The bytes sent and the report logged — prefix reuse, the status strategy
decision of ``auto``, the time reading — must not depend on which of the two prepared
the step. Checked at every step of replays of the bundled sessions, on random
timelines (hypothesis), and against a separate process.
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import REPO
from ctxline import (
    AssistantMessage,
    Context,
    MemoryStore,
    Notification,
    PrepareOptions,
    Rule,
    SQLiteStore,
    State,
    ToolCall,
    ToolResult,
    UserMessage,
)
from ctxline.importers import load_tree
from ctxline.record.events import Event
from ctxline.record.jsonvalue import as_str
from ctxline.record.store import Store
from ctxline.replay import model_calls
from ctxline.sources.status import StatusConfig
from ctxline.sources.timectx import TimeConfig
from json_reads_a import obj_at, objects

T0 = datetime(2026, 11, 2, 23, 58, tzinfo=UTC)
STATUS = StatusConfig(time=TimeConfig("Europe/Berlin", refresh_s=120), limits={"bash": 5})


def _context(store: Store, session: str, options: PrepareOptions) -> Context:
    return Context(store, session, options=options, status=STATUS, status_mode="auto")


def _same_step(warm: Context, store: Store, session: str, now: datetime) -> None:
    """Prepare cold (a fresh Context, nothing logged), then warm (logged): identical."""
    cold = _context(store, session, warm.options).prepare(now=now, log=False)
    hot = warm.prepare(now=now)
    assert cold.body_bytes == hot.body_bytes
    assert cold.report.to_json() == hot.report.to_json()
    assert cold.header.inputs == hot.header.inputs


def test_replays_of_the_bundled_sessions_are_the_same_cold_and_warm() -> None:
    sessions = load_tree(REPO / "examples" / "data", "auto", skipped=lambda _f, _e: None)
    options = PrepareOptions(context_window=8_000, max_output=1_000)
    actions: set[str] = set()
    strategies: set[str] = set()
    steps = 0
    for session in sessions:
        store = MemoryStore()
        warm = _context(store, session.id, options)
        calls = set(model_calls(session.events))
        for index, pending in enumerate(session.events):
            if index in calls and warm.events:
                now = warm.events[-1].at
                _same_step(warm, store, session.id, now)
                header = warm.requests()[-1]
                actions.update(as_str(a["action"]) for a in objects(header.report["actions"]))
                status = obj_at(header.inputs, "meta", "status")
                if "decision" in status:
                    strategies.add(as_str(status["strategy"]))
                steps += 1
            warm.append(pending)
    assert steps > 40
    assert "compact" in actions  # the steps that reduce are compared too
    assert strategies  # the auto decision (from logged growth) was taken and compared too


_EVENTS = st.sampled_from(["user", "call", "big", "state", "rule", "timed", "note"])


def _event(kind: str, i: int) -> list[Event]:
    if kind == "user":
        return [UserMessage(f"please do step {i}")]
    if kind in ("call", "big"):
        size = 900 if kind == "big" else 8
        return [
            AssistantMessage(f"running {i}", (ToolCall(f"c{i}", "bash", {"command": f"ls {i % 3}"}),)),
            ToolResult(f"c{i}", "\n".join(f"out {i} {j} " + "x" * 40 for j in range(size))),
        ]
    if kind == "state":
        return [State("env/branch", f"b{i % 2}")]
    if kind == "rule":
        return [Rule("tone", "set", text=f"style {i}")]
    if kind == "timed":
        return [Rule("temp", "set", text="for now", expires_at=T0 + timedelta(minutes=i % 4))]
    return [Notification("job/1", f"finished {i}")]


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    plan=st.lists(st.tuples(st.lists(_EVENTS, min_size=1, max_size=4), st.integers(0, 200)), min_size=2, max_size=10),
    window=st.sampled_from([3_000, 6_000, 50_000]),
    provider=st.sampled_from(["openai", "anthropic"]),
)  # fmt: skip
def test_random_timelines_are_the_same_cold_and_warm(
    plan: list[tuple[list[str], int]], window: int, provider: str
) -> None:
    options = PrepareOptions(
        provider="anthropic" if provider == "anthropic" else "openai",
        context_window=window,
        max_output=500,
        tokenizer="bytes/4",
    )
    store = MemoryStore()
    warm = _context(store, "p", options)
    warm.append(UserMessage("the original task"))
    now, i = T0, 0
    for kinds, seconds in plan:
        for kind in kinds:
            i += 1
            warm.append(*_event(kind, i))
        now += timedelta(seconds=seconds)
        try:
            _same_step(warm, store, "p", now)
        except Exception as exc:  # a refusal must be the same refusal, cold or warm
            if type(exc).__name__ not in ("ContextOverflow", "CompactionError"):
                raise
            assert warm.events[-1].kind != "request"


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    plan=st.lists(st.tuples(st.lists(_EVENTS, min_size=1, max_size=4), st.integers(0, 200)), min_size=3, max_size=14),
    window=st.sampled_from([3_000, 6_000, 50_000]),
    provider=st.sampled_from(["openai", "anthropic"]),
    fresh=st.sampled_from([None, 100]),
)  # fmt: skip
def test_edits_made_in_place_are_the_same_as_a_cold_rendering(
    plan: list[tuple[list[str], int]], window: int, provider: str, fresh: int | None
) -> None:
    """The budget's state — the edit index, the summary lines and span fold kept ahead,
    the growth and waiting folded from the logged requests, the counts made at append
    time — and the edits patched into the rendered view: a cold cache still gives the
    same bytes and report. ``edit_gain=0`` makes every edit that pays, so patches are
    frequent; ``defer=False`` makes the ladder reduce at the pressure line."""
    options = PrepareOptions(
        provider="anthropic" if provider == "anthropic" else "openai",
        context_window=window,
        max_output=500,
        tokenizer="bytes/4",
        edit_gain=0.0,
        defer=window != 6_000,
        fresh_tokens=fresh,
    )
    store = MemoryStore()
    warm = _context(store, "p", options)
    warm.append(UserMessage("the original task"))
    now, i = T0, 0
    for kinds, seconds in plan:
        for kind in kinds:
            i += 1
            warm.append(*_event(kind, i))
        now += timedelta(seconds=seconds)
        try:
            _same_step(warm, store, "p", now)
        except Exception as exc:  # a refusal must be the same refusal, cold or warm
            if type(exc).__name__ not in ("ContextOverflow", "CompactionError"):
                raise
            assert warm.events[-1].kind != "request"


_FRESH = """
import json, sys
from datetime import datetime
from ctxline import Context, PrepareOptions, SQLiteStore
from ctxline.sources.status import StatusConfig
from ctxline.sources.timectx import TimeConfig
store = SQLiteStore(sys.argv[1])
status = StatusConfig(time=TimeConfig("Europe/Berlin", refresh_s=120), limits={"bash": 5})
options = PrepareOptions.from_json(json.loads(sys.argv[2]))
ctx = Context(store, "w", options=options, status=status, status_mode="auto", create=False)
prep = ctx.prepare(now=datetime.fromisoformat(sys.argv[3]), log=False)
print(json.dumps({"sha": prep.sha256, "report": prep.report.to_json()}))
"""


def test_a_fresh_process_prepares_what_the_running_worker_prepares(tmp_path: Path) -> None:
    db = tmp_path / "w.db"
    store = SQLiteStore(db)
    options = PrepareOptions(context_window=6_000, max_output=500)
    warm = _context(store, "w", options)
    warm.append(UserMessage("fix the build"))
    now = T0
    for i in range(1, 7):
        warm.append(*_event("big" if i % 3 == 0 else "call", i))
        now += timedelta(seconds=45 * i)
        if i % 2 == 0:
            fresh = subprocess.run(
                [sys.executable, "-c", _FRESH, str(db), json.dumps(options.to_json()), now.isoformat()],
                capture_output=True, text=True, check=True, timeout=120,
            )  # fmt: skip
            other = json.loads(fresh.stdout)
            prep = warm.prepare(now=now)
            assert other["sha"] == prep.sha256
            assert other["report"] == prep.report.to_json()
        else:
            warm.prepare(now=now)
    store.close()
