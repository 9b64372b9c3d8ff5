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
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ctxline.errors import CtxlineError, IntegrityError, ValidationError
from ctxline.record.blobs import blob_ref, text_ref
from ctxline.record.events import Event
from ctxline.record.parse import event_from_json
from ctxline.record.store.base import MAIN, HealthCheck
from ctxline.record.store.chain import GENESIS, PIECE_CHARS, ChainCheck, digest_text, json_depth
from ctxline.record.store.checks import MAX_DEPTH, MAX_EVENT_BYTES

__all__ = [
    "SESSION_SQL",
    "PieceBlobs",
    "Segment",
    "apply_steps",
    "body_digest",
    "chain_health",
    "check_blob_size",
    "insert_main",
    "listed",
    "measure",
    "parse_body",
    "text_of",
    "text_pieces",
]


SESSION_SQL = (
    "SELECT s.id, s.created_at, s.meta,"
    " (SELECT head FROM timelines t WHERE t.session = s.id AND t.name = 'main'),"
    " (SELECT count(*) FROM timelines t WHERE t.session = s.id) FROM sessions s"
)
"""A session's id, time, meta, main head and timeline count (add WHERE or ORDER BY)."""


def insert_main(conn: Any, mark: str, session: str, now: str) -> None:
    """A new session's ``main`` timeline: no events yet, its link the genesis link."""
    conn.execute(
        "INSERT INTO timelines(session, name, parent, fork_seq, head, created_at, link)"
        f" VALUES ({mark}, {mark}, NULL, NULL, 0, {mark}, {mark})",
        (session, MAIN, now, GENESIS),
    )


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


def parse_body(box: list[str | bytes], where: str, *, checked: bool = False) -> Event:
    """The event in a stored body; ``box`` holds the body and is emptied, so the caller
    keeps no reference while the JSON is parsed (one copy less of a large body).
    ``checked``: the body's digest matched its hash link, so ctxline wrote it, and its
    append checked its depth and cleaned its strings: neither is done again."""
    raw = box.pop()
    try:
        text = raw.decode() if isinstance(raw, bytes) else raw
        del raw
        obj = json.loads(text)
        del text
        if not checked:
            deep = json_depth(obj, MAX_DEPTH)  # never rely on the recursion limit: it varies
            if deep is not None:
                raise ValueError(f"nested deeper than {MAX_DEPTH} at {'.'.join(deep)[:120]}")
        return event_from_json(obj, stored=checked)
    except (ValueError, RecursionError, TypeError) as exc:  # JSONDecodeError, huge ints, bad UTF-8
        what = exc.message if isinstance(exc, ValidationError) else f"{type(exc).__name__}: {exc}"
        raise IntegrityError(
            f"{where}: the stored event cannot be read ({what[:200]}); run ctxline doctor"
        ) from None


def text_of(data: bytes | bytearray, where: str) -> str:
    """Stored UTF-8 as text; IntegrityError naming ``where`` when it is not UTF-8."""
    try:
        return data.decode()
    except UnicodeDecodeError:
        raise IntegrityError(
            f"{where}: its stored content is not UTF-8; run ctxline doctor"
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


class PieceBlobs:
    """``put`` and ``put_text`` of both SQL stores' blobs: the bytes handed to ``_put`` a
    piece at a time (never a whole encoded copy of a text); a backend defines ``_put``."""

    def put(self, data: bytes) -> str:
        ref = blob_ref(data)
        view = memoryview(data)
        self._put(
            ref,
            len(data),
            lambda: (bytes(view[i : i + PIECE_CHARS]) for i in range(0, len(view), PIECE_CHARS)),
        )
        return ref

    _last: tuple[str, str] | None = None
    """The last huge text saved and its handle (an external row names it next)."""

    def put_text(self, text: str) -> str:
        """Save ``text`` as UTF-8 (the same blob as ``put(text.encode())``), in pieces."""
        pieces = text_pieces(text)
        ref, size = measure(pieces)
        self._put(ref, size, pieces)
        self._last = (text, ref) if len(text) > PIECE_CHARS else None
        return ref

    def ref_of(self, text: str) -> str:
        """``text_ref(text)``, without hashing it again when it is the text just saved."""
        last = self._last
        return last[1] if last is not None and last[0] is text else text_ref(text)

    def _put(self, ref: str, size: int, pieces: Callable[[], Iterator[bytes]]) -> None:
        raise NotImplementedError


def check_blob_size(size: int) -> None:
    if size > MAX_EVENT_BYTES:
        raise ValidationError(
            f"a blob of {size:,} bytes is over the {MAX_EVENT_BYTES:,} bytes a store holds",
            field="blob",
        )


def listed(problems: list[str], most: int = 20) -> tuple[str, ...]:
    """At most ``most`` problems, and how many more there are."""
    if len(problems) <= most:
        return tuple(problems)
    return (*problems[:most], f"… and {len(problems) - most} more")


def chain_health(conn: Any, visible: Any, link_at: Any, verify: Any) -> HealthCheck:
    """The ``chain`` check of ``ctxline doctor`` on either SQL store: every timeline's own
    links recomputed with the backend's functions (``visible_segments``, ``link_at``,
    ``verify_segments`` of its events module), problems named, nothing raised."""
    timelines = conn.execute(
        "SELECT session, name FROM timelines ORDER BY session, name"
    ).fetchall()
    problems: list[str] = []
    n = 0
    for session, name in timelines:
        try:
            segments, own = visible(conn, session, name, True)
            base = segments[-1].base
            start = link_at(conn, session, segments, base) if base else GENESIS
            found: ChainCheck = verify(conn, session, name, segments[-1:], own, start)
        except CtxlineError as exc:
            problems.append(str(exc).removesuffix("; run ctxline doctor"))
            continue
        n += found.checked
        problems += found.problems
    return HealthCheck(
        "chain", f"{n} hash link(s) of {len(timelines)} timeline(s) recomputed", listed(problems)
    )


def apply_steps(
    conn: Any,
    steps: Sequence[tuple[int, str, Any]],
    clock: Callable[[], Any],
    *,
    create: str,
    mark: str,
    raw: Callable[[str], Any] = str,
) -> list[int]:
    """Apply the pending migration ``steps`` inside the caller's transaction, in either
    dialect (``create``: its ``migrations`` table, ``mark``: its parameter mark, ``raw``:
    how a statement is handed over); returns the versions applied. A database holding a
    version this build does not know is refused."""
    from ctxline.record.codec import format_at

    conn.execute(create)
    done = {row[0] for row in conn.execute("SELECT version FROM migrations")}
    known = {version for version, _, _ in steps}
    if done - known:
        raise IntegrityError(
            f"the database has schema versions {sorted(done - known)} from a newer ctxline;"
            " upgrade ctxline"
        )
    applied = []
    for version, name, sql in steps:
        if version in done:
            continue
        if callable(sql):
            sql(conn)
        else:
            for statement in sql.split(";"):
                if statement.strip():
                    conn.execute(raw(statement))
        conn.execute(
            f"INSERT INTO migrations(version, name, applied_at) VALUES ({mark}, {mark}, {mark})",
            (version, name, format_at(clock())),
        )
        applied.append(version)
    return applied
