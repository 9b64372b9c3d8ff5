"""Fail-closed opening and health checks of a SQLite record.

Why: a damaged file must stop ctxline with a clear error and stay untouched, and a
WAL database whose ``-wal`` file went missing must not open as if nothing happened:
SQLite would silently serve the database without the transactions the WAL held.

What SQLite does (and so what can be checked). In WAL mode (bytes 18-19 of the
header are 2) commits go to ``<db>-wal`` and are copied into the database file by
checkpoints; ``<db>-shm`` is the WAL index, shared memory mapped from a file. Its
header (two identical 48-byte copies with a checksum) records ``mxFrame``, the last
valid frame of the WAL, its page size and salts; the checkpoint info after it records
``nBackfill``, the frames already copied into the database. Frames ``nBackfill+1 ..
mxFrame`` are committed transactions that exist only in the WAL. Every open
connection holds a shared lock on byte 128 of ``-shm`` (the "dead man switch"); the
first connection to open takes it exclusively, truncates ``-shm`` and rebuilds the
index from the ``-wal`` alone. So a missing, shortened or foreign ``-wal`` is
invisible to SQLite, which opens the database without those commits (or replays the
foreign frames). The last connection to close checkpoints and deletes ``-wal``, then
``-shm``.

The check, before any connection is opened, when the header says WAL, ``-shm``
exists and no process holds its lock byte (a live database's index is its owners'):
if the index header is valid and ``mxFrame > nBackfill``, then the ``-wal`` must be
there, carry the index's salts and be long enough for ``mxFrame`` frames; otherwise
:class:`~ctxline.errors.IntegrityError` names the missing frames and nothing is
opened, so the files stay as they were. It cannot detect a database copied without
its ``-wal`` *and* ``-shm`` (nothing left records that frames existed), a ``-wal``
lost while ``-shm`` was also rebuilt, nor anything on a platform without POSIX locks.

    check_sqlite_file(Path("ctxline.db"))     # raises IntegrityError, touches nothing
    health = connection_health(conn)          # [HealthCheck("pages", …, []), …]
"""

from __future__ import annotations

import json
import os
import sqlite3
import struct
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ctxline.errors import IntegrityError
from ctxline.record.blobs import blob_ref
from ctxline.record.parse import event_from_json
from ctxline.record.store.base import HealthCheck
from ctxline.record.store.textsearch import index_words

__all__ = [
    "SQLITE_MAGIC",
    "check_sqlite_file",
    "connection_health",
    "held_open",
    "wal_problem",
]

SQLITE_MAGIC = b"SQLite format 3\x00"
WAL_MAGIC = (0x377F0682, 0x377F0683)
WAL_HEADER = 32
FRAME_HEADER = 24
SHM_HEADER = 136
DMS_BYTE = 128  # UNIX_SHM_DMS = (22 + SQLITE_SHM_NLOCK) * 4 + SQLITE_SHM_NLOCK
WAL_INDEX_VERSION = 3007000
MAX_LISTED = 20

# --- databases this process holds open ----------------------------------------------
#
# A POSIX lock belongs to a process and an inode, and closing *any* descriptor of the
# file drops all of that process's locks on it. Reading the header or -shm of a database
# this process already has open through SQLite would silently release SQLite's locks,
# so the file checks are skipped for those (the file was checked when first opened).

_open_lock = threading.Lock()
_open_count: dict[tuple[int, int], int] = {}


def _key(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


@contextmanager
def held_open(path: Path) -> Iterator[None]:
    """Mark ``path`` as open in this process for as long as the block runs."""
    key = _key(path)
    if key is not None:
        with _open_lock:
            _open_count[key] = _open_count.get(key, 0) + 1
    try:
        yield
    finally:
        if key is not None:
            with _open_lock:
                left = _open_count.get(key, 1) - 1
                if left:
                    _open_count[key] = left
                else:
                    _open_count.pop(key, None)


def open_here(path: Path) -> bool:
    key = _key(path)
    with _open_lock:
        return key is not None and key in _open_count


# --- the WAL index ---------------------------------------------------------------------


def _locked_by_others(fd: int) -> bool | None:
    """Whether another process holds a lock on the index's dead-man-switch byte."""
    try:
        import fcntl
    except ImportError:  # not a POSIX system
        return None
    probe = struct.pack("hhqqi4x", fcntl.F_WRLCK, os.SEEK_SET, DMS_BYTE, 1, 0)
    try:
        answer = fcntl.fcntl(fd, fcntl.F_GETLK, probe)
    except OSError:
        return None
    return bool(struct.unpack("hhqqi4x", answer)[0] != fcntl.F_UNLCK)


def _checksum(data: bytes) -> tuple[int, int]:
    """SQLite's WAL checksum over native-order 32-bit words (the index header's)."""
    s1 = s2 = 0
    values = struct.unpack(f"={len(data) // 4}I", data)
    for i in range(0, len(values), 2):
        s1 = (s1 + values[i] + s2) & 0xFFFFFFFF
        s2 = (s2 + values[i + 1] + s1) & 0xFFFFFFFF
    return s1, s2


def wal_problem(path: Path) -> str | None:
    """What is wrong with the WAL files of the database at ``path``; None when nothing is
    (or nothing can be told: not WAL, no index, index in use, torn or unknown header)."""
    try:
        with path.open("rb") as fh:
            header = fh.read(100)
    except OSError:
        return None
    if len(header) < 100 or header[18] != 2 or header[19] != 2:
        return None  # not in WAL mode
    shm = Path(f"{path}-shm")
    wal = Path(f"{path}-wal")
    try:
        fd = os.open(shm, os.O_RDONLY)
    except OSError:
        return None  # no index: SQLite rebuilds it from the -wal, nothing to compare
    try:
        if _locked_by_others(fd) is not False:
            return None  # live (or cannot tell): its owners' index is authoritative
        index = os.pread(fd, SHM_HEADER, 0)
    finally:
        os.close(fd)
    if len(index) < SHM_HEADER or index[:48] != index[48:96]:
        return None
    version, _, _, is_init, _, page_code, mx_frame = struct.unpack("=IIIBBHI", index[:20])
    if version != WAL_INDEX_VERSION or not is_init:
        return None
    if _checksum(index[:40]) != struct.unpack("=II", index[40:48]):
        return None
    (backfilled,) = struct.unpack("=I", index[96:100])
    page_size = 65536 if page_code == 1 else page_code
    salts = index[32:40]  # copied byte for byte from the WAL header
    if mx_frame == 0 or backfilled > mx_frame:
        return None
    pending = mx_frame - backfilled
    try:
        size = wal.stat().st_size
    except OSError:
        size = -1
    name = wal.name
    lost = (
        f"{pending} WAL frame(s) of committed transactions (frames {backfilled + 1}-{mx_frame})"
        " are not in the database file"
    )
    fix = (
        f"; put the original {name} back beside it, or, to accept the loss and open what the"
        f" database file holds, delete {shm.name}; nothing was changed"
    )
    if size <= 0:
        if pending == 0:
            return None  # every frame was checkpointed: the WAL held nothing more
        what = "is missing" if size < 0 else "is empty"
        return f"{path}: {name} {what} but its index ({shm.name}) says {lost}{fix}"
    with wal.open("rb") as fh:
        wal_header = fh.read(WAL_HEADER)
    if len(wal_header) < WAL_HEADER or struct.unpack(">I", wal_header[:4])[0] not in WAL_MAGIC:
        # SQLite treats a WAL with a bad header as empty: harmless only if nothing was pending
        return f"{path}: {name} is not a WAL file (bad header); {lost}{fix}" if pending else None
    if wal_header[16:24] != salts:
        return (
            f"{path}: {name} does not belong to this database state (its salts differ from"
            f" the index in {shm.name}); SQLite would replay foreign frames{fix}"
        )
    frames = (size - WAL_HEADER) // (FRAME_HEADER + page_size)
    if frames < mx_frame and pending:
        return f"{path}: {name} is truncated: it holds {frames} frame(s) but its index says {mx_frame}; {lost}{fix}"
    return None


def check_sqlite_file(path: Path) -> None:
    """Fail closed on a file that exists but is not a healthy SQLite database.

    Checks the header, the WAL files (:func:`wal_problem`) and ``PRAGMA quick_check``
    (on a read-only connection); raises :class:`IntegrityError` and changes nothing.
    Skipped for a database this process already holds open.
    """
    if not path.exists() or path.stat().st_size == 0 or open_here(path):
        return
    with path.open("rb") as fh:
        magic = fh.read(16)
    if magic != SQLITE_MAGIC:
        raise IntegrityError(
            f"{path} is not a SQLite database (bad header); the file was left untouched"
        )
    problem = wal_problem(path)
    if problem is not None:
        raise IntegrityError(problem)
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            rows = conn.execute("PRAGMA quick_check").fetchall()
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        raise IntegrityError(f"{path} is damaged ({exc}); the file was left untouched") from None
    problems = [r[0] for r in rows if r[0] != "ok"]
    if problems:
        raise IntegrityError(
            f"{path} failed the integrity check: {'; '.join(problems[:3])}; the file was left untouched"
        )


# --- checks over an open connection ----------------------------------------------------


def _listed(problems: list[str]) -> list[str]:
    if len(problems) <= MAX_LISTED:
        return problems
    return [*problems[:MAX_LISTED], f"… and {len(problems) - MAX_LISTED} more"]


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
    return HealthCheck("pages", f"PRAGMA {pragma}", tuple(_listed(rows)))


def timelines_check(conn: sqlite3.Connection) -> HealthCheck:
    problems = []
    n_timelines = 0
    for session, name, head, base, n, top in conn.execute(
        "SELECT t.session, t.name, t.head, coalesce(t.fork_seq, 0),"
        " (SELECT count(*) FROM events e WHERE e.session = t.session AND e.timeline = t.name),"
        " (SELECT coalesce(max(seq), 0) FROM events e WHERE e.session = t.session AND e.timeline = t.name)"
        " FROM timelines t ORDER BY t.session, t.name"
    ):
        n_timelines += 1
        if n != head - base or (n and top != head):
            problems.append(
                f"timeline {session}/{name}: head {head} but {n} events (max seq {top})"
            )
    return HealthCheck(
        "timelines", f"{n_timelines} timeline(s): heads against events", tuple(_listed(problems))
    )


def blobs_check(conn: sqlite3.Connection) -> HealthCheck:
    problems = []
    n = 0
    for ref, size, data in conn.execute("SELECT ref, size, data FROM blobs ORDER BY ref"):
        n += 1
        raw = bytes(data)
        if blob_ref(raw) != ref:
            problems.append(f"blob {ref} is corrupt: its bytes do not match its hash")
        elif len(raw) != size:
            problems.append(f"blob {ref}: {len(raw)} bytes but {size} recorded")
    return HealthCheck("blobs", f"{n} blob(s) re-hashed", tuple(_listed(problems)))


def search_check(conn: sqlite3.Connection) -> HealthCheck:
    """The FTS5 index against the record: one entry per searchable event, word counts equal."""
    if "search_docs" not in _tables(conn):
        return HealthCheck(
            "search",
            "no search index yet (schema before version 2): built on the next write open",
            (),
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
        if "readonly" in str(exc).replace("-", "").replace(" ", ""):
            structure = "FTS5 structure not checked (read-only file), "
        else:
            problems.append(f"FTS5 integrity-check failed: {exc}")
    docs = {
        (r[1], r[2], r[3]): r[0]
        for r in conn.execute("SELECT id, session, timeline, seq FROM search_docs")
    }
    sizes = {
        r[0]: _varint(bytes(r[1])) for r in conn.execute("SELECT id, sz FROM search_fts_docsize")
    }
    doc_ids = set(docs.values())
    indexed = 0
    for session, timeline, seq, body in conn.execute(
        "SELECT session, timeline, seq, body FROM events ORDER BY session, timeline, seq"
    ):
        key = (session, timeline, seq)
        want = len(index_words(event_from_json(json.loads(body))))
        doc = docs.pop(key, None)
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
        "search",
        f"{structure}{indexed} indexed event(s) against the record",
        tuple(_listed(problems)),
    )


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


def connection_health(conn: sqlite3.Connection, *, full: bool = True) -> list[HealthCheck]:
    """Every check over an open connection: pages, schema, timelines, blobs, search."""
    from ctxline.record.store.migrations import SQLITE_MIGRATIONS

    checks = [pages_check(conn, full=full)]
    if checks[0].problems and full:
        return checks  # damaged pages: reading the tables could fail or mislead
    schema = schema_check(conn, {v for v, _, _ in SQLITE_MIGRATIONS})
    checks.append(schema)
    if "migrations" not in _tables(conn):
        return checks
    checks += [timelines_check(conn), blobs_check(conn), search_check(conn)]
    return checks
