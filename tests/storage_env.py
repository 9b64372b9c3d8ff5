"""Real storage environments for the tests: killed writers, read-only and full disks.

Why: "read-only", "disk full" and "a writer killed with -9" must be the real thing, not
a mock. As root (CI runs as root on a fresh VM, and so does this machine) a small
tmpfs is mounted for a full disk and remounted read-only for a read-only file system,
and a file is made read-only with a read-only bind mount (root ignores file modes).
Without root the same conditions come from ``chmod`` (which then binds) and
``RLIMIT_FSIZE`` (writes past the limit fail as on a full disk), so every test runs
everywhere.

    with read_only_dir(tmp_path / "ro") as folder: ...
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = [
    "ROOT",
    "SRC",
    "ctxline",
    "killed_writer",
    "read_only_dir",
    "read_only_file",
    "small_disk",
    "writable_tmpfs",
]

SRC = str(Path(__file__).resolve().parents[1] / "src")
ROOT = os.geteuid() == 0


def _mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True, capture_output=True)


def _umount(path: Path) -> None:
    subprocess.run(["umount", "-l", str(path)], check=False, capture_output=True)


@contextmanager
def small_disk(folder: Path, size_kb: int) -> Iterator[tuple[Path, int | None]]:
    """A folder on a tiny disk: (folder, None) on a tmpfs of ``size_kb`` (root), or
    (folder, limit) where ``limit`` is the RLIMIT_FSIZE a subprocess must run under."""
    folder.mkdir(parents=True, exist_ok=True)
    if not ROOT:
        yield folder, size_kb * 1024
        return
    _mount("-t", "tmpfs", "-o", f"size={size_kb}k", "tmpfs", str(folder))
    try:
        yield folder, None
    finally:
        _umount(folder)


@contextmanager
def read_only_dir(folder: Path) -> Iterator[Path]:
    """``folder`` made read-only for the block: a tmpfs (from :func:`writable_tmpfs`)
    remounted ``ro`` as root, ``chmod`` of the folder and its files otherwise."""
    if ROOT:
        _mount("-o", "remount,ro", str(folder))
    else:
        for p in folder.iterdir():
            p.chmod(0o444)
        folder.chmod(0o555)
    try:
        yield folder
    finally:
        if ROOT:
            _mount("-o", "remount,rw", str(folder))
        else:
            folder.chmod(0o755)
            for p in folder.iterdir():
                p.chmod(0o644)


@contextmanager
def writable_tmpfs(folder: Path) -> Iterator[Path]:
    """A folder that :func:`read_only_dir` can make read-only (a tmpfs as root)."""
    folder.mkdir(parents=True, exist_ok=True)
    if ROOT:
        _mount("-t", "tmpfs", "-o", "size=16m", "tmpfs", str(folder))
    try:
        yield folder
    finally:
        if ROOT:
            _umount(folder)


@contextmanager
def read_only_file(path: Path) -> Iterator[Path]:
    """``path`` made read-only, its folder still writable (a ``ro`` bind mount as root)."""
    if ROOT:
        _mount("--bind", str(path), str(path))
        _mount("-o", "remount,ro,bind", str(path))
    else:
        path.chmod(0o444)
    try:
        yield path
    finally:
        if ROOT:
            _umount(path)
        else:
            path.chmod(0o644)


def ctxline(
    *args: str, stdin: bytes = b"", fsize: int | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    """The real console entry point in a subprocess (optionally under RLIMIT_FSIZE)."""

    def limit() -> None:
        if fsize is not None:
            import resource

            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))

    return subprocess.run(
        [sys.executable, "-c", "from ctxline.cli import main; main()", *args],
        input=stdin,
        capture_output=True,
        env={**os.environ, "PYTHONPATH": SRC, **(env or {})},
        preexec_fn=limit if fsize is not None else None,
        timeout=120,
        check=False,
    )


WRITER = textwrap.dedent(
    """
    import sys, time
    from ctxline.record.store import SQLiteStore
    from ctxline.record.events import UserMessage
    store = SQLiteStore(sys.argv[1])
    store._conn.execute("PRAGMA wal_autocheckpoint = 0")
    store.create_session("s", exist_ok=True)
    for i in range(int(sys.argv[2])):
        store.append("s", [UserMessage(f"acknowledged {i} " + "x" * int(sys.argv[3]))])
    print("ready", flush=True)
    time.sleep(120)
    """
)


def killed_writer(db: Path, events: int = 50, size: int = 3000) -> None:
    """Append ``events`` acknowledged events without a checkpoint, then kill -9 the writer:
    the database file, its ``-wal`` and ``-shm`` stay as a crash leaves them."""
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(db), str(events), str(size)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": SRC},
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
