"""A checked read parses a stored body once: its digest proves ctxline wrote it.

Why: an append checks an event's depth and refuses lone surrogates and NaN, so a body
whose digest matches its hash link holds none of them; the read no longer walks it again
for depth or copies every value to clean it (about 40 % of a long session's read). A body
changed outside ctxline never gets that far: its digest is checked first.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from ctxline.errors import IntegrityError
from ctxline.record.events import JsonValue, UserMessage
from ctxline.record.store import SQLiteStore
from ctxline.record.store.checks import MAX_DEPTH
from ctxline.record.store.rows import parse_body

DEEP = (
    '{"kind":"user.message","text":"x","meta":{"a":'
    + "[" * (MAX_DEPTH + 5)
    + "]" * (MAX_DEPTH + 5)
    + "}}"
)
LONE = '{"kind":"user.message","text":"bad \\ud800 half","meta":{"k\\udc00":"v"}}'


def test_an_unchecked_body_is_still_walked_and_cleaned() -> None:
    with pytest.raises(IntegrityError, match="nested deeper"):
        parse_body([DEEP], "s/main seq 1")
    event = parse_body([LONE], "s/main seq 1")
    assert isinstance(event, UserMessage)
    assert event.text == "bad \ufffd half"
    assert event.meta == {"k\ufffd": "v"}


@pytest.mark.parametrize("body", [DEEP, LONE])
def test_a_body_replaced_outside_ctxline_is_refused_before_it_is_parsed(
    tmp_path: Path, body: str
) -> None:
    store = SQLiteStore(tmp_path / "r.db")
    store.create_session("s")
    store.append("s", [UserMessage("hello", meta={"n": [1, {"deep": [2.5, None, True]}]})])
    store.close()
    conn = sqlite3.connect(tmp_path / "r.db")
    with conn:
        conn.execute("UPDATE events SET body = ? WHERE seq = 1", (body,))
    conn.close()
    with pytest.raises(
        IntegrityError, match="seq 1: the stored event does not match its hash link"
    ):
        SQLiteStore(tmp_path / "r.db").read("s")


def test_a_checked_read_gives_back_the_values_appended(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "r.db")
    store.create_session("s")
    meta: dict[str, JsonValue] = {"n": [1, {"deep": [2.5, None, True, "é😀"]}], "k": {"x": -3}}
    event = UserMessage("hello", meta=meta)
    store.append("s", [event])
    (read,) = store.read("s")
    assert read.event == event
    assert isinstance(read.event, UserMessage)
    assert read.event.meta == meta
    store.close()
