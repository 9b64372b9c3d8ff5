"""What every SQL backend does with a stored row, whatever its dialect.

Why a module of its own: SQLite and PostgreSQL store the same rows (canonical JSON
bodies, hash links, content-addressed blobs), so reading a body back, hashing it and
streaming a text blob are the same code for both; each backend's modules keep only
what its engine does differently (no PostgreSQL module imports a SQLite one).

    event = parse_body([row_body], "s/main seq 3")      # IntegrityError naming the seq
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from ctxline.errors import IntegrityError, ValidationError
from ctxline.record.events import Event
from ctxline.record.parse import event_from_json
from ctxline.record.store.chain import PIECE_CHARS, digest_text, json_depth
from ctxline.record.store.checks import MAX_DEPTH, MAX_EVENT_BYTES

__all__ = [
    "Segment",
    "body_digest",
    "check_blob_size",
    "measure",
    "parse_body",
    "text_pieces",
]


@dataclass(frozen=True, slots=True)
class Segment:
    """A timeline's own events ``(base, upto]`` as seen from a descendant (root first)."""

    name: str
    base: int
    upto: int


def body_digest(body: str | bytes) -> str:
    return (
        "sha256:" + hashlib.sha256(body).hexdigest()
        if isinstance(body, bytes)
        else digest_text(body)
    )


def parse_body(box: list[str | bytes], where: str) -> Event:
    """The event in a stored body; ``box`` holds the body and is emptied, so the caller
    keeps no reference while the JSON is parsed (one copy less of a large body)."""
    raw = box.pop()
    try:
        text = raw.decode() if isinstance(raw, bytes) else raw
        del raw
        obj = json.loads(text)
        del text
        deep = json_depth(obj, MAX_DEPTH)  # never rely on the recursion limit: it varies
        if deep is not None:
            raise ValueError(f"nested deeper than {MAX_DEPTH} at {'.'.join(deep)[:120]}")
        return event_from_json(obj)
    except (ValueError, RecursionError, TypeError) as exc:  # JSONDecodeError, huge ints, bad UTF-8
        what = exc.message if isinstance(exc, ValidationError) else f"{type(exc).__name__}: {exc}"
        raise IntegrityError(
            f"{where}: the stored event cannot be read ({what[:200]}); run ctxline doctor"
        ) from None


def text_pieces(text: str) -> Callable[[], Iterator[bytes]]:
    """A re-startable source of ``text``'s UTF-8, a slice at a time."""
    return lambda: (text[i : i + PIECE_CHARS].encode() for i in range(0, len(text), PIECE_CHARS))


def measure(pieces: Callable[[], Iterator[bytes]]) -> tuple[str, int]:
    """The blob ref and size of what ``pieces`` yields, read once."""
    h = hashlib.sha256()
    size = 0
    for piece in pieces():
        h.update(piece)
        size += len(piece)
    return "sha256:" + h.hexdigest(), size


def check_blob_size(size: int) -> None:
    if size > MAX_EVENT_BYTES:
        raise ValidationError(
            f"a blob of {size:,} bytes is over the {MAX_EVENT_BYTES:,} bytes a store holds",
            field="blob",
        )
