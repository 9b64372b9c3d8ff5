"""Shared fixtures: every store backend, and the real recorded sessions."""

from __future__ import annotations

import itertools
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


def shared_data() -> Path:
    """``../shared/data`` beside the repo (or $CTXLINE_SHARED_DATA).

    Missing data skips locally, and fails in CI, where it must be there.
    """
    root = Path(os.environ.get("CTXLINE_SHARED_DATA", REPO.parent / "shared" / "data"))
    if not root.is_dir():
        if os.environ.get("CI") == "true":
            pytest.fail(f"shared data folder {root} is missing in CI")
        pytest.skip(f"shared data folder {root} is missing")
    return root


@pytest.fixture
def data_dir() -> Path:
    return shared_data()
