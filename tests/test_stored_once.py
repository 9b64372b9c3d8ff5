"""A huge tool result is stored once (``store.external``): its content only as a blob.

The row holds the event with its content empty and ``chain.external`` the blob's handle;
the hash chain is the one the same event has inline, so reads, ``verify_chain``, the
doctor and an export see exactly the event that was appended, and any change to the
blob, the row or the handle is caught and named.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import FakeClock, counter_ids, make_store
from ctxline.errors import IntegrityError
from ctxline.record.blobs import text_ref
from ctxline.record.codec import canonical_json, event_to_json, format_at
from ctxline.record.events import AssistantMessage, ToolCall, ToolResult, UserMessage
from ctxline.record.store import SQLiteStore, Store
from ctxline.record.store.chain import GENESIS, chain_link, encode_body
from ctxline.record.store.external import EXTERNAL_MIN_CHARS, is_external
from ctxline.record.store.redaction import Redaction, redact, redacted_event

DURABLE = ["sqlite", "postgres"]
HUGE = ('line "quoted" \\ with é and 😀\n' * (EXTERNAL_MIN_CHARS // 28 + 10))[
    : EXTERNAL_MIN_CHARS + 5
]


@pytest.fixture(params=DURABLE)
def durable(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    s = make_store(str(request.param), tmp_path)
    yield s
    s.close()


def _append(store: Store, content: str = HUGE, session: str = "s") -> ToolResult:
    call = ToolCall("c1", "cat", {"path": "big.log"})
    result = ToolResult("c1", content, name="cat")
    store.create_session(session, exist_ok=True)
    store.append(
        session, [UserMessage("read it"), AssistantMessage("", tool_calls=(call,)), result]
    )
    return result


def _rows(store: Store) -> list[tuple[int, int, str | None]]:
    """(seq, stored body bytes, external handle) per row, through the engine itself."""
    sql = (
        "SELECT e.seq, octet_length(e.body), c.external FROM events e JOIN chain c"
        " ON c.session = e.session AND c.timeline = e.timeline AND c.seq = e.seq ORDER BY e.seq"
    )
    if isinstance(store, SQLiteStore):
        conn = sqlite3.connect(store.path)
        try:
            return conn.execute(
                sql.replace("octet_length(e.body)", "length(CAST(e.body AS BLOB))")
            ).fetchall()
        finally:
            conn.close()
    with store._conn() as conn:  # type: ignore[attr-defined]
        return [(int(a), int(b), c) for a, b, c in conn.execute(sql).fetchall()]


def test_only_results_over_a_mib_are_external() -> None:
    assert is_external(ToolResult("c", "x" * (EXTERNAL_MIN_CHARS + 1)))
    assert not is_external(ToolResult("c", "x" * EXTERNAL_MIN_CHARS))
    assert not is_external(UserMessage("x" * (EXTERNAL_MIN_CHARS + 1)))


def test_a_huge_result_is_stored_once_and_reads_back_whole(durable: Store) -> None:
    result = _append(durable)
    rows = _rows(durable)
    assert [r[0] for r in rows] == [1, 2, 3]
    assert rows[0][2] is None
    assert rows[1][2] is None
    _seq, size, ref = rows[2]
    assert ref == text_ref(HUGE)
    assert size < 500  # the row holds no content: the blob does
    assert durable.blobs.get(ref).decode() == HUGE
    events = durable.read("s")
    assert events[2].event == result
    assert durable.read("s", after_seq=2)[0].event == result
    assert durable.verify_chain("s").ok


def test_the_link_is_the_one_the_event_has_inline(durable: Store) -> None:
    """What an auditor recomputes from an export: the whole canonical JSON's digest."""
    _append(durable)
    stored = durable.read("s")
    prev = GENESIS
    for s in stored:
        digest = "sha256:" + hashlib.sha256(canonical_json(event_to_json(s.event))).hexdigest()
        assert digest == encode_body(s.event).digest
        prev = chain_link(prev, s.seq, s.id, format_at(s.at), digest)
    check = durable.verify_chain("s")
    assert check.ok
    assert check.link == prev


def test_the_doctor_finds_the_record_healthy(durable: Store) -> None:
    _append(durable)
    problems = [p for check in durable.health() for p in check.problems]  # type: ignore[attr-defined]
    assert problems == []


def test_a_result_of_a_mib_stays_inline(durable: Store) -> None:
    _append(durable, "y" * EXTERNAL_MIN_CHARS)
    (_, size, ref) = _rows(durable)[2]
    assert ref is None
    assert size > EXTERNAL_MIN_CHARS


def _sqlite(tmp_path: Path) -> SQLiteStore:
    return SQLiteStore(tmp_path / "once.db", clock=FakeClock(), new_id=counter_ids())


def _tamper(path: str, sql: str, *args: object) -> None:
    conn = sqlite3.connect(path)
    with conn:
        conn.execute(sql, args)
    conn.close()


@pytest.mark.parametrize(
    ("sql", "why"),
    [
        (
            "UPDATE blobs SET data = CAST(replace(CAST(data AS TEXT), 'quoted', 'QUOTED') AS BLOB)",
            "hash link",
        ),
        ("DELETE FROM blobs", "missing"),
        ("UPDATE events SET body = replace(body, '\"cat\"', '\"dog\"') WHERE seq = 3", "hash link"),
        (
            'UPDATE events SET body = replace(body, \'"content":""\', \'"content":"x"\') WHERE seq = 3',
            "not an empty tool result",
        ),
        ("UPDATE chain SET external = NULL WHERE seq = 3", "hash link"),
    ],
)
def test_a_changed_blob_row_or_handle_is_caught_and_named(
    tmp_path: Path, sql: str, why: str
) -> None:
    store = _sqlite(tmp_path)
    _append(store)
    store.close()
    _tamper(str(tmp_path / "once.db"), sql)
    store = _sqlite(tmp_path)
    with pytest.raises(IntegrityError, match="seq 3") as caught:
        store.read("s")
    assert why in str(caught.value)
    check = store.verify_chain("s")
    assert not check.ok
    assert "seq 3" in check.problems[0]
    assert store.read("s", limit=2)[1].seq == 2  # the rows before it still read
    store.close()


def test_a_handle_moved_to_another_blob_is_caught(tmp_path: Path) -> None:
    store = _sqlite(tmp_path)
    _append(store)
    other = store.blobs.put(HUGE.replace("quoted", "QUOTED").encode())
    store.close()
    _tamper(str(tmp_path / "once.db"), "UPDATE chain SET external = ? WHERE seq = 3", other)
    store = _sqlite(tmp_path)
    with pytest.raises(IntegrityError, match=r"seq 3.*hash link"):
        store.read("s")
    store.close()


def _forget_quoted(store: Store) -> int:
    """Redact the word "quoted" out of session s's result, as ``forget`` would."""
    (stored,) = [e for e in store.read("s") if isinstance(e.event, ToolResult)]
    new = redacted_event(
        stored.event,
        lambda path, s: s.replace("quoted", "[gone]"),
        "forgotten m-1",
        "2026-12-04T00:00:00Z",
    )
    assert new is not None
    return redact(store, [Redaction("s", "main", stored.seq, new)])


def test_redacting_an_external_row_stores_its_tombstone_inline(durable: Store) -> None:
    """``forget``'s path: the content's blob goes, unless another row's content is it."""
    result = _append(durable)
    _append(durable, session="t")  # the same content in another session: its blob stays
    assert _forget_quoted(durable) == 1
    assert _rows(durable)[2][2] is None
    (after,) = [e.event for e in durable.read("s") if isinstance(e.event, ToolResult)]
    assert isinstance(after, ToolResult)
    assert "quoted" not in after.content
    assert durable.verify_chain("s").ok
    assert [e.event for e in durable.read("t")][2] == result  # still whole, still verified
    assert durable.blobs.has(text_ref(HUGE))


def test_redacting_the_only_copy_deletes_its_blob(durable: Store) -> None:
    _append(durable)
    _forget_quoted(durable)
    assert not durable.blobs.has(text_ref(HUGE))
    assert durable.verify_chain("s").ok


def test_a_file_from_before_version_7_keeps_its_inline_rows(tmp_path: Path) -> None:
    """A version-6 file (no ``chain.external``, the huge row inline, as version 6 wrote
    it) reads and verifies read-only; opened for writing it gains the column, the old
    row still reads and verifies, and the next huge row is stored once."""
    store = _sqlite(tmp_path)
    result = _append(store)
    store.close()
    path = str(tmp_path / "once.db")
    conn = sqlite3.connect(path)
    with conn:
        conn.execute(
            "UPDATE events SET body = ? WHERE seq = 3", (canonical_json(event_to_json(result)),)
        )
        conn.execute("ALTER TABLE chain DROP COLUMN external")
        conn.execute("DELETE FROM migrations WHERE version = 7")
    conn.close()
    old = SQLiteStore(path, read_only=True)
    assert old.read("s")[2].event == result
    assert old.verify_chain("s").ok
    old.close()
    store = SQLiteStore(path, clock=FakeClock(), new_id=counter_ids("later"))
    assert store.read("s")[2].event == result
    assert store.verify_chain("s").ok
    _append(store, session="new")
    assert store.read("new")[2].event == result
    store.close()
    conn = sqlite3.connect(path)
    refs = conn.execute(
        "SELECT session, external FROM chain WHERE seq = 3 ORDER BY session"
    ).fetchall()
    (version,) = conn.execute("SELECT max(version) FROM migrations").fetchone()
    conn.close()
    assert refs == [("new", text_ref(HUGE)), ("s", None)]
    assert version == 7
