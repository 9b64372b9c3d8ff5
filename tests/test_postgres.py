"""PostgreSQL specifics: migrations, NUL, torn blobs, racing workers and faults.

The contract suite runs on PostgreSQL through ``conftest.BACKENDS``; these tests add
what only a shared server has: several processes racing for one timeline, a reader
tailing while others write, a connection dropped right after ``COMMIT``, and writers
killed with SIGKILL in the middle of appends. The server is ``$CTXLINE_TEST_PG`` or a
throwaway one (``pg_server``); every test gets its own schema.

Run as a script, this file is the writer process those tests start:
``python test_postgres.py writer DSN SESSION WORKER [--expected] [--count=N]
[--batch=N] [--wait-go]`` prints ``ack <seq> <id>`` per acknowledged event and
``conflict <expected> <actual>`` per Conflict it retried; with ``--wait-go`` it prints
``ready`` once connected and starts when a line arrives on stdin.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg  # the postgres extra, part of dev
import pytest

import pg_server
from ctxline.errors import BlobError, Conflict, IntegrityError, PairingError, ValidationError
from ctxline.record.events import AssistantMessage, Pending, ToolCall, ToolResult, UserMessage
from ctxline.record.store import MAIN, open_store
from ctxline.record.store.postgres import PostgresStore, append_with_retry

HERE = Path(__file__).resolve()


@pytest.fixture(scope="session")
def pg_server_dsn() -> str:
    """The server for this test run: $CTXLINE_TEST_PG or a throwaway one."""
    return pg_server.server_dsn()


@pytest.fixture
def pg_dsn(pg_server_dsn: str) -> str:
    """A DSN on a new, empty schema: this test's own database."""
    return pg_server.fresh_dsn()


@pytest.fixture
def pg(pg_dsn: str) -> Iterator[PostgresStore]:
    store = PostgresStore(pg_dsn)
    yield store
    store.close()


# --- opening, migrations, errors ----------------------------------------------------


def test_open_store_accepts_both_url_schemes(pg_dsn: str) -> None:
    for url in (pg_dsn, "postgres://" + pg_dsn.removeprefix("postgresql://")):
        store = open_store(url)
        assert isinstance(store, PostgresStore)
        store.create_session("s", exist_ok=True)
        store.close()


def test_unreachable_server_is_a_clear_error() -> None:
    with pytest.raises(ValidationError, match=r"cannot connect to PostgreSQL at .*:\*\*\*@"):
        open_store("postgresql://u:secret@127.0.0.1:1/x")
    with pytest.raises(ValidationError, match="bad URL for PostgreSQL"):
        open_store("postgresql://u@127.0.0.1:1/x?bogus=1")


def test_missing_psycopg_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ctxline.record.store.postgres", None)
    with pytest.raises(ValidationError, match=r"ctxline\[postgres\]"):
        open_store("postgresql://localhost/x")


def test_concurrent_first_open_migrates_once(pg_dsn: str) -> None:
    stores: list[PostgresStore] = []
    errors: list[BaseException] = []

    def open_one() -> None:
        try:
            stores.append(PostgresStore(pg_dsn, pool_size=1))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert [s.schema_versions() for s in stores] == [[1, 2, 3, 4, 5, 6, 7]] * 8
    with pg_server.admin_connect(pg_dsn) as conn:
        assert conn.execute("SELECT count(*) FROM migrations").fetchone() == (7,)
    for s in stores:
        s.close()


def test_newer_schema_is_refused(pg_dsn: str) -> None:
    PostgresStore(pg_dsn).close()
    with pg_server.admin_connect(pg_dsn) as conn:
        conn.execute("INSERT INTO migrations VALUES (99, 'future', '2030-01-01T00:00:00.000000Z')")
    with pytest.raises(IntegrityError, match="newer ctxline"):
        PostgresStore(pg_dsn)


# --- values PostgreSQL treats specially ----------------------------------------------


def test_nul_in_bodies_and_call_ids(pg: PostgresStore) -> None:
    pg.create_session("s", meta={"note": "a\x00b"})
    call = AssistantMessage("x\x00y", (ToolCall("c\x00\\0", "f", {"k": "\x00"}),))
    stored = pg.append("s", [UserMessage("\x00"), call])
    pg.append("s", [ToolResult("c\x00\\0", "out\x00")])
    with pytest.raises(PairingError):  # the escaping keeps distinct ids distinct
        pg.append("s", [ToolResult("c\\0\\0", "out")])
    assert pg.read("s")[:2] == stored
    assert pg.session("s").meta == {"note": "a\x00b"}
    with pytest.raises(ValidationError, match="NUL"):
        pg.append("s", [Pending(UserMessage("x"), id="bad\x00id")])
    assert pg.get_token_counts(["x\x00"], "t") == {}


def test_rogue_duplicate_seq_maps_to_conflict(pg: PostgresStore, pg_dsn: str) -> None:
    pg.create_session("s")
    pg.append("s", [UserMessage("one")])
    with pg_server.admin_connect(pg_dsn) as conn:  # a writer that ignored the timeline lock
        conn.execute(
            "INSERT INTO events VALUES ('s', 'main', 2, 'rogue', '2026-01-01T00:00:00.000000Z',"
            ' \'user\', \'{"kind":"user","text":"rogue"}\')'
        )
    with pytest.raises(Conflict):
        pg.append("s", [UserMessage("two")], expected_seq=1)


def test_torn_or_flipped_blob_is_a_read_error(pg: PostgresStore, pg_dsn: str) -> None:
    raw = bytearray(os.urandom(50_000))
    raw[999] = 0x00  # the byte the UPDATE below overwrites with 0xff: never already 0xff
    data = bytes(raw)
    ref = pg.blobs.put(data)
    other = pg.blobs.put(b"keep me")
    assert pg.integrity_check() == []
    with pg_server.admin_connect(pg_dsn) as conn:
        conn.execute(
            "UPDATE blobs SET data = overlay(data placing '\\xff'::bytea from 1000 for 1) WHERE ref = %s",
            (ref,),
        )
    with pytest.raises(BlobError, match="corrupt"):
        pg.blobs.get(ref)
    with pg_server.admin_connect(pg_dsn) as conn:
        conn.execute(
            "UPDATE blobs SET data = substring(data from 1 for 100) WHERE ref = %s", (ref,)
        )
    with pytest.raises(BlobError, match="corrupt"):
        pg.blobs.get(ref)
    assert pg.blobs.get(other) == b"keep me"
    assert pg.integrity_check() == [f"blob {ref} is corrupt: its bytes do not match its hash"]


# --- the retry helper ----------------------------------------------------------------


def test_append_with_retry_rereads_the_head(pg: PostgresStore) -> None:
    pg.create_session("s")
    seen: list[Conflict] = []
    calls: list[int] = []

    def make(head: int) -> list[UserMessage]:
        calls.append(head)
        if len(calls) == 1:  # another worker slips in between our read and our append
            pg.append("s", [UserMessage("theirs")])
        return [UserMessage(f"after {head}")]

    stored = append_with_retry(pg, "s", make, on_conflict=seen.append)
    assert calls == [0, 1]
    assert [(c.expected, c.actual) for c in seen] == [(0, 1)]
    assert stored[0].seq == 2

    def always_beaten(head: int) -> list[UserMessage]:
        pg.append("s", [UserMessage(f"theirs after {head}")])
        return [UserMessage("never")]

    seen.clear()
    with pytest.raises(Conflict):
        append_with_retry(pg, "s", always_beaten, attempts=3, on_conflict=seen.append)
    assert len(seen) == 3


# --- many writers ----------------------------------------------------------------------


def _always(batch: list[Pending]) -> Callable[[int], list[Pending]]:
    """A make_events for append_with_retry: the same batch (same ids) whatever the head."""
    return lambda head: batch


def _writer(dsn: str, worker: str, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(HERE), "writer", dsn, "s", worker, *extra],
        stdin=subprocess.PIPE if "--wait-go" in extra else None,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )


def _acks(out: str) -> dict[str, int]:
    acked: dict[str, int] = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == "ack":
            acked[parts[2]] = int(parts[1])
    return acked


def _assert_whole(store: PostgresStore, acked: dict[str, int]) -> tuple[int, int]:
    """Gap-free, every acknowledged event at its seq, nothing twice; (stored, lost)."""
    events = store.read("s")
    assert [e.seq for e in events] == list(range(1, len(events) + 1)), "gap in the timeline"
    by_id = {e.id: e.seq for e in events}
    assert len(by_id) == len(events), "duplicated event id"
    texts = [e.event.text for e in events if isinstance(e.event, UserMessage)]
    assert len(set(texts)) == len(texts), "duplicated event content"
    lost = [i for i in acked if i not in by_id]
    assert lost == []
    assert all(by_id[i] == seq for i, seq in acked.items())
    assert store.integrity_check() == []
    return len(events), len(lost)


def test_racing_appenders_are_gap_free_and_report_conflicts(pg: PostgresStore, pg_dsn: str) -> None:
    pg.create_session("s")
    procs = [_writer(pg_dsn, f"r{i}", "--expected", "--count=40", "--wait-go") for i in range(4)]
    for p in procs:  # all connected: now start them together
        assert p.stdout is not None
        assert p.stdout.readline() == "ready\n"
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    # a fork taken mid-race, written by this process, sees only the prefix it forked at
    while pg.head("s") < 30 and all(p.poll() is None for p in procs):
        time.sleep(0.01)
    point = pg.head("s")
    pg.fork("s", MAIN, point, "alt")
    mine = [pg.append("s", [UserMessage(f"alt {i}")], timeline="alt")[0] for i in range(20)]
    outputs = [p.communicate(timeout=60)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs)
    conflicts = sum(line.startswith("conflict") for out in outputs for line in out.splitlines())
    acked = {k: v for out in outputs for k, v in _acks(out).items()}
    stored, _ = _assert_whole(pg, acked)
    assert stored == 4 * 40 * 3 == len(acked)
    events = pg.read("s")
    for first in range(0, len(events), 3):  # batches are atomic: never interleaved
        assert len({e.id.rsplit("-", 1)[0] for e in events[first : first + 3]}) == 1
    alt = pg.read("s", "alt")
    assert alt == events[:point] + mine
    assert [e.seq for e in alt] == list(range(1, point + 21))
    assert conflicts > 0, "four writers on one timeline should have collided"
    print(
        f"race postgres: workers=4 events={stored} conflicts={conflicts} fork_at={point} lost=0 duplicated=0"
    )


def test_tailing_reader_never_skips_a_later_commit(pg_dsn: str) -> None:
    store = PostgresStore(pg_dsn, pool_size=8)
    store.create_session("s")
    total = 4 * 30 * 2
    done = threading.Event()

    def write(worker: int) -> None:
        for n in range(30):
            batch = [
                Pending(UserMessage(f"{worker}:{n}:{i}"), id=f"t{worker}-{n}-{i}") for i in range(2)
            ]
            append_with_retry(store, "s", _always(batch), attempts=1000)

    seen: list[int] = []

    def tail() -> None:
        while not done.is_set() or (seen[-1] if seen else 0) < total:
            for ev in store.read("s", after_seq=seen[-1] if seen else 0, limit=7):
                seen.append(ev.seq)

    writers = [threading.Thread(target=write, args=(w,)) for w in range(4)]
    tailer = threading.Thread(target=tail)
    tailer.start()
    for t in writers:
        t.start()
    for t in writers:
        t.join()
    done.set()
    tailer.join(timeout=30)
    assert seen == list(range(1, total + 1))
    store.close()


@contextmanager
def _dropping_after_commit(
    store: PostgresStore, dsn: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[list[int]]:
    """Make the next write transaction's connection die right after its COMMIT."""
    real = store._tx
    dropped: list[int] = []

    @contextmanager
    def tx() -> Iterator[psycopg.Connection[tuple[object, ...]]]:
        with real() as conn:
            pid = conn.info.backend_pid
            yield conn
        if not dropped:  # committed: the server has it, but the client never hears so
            dropped.append(pid)
            with pg_server.admin_connect(dsn) as admin:
                admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
            raise psycopg.OperationalError(
                "server closed the connection unexpectedly (after COMMIT)"
            )

    with monkeypatch.context() as patch:
        patch.setattr(store, "_tx", tx)
        yield dropped


def test_connection_dropped_after_commit_then_retry_is_exactly_once(
    pg: PostgresStore, pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    pg.create_session("s")
    batch = [Pending(UserMessage("one"), id="c-1"), Pending(UserMessage("two"), id="c-2")]
    with (
        _dropping_after_commit(pg, pg_dsn, monkeypatch) as dropped,
        pytest.raises(psycopg.OperationalError),
    ):
        pg.append("s", batch, expected_seq=0)
    assert len(dropped) == 1
    again = pg.append("s", batch, expected_seq=0)  # the caller cannot know: it sends it again
    assert [e.seq for e in again] == [1, 2]
    assert [e.id for e in pg.read("s")] == ["c-1", "c-2"]

    # the same through the helper, which retries the dropped connection by itself
    more = [Pending(UserMessage("three"), id="c-3")]
    with _dropping_after_commit(pg, pg_dsn, monkeypatch) as dropped:
        stored = append_with_retry(pg, "s", lambda head: more, retry_on=(psycopg.OperationalError,))
    assert len(dropped) == 1
    assert [e.seq for e in stored] == [3]
    assert [e.id for e in pg.read("s")] == ["c-1", "c-2", "c-3"]
    assert pg.head("s") == 3
    print("dropped-after-commit postgres: drops=2 retries=2 copies=1 each")


def test_kill_9_loses_no_acknowledged_append(pg: PostgresStore, pg_dsn: str) -> None:
    pg.create_session("s")
    rng = random.Random(7)
    acked: dict[str, int] = {}
    kills = 0
    for round_ in range(22):
        extra = ["--expected"] if round_ % 2 else []
        proc = _writer(pg_dsn, f"w{round_}", "--batch=4", *extra)
        assert proc.stdout is not None
        first = proc.stdout.readline()  # it is appending now
        time.sleep(rng.random() * 0.12)
        proc.send_signal(signal.SIGKILL)
        rest, _ = proc.communicate(timeout=30)
        assert proc.returncode == -signal.SIGKILL
        kills += 1
        acked.update(_acks(first + rest))
    stored, lost = _assert_whole(pg, acked)
    assert len(acked) > 200, "the writers should have acknowledged appends before each kill"
    print(
        f"kill-9 postgres: kills={kills} acknowledged={len(acked)} stored={stored}"
        f" lost={lost} duplicated=0"
    )


# --- the writer process ---------------------------------------------------------------


def writer_main(argv: list[str]) -> None:
    dsn, session, worker = argv[:3]
    opts = dict(a.removeprefix("--").split("=", 1) for a in argv[3:] if "=" in a)
    limit = int(opts["count"]) if "count" in opts else None
    size = int(opts.get("batch", "3"))
    store = PostgresStore(dsn, pool_size=1)
    store.create_session(session, exist_ok=True)
    if "--wait-go" in argv:  # line the racing writers up: start when the parent says so
        print("ready", flush=True)
        sys.stdin.readline()

    def conflict(exc: Conflict) -> None:
        print(f"conflict {exc.expected} {exc.actual}", flush=True)

    n = 0
    while limit is None or n < limit:
        n += 1
        batch = [
            Pending(UserMessage(f"{worker}:{n}:{i}"), id=f"{worker}-{n}-{i}") for i in range(size)
        ]
        if "--expected" in argv:
            stored = append_with_retry(
                store, session, _always(batch), attempts=10_000, on_conflict=conflict
            )
        else:
            stored = store.append(session, batch)
        sys.stdout.write("".join(f"ack {ev.seq} {ev.id}\n" for ev in stored))
        sys.stdout.flush()
    store.close()


if __name__ == "__main__":
    if sys.argv[1:2] == ["writer"]:
        writer_main(sys.argv[2:])


def test_a_large_body_is_read_back_in_slices_whole_and_checked(
    pg: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A body over LARGE_BODY is fetched SLICE_BYTES bytes at a time through one server-side
    cursor (issue 25: libpq keeps its buffer at the largest row it read, and character
    slices were quadratic); a slice may end inside a character (777 bytes of a text of two-
    and three-byte ones), the joined bytes decode exactly, and the hash link holds."""
    from ctxline.record.store import pg_events

    monkeypatch.setattr(pg_events, "LARGE_BODY", 1_000)
    monkeypatch.setattr(pg_events, "SLICE_BYTES", 777)
    content = "naïve café ✅ line\n" * 600  # ~12K characters, ~14K bytes: 16+ slices
    pg.create_session("big")
    call = AssistantMessage("", (ToolCall("c1", "build", {}),))
    pg.append("big", [call, ToolResult("c1", content, name="build")])
    (_, result) = pg.read("big")
    assert isinstance(result.event, ToolResult)
    assert result.event.content == content
    assert pg.verify_chain("big").ok
