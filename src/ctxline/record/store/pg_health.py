"""The health checks of a PostgreSQL record (what ``ctxline doctor`` runs on it).

The same checks as SQLite's (:mod:`ctxline.record.store.sqlite_health`) from
``schema`` on — pages are the server's job — in one read-only snapshot: ``schema``,
``timelines``, ``rows`` (every session meta and event parsed), ``chain`` (every hash
link; bodies hashed by the server), ``calls``, ``blobs`` (re-hashed in SQL) and
``search`` (each tsvector recomputed from its event and compared).

    checks = pg_health(conn, {1, 2, 3})
"""

from __future__ import annotations

from collections import Counter
from functools import partial
from typing import Any

import psycopg

from ctxline.errors import CtxlineError
from ctxline.record.codec import parse_at
from ctxline.record.store.base import HealthCheck
from ctxline.record.store.checks import call_ids
from ctxline.record.store.external import resolved
from ctxline.record.store.pg_events import (
    LARGE_BODY,
    SMALL_BODY,
    blob_text,
    call_key,
    decode_meta,
    fetch_all,
    has_external,
    large_body,
    link_at,
    verify_segments,
    visible_segments,
)
from ctxline.record.store.rows import chain_health, parse_body
from ctxline.record.store.textsearch import index_words

__all__ = ["pg_health"]

Conn = psycopg.Connection[tuple[Any, ...]]
CHUNK = 200


def _is_time(value: object) -> bool:
    try:
        parse_at(value)
    except CtxlineError:
        return False
    return True


def _few(problems: list[str], most: int = 20) -> tuple[str, ...]:
    if len(problems) <= most:
        return tuple(problems)
    return (*problems[:most], f"… and {len(problems) - most} more")


def _doctor(exc: CtxlineError) -> str:
    return str(exc).removesuffix("; run ctxline doctor")


def _timelines(conn: Conn) -> HealthCheck:
    problems: list[str] = []
    rows = conn.execute(
        "SELECT t.session, t.name, t.head, coalesce(t.fork_seq, 0), t.parent,"
        " (SELECT count(*) FROM events e WHERE e.session = t.session AND e.timeline = t.name),"
        " (SELECT coalesce(max(seq), 0) FROM events e"
        " WHERE e.session = t.session AND e.timeline = t.name),"
        " (SELECT p.head FROM timelines p WHERE p.session = t.session AND p.name = t.parent)"
        " FROM timelines t ORDER BY t.session, t.name"
    ).fetchall()
    for session, name, head, base, parent, n, top, parent_head in rows:
        if n != head - base or (n and top != head):
            problems.append(
                f"timeline {session}/{name}: head {head} but {n} events (max seq {top})"
            )
        if parent is not None and (parent_head is None or base > parent_head):
            problems.append(
                f"timeline {session}/{name}: forks from {parent!r} at seq {base}, which it does not have"
            )
    return HealthCheck(
        "timelines", f"{len(rows)} timeline(s): heads against events", _few(problems)
    )


def _rows(conn: Conn, searched: bool) -> tuple[HealthCheck, HealthCheck, HealthCheck]:
    """Every session meta and event parsed; call index and search index compared."""
    problems: list[str] = []
    sessions = conn.execute("SELECT id, meta, created_at FROM sessions ORDER BY id").fetchall()
    for session, meta, created in sessions:
        try:
            decode_meta(session, meta)
        except CtxlineError as exc:
            problems.append(_doctor(exc))
        if not _is_time(created):
            problems.append(
                f"session {session[:80]!r}: its stored time {str(created)[:40]!r} is not a time"
            )
    calls = Counter(
        (s, t, c, int(q))
        for s, t, c, q in conn.execute(
            "SELECT session, timeline, call_id, seq FROM tool_calls"
        ).fetchall()
    )
    docs = (
        {
            (r[0], r[1], int(r[2]))
            for r in conn.execute("SELECT session, timeline, seq FROM search_docs").fetchall()
        }
        if searched
        else set()
    )
    expected: Counter[tuple[str, str, str, int]] = Counter()
    search_problems: list[str] = []
    n = indexed = 0
    last: tuple[str, str, int] = ("", "", 0)
    ext = (
        "(SELECT c.external FROM chain c WHERE c.session = e.session"
        " AND c.timeline = e.timeline AND c.seq = e.seq)"
        if has_external(conn)
        else "NULL"
    )
    while True:
        chunk = fetch_all(
            conn,
            f"SELECT e.session, e.timeline, e.seq, e.kind, e.at, {ext}, {SMALL_BODY} FROM events e"
            " WHERE (e.session, e.timeline, e.seq) > (%s, %s, %s)"
            " ORDER BY e.session, e.timeline, e.seq LIMIT %s",
            (LARGE_BODY, *last, CHUNK),
        )
        if not chunk:
            break
        last = (chunk[-1][0], chunk[-1][1], int(chunk[-1][2]))
        compare: list[tuple[str, str, int, str]] = []
        chunk.reverse()
        while chunk:
            session, timeline, seq, kind, at, ext_ref, body = chunk.pop()
            seq, n = int(seq), n + 1
            key = (session, timeline, seq)
            if body is None:
                body = large_body(conn, session, timeline, seq)
            box = [body]
            del body
            where = f"{session}/{timeline} seq {seq}"
            try:
                event = parse_body(box, where)
                if ext_ref is not None:  # its content is a blob (store.external)
                    event = resolved(event, partial(blob_text, conn, str(ext_ref), where), where)
            except CtxlineError as exc:
                problems.append(_doctor(exc))
                docs.discard(key)
                continue
            if not _is_time(at):
                problems.append(
                    f"{session}/{timeline} seq {seq}: the stored time {str(at)[:40]!r} is not a time"
                )
            if event.kind != kind:
                problems.append(
                    f"{session}/{timeline} seq {seq}: the kind column says {kind!r}, the body {event.kind!r}"
                )
            expected.update((session, timeline, call_key(c), seq) for c in call_ids(event))
            if not searched:
                continue
            found = index_words(event)
            present = key in docs
            docs.discard(key)
            where = f"{session}/{timeline}#{seq}"
            if found and not present:
                search_problems.append(f"event {where} is missing from the search index")
            elif present and not found:
                search_problems.append(f"event {where} has nothing to search but is indexed")
            elif present:
                compare.append((*key, " ".join(found)))
        if compare:
            indexed += len(compare)
            stale = conn.execute(
                "SELECT x.s, x.t, x.q FROM unnest(%s::text[], %s::text[], %s::bigint[], %s::text[])"
                " AS x(s, t, q, txt) JOIN search_docs d"
                " ON d.session = x.s AND d.timeline = x.t AND d.seq = x.q"
                " WHERE d.tsv <> to_tsvector('simple', x.txt)",
                [list(col) for col in zip(*compare, strict=True)],
            ).fetchall()
            search_problems += [
                f"event {s}/{t}#{q}: its index entry does not match its text" for s, t, q in stale
            ]
    search_problems += [f"search entry for {s}/{t}#{q} has no event" for s, t, q in sorted(docs)]
    call_problems = [
        f"{s}/{t} seq {q}: tool call {c!r} is missing from the call index"
        for (s, t, c, q) in sorted(expected - calls)
    ] + [
        f"the call index holds {c!r} at {s}/{t} seq {q}, which has no such call"
        for (s, t, c, q) in sorted(calls - expected)
    ]
    search = (
        HealthCheck(
            "search",
            f"{indexed} indexed event(s) against the record (tsvector)",
            _few(search_problems),
        )
        if searched
        else HealthCheck("search", "no search index yet (schema before version 2)")
    )
    return (
        HealthCheck("rows", f"{len(sessions)} session(s), {n} event(s) parsed", _few(problems)),
        HealthCheck("calls", f"{sum(expected.values())} tool call(s) indexed", _few(call_problems)),
        search,
    )


def _chain(conn: Conn, chained: bool) -> HealthCheck:
    if not chained:
        return HealthCheck(
            "chain", "no hash chain yet (schema before version 3): computed on the next open"
        )
    return chain_health(conn, visible_segments, link_at, verify_segments)


def pg_health(conn: Conn, known: set[int]) -> list[HealthCheck]:
    """Every check, inside the caller's read-only snapshot."""
    tables = {
        r[0]
        for r in conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
        )
    }
    if "migrations" not in tables:
        return [
            HealthCheck(
                "schema", "migrations table", ("no migrations table: not a ctxline database",)
            )
        ]
    done = {int(r[0]) for r in conn.execute("SELECT version FROM migrations")}
    detail = f"schema versions {sorted(done)}"
    if known - done:
        detail += f" (versions {sorted(known - done)} are applied on the next open)"
    newer = [f"schema versions {sorted(done - known)} come from a newer ctxline"]
    checks = [HealthCheck("schema", detail, tuple(newer if done - known else ()))]
    rows, calls, search = _rows(conn, "search_docs" in tables)
    checks += [_timelines(conn), rows, _chain(conn, "chain" in tables), calls]
    n_blobs = conn.execute("SELECT count(*) FROM blobs").fetchall()[0][0]
    bad = [
        f"blob {ref} is corrupt: its bytes do not match its hash"
        for (ref,) in conn.execute(
            "SELECT ref FROM blobs WHERE ref <> 'sha256:' || encode(sha256(data), 'hex')"
            " OR size <> length(data) ORDER BY ref"
        ).fetchall()
    ]
    checks += [HealthCheck("blobs", f"{n_blobs} blob(s) re-hashed", _few(bad)), search]
    return checks
