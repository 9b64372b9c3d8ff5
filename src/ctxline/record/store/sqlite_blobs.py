"""The SQLite store's blobs: content-addressed, written and read without whole copies.

Why: an offloaded tool output can be hundreds of MB. A plain ``INSERT`` of a 200 MB
value costs a copy for the bound parameter and another for SQLite's record on top of
the caller's bytes, so large blobs are inserted as ``zeroblob(size)`` and written
through SQLite's incremental blob I/O a MiB at a time; reads hash as they go.
:meth:`SQLiteBlobs.put_text` saves a string's UTF-8 without ever encoding it whole.

    ref = store.blobs.put_text(result.content)     # == blob_ref(result.content.encode())
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from ctxline.errors import BlobError
from ctxline.record.blobs import parse_ref, verify
from ctxline.record.store.chain import PIECE_CHARS
from ctxline.record.store.rows import PieceBlobs, check_blob_size, text_pieces
from ctxline.record.store.sqlite_events import shrink_after_read

if TYPE_CHECKING:
    from ctxline.record.store.sqlite import SQLiteStore

__all__ = ["SQLiteBlobs", "text_pieces"]


class SQLiteBlobs(PieceBlobs):
    def __init__(self, store: SQLiteStore) -> None:
        self._store = store

    def _put(self, ref: str, size: int, pieces: Callable[[], Iterator[bytes]]) -> None:
        check_blob_size(size)
        with self._store._write("save a blob") as conn:
            if conn.execute("SELECT 1 FROM blobs WHERE ref = ?", (ref,)).fetchone():
                return
            if size <= PIECE_CHARS:
                conn.execute(
                    "INSERT INTO blobs(ref, size, data) VALUES (?, ?, ?)",
                    (ref, size, b"".join(pieces())),
                )
                return
            cur = conn.execute(
                "INSERT INTO blobs(ref, size, data) VALUES (?, ?, zeroblob(?))", (ref, size, size)
            )
            assert cur.lastrowid is not None
            written = hashlib.sha256()
            with conn.blobopen("blobs", "data", cur.lastrowid) as blob:
                for piece in pieces():
                    written.update(piece)
                    blob.write(piece)
            if "sha256:" + written.hexdigest() != ref:  # the source changed under us
                raise BlobError(f"blob {ref}: its bytes changed while they were saved")

    def get(self, ref: str) -> bytes:
        parse_ref(ref)
        with self._store._reading() as conn:
            row = conn.execute(
                "SELECT rowid, typeof(data) FROM blobs WHERE ref = ?", (ref,)
            ).fetchone()
            if row is None:
                raise BlobError(f"blob {ref} is missing")
            if row[1] != "blob":
                raise BlobError(f"blob {ref} is corrupt: its data is not bytes")
            with conn.blobopen("blobs", "data", row[0], readonly=True) as blob:
                data = blob.read()
            shrink_after_read(conn, len(data))
        return verify(ref, data)

    def has(self, ref: str) -> bool:
        with self._store._reading() as conn:
            return conn.execute("SELECT 1 FROM blobs WHERE ref = ?", (ref,)).fetchone() is not None
