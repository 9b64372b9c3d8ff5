"""A 5 MB tool result through the runner: recorded whole, its blob saved once, shown as a
preview with a handle, and read back page by page to the same text (issue 25).

Speed is not asserted here (``benchmarks/bench_large_output.py`` measures it side by side
with LangGraph); what is asserted is what the speed-ups must not change.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxline.models.base import ModelReply, Provider
from ctxline.models.scripted import ScriptedModel
from ctxline.record.blobs import text_ref
from ctxline.record.codec import canonical_json
from ctxline.record.events import JsonValue, ToolResult
from ctxline.record.store import SQLiteStore
from ctxline.record.store.chain import PIECE_CHARS, SLICE_CHARS, canonical_pieces
from ctxline.runner import Agent
from ctxline.runner.sanitize import clean_text
from ctxline.text import clean_text as record_clean_text
from ctxline.tools.read_result import read_result

LINE = "2026-11-02T23:59:00Z build step {:07d}: compiling module and linking objects ok\n"
PAYLOAD = "".join(LINE.format(i) for i in range(65_000))  # ~5.3 MB of ASCII log lines


class Recording(ScriptedModel):
    """The scripted model, keeping every request body it was sent."""

    def __init__(self, script: list[dict[str, Any]]) -> None:
        super().__init__(script)
        self.bodies: list[Mapping[str, Any]] = []

    def complete(self, body: Mapping[str, Any], *, provider: Provider = "openai") -> ModelReply:
        self.bodies.append(body)
        return super().complete(body, provider=provider)


def _run(tmp_path: Path, content: str) -> tuple[Agent, Recording, Path]:
    def build() -> str:
        """Build every target and print the log."""
        return content

    model = Recording(
        [{"tool_calls": [{"id": "c1", "name": "build", "arguments": {}}]}, {"text": "built"}]
    )
    db = tmp_path / "big.db"
    agent = Agent(model, [build], store=SQLiteStore(db), session="big")
    assert agent.run("build it").final == "built"
    return agent, model, db


def _tool_message(body: Mapping[str, Any]) -> str:
    (tool,) = [m for m in body["messages"] if m.get("role") == "tool"]
    content = tool["content"]
    assert isinstance(content, str)
    return content


def test_a_big_result_is_recorded_whole_and_its_blob_saved_once(tmp_path: Path) -> None:
    agent, _, db = _run(tmp_path, PAYLOAD)
    (result,) = [e.event for e in agent.ctx.events if isinstance(e.event, ToolResult)]
    assert result.content == PAYLOAD  # the record holds the output as the tool returned it
    agent.store.close()
    conn = sqlite3.connect(db)
    blobs = conn.execute("SELECT ref, size FROM blobs").fetchall()
    conn.close()
    data = PAYLOAD.encode()
    big = [(ref, size) for ref, size in blobs if size >= len(data)]
    assert big == [(text_ref(PAYLOAD), len(data))]  # one blob, whatever the steps showed


def test_the_next_request_shows_a_preview_whose_handle_reads_back_page_by_page(
    tmp_path: Path,
) -> None:
    agent, model, _ = _run(tmp_path, PAYLOAD)
    shown = _tool_message(model.bodies[1])
    lines = PAYLOAD.splitlines()
    head = re.match(
        r"\[output shown as a preview: ([\d,]+) characters, ([\d,]+) lines, ~([\d,]+) tokens\.",
        shown,
    )
    assert head is not None, shown[:300]
    assert int(head[1].replace(",", "")) == len(PAYLOAD)
    assert int(head[2].replace(",", "")) == len(lines)
    tokens = int(head[3].replace(",", ""))
    assert len(PAYLOAD) // 8 < tokens < len(PAYLOAD) // 2
    assert lines[0] in shown
    assert lines[11] in shown
    assert lines[12] not in shown
    assert lines[-1] in shown
    assert f"{len(lines) - 18:,} lines omitted" in shown
    assert len(shown) < 10_000  # the request carries the preview, not the 5 MB
    handle = text_ref(PAYLOAD)
    assert f'handle="{handle}"' in shown
    first = read_result(agent.store.blobs, handle, 1)
    assert first.ok, first.message
    assert first.pages > 1
    pages = [first.text]
    for n in range(2, first.pages + 1):
        page = read_result(agent.store.blobs, handle, n)
        assert page.ok
        assert page.page == n
        pages.append(page.text)
    assert "".join(pages) == PAYLOAD
    assert not read_result(agent.store.blobs, handle, first.pages + 1).text


def test_a_big_non_ascii_result_still_has_its_lone_surrogates_replaced(tmp_path: Path) -> None:
    content = "naïve café ✅\n" * 200_000 + "\ud800 end"
    agent, _, _ = _run(tmp_path, content)
    (result,) = [e.event for e in agent.ctx.events if isinstance(e.event, ToolResult)]
    assert result.content == content[:-5] + "\ufffd end"
    assert clean_text(PAYLOAD) is PAYLOAD  # an ASCII text is returned as it is


def test_the_records_clean_text_checks_a_long_text_a_slice_at_a_time() -> None:
    """``ctxline.text.clean_text`` (what every read of the record passes a text through)
    no longer encodes a whole copy of a long text to look for lone surrogates: an ASCII
    or encodable text comes back as the very same object, one with a surrogate after the
    first slice is still cleaned (a 50 MB read peaked at 4.2x with that copy, issue 25)."""
    assert record_clean_text(PAYLOAD) is PAYLOAD
    wide = "naïve café ✅\n" * 200_000  # 2.8M characters: three slices
    assert record_clean_text(wide) is wide
    late = wide + "\ud83d\ude00 and \udc00"  # a pair in the last slice, and a lone half
    assert record_clean_text(late) == wide + "😀 and \ufffd"


@settings(max_examples=200, deadline=None)
@given(st.text(st.sampled_from("a✅é\n\ud800\udbff\udc00\udfff"), max_size=40), st.integers(1, 8))
def test_clean_text_in_slices_is_clean_text_whole(text: str, piece: int) -> None:
    """Any slice length gives the whole text's answer: a surrogate is one code point of a
    str, so a boundary never hides one or makes one (even between the halves of a pair)."""
    import ctxline.text as module

    try:
        text.encode("utf-8")
        expected = text
    except UnicodeEncodeError:
        expected = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    old = module._PIECE
    module._PIECE = piece
    try:
        assert record_clean_text(text) == expected
    finally:
        module._PIECE = old


def test_a_long_string_is_encoded_in_quarter_mib_slices_to_the_same_bytes() -> None:
    """Each slice is copied four times on its way to bytes, so the slices are a quarter
    MiB of characters (a MiB was 4 MB of a 50 MB append's peak, issue 25); joined, the
    pieces are the canonical JSON, escapes and multi-byte characters included."""
    content = 'naïve "quoted" ✅ \\ tab\t line\n' * 60_000  # 1.8M characters
    obj: JsonValue = {"kind": "tool.result", "content": content, "call_id": "c1"}
    pieces = list(canonical_pieces(obj))
    assert b"".join(pieces) == canonical_json(obj)
    longest = max(len(p.decode()) for p in pieces)  # characters of escaped JSON
    assert len(content) > PIECE_CHARS
    assert longest <= 2 * SLICE_CHARS < PIECE_CHARS  # an escape is at most 2 characters here


@settings(max_examples=200, deadline=None)
@given(st.text(st.sampled_from('a✅é\n"\\\t\x00\u2028'), max_size=60), st.integers(1, 9))
def test_canonical_pieces_join_to_canonical_json_for_any_slice(text: str, piece: int) -> None:
    obj: JsonValue = {"b": [text, {"c": text}], "a": text}
    assert b"".join(canonical_pieces(obj, piece)) == canonical_json(obj)


def test_the_handle_and_preview_made_ahead_are_the_ones_the_next_step_shows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The work done ahead for a new result (its handle: a hash of all of it; its preview:
    its lines counted) is kept for the step that shows it, not done twice (issue 25)."""
    from ctxline.view import cache, edits

    calls: dict[str, int] = {"text_ref": 0, "preview": 0}
    real_ref, real_preview = text_ref, edits.preview

    def counting_ref(text: str) -> str:
        calls["text_ref"] += text is PAYLOAD
        return real_ref(text)

    def counting_preview(content: str, handle: str, **kw: Any) -> str:
        calls["preview"] += content == PAYLOAD
        return real_preview(content, handle, **kw)

    monkeypatch.setattr(cache, "text_ref", counting_ref)  # the names cache.py calls
    monkeypatch.setattr(cache, "preview", counting_preview)
    _, model, _ = _run(tmp_path, PAYLOAD)
    assert calls == {"text_ref": 1, "preview": 1}
    shown = _tool_message(model.bodies[1])
    found = re.search(r"~([\d,]+) tokens", shown)
    assert found is not None
    tokens = int(found.group(1).replace(",", ""))
    assert shown == real_preview(PAYLOAD, text_ref(PAYLOAD), tokens=tokens)


def test_a_huge_text_is_not_hashed_for_a_count_lookup() -> None:
    """A text over ``_HUGE`` is estimated from samples, which costs less than the sha1 of
    all of it that a stored count is looked up by: it is counted, and not stored."""
    from ctxline.record.store import MemoryStore
    from ctxline.tokens import counters

    counter = counters.get_counter("o200k")
    store = MemoryStore()
    huge = "x = 1\n" * (counters._HUGE // 6 + 1)
    long = "y = 2\n" * 1_000
    learned: dict[str, int] = {}
    got = counters.TextCounts(counter, store, learned).counts([huge, long])
    assert got == [counter.count(huge), counter.count(long)]
    assert list(learned) == ["text:" + counters._sha1(long)]  # only the long one is kept


def test_importing_ctxline_loads_neither_jsonschema_nor_an_encoding() -> None:
    """A process that only reads the record back holds neither jsonschema (4 MB, imported
    where a slot schema is checked) nor o200k's tables (48 MB, built at the first count)."""
    import os
    import subprocess
    import sys

    code = (
        "import sys\n"
        "import ctxline\n"
        "from ctxline.tokens import tiktoken_files as tf\n"
        "from ctxline.tokens.counters import get_counter\n"
        "counter = get_counter('o200k')\n"
        "print('jsonschema' in sys.modules, sorted(tf._CACHE))\n"
    )
    src = str(Path(__file__).resolve().parents[1] / "src")
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": src},
    )
    assert out.stdout.split("\n")[0] == "False []"
