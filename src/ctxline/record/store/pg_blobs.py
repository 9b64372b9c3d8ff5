"""The PostgreSQL store's blobs: content-addressed ``bytea``, streamed in and out.

A blob over a MiB goes to the server with binary ``COPY`` a piece at a time (a
parameter would cost psycopg's and libpq's copies on top of the caller's bytes), and
comes back through a binary cursor (no hex text twice its size).

    ref = store.blobs.put_text(result.content)     # == blob_ref(result.content.encode())
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import errors as pg_errors

from ctxline.errors import BlobError
from ctxline.record.blobs import parse_ref, verify
from ctxline.record.store.chain import PIECE_CHARS
from ctxline.record.store.pg_events import Pieces, copy_rows
from ctxline.record.store.rows import PieceBlobs, check_blob_size

if TYPE_CHECKING:
    from ctxline.record.store.postgres import PostgresStore

__all__ = ["PostgresBlobs"]

Conn = psycopg.Connection[tuple[Any, ...]]


class PostgresBlobs(PieceBlobs):
    """The store's blobs; given ``conn`` (a streamed append's), saved and read inside that
    connection's transaction, each save in a savepoint."""

    def __init__(self, store: PostgresStore, conn: Conn | None = None) -> None:
        self._store = store
        self._tx_conn = conn

    @contextmanager
    def _reading(self) -> Iterator[Conn]:
        if self._tx_conn is not None:
            yield self._tx_conn
            return
        with self._store._conn() as conn:
            yield conn

    def _put(self, ref: str, size: int, pieces: Callable[[], Iterator[bytes]]) -> None:
        check_blob_size(size)
        store = self._store
        store._writable("save a blob")
        with store._guard("save a blob"):
            try:
                if self._tx_conn is not None:
                    with self._tx_conn.transaction():  # a savepoint: a race undoes only this
                        _put_in(self._tx_conn, ref, size, pieces)
                    return
                with store._tx() as conn:
                    _put_in(conn, ref, size, pieces)
            except pg_errors.UniqueViolation:
                return  # another writer saved the same bytes at the same moment

    def get(self, ref: str) -> bytes:
        parse_ref(ref)
        with (
            self._store._guard("read a blob"),
            self._reading() as conn,
            conn.cursor(binary=True) as cur,
        ):
            row = cur.execute("SELECT data FROM blobs WHERE ref = %s", (ref,)).fetchone()
        if row is None:
            raise BlobError(f"blob {ref} is missing")
        return verify(ref, bytes(row[0]))

    def has(self, ref: str) -> bool:
        if "\x00" in ref:
            return False
        with self._store._guard("read a blob"), self._reading() as conn:
            return conn.execute("SELECT 1 FROM blobs WHERE ref = %s", (ref,)).fetchone() is not None


def _put_in(conn: Conn, ref: str, size: int, pieces: Callable[[], Iterator[bytes]]) -> None:
    if conn.execute("SELECT 1 FROM blobs WHERE ref = %s", (ref,)).fetchone():
        return
    if size <= PIECE_CHARS:
        conn.execute(
            "INSERT INTO blobs(ref, size, data) VALUES (%s, %s, %s) ON CONFLICT (ref) DO NOTHING",
            (ref, size, b"".join(pieces())),
        )
        return
    copy_rows(conn, "blobs", "ref, size, data", [(ref, size, Pieces(size, pieces))])
