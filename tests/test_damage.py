"""Storage damage and hostile environments: every case fails closed, loses nothing.

Why: a record that opens "healthy" after its acknowledged commits vanished is worse
than one that refuses to open. Each case here damages real files the way crashes,
disks and careless copies do — a 0-byte or missing database file beside a killed
writer's ``-wal``, bit flips in the ``-wal`` or in the database file, a read-only or
full disk — and checks the outcome is one of: refused with a clear error (files
untouched, the ``-wal`` never deleted), or data exactly as written. Never silently
different data, never a traceback. Row-level tampering is in ``test_store_damage_rows``.

    .venv/bin/pytest tests/test_damage.py -q
"""

from __future__ import annotations

import random
import re
import sqlite3
import subprocess
from pathlib import Path

import pytest

from ctxline.errors import CtxlineError, IntegrityError
from ctxline.record.doctor import run_doctor
from ctxline.record.events import AssistantMessage, ToolCall, ToolResult, UserMessage
from ctxline.record.store import SQLiteStore, StorageError
from storage_env import (
    ctxline,
    killed_writer,
    read_only_dir,
    read_only_file,
    small_disk,
    writable_tmpfs,
)


def files(db: Path) -> dict[str, bytes]:
    out = {}
    for suffix in ("", "-wal", "-shm"):
        p = Path(f"{db}{suffix}")
        if p.exists():
            out[suffix] = p.read_bytes()
    return out


def no_traceback(result: subprocess.CompletedProcess[bytes], code: int = 2) -> str:
    err = result.stderr.decode()
    assert result.returncode == code, (result.returncode, err, result.stdout[-500:])
    assert "Traceback" not in err
    assert err.startswith("error: "), err
    assert err.count("\n") == 1, err
    return err


# --- a database file that is missing or empty beside a killed writer's -wal ---------------


@pytest.mark.parametrize("damage", ["empty", "missing"])
def test_lost_database_file_beside_a_wal_is_refused_and_the_wal_kept(
    tmp_path: Path, damage: str
) -> None:
    db = tmp_path / "k.db"
    killed_writer(db)
    wal = Path(f"{db}-wal")
    assert wal.stat().st_size > 100_000
    if damage == "empty":
        db.write_bytes(b"")
    else:
        db.unlink()
    before = files(db)
    what = "is empty" if damage == "empty" else "is missing"
    with pytest.raises(IntegrityError, match=f"{what}.*k.db-wal beside it holds"):
        SQLiteStore(db)
    for args in (
        ["sessions", "--db", str(db)],
        ["export", "--session", "s", "--db", str(db)],
        ["doctor", "--db", str(db)],
        ["append", "--session", "s", "--create", "--db", str(db)],
        ["import", str(tmp_path / "none.jsonl"), "--db", str(db)],
    ):
        stdin = b'{"kind": "user.message", "text": "x"}\n' if args[0] == "append" else b""
        result = ctxline(*args, stdin=stdin)
        assert result.returncode == 2, args
        assert b"Traceback" not in result.stderr, args
        assert files(db) == before, f"{args[0]} changed the files"
    assert "wal beside it holds" in ctxline("doctor", "--db", str(db)).stdout.decode()


# --- bit flips in the -wal of a killed writer ---------------------------------------------


def _flip(path: Path, bits: int, seed: int, start: int = 32) -> None:
    data = bytearray(path.read_bytes())
    rng = random.Random(seed)
    for _ in range(bits):
        pos = rng.randrange(start, len(data))
        data[pos] ^= 1 << rng.randrange(8)
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("seed", range(5))
def test_ten_bit_flips_in_the_wal_are_refused_not_served_short(tmp_path: Path, seed: int) -> None:
    db = tmp_path / "k.db"
    killed_writer(db)
    _flip(Path(f"{db}-wal"), 10, seed)
    before = files(db)
    with pytest.raises(
        IntegrityError, match=r"fails its checksum.*silently drop the committed"
    ) as info:
        SQLiteStore(db)
    assert files(db) == before
    report = run_doctor(str(db))
    assert not report.healthy
    assert "fails its checksum" in report.problems[0]
    no_traceback(ctxline("sessions", "--db", str(db)))
    assert files(db) == before
    # the way out the message gives: cut the WAL at the bad frame, drop the index
    cut = int(str(info.value).split("truncate -s ")[1].split()[0])
    with Path(f"{db}-wal").open("r+b") as fh:
        fh.truncate(cut)
    Path(f"{db}-shm").unlink()
    store = SQLiteStore(db)  # opens with what came before the bad frame: the loss, accepted
    kept = [s.events for s in store.sessions()]
    assert kept in ([], *([n] for n in range(50)))
    assert all(store.verify_chain(s.id).ok for s in store.sessions())
    store.close()


def test_flipped_wal_without_its_index_is_refused_too(tmp_path: Path) -> None:
    db = tmp_path / "k.db"
    killed_writer(db)
    _flip(Path(f"{db}-wal"), 10, 99)
    Path(f"{db}-shm").unlink()
    with pytest.raises(IntegrityError, match="fails its checksum"):
        SQLiteStore(db)


def test_damaged_wal_header_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "k.db"
    killed_writer(db)
    wal = Path(f"{db}-wal")
    data = bytearray(wal.read_bytes())
    data[26] ^= 0xFF  # inside the header's checksum
    wal.write_bytes(bytes(data))
    Path(f"{db}-shm").unlink()
    with pytest.raises(IntegrityError, match=r"header of k\.db-wal is damaged"):
        SQLiteStore(db)


def test_an_undamaged_crash_opens_with_every_acknowledged_event(tmp_path: Path) -> None:
    """The control: the checks never refuse what SQLite recovers whole."""
    db = tmp_path / "k.db"
    killed_writer(db)
    store = SQLiteStore(db)
    assert store.head("s") == 50
    assert [e.event.text for e in store.read("s")][-1].startswith("acknowledged 49")  # type: ignore[union-attr]
    assert store.verify_chain("s").ok
    store.close()
    assert run_doctor(str(db)).healthy


# --- bit flips in the database file -------------------------------------------------------


def _record(db: Path) -> list[tuple[object, ...]]:
    store = SQLiteStore(db)
    store.create_session("s", meta={"owner": "team"})
    for i in range(30):
        call = AssistantMessage("", (ToolCall(f"c{i}", "bash", {"command": f"ls {i}"}),))
        store.append(
            "s",
            [
                UserMessage(f"check the response {i}"),
                call,
                ToolResult(f"c{i}", f"response {i} " * 30),
            ],
        )
    store.blobs.put(b"saved output " * 500)
    out: list[tuple[object, ...]] = [(e.seq, e.id, e.at, e.event) for e in store.read("s")]
    store.close()
    return out


def test_random_bit_flips_in_the_database_never_serve_changed_data(tmp_path: Path) -> None:
    db = tmp_path / "base.db"
    truth = _record(db)
    original = db.read_bytes()
    outcomes: dict[str, int] = {}
    refusals: list[str] = []
    rng = random.Random(2024)
    for n in range(20):
        damaged = bytearray(original)
        for _ in range(1 + n % 3):
            damaged[rng.randrange(100, len(damaged))] ^= 1 << rng.randrange(8)
        copy = tmp_path / f"flip{n}.db"
        copy.write_bytes(bytes(damaged))
        try:
            store = SQLiteStore(copy)
        except CtxlineError:
            outcomes["refused at open"] = outcomes.get("refused at open", 0) + 1
            continue
        try:
            got = [(e.seq, e.id, e.at, e.event) for e in store.read("s")]
            meta = store.session("s").meta
        except CtxlineError as exc:
            refusals.append(str(exc))
            outcomes["refused at read"] = outcomes.get("refused at read", 0) + 1
            continue
        finally:
            store.close()
        assert got == truth, f"flip {n} served changed data"
        assert meta == {"owner": "team"}, f"flip {n} served a changed meta"
        outcomes["unchanged"] = outcomes.get("unchanged", 0) + 1
        result = ctxline("export", "--session", "s", "--db", str(copy))
        assert result.returncode in (0, 2)
        assert b"Traceback" not in result.stderr
    assert sum(outcomes.values()) == 20
    assert all(re.search(r"seq \d+|session|damaged", r) for r in refusals), refusals
    assert outcomes.get("refused at open", 0) + outcomes.get("refused at read", 0) > 0, outcomes


def test_one_changed_letter_in_a_body_is_named_by_seq(tmp_path: Path) -> None:
    """The issue's case: "response" became "rerponse" and doctor said healthy."""
    db = tmp_path / "r.db"
    _record(db)
    data = db.read_bytes()
    at = data.index(b"response 7 response 7")
    db.write_bytes(data[:at] + b"rerponse" + data[at + 8 :])
    store = SQLiteStore(db)  # the pages are fine: only the hash chain can tell
    with pytest.raises(
        IntegrityError, match=r"s/main seq 24: the stored event does not match its hash link"
    ):
        store.read("s")
    assert not store.verify_chain("s").ok
    store.close()
    for cmd in ("export", "show"):
        err = no_traceback(ctxline(cmd, "--session", "s", "--db", str(db)))
        assert "seq 24" in err
    report = run_doctor(str(db))
    (chain,) = [c for c in report.checks if c.name == "chain"]
    assert any("s/main seq 24" in p and "its body" in p for p in chain.problems), chain


# --- read-only and full disks ---------------------------------------------------------------


def _small_record(db: Path) -> None:
    store = SQLiteStore(db)
    store.create_session("s")
    store.append("s", [UserMessage("kept"), UserMessage("also kept")])
    store.close()


def test_healthy_database_on_a_read_only_file_system_reads_and_refuses_writes(
    tmp_path: Path,
) -> None:
    with writable_tmpfs(tmp_path / "disk") as folder:
        db = folder / "r.db"
        _small_record(db)
        before = files(db)
        with read_only_dir(folder):
            for args in (
                ["sessions", "--json"],
                ["export", "--session", "s"],
                ["show", "--session", "s"],
                ["search", "--session", "s", "kept"],
                ["requests", "--session", "s"],
            ):
                result = ctxline(*args, "--db", str(db))
                assert result.returncode == 0, (args, result.stderr)
            doctor = ctxline("doctor", "--db", str(db), "--json")
            assert doctor.returncode == 0, doctor.stdout  # healthy, not "damaged"
            for args, stdin in (
                (["append", "--session", "s"], b'{"kind": "user.message", "text": "x"}\n'),
                (["fork", "--session", "s", "--at", "1", "--name", "alt"], b""),
            ):
                err = no_traceback(ctxline(*args, "--db", str(db), stdin=stdin))
                assert "read-only" in err
                assert "nothing was written" in err
            missing = no_traceback(ctxline("sessions", "--db", str(folder / "typo.db")))
            assert "no such database" in missing
        assert files(db) == before


def test_read_only_file_refuses_writes_in_one_line(tmp_path: Path) -> None:
    db = tmp_path / "f.db"
    _small_record(db)
    with read_only_file(db):
        err = no_traceback(
            ctxline(
                "append",
                "--session",
                "s",
                "--db",
                str(db),
                stdin=b'{"kind": "user.message", "text": "x"}\n',
            )
        )
        assert "read-only" in err
        assert ctxline("sessions", "--db", str(db)).returncode == 0
    assert SQLiteStore(db).head("s") == 2


def test_full_disk_is_exit_2_and_loses_nothing(tmp_path: Path) -> None:
    with small_disk(tmp_path / "tiny", 700) as (folder, fsize):
        db = folder / "full.db"
        acked = 0
        err = ""
        line = b'{"kind": "user.message", "text": "' + b"y" * 20_000 + b'"}\n'
        for _ in range(200):
            result = ctxline(
                "append", "--session", "s", "--create", "--db", str(db), stdin=line, fsize=fsize
            )
            if result.returncode != 0:
                err = no_traceback(result)
                break
            acked += 1
        assert acked > 0
        assert "full" in err or "I/O error" in err, (acked, err)
        assert "nothing was written" in err
        store = SQLiteStore(db, read_only=True)
        assert (
            store.head("s") == acked
        )  # every acknowledged append is there, the refused one is not
        assert store.verify_chain("s").ok
        store.close()


def test_database_size_limit_is_a_storage_error_and_the_store_goes_on(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "cap.db")
    store.create_session("s")
    store.append("s", [UserMessage("first")])
    pages = store._conn.execute("PRAGMA page_count").fetchone()[0]
    store._conn.execute(f"PRAGMA max_page_count = {pages + 2}")
    with pytest.raises(StorageError, match="full"):
        store.append("s", [UserMessage("x" * 50_000)])
    with pytest.raises(StorageError, match="full"):
        store.blobs.put(b"z" * 50_000)
    assert [e.event for e in store.read("s")] == [UserMessage("first")]
    store._conn.execute("PRAGMA max_page_count = 1000000")
    store.append("s", [UserMessage("after")])
    assert store.head("s") == 2
    assert store.integrity_check() == []
    store.close()


def test_write_open_of_a_damaged_old_record_is_refused_unchanged(tmp_path: Path) -> None:
    """An older record (before the hash chain) with a gap: the chain is never computed
    over it, the migration rolls back, the file stays as it was."""
    db = tmp_path / "old.db"
    _small_record(db)
    conn = sqlite3.connect(db)
    conn.executescript(
        "DROP TABLE chain; ALTER TABLE timelines DROP COLUMN link;"
        " DELETE FROM migrations WHERE version = 3; DELETE FROM events WHERE seq = 1;"
    )
    conn.close()
    before = files(db)
    with pytest.raises(
        IntegrityError, match="cannot compute the hash chain: s/main seq 1 is missing"
    ):
        SQLiteStore(db)
    assert files(db)[""] == before[""]
    reader = SQLiteStore(db, read_only=True)  # reading it read-only still names the gap
    with pytest.raises(IntegrityError, match="seq 1 is missing"):
        reader.read("s")
    assert "no hash chain yet" in reader.verify_chain("s").problems[0]
    reader.close()
