"""Fail-closed opening of a SQLite record: the files are checked before SQLite sees them.

Why: a damaged file must stop ctxline with a clear error and stay untouched, and the
states in which SQLite would silently drop acknowledged commits must be refused:

* **a missing or empty (0-byte) database file beside a non-empty ``-wal``**: SQLite
  treats a 0-page database as new and *deletes* the ``-wal``;
* **a missing, shortened or foreign ``-wal``** whose index (``-shm``) says it held
  committed frames: SQLite would open the database without them (or replay foreign
  frames);
* **a damaged ``-wal``**: SQLite's recovery stops at the first frame whose checksum
  or salt is wrong and silently discards every frame after it, committed or not.

What SQLite does (and so what can be checked). In WAL mode (bytes 18-19 of the header
are 2) commits go to ``<db>-wal`` as frames (a 24-byte header and a page) and are
copied into the database file by checkpoints. Each frame header carries the WAL's two
salts and a running checksum over every frame before it; a frame whose header says
"database size N" ends a committed transaction. ``<db>-shm`` is the WAL index: its
header (two identical 48-byte copies with a checksum) records ``mxFrame``, the last
valid frame, and the checkpoint info after it ``nBackfill``, the frames already in the
database file. Every open connection holds a shared POSIX lock on byte 128 of
``-shm`` (the "dead man switch"); the first connection to open takes it exclusively
and rebuilds the index from the ``-wal`` alone.

The checks, before any connection is opened, on a database no process holds open
(a live database's files are its owners'): the index, when valid, against the
``-wal`` (present, same salts, long enough for ``mxFrame`` frames); then every frame
of the ``-wal`` is checksummed as SQLite would (about 25 ms per MB, only after a
crash: a clean close deletes the ``-wal``), and a commit frame that recovery would
drop — after a frame that fails its checksum, or itself failing — is refused with the
offset to cut at to accept the loss. Then ``PRAGMA integrity_check`` (every page and
index; ``quick_check`` for files over :data:`FULL_CHECK_MAX_BYTES`) on a read-only
connection. It cannot detect a database copied without its ``-wal`` *and* ``-shm``
(nothing left records that frames existed), a flipped bit in the salts of a commit
frame that ends the WAL, nor anything on a platform without POSIX locks.

    check_sqlite_file(Path("ctxline.db"))     # raises IntegrityError, touches nothing
"""

from __future__ import annotations

import os
import sqlite3
import struct
import threading
from array import array
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

from ctxline.errors import IntegrityError
from ctxline.record.store.failures import SQLITE_CODES, os_failure, sqlite_failure

__all__ = [
    "FULL_CHECK_MAX_BYTES",
    "SQLITE_MAGIC",
    "check_sqlite_file",
    "connect_read_only",
    "file_uri",
    "held_open",
    "open_here",
    "wal_frames_problem",
    "wal_problem",
]

SQLITE_MAGIC = b"SQLite format 3\x00"
WAL_MAGIC = (0x377F0682, 0x377F0683)
WAL_HEADER = 32
FRAME_HEADER = 24
SHM_HEADER = 136
DMS_BYTE = 128  # UNIX_SHM_DMS = (22 + SQLITE_SHM_NLOCK) * 4 + SQLITE_SHM_NLOCK
WAL_INDEX_VERSION = 3007000
FULL_CHECK_MAX_BYTES = 256 * 1024 * 1024
"""Opening runs ``PRAGMA integrity_check`` on files up to this size, ``quick_check``
above it (``ctxline doctor`` always runs the full check)."""

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


# --- the WAL frames ----------------------------------------------------------------------


def _frame_checksum(data: bytes, seed: tuple[int, int], big_endian: bool) -> tuple[int, int]:
    """SQLite's running WAL checksum over ``data`` (32-bit words, in the WAL's byte order)."""
    words = array("I")
    words.frombytes(data)
    if big_endian != (struct.pack("=I", 1) == struct.pack(">I", 1)):
        words.byteswap()
    s1, s2 = seed
    it = iter(words)
    for a, b in zip(it, it, strict=True):
        s1 = (s1 + a + s2) & 0xFFFFFFFF
        s2 = (s2 + b + s1) & 0xFFFFFFFF
    return s1, s2


def _page_size(path: Path) -> int | None:
    try:
        with path.open("rb") as fh:
            header = fh.read(100)
    except OSError:
        return None
    if len(header) < 100 or header[:16] != SQLITE_MAGIC:
        return None
    (size,) = struct.unpack(">H", header[16:18])
    return 65536 if size == 1 else size


def _fix(wal: Path, shm: Path, frame: int, frame_size: int) -> str:
    keep = WAL_HEADER + (frame - 1) * frame_size
    return (
        f"; keep a copy of the three files, then, to accept the loss and keep the {frame - 1}"
        f" frame(s) before it, cut the WAL there (truncate -s {keep} {wal.name}) and delete"
        f" {shm.name}; nothing was changed"
    )


def wal_frames_problem(path: Path) -> str | None:
    """What SQLite's WAL recovery of ``path`` would silently drop, or None.

    Walks every frame of ``<path>-wal``: recovery keeps frames up to the last commit
    before the first frame whose salts or running checksum are wrong. A commit frame
    of the current WAL (same salts) at or after that frame is an acknowledged commit
    that would vanish.
    """
    wal = Path(f"{path}-wal")
    shm = Path(f"{path}-shm")
    try:
        size = wal.stat().st_size
    except OSError:
        return None
    if size <= WAL_HEADER:
        return None
    with wal.open("rb") as fh:
        header = fh.read(WAL_HEADER)
        magic, _, page_size, _, salt1, salt2, c1, c2 = struct.unpack(">8I", header)
        sane = 512 <= page_size <= 65536 and page_size & (page_size - 1) == 0
        big = bool(magic & 1)
        if (
            magic not in WAL_MAGIC
            or not sane
            or _frame_checksum(header[:24], (0, 0), big)
            != (
                c1,
                c2,
            )
        ):
            page_size = _page_size(path) or 4096
            frame_size = FRAME_HEADER + page_size
            commits = 0
            for n in range((size - WAL_HEADER) // frame_size):
                fh.seek(WAL_HEADER + n * frame_size)
                commits += struct.unpack(">I", fh.read(FRAME_HEADER)[4:8])[0] != 0
            if commits:
                return (
                    f"{path}: the header of {wal.name} is damaged, so SQLite would ignore all of"
                    f" its {(size - WAL_HEADER) // frame_size} frame(s), {commits} committed"
                    f" transaction(s) included{_fix(wal, shm, 1, frame_size)}"
                )
            return None
        frame_size = FRAME_HEADER + page_size
        seed = (c1, c2)
        bad = 0  # the first frame recovery stops at (0: none)
        lost: list[int] = []
        n = 0
        while True:
            frame = fh.read(frame_size)
            if len(frame) < frame_size:
                break
            n += 1
            pgno, commit, s1, s2, k1, k2 = struct.unpack(">6I", frame[:FRAME_HEADER])
            current = (s1, s2) == (salt1, salt2)
            if not bad:
                seed = _frame_checksum(frame[:8] + frame[FRAME_HEADER:], seed, big)
                if not current or pgno == 0 or seed != (k1, k2):
                    bad = n
            if bad and current and commit:
                lost.append(n)
    if not lost:
        return None
    return (
        f"{path}: frame {bad} of {wal.name} fails its checksum, so SQLite's recovery would"
        f" silently drop the committed transaction(s) ending at frame(s)"
        f" {', '.join(map(str, lost[:5]))}{' …' if len(lost) > 5 else ''} ({len(lost)} commit(s))"
        f"{_fix(wal, shm, bad, frame_size)}"
    )


# --- the checks before opening -------------------------------------------------------------


def file_uri(path: Path, **params: str) -> str:
    query = "&".join(f"{k}={v}" for k, v in params.items())
    return f"file:{quote(str(path.absolute()))}?{query}"


def connect_read_only(path: Path, *, timeout: float = 30.0) -> sqlite3.Connection:
    """A read-only connection that never creates or changes the database file.

    ``mode=ro`` first; where SQLite cannot open the WAL files (a read-only file system
    or folder) and no ``-wal`` holds anything, ``immutable=1`` (no locks, no WAL: right
    for a file nobody can be writing).
    """
    try:
        conn = sqlite3.connect(
            file_uri(path, mode="ro"), uri=True, isolation_level=None, timeout=timeout
        )
        conn.execute("SELECT count(*) FROM sqlite_master").fetchall()
        return conn
    except sqlite3.Error as exc:
        code = (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF
        wal = Path(f"{path}-wal")
        if code not in (SQLITE_CODES["CANTOPEN"], SQLITE_CODES["READONLY"], SQLITE_CODES["PERM"]):
            raise
        if wal.exists() and wal.stat().st_size > 0:
            raise sqlite_failure(
                exc,
                str(path),
                "open the database read-only (its -wal needs recovery, which needs a writable folder)",
            ) from None
    conn = sqlite3.connect(
        file_uri(path, mode="ro", immutable="1"), uri=True, isolation_level=None, timeout=timeout
    )
    return conn


def check_sqlite_file(path: Path) -> None:
    """Fail closed on a file that exists but is not a healthy SQLite database.

    Checks the database file against its WAL files (:func:`wal_problem`,
    :func:`wal_frames_problem`), the header, and ``PRAGMA integrity_check`` (or
    ``quick_check`` above :data:`FULL_CHECK_MAX_BYTES`) on a read-only connection;
    raises :class:`IntegrityError` and changes nothing. Skipped for a database this
    process already holds open.
    """
    wal = Path(f"{path}-wal")
    shm = Path(f"{path}-shm")
    try:
        size = path.stat().st_size if path.exists() else None
        wal_size = wal.stat().st_size if wal.exists() else 0
    except OSError as exc:
        raise os_failure(exc, str(path), "read the database file") from None
    if not size:
        if wal_size > 0:
            what = "is missing" if size is None else "is empty (0 bytes)"
            raise IntegrityError(
                f"{path} {what} but {wal.name} beside it holds {wal_size:,} bytes of committed"
                f" transactions; SQLite would open an empty database and delete {wal.name}."
                f" Restore {path.name} (the copy this WAL belongs to); to start afresh instead,"
                f" move {wal.name} and {shm.name} away; nothing was changed"
            )
        return
    if open_here(path):
        return
    try:
        with path.open("rb") as fh:
            magic = fh.read(16)
    except OSError as exc:
        raise os_failure(exc, str(path), "read the database file") from None
    if magic != SQLITE_MAGIC:
        raise IntegrityError(
            f"{path} is not a SQLite database (bad header); the file was left untouched"
        )
    problem = wal_problem(path) or (None if _live(path) else wal_frames_problem(path))
    if problem is not None:
        raise IntegrityError(problem)
    pragma = "integrity_check" if size <= FULL_CHECK_MAX_BYTES else "quick_check"
    try:
        conn = connect_read_only(path)
        try:
            rows = conn.execute(f"PRAGMA {pragma}").fetchall()
        finally:
            conn.close()
    except sqlite3.Error as exc:
        failure = sqlite_failure(exc, str(path), "check the database")
        if not isinstance(failure, IntegrityError) and "malformed" not in str(exc):
            raise failure from None
        raise IntegrityError(f"{path} is damaged ({exc}); the file was left untouched") from None
    problems = [r[0] for r in rows if r[0] != "ok"]
    if problems:
        raise IntegrityError(
            f"{path} failed the integrity check: {'; '.join(problems[:3])}; the file was left untouched"
        )


def _live(path: Path) -> bool:
    """Whether another process has the database open (it holds the -shm lock byte)."""
    try:
        fd = os.open(f"{path}-shm", os.O_RDONLY)
    except OSError:
        return False
    try:
        return _locked_by_others(fd) is not False
    finally:
        os.close(fd)
