"""The extractive summary and the digest of a compacted span."""

from __future__ import annotations

from datetime import UTC, datetime

from ctxline.record.events import (
    AssistantMessage,
    Event,
    StoredEvent,
    ToolCall,
    ToolResult,
    UserMessage,
)
from ctxline.tokens.counters import get_counter
from ctxline.view.compaction import digest, extractive_summary

T0 = datetime(2026, 11, 2, tzinfo=UTC)
COUNTER = get_counter("bytes/4")


def stored(events: list[Event]) -> list[StoredEvent]:
    return [StoredEvent(i + 1, f"e{i + 1}", T0, ev) for i, ev in enumerate(events)]


def session(steps: int) -> list[StoredEvent]:
    events: list[Event] = [UserMessage("fix the failing test in src/app.py")]
    for i in range(steps):
        events.append(
            AssistantMessage(
                f"looking at step {i}",
                (ToolCall(f"c{i}", "bash", {"command": f"cat src/mod{i}.py"}),),
            )
        )
        events.append(ToolResult(f"c{i}", f"line one of {i}\nmore", is_error=i % 5 == 0))
    return stored(events)


def test_a_short_span_is_summarized_whole() -> None:
    text = extractive_summary(session(3), 2000, COUNTER)
    lines = text.splitlines()
    assert lines[0].startswith("Summary of record seq 1–7")
    assert lines[1] == "[1] user: fix the failing test in src/app.py"
    assert '[3] bash({"command":"cat src/mod0.py"}) → error: line one of 0' in lines
    assert "omitted" not in text


def test_a_long_span_keeps_the_newest_steps_within_budget() -> None:
    events = session(400)
    text = extractive_summary(events, 300, COUNTER)
    assert COUNTER.count(text) <= 300
    lines = text.splitlines()
    omitted = int(lines[1].split()[1].replace(",", ""))
    kept = lines[2:]
    assert kept[-1].startswith(f"[{events[-1].seq}] bash(")
    total_lines = 1 + 400 * 2  # the task, then an assistant line and a result line per step
    assert omitted + len(kept) == total_lines


def test_digest_counts_tools_and_files() -> None:
    text = digest(session(3), {3: "sha256:" + "a" * 64})
    assert "tools used: bash ×3" in text
    assert "seq 3: sha256:" in text
    assert "src/mod0.py" in text
    assert "src/mod2.py" in text
