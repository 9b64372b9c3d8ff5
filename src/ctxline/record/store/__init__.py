"""Storage backends behind one small Protocol, and ``open_store`` for database URLs.

store = open_store("sqlite:///ctxline.db")   # or a plain path, or ":memory:"
store = open_store("postgresql://user@host/db")  # pip install 'ctxline[postgres]'
reader = open_store("ctxline.db", read_only=True)  # never creates, migrates or writes

Commands that only read (``sessions``, ``export``, ``show``, ``requests``, ``request``,
``blob``, ``search``) open with ``read_only=True``: a mistyped path is an error, not a
new empty database, and a record on a read-only disk opens as it is.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from ctxline.errors import ValidationError
from ctxline.record.blobs import BlobStore
from ctxline.record.store.base import (
    MAIN,
    Batch,
    ChainCheck,
    HealthCheck,
    SearchHit,
    SessionInfo,
    StorageError,
    Store,
    TimelineInfo,
    new_ulid,
    utc_now,
)
from ctxline.record.store.chain import GENESIS
from ctxline.record.store.memory import MemoryStore
from ctxline.record.store.sqlite import SQLiteStore

__all__ = [
    "GENESIS",
    "MAIN",
    "Batch",
    "ChainCheck",
    "HealthCheck",
    "MemoryStore",
    "SQLiteStore",
    "SearchHit",
    "SessionInfo",
    "StorageError",
    "Store",
    "TimelineInfo",
    "new_ulid",
    "open_store",
    "put_text",
    "utc_now",
]


def put_text(blobs: BlobStore, text: str) -> str:
    """Save ``text`` as a UTF-8 blob; the durable backends stream it a MiB at a time
    (never a whole encoded copy), others get ``text.encode()``. The handle is
    ``blob_ref(text.encode())`` either way."""
    put = getattr(blobs, "put_text", None)
    if callable(put):
        ref: str = put(text)
        return ref
    return blobs.put(text.encode())


def open_store(
    url: str, *, durability: str = "normal", read_only: bool = False, create: bool = True
) -> Store:
    """Open a store from ``:memory:``, ``memory://``, ``sqlite:///path``, a file path, or
    ``postgresql://…`` (needs the ``ctxline[postgres]`` extra; imported only then).

    ``read_only=True``: never create, migrate or write (a missing database is a
    ValidationError; writes raise StorageError). ``create=False``: refuse a missing
    database, but migrate an existing one.
    """
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
        return SQLiteStore(path or ":memory:", durability=mode, read_only=read_only, create=create)
    if url.startswith(("postgresql://", "postgres://")):
        try:
            from ctxline.record.store.postgres import PostgresStore
        except ImportError as exc:
            raise ValidationError(
                f"PostgreSQL needs psycopg ({exc.name or exc}); install it with"
                " pip install 'ctxline[postgres]'",
                field="db",
            ) from None
        return PostgresStore(url, read_only=read_only, create=create)
    if "://" in url:
        raise ValidationError(
            f"unknown database URL {url!r}; use a path, sqlite:///path, postgresql://… or :memory:",
            field="db",
        )
    if not url:
        raise ValidationError("the database path is empty", field="db")
    return SQLiteStore(Path(url), durability=mode, read_only=read_only, create=create)
