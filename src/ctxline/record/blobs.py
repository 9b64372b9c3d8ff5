"""Content-addressed blobs for large payloads, verified on every read.

A handle is ``sha256:<hex>``: the algorithm travels with the hash. A blob whose bytes
no longer hash to their handle raises :class:`~ctxline.errors.BlobError`; ctxline
never returns wrong bytes.

    ref = store.blobs.put(b"large tool output")
    assert store.blobs.get(ref) == b"large tool output"
"""

from __future__ import annotations

import hashlib
from typing import Protocol, runtime_checkable

from ctxline.errors import BlobError

__all__ = ["TEXT_PIECE", "BlobStore", "MemoryBlobs", "blob_ref", "parse_ref", "text_ref", "verify"]

ALGORITHM = "sha256"


def blob_ref(data: bytes) -> str:
    return f"{ALGORITHM}:{hashlib.sha256(data).hexdigest()}"


TEXT_PIECE = 1 << 20
"""Characters hashed at a time by :func:`text_ref` (a huge output is never encoded whole)."""


def text_ref(text: str) -> str:
    """``blob_ref(text.encode())``, hashed a slice at a time (UTF-8 encodes each code point
    on its own, so the slices' bytes are the whole text's bytes)."""
    if len(text) <= TEXT_PIECE:
        return blob_ref(text.encode())
    h = hashlib.sha256()
    for start in range(0, len(text), TEXT_PIECE):
        h.update(text[start : start + TEXT_PIECE].encode())
    return f"{ALGORITHM}:{h.hexdigest()}"


def parse_ref(ref: str) -> str:
    """The hex digest of a handle; raises BlobError for a malformed one."""
    algo, _, digest = ref.partition(":")
    if algo != ALGORITHM or len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
        raise BlobError(f"malformed blob handle {ref!r} (expected sha256:<64 hex digits>)")
    return digest


def verify(ref: str, data: bytes) -> bytes:
    if blob_ref(data) != ref:
        raise BlobError(f"blob {ref} is corrupt: its bytes do not match its hash")
    return data


@runtime_checkable
class BlobStore(Protocol):
    def put(self, data: bytes) -> str: ...

    def get(self, ref: str) -> bytes:
        """The verified bytes; BlobError when missing or corrupt."""
        ...

    def has(self, ref: str) -> bool: ...


class MemoryBlobs:
    def __init__(self) -> None:
        self._data: dict[str, bytes] = {}

    def put(self, data: bytes) -> str:
        ref = blob_ref(data)
        self._data.setdefault(ref, bytes(data))
        return ref

    def get(self, ref: str) -> bytes:
        parse_ref(ref)
        data = self._data.get(ref)
        if data is None:
            raise BlobError(f"blob {ref} is missing")
        return verify(ref, data)

    def has(self, ref: str) -> bool:
        return ref in self._data
