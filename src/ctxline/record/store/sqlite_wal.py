"""The WAL files of a SQLite record: what SQLite's recovery would keep, and what it would drop.

Why: in WAL mode commits live in ``<db>-wal`` until a checkpoint copies them into the
database file, and SQLite's recovery trusts what it finds: a missing ``-wal`` is "no
commits", a frame with a wrong checksum ends the log (every later frame, committed or
not, is discarded). These functions read the files *before* SQLite does and say what
would be lost (see docs/integrity.md for the format):

* :func:`wal_problem`: the index (``-shm``, when valid and not in use) against the
  ``-wal``: present, same salts, long enough for the frames the index says committed;
* :func:`wal_frames_problem`: every frame's running checksum, as recovery computes it;
  a commit frame of the current WAL at or after the first bad frame is refused.

    problem = wal_problem(path) or wal_frames_problem(path)   # str or None
"""

from __future__ import annotations

import os
import struct
from array import array
from pathlib import Path

__all__ = [
    "SQLITE_MAGIC",
    "live",
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


def live(path: Path) -> bool:
    """Whether another process has the database open (it holds the -shm lock byte)."""
    try:
        fd = os.open(f"{path}-shm", os.O_RDONLY)
    except OSError:
        return False
    try:
        return _locked_by_others(fd) is not False
    finally:
        os.close(fd)
