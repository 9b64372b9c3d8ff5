"""Storage backends behind one small Protocol, and ``open_store`` for database URLs.

store = open_store("sqlite:///ctxline.db")   # or a plain path, or ":memory:"
store = open_store("postgresql://user@host/db")  # pip install 'ctxline[postgres]'
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from ctxline.errors import ValidationError
from ctxline.record.store.base import (
    MAIN,
    HealthCheck,
    SearchHit,
    SessionInfo,
    Store,
    TimelineInfo,
    new_ulid,
    utc_now,
)
from ctxline.record.store.memory import MemoryStore
from ctxline.record.store.sqlite import SQLiteStore

__all__ = [
    "MAIN",
    "HealthCheck",
    "MemoryStore",
    "SQLiteStore",
    "SearchHit",
    "SessionInfo",
    "Store",
    "TimelineInfo",
    "new_ulid",
    "open_store",
    "utc_now",
]


def open_store(url: str, *, durability: str = "normal") -> Store:
    """Open a store from ``:memory:``, ``memory://``, ``sqlite:///path``, a file path, or
    ``postgresql://…`` (needs the ``ctxline[postgres]`` extra; imported only then)."""
    if durability not in ("normal", "full"):
        raise ValidationError(
            f"durability must be normal or full, got {durability!r}", field="durability"
        )
    mode: Literal["normal", "full"] = "full" if durability == "full" else "normal"
    if url in (":memory:", "memory://", "memory:"):
        return MemoryStore()
    if url.startswith("sqlite://"):
        path = url.removeprefix("sqlite://")
        path = path.removeprefix("/")  # sqlite:///rel.db is relative, sqlite:////abs.db absolute
        return SQLiteStore(path or ":memory:", durability=mode)
    if url.startswith(("postgresql://", "postgres://")):
        try:
            from ctxline.record.store.postgres import PostgresStore
        except ImportError as exc:
            raise ValidationError(
                f"PostgreSQL needs psycopg ({exc.name or exc}); install it with"
                " pip install 'ctxline[postgres]'",
                field="db",
            ) from None
        return PostgresStore(url)
    if "://" in url:
        raise ValidationError(
            f"unknown database URL {url!r}; use a path, sqlite:///path, postgresql://… or :memory:",
            field="db",
        )
    return SQLiteStore(Path(url), durability=mode)
