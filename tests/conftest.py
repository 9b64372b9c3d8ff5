"""Shared fixtures: every store backend, and the real recorded sessions."""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from ctxline.record.store import MemoryStore, SQLiteStore, Store

REPO = Path(__file__).resolve().parents[1]

BACKENDS = ["memory", "sqlite", "postgres"]


class FakeClock:
    """A clock that moves one second per reading, from a fixed start."""

    def __init__(self, start: datetime = datetime(2026, 11, 2, 23, 59, 0, tzinfo=UTC)) -> None:
        self.now = start

    def __call__(self) -> datetime:
        value = self.now
        self.now += timedelta(seconds=1)
        return value


def counter_ids(prefix: str = "ev") -> Callable[[], str]:
    numbers = itertools.count(1)
    return lambda: f"{prefix}-{next(numbers):06d}"


def make_store(kind: str, tmp_path: Path) -> Store:
    if kind == "memory":
        return MemoryStore(clock=FakeClock(), new_id=counter_ids())
    if kind == "sqlite":
        return SQLiteStore(tmp_path / "contract.db", clock=FakeClock(), new_id=counter_ids())
    if kind == "postgres":  # a fresh schema on $CTXLINE_TEST_PG or a throwaway server
        import pg_server

        pg_server.require_psycopg()
        from ctxline.record.store.postgres import PostgresStore

        return PostgresStore(pg_server.fresh_dsn(), clock=FakeClock(), new_id=counter_ids())
    raise AssertionError(kind)


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    s = make_store(str(request.param), tmp_path)
    yield s
    s.close()


DATA = REPO / "tests" / "data"
"""The real sessions kept in the repo: a subset of ../shared/data with its licenses."""


def shared_data() -> Path:
    """The real recorded sessions: ``$CTXLINE_SHARED_DATA``, else ``../shared/data`` beside
    the repo when it is there, else the subset in ``tests/data`` (what a plain clone has).

    Never skips: every test that reads real data passes on the subset as on the full set.
    """
    env = os.environ.get("CTXLINE_SHARED_DATA")
    if env:
        if not Path(env).is_dir():
            pytest.fail(f"$CTXLINE_SHARED_DATA names no folder: {env}")
        return Path(env)
    beside = REPO.parent / "shared" / "data"
    return beside if beside.is_dir() else DATA


@pytest.fixture
def data_dir() -> Path:
    return shared_data()


def tau_file(root: Path) -> Path:
    """The tau-bench file of a data folder: ``gpt-4o-airline-tasks-00-24.json`` in the full
    set, its tasks 0–4 and 13 in the repo's subset; both start with task 0, trial 0."""
    files = sorted((root / "tau-bench").glob("gpt-4o-airline-*.json"))
    assert files, f"no tau-bench file in {root}"
    return files[0]


def expected_sessions(root: Path) -> dict[str, int]:
    """How many sessions each format's files under ``root`` hold, counted from the raw files.

    tau-bench: one per entry of each JSON list; SWE-agent and mini-swe-agent: one per
    file; Claude Code: one per ``.jsonl`` file, sub-agent files included.
    """
    tau = sum(
        len(json.loads(path.read_text(encoding="utf-8")))
        for path in (root / "tau-bench").glob("*.json")
    )
    return {
        "tau-bench": tau,
        "swe-agent": len(list((root / "swe-agent").glob("*.traj"))),
        "mini-swe-agent": len(list((root / "mini-swe-agent").glob("*.traj.json"))),
        "claude-code": len(expected_claude_sessions(root)),
    }


def expected_claude_sessions(root: Path) -> set[str]:
    """The Claude Code session ids under ``root``: one per file, named by its stem."""
    return {f"claude-code/{path.stem}" for path in (root / "claude-code").rglob("*.jsonl")}
