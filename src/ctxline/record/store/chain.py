"""The hash chain of a timeline, and event bodies encoded in bounded pieces.

Why: a row changed outside ctxline (a flipped bit, a hand edit, a restored page) must
not be served as if it were the record. Every stored event carries a *link*: the
SHA-256 of the previous event's link and of this event's identity and body, so a
change to any byte of a body, ``seq``, ``id`` or ``at`` — or a removed event — breaks
every link from there on, and the first broken link names the seq.

The link, exactly (what an auditor recomputes from ``ctxline export``)::

    body   = canonical_json(event)                      # the export line minus seq, id, at
    digest = "sha256:" + sha256(body).hexdigest()
    link   = "sha256:" + sha256(prev + "\\n" + canonical_json(
                 {"at": at, "body": digest, "id": id, "seq": seq})).hexdigest()

``prev`` is the link of the previous event on the timeline (ASCII); the first event of
a root timeline starts from :data:`GENESIS`; a fork's first event starts from its
parent's link at the fork point. Hashing the body's digest rather than the body lets
a store compute the digest once, streaming, before its write transaction, and makes
the link itself cheap under the lock.

Bodies: :func:`encode_body` returns a :class:`Body` with its size and digest. An event
holding a string longer than :data:`PIECE_CHARS` characters is never encoded whole:
its canonical JSON is produced as pieces of a quarter MiB (:meth:`Body.pieces`, the
same bytes as :func:`~ctxline.record.events.canonical_json`), so a 200 MB tool output
costs a few MiB of encoding buffers instead of two or three more copies of itself.

    body = encode_body(UserMessage("hi"))
    link = chain_link(GENESIS, 1, "ev-1", "2026-11-02T23:59:00.000000Z", body.digest)
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from json.encoder import encode_basestring

from ctxline.errors import IntegrityError
from ctxline.record.codec import canonical_json, event_to_json
from ctxline.record.events import Event, JsonValue

__all__ = [
    "GENESIS",
    "PIECE_CHARS",
    "Body",
    "ChainCheck",
    "canonical_pieces",
    "chain_link",
    "digest_text",
    "encode_body",
    "field_path",
    "json_depth",
    "scan",
]

GENESIS = "sha256:" + "0" * 64
"""The link before the first event of a root timeline."""
PIECE_CHARS = 1 << 20
"""Strings longer than this are encoded (and hashed, and written) in slices."""
SLICE_CHARS = 1 << 18
"""The slices' length: each is copied four times on its way to bytes (slice, escaped,
unquoted, encoded), so a MiB-long slice was 4 MB of a 50 MB append's peak (issue 25)."""


def _has_long(obj: JsonValue, piece: int) -> bool:
    stack = [obj]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if len(item) > piece:
                return True
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return False


def json_depth(obj: JsonValue, limit: int) -> list[str] | None:
    """The path to the first point where ``obj`` nests deeper than ``limit`` containers
    (``["meta", "a", "[0]", …]``), or None when it does not. Iterative: any depth."""
    return scan(obj, limit)[0]


def scan(obj: JsonValue, limit: int, piece: int = PIECE_CHARS) -> tuple[list[str] | None, bool]:
    """One walk of ``obj``: the path where it nests deeper than ``limit`` (or None), and
    whether it holds a string longer than ``piece`` characters."""
    long = False
    stack: list[tuple[JsonValue, int, list[str]]] = [(obj, 0, [])]
    while stack:
        item, depth, path = stack.pop()
        if isinstance(item, str):
            long = long or len(item) > piece
            continue
        if not isinstance(item, dict | list | tuple):
            continue
        if depth + 1 > limit:
            return path, long
        pairs = item.items() if isinstance(item, dict) else enumerate(item)
        for key, value in pairs:
            if isinstance(value, str):
                long = long or len(value) > piece
            elif isinstance(value, dict | list | tuple):
                name = str(key) if isinstance(item, dict) else f"[{key}]"
                stack.append((value, depth + 1, [*path, name]))
    return None, long


def field_path(parts: list[str], most: int = 8) -> str:
    """``["meta", "a", "[0]", "[1]"]`` as ``meta.a[0][1]`` (cut after ``most`` parts)."""
    out = ""
    for part in parts[:most]:
        out += part if part.startswith("[") or not out else "." + part
    return out + ("…" if len(parts) > most else "")


def canonical_pieces(obj: JsonValue, piece: int = PIECE_CHARS) -> Iterator[bytes]:
    """``canonical_json(obj)`` as consecutive pieces; long strings are sliced, so no piece
    holds much more than ``piece`` characters of one string. Raises what
    ``canonical_json`` raises (ValueError, TypeError, UnicodeEncodeError, RecursionError)."""
    if not _has_long(obj, piece):
        yield canonical_json(obj)
        return
    yield from _walk(obj, piece)


def _walk(obj: JsonValue, piece: int) -> Iterator[bytes]:
    if isinstance(obj, str):
        if len(obj) <= piece:
            yield canonical_json(obj)
            return
        yield b'"'
        step = min(piece, SLICE_CHARS)
        for start in range(0, len(obj), step):  # escaping is per character: slices join exactly
            yield encode_basestring(obj[start : start + step])[1:-1].encode()
        yield b'"'
    elif isinstance(obj, dict) and all(isinstance(k, str) for k in obj):
        first = True
        for key, value in sorted(obj.items()):  # what json.dumps(sort_keys=True) does
            yield (b"{" if first else b",") + canonical_json(key) + b":"
            first = False
            yield from _walk(value, piece)
        yield b"{}" if first else b"}"
    elif isinstance(obj, list | tuple):
        if not obj:
            yield b"[]"
            return
        for i, value in enumerate(obj):
            yield b"[" if i == 0 else b","
            yield from _walk(value, piece)
        yield b"]"
    else:
        yield canonical_json(obj)


@dataclass(frozen=True, slots=True)
class Body:
    """An event's canonical JSON: whole when small, re-encoded piece by piece when large."""

    size: int
    """Bytes of the canonical JSON."""
    digest: str
    """``sha256:<hex>`` of those bytes."""
    data: bytes | None
    """The bytes themselves, or None for a large body (use :meth:`pieces`)."""
    event: Event
    external: str | None = None
    """The blob handle of the content of an external row (``store.external``): then
    ``data`` is the event without its content and ``digest`` the whole event's."""

    def pieces(self) -> Iterator[bytes]:
        if self.data is not None:
            yield self.data
            return
        total = 0
        for chunk in canonical_pieces(event_to_json(self.event)):
            total += len(chunk)
            yield chunk
        if total != self.size:  # the event changed under us: never write a torn body
            raise IntegrityError(f"the {self.event.kind} event changed while it was written")

    @property
    def text(self) -> str:
        """The body as text (small bodies only)."""
        if self.data is None:
            raise ValueError("a large body is written in pieces, not as one text")
        return self.data.decode()


def encode_body(
    event: Event, piece: int = PIECE_CHARS, *, obj: JsonValue = None, long: bool | None = None
) -> Body:
    """The canonical JSON of ``event`` with its size and digest (one streaming pass when
    it holds a long string). ``obj`` and ``long``: its JSON object and whether it holds
    a long string, when the caller has them already. Raises what ``canonical_json`` raises."""
    if obj is None:
        obj = event_to_json(event)
    if long is None:
        long = _has_long(obj, piece)
    if not long:
        data = canonical_json(obj)
        return Body(len(data), "sha256:" + hashlib.sha256(data).hexdigest(), data, event)
    h = hashlib.sha256()
    size = 0
    for chunk in _walk(obj, piece):
        h.update(chunk)
        size += len(chunk)
    return Body(size, "sha256:" + h.hexdigest(), None, event)


def digest_text(text: str | bytes, piece: int = PIECE_CHARS) -> str:
    """``sha256:<hex>`` of ``text`` as UTF-8, hashed in slices (no whole copy)."""
    h = hashlib.sha256()
    if isinstance(text, bytes):
        h.update(text)
    else:
        for start in range(0, len(text), piece):
            h.update(text[start : start + piece].encode())
    return "sha256:" + h.hexdigest()


def chain_link(prev: str, seq: int, event_id: str, at: str, digest: str) -> str:
    """The link of the event at ``seq`` (``at`` as stored: ``format_at``)."""
    # canonical_json({"at": at, "body": digest, "id": event_id, "seq": seq}), keys in order
    head = (
        f'{{"at":{encode_basestring(at)},"body":{encode_basestring(digest)},'
        f'"id":{encode_basestring(event_id)},"seq":{int(seq)}}}'
    )
    return "sha256:" + hashlib.sha256(f"{prev}\n{head}".encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class ChainCheck:
    """What :meth:`Store.verify_chain` found on one timeline (its visible events)."""

    session: str
    timeline: str
    head: int
    link: str
    """The link of the head event (:data:`GENESIS` for an empty root timeline): pin it
    somewhere else and a later rewrite of the whole chain is detected too."""
    checked: int
    """Events whose link was recomputed."""
    problems: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.problems

    def raise_if_broken(self) -> None:
        """Raise :class:`~ctxline.errors.IntegrityError` naming the first problem."""
        if self.problems:
            more = f" (and {len(self.problems) - 1} more)" if len(self.problems) > 1 else ""
            raise IntegrityError(f"{self.problems[0]}{more}; run ctxline doctor")
