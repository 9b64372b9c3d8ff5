"""The health checks of an open SQLite record (what ``ctxline doctor`` runs).

Why: the failures that matter are silent until something reads the wrong bytes — a
damaged page or index, a head that disagrees with its events, a row edited outside
ctxline, a call id the pairing check would miss, a blob whose bytes no longer hash
to their handle, a search index that drifted. Each check reads only; none repairs.

* ``pages``: ``PRAGMA integrity_check`` (every page, index and constraint);
* ``schema``: migration versions known and applied;
* ``timelines``: each head equals its own events (count and highest seq), parents exist;
* ``rows``: every session meta and every event body parsed as ctxline reads it, its
  ``kind`` column equal to its body's;
* ``chain``: every event's hash link recomputed, each head link against its last event;
* ``calls``: the tool-call index equal to the calls in the events;
* ``blobs``: every blob re-hashed (a MiB at a time) against its handle, and its size;
* ``search``: FTS5 ``integrity-check`` (in a rolled-back savepoint), one entry per
  searchable event, each entry's word count equal to its event's.

    checks = connection_health(conn)       # [HealthCheck("pages", …, ()), …]
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections import Counter
from functools import partial
from typing import Any

from ctxline.errors import CtxlineError, IntegrityError
from ctxline.record.codec import parse_at
from ctxline.record.events import JsonValue
from ctxline.record.store.base import HealthCheck, SessionInfo
from ctxline.record.store.chain import PIECE_CHARS
from ctxline.record.store.checks import call_ids
from ctxline.record.store.external import resolved
from ctxline.record.store.rows import SESSION_SQL, chain_health
from ctxline.record.store.sqlite_events import (
    blob_text,
    has_external,
    link_at,
    parse_body,
    verify_segments,
    visible_segments,
)
from ctxline.record.store.textsearch import index_words

__all__ = ["connection_health", "session_info"]

MAX_LISTED = 20


def session_info(row: tuple[Any, ...]) -> SessionInfo:
    """A sessions row as :class:`SessionInfo`; IntegrityError naming a damaged one."""
    try:
        meta: dict[str, JsonValue] = json.loads(row[2])
        if not isinstance(meta, dict):
            raise ValueError("not an object")
        return SessionInfo(row[0], parse_at(row[1]), int(row[3]), int(row[4]), meta)
    except (ValueError, TypeError, RecursionError) as exc:
        raise IntegrityError(
            f"session {str(row[0])[:80]!r}: its stored meta or time cannot be read"
            f" ({type(exc).__name__}: {str(exc)[:120]}); run ctxline doctor"
        ) from None


def _is_time(value: object) -> bool:
    try:
        parse_at(value)
    except CtxlineError:
        return False
    return True


def _listed(problems: list[str]) -> tuple[str, ...]:
    if len(problems) <= MAX_LISTED:
        return tuple(problems)
    return (*problems[:MAX_LISTED], f"… and {len(problems) - MAX_LISTED} more")


def _varint(data: bytes) -> int:
    """The first SQLite varint of ``data`` (FTS5's docsize record)."""
    value = 0
    for i, byte in enumerate(data[:9]):
        if i == 8:
            return (value << 8) | byte
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:
            return value
    return value


def _tables(conn: sqlite3.Connection) -> set[str]:
    return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def pages_check(conn: sqlite3.Connection, *, full: bool) -> HealthCheck:
    pragma = "integrity_check" if full else "quick_check"
    rows = [r[0] for r in conn.execute(f"PRAGMA {pragma}") if r[0] != "ok"]
    return HealthCheck("pages", f"PRAGMA {pragma}", _listed(rows))


def schema_check(conn: sqlite3.Connection, known: set[int]) -> HealthCheck:
    if "migrations" not in _tables(conn):
        return HealthCheck(
            "schema", "migrations table", ("no migrations table: not a ctxline database",)
        )
    done = {r[0] for r in conn.execute("SELECT version FROM migrations")}
    problems = []
    if done - known:
        problems.append(f"schema versions {sorted(done - known)} come from a newer ctxline")
    detail = f"schema versions {sorted(done)}"
    if known - done:
        detail += f" (versions {sorted(known - done)} are applied on the next write open)"
    return HealthCheck("schema", detail, tuple(problems))


def timelines_check(conn: sqlite3.Connection) -> HealthCheck:
    problems = []
    rows = conn.execute(
        "SELECT t.session, t.name, t.head, coalesce(t.fork_seq, 0), t.parent,"
        " (SELECT count(*) FROM events e WHERE e.session = t.session AND e.timeline = t.name),"
        " (SELECT coalesce(max(seq), 0) FROM events e WHERE e.session = t.session AND e.timeline = t.name),"
        " (SELECT p.head FROM timelines p WHERE p.session = t.session AND p.name = t.parent)"
        " FROM timelines t ORDER BY t.session, t.name"
    ).fetchall()
    for session, name, head, base, parent, n, top, parent_head in rows:
        if not isinstance(head, int) or n != head - base or (n and top != head):
            problems.append(
                f"timeline {session}/{name}: head {head} but {n} events (max seq {top})"
            )
        if parent is not None and (parent_head is None or base > parent_head):
            problems.append(
                f"timeline {session}/{name}: forks from {parent!r} at seq {base}, which it does not have"
            )
    orphans = conn.execute(
        "SELECT DISTINCT session, timeline FROM events e WHERE NOT EXISTS (SELECT 1 FROM"
        " timelines t WHERE t.session = e.session AND t.name = e.timeline)"
    ).fetchall()
    problems += [f"events of {s}/{t} belong to no timeline" for s, t in orphans]
    return HealthCheck(
        "timelines", f"{len(rows)} timeline(s): heads against events", _listed(problems)
    )


def _body(conn: sqlite3.Connection, rowid: int, body: str | bytes | None) -> str | bytes:
    if body is not None:
        return body
    with conn.blobopen("events", "body", rowid, readonly=True) as blob:
        return blob.read()


def rows_check(
    conn: sqlite3.Connection, searched: bool
) -> tuple[HealthCheck, HealthCheck, dict[tuple[str, str, int], int]]:
    """Every session meta and event parsed; the call index compared; words per event."""
    problems: list[str] = []
    sessions = 0
    for row in conn.execute(_SESSION_SQL):
        sessions += 1
        try:
            session_info(row)
        except IntegrityError as exc:
            problems.append(str(exc).removesuffix("; run ctxline doctor"))
    calls = Counter(
        (s, t, c, q)
        for s, t, c, q in conn.execute("SELECT session, timeline, call_id, seq FROM tool_calls")
    )
    expected: Counter[tuple[str, str, str, int]] = Counter()
    words: dict[tuple[str, str, int], int] = {}
    n = 0
    ext = (
        "(SELECT c.external FROM chain c WHERE c.session = events.session"
        " AND c.timeline = events.timeline AND c.seq = events.seq)"
        if has_external(conn)
        else "NULL"
    )
    for rowid, session, timeline, seq, kind, at, ext_ref, body in conn.execute(
        f"SELECT rowid, session, timeline, seq, kind, at, {ext},"
        " CASE WHEN typeof(body) = 'blob' THEN NULL ELSE body END"
        " FROM events ORDER BY session, timeline, seq"
    ):
        n += 1
        where = f"{session}/{timeline} seq {seq}"
        try:
            box = [_body(conn, rowid, body)]
            del body
            event = parse_body(box, where)
            if ext_ref is not None:  # its content is a blob (store.external)
                event = resolved(event, partial(blob_text, conn, str(ext_ref), where), where)
        except CtxlineError as exc:
            problems.append(str(exc).removesuffix("; run ctxline doctor"))
            words[(session, timeline, seq)] = -1
            continue
        if event.kind != kind:
            problems.append(f"{where}: the kind column says {kind!r}, the body {event.kind!r}")
        if not _is_time(at):
            problems.append(f"{where}: the stored time {str(at)[:40]!r} is not a time")
        expected.update((session, timeline, c, seq) for c in call_ids(event))
        if searched:
            words[(session, timeline, seq)] = len(index_words(event))
    call_problems = [
        f"{s}/{t} seq {q}: tool call {c!r} is missing from the call index"
        for (s, t, c, q) in sorted(expected - calls)
    ] + [
        f"the call index holds {c!r} at {s}/{t} seq {q}, which has no such call"
        for (s, t, c, q) in sorted(calls - expected)
    ]
    return (
        HealthCheck("rows", f"{sessions} session(s), {n} event(s) parsed", _listed(problems)),
        HealthCheck(
            "calls", f"{sum(expected.values())} tool call(s) indexed", _listed(call_problems)
        ),
        words,
    )


_SESSION_SQL = SESSION_SQL + " ORDER BY s.id"


def chain_check(conn: sqlite3.Connection) -> HealthCheck:
    if "chain" not in _tables(conn):
        return HealthCheck(
            "chain", "no hash chain yet (schema before version 3): computed on the next write open"
        )
    return chain_health(conn, visible_segments, link_at, verify_segments)


def blobs_check(conn: sqlite3.Connection) -> HealthCheck:
    problems = []
    rows = conn.execute("SELECT rowid, ref, size, typeof(data) FROM blobs ORDER BY ref").fetchall()
    for rowid, ref, size, kind in rows:
        if kind != "blob":
            problems.append(f"blob {ref} is corrupt: its data is {kind}, not bytes")
            continue
        h = hashlib.sha256()
        length = 0
        with conn.blobopen("blobs", "data", rowid, readonly=True) as blob:
            while piece := blob.read(PIECE_CHARS):
                h.update(piece)
                length += len(piece)
        if f"sha256:{h.hexdigest()}" != ref:
            problems.append(f"blob {ref} is corrupt: its bytes do not match its hash")
        elif length != size:
            problems.append(f"blob {ref}: {length} bytes but {size} recorded")
    return HealthCheck("blobs", f"{len(rows)} blob(s) re-hashed", _listed(problems))


def fts_check_copy(conn: sqlite3.Connection, table: str) -> None:
    """FTS5's ``integrity-check`` of ``table`` run on a copy of its shadow tables in a
    private temporary database (deleted on close), so ``conn`` may be read-only and
    nothing of the record is written. Raises what the check raises."""
    (sql,) = conn.execute("SELECT sql FROM sqlite_master WHERE name = ?", (table,)).fetchone()
    scratch = sqlite3.connect("", isolation_level=None)
    factory = conn.text_factory
    conn.text_factory = _text_or_bytes  # a damaged text value is copied as it is
    try:
        scratch.execute(sql)
        shadows = [
            r[0]
            for r in scratch.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            if r[0].startswith(f"{table}_")
        ]
        scratch.execute("BEGIN")
        for name in shadows:
            scratch.execute(f"DELETE FROM {name}")
            rows = conn.execute(f"SELECT * FROM {name}")
            while chunk := rows.fetchmany(500):
                marks = ", ".join("?" * len(chunk[0]))
                scratch.executemany(f"INSERT INTO {name} VALUES ({marks})", chunk)
        scratch.execute("COMMIT")
        scratch.execute(f"INSERT INTO {table}({table}) VALUES ('integrity-check')")
    finally:
        conn.text_factory = factory
        scratch.close()


def _text_or_bytes(data: bytes) -> str | bytes:
    try:
        return data.decode()
    except UnicodeDecodeError:
        return data


def search_check(conn: sqlite3.Connection, words: dict[tuple[str, str, int], int]) -> HealthCheck:
    """The FTS5 index against the record: one entry per searchable event, word counts equal."""
    if "search_docs" not in _tables(conn):
        return HealthCheck(
            "search", "no search index yet (schema before version 2): built on the next write open"
        )
    problems: list[str] = []
    structure = "FTS5 integrity-check, "
    try:  # the check is written as an INSERT but changes nothing; rolled back all the same
        conn.execute("SAVEPOINT doctor")
        try:
            conn.execute("INSERT INTO search_fts(search_fts) VALUES ('integrity-check')")
        finally:
            conn.execute("ROLLBACK TO doctor")
            conn.execute("RELEASE doctor")
    except sqlite3.DatabaseError as exc:
        if "readonly" not in str(exc).replace("-", "").replace(" ", ""):
            problems.append(f"FTS5 integrity-check failed: {exc}")
        else:  # a read-only connection: the same check on a scratch copy of the index
            structure = "FTS5 integrity-check (on a copy), "
            try:
                fts_check_copy(conn, "search_fts")
            except sqlite3.DatabaseError as copied:
                problems.append(f"FTS5 integrity-check failed: {copied}")
    docs = {
        (r[1], r[2], r[3]): r[0]
        for r in conn.execute("SELECT id, session, timeline, seq FROM search_docs")
    }
    sizes = {
        r[0]: _varint(bytes(r[1])) for r in conn.execute("SELECT id, sz FROM search_fts_docsize")
    }
    doc_ids = set(docs.values())
    indexed = 0
    for (session, timeline, seq), want in sorted(words.items()):
        doc = docs.pop((session, timeline, seq), None)
        if want < 0:  # an event that cannot be read: the rows check names it
            continue
        where = f"{session}/{timeline}#{seq}"
        if want and doc is None:
            problems.append(f"event {where} is missing from the search index")
        elif doc is not None and not want:
            problems.append(f"event {where} has nothing to search but is indexed")
        elif doc is not None:
            indexed += 1
            have = sizes.get(doc)
            if have is None:
                problems.append(f"event {where}: entry {doc} is missing from the FTS5 table")
            elif have != want:
                problems.append(
                    f"event {where}: the index holds {have} words, the event has {want}"
                )
    for (session, timeline, seq), doc in sorted(docs.items()):
        problems.append(
            f"search entry {doc} points at {session}/{timeline}#{seq}, which has no event"
        )
    for doc in sorted(set(sizes) - doc_ids):
        problems.append(f"FTS5 row {doc} has no search entry")
    return HealthCheck(
        "search", f"{structure}{indexed} indexed event(s) against the record", _listed(problems)
    )


def connection_health(conn: sqlite3.Connection, *, full: bool = True) -> list[HealthCheck]:
    """Every check over an open connection (see the module doc), in that order."""
    from ctxline.record.store.migrations import SQLITE_MIGRATIONS

    checks = [pages_check(conn, full=full)]
    if checks[0].problems and full:
        return checks  # damaged pages: reading the tables could fail or mislead
    checks.append(schema_check(conn, {v for v, _, _ in SQLITE_MIGRATIONS}))
    if "migrations" not in _tables(conn):
        return checks
    searched = "search_docs" in _tables(conn)
    rows, calls, words = rows_check(conn, searched)
    checks += [timelines_check(conn), rows, chain_check(conn), calls, blobs_check(conn)]
    checks.append(search_check(conn, words))
    return checks
