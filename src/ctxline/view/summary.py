"""The default summary: one line per step, newest kept first, made from the record.

:func:`extractive_summary` is the deterministic, offline summarizer compaction uses by
default (any ``(events, max_tokens, counter) -> str`` may replace it).
:class:`SummaryLines` keeps its lines as the record grows, so the step that compacts
does not walk the record: the summary of a span is found from the end of those lines.

    text = extractive_summary(events, 2_000, counter)
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from ctxline.record.events import (
    AssistantMessage,
    Notification,
    StoredEvent,
    ToolCall,
    ToolResult,
    UserMessage,
)
from ctxline.render.openai import arguments_text
from ctxline.tags import quote_name
from ctxline.tokens.counters import TokenCounter
from ctxline.view.edits import iter_lines

__all__ = ["SummaryLines", "extractive_summary"]


def _clip(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _line(ev: StoredEvent, calls: dict[str, ToolCall]) -> str | None:
    e = ev.event
    if isinstance(e, UserMessage):
        return f"[{ev.seq}] user: {_clip(e.text, 300)}"
    if isinstance(e, AssistantMessage) and e.text.strip():
        return f"[{ev.seq}] assistant: {_clip(e.text, 200)}"
    if isinstance(e, ToolResult):
        call = calls.get(e.call_id)
        name = call.name if call is not None else (e.name or "tool")
        args = _clip(arguments_text(call.arguments), 120) if call is not None else ""
        status = "error" if e.is_error else "ok"
        first = next((line for line in iter_lines(e.content) if line.strip()), "")
        return f"[{ev.seq}] {quote_name(name)}({args}) → {status}: {_clip(first, 120)}"
    if isinstance(e, Notification):
        return f"[{ev.seq}] notification from {quote_name(e.source)}: {_clip(e.text, 160)}"
    return None


def extractive_summary(
    events: Sequence[StoredEvent], max_tokens: int, counter: TokenCounter
) -> str:
    """A deterministic line-per-step digest of ``events``, kept within ``max_tokens``.

    When it is too long the oldest lines go first (a marker says how many); lines are
    counted newest first and only until the budget is spent. A result's line names the
    call it answers: the latest call with its id before it. :class:`SummaryLines` makes
    the same text from lines kept ahead of need.
    """
    calls: dict[str, ToolCall] = {}
    lines: list[str | None] = []
    for ev in events:
        lines.append(_line(ev, calls))
        if isinstance(ev.event, AssistantMessage):
            for call in ev.event.tool_calls:
                calls[call.id] = call
    head = f"Summary of record seq 1–{events[-1].seq if events else 0} (extractive, made by ctxline from the record):"
    budget = max_tokens - counter.count(head) - 16
    kept: list[str] = []
    used = 0
    index = len(events) - 1
    while index >= 0:
        line = lines[index]
        if line is not None:
            cost = counter.count(line) + 1
            if used + cost > budget:
                break
            kept.append(line)
            used += cost
        index -= 1
    kept.reverse()
    if index < 0:
        return "\n".join([head, *kept])
    omitted = sum(1 for line in lines[: index + 1] if line is not None)
    return "\n".join([head, f"… {omitted:,} earlier steps omitted …", *kept])


class SummaryLines:
    """The lines of :func:`extractive_summary`, made once per event as the record grows.

    A compaction then costs O(lines it keeps): the summary of any span ``1..upto``
    (less the user messages kept verbatim) is the newest lines that fit, found from the
    end, and the same text :func:`extractive_summary` makes from the span's events.
    """

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self.tokens = 0
        """About the tokens of the last :meth:`summary` (from its lines' counts)."""
        self.upto = 0
        self.last_id = ""
        self.counter = ""
        self.seqs: list[int] = []
        self.texts: list[str] = []
        self.costs: list[int] = []
        self.calls: dict[str, ToolCall] = {}

    def advance(self, events: Sequence[StoredEvent], upto: int, counter: TokenCounter) -> None:
        """Make the lines of ``events`` up to seq ``upto`` (starting over on another record)."""
        upto = min(upto, len(events))
        stale = self.upto and (self.upto > len(events) or events[self.upto - 1].id != self.last_id)
        if stale or counter.name != self.counter:
            self._reset()
            self.counter = counter.name
        for ev in events[self.upto : upto]:
            line = _line(ev, self.calls)
            if line is not None:
                self.seqs.append(ev.seq)
                self.texts.append(line)
                self.costs.append(counter.count(line) + 1)
            if isinstance(ev.event, AssistantMessage):
                for call in ev.event.tool_calls:
                    self.calls[call.id] = call
        if upto > self.upto:
            self.upto, self.last_id = upto, events[upto - 1].id

    def summary(
        self,
        events: Sequence[StoredEvent],
        upto: int,
        keep: Sequence[int],
        max_tokens: int,
        counter: TokenCounter,
    ) -> str:
        """``extractive_summary`` of the events up to ``upto`` but those in ``keep``."""
        self.advance(events, upto, counter)
        kept_seqs = set(keep)
        last = upto
        while last in kept_seqs:
            last -= 1
        head = f"Summary of record seq 1–{max(last, 0)} (extractive, made by ctxline from the record):"
        head_tokens = counter.count(head)
        budget = max_tokens - head_tokens - 16
        end = bisect.bisect_right(self.seqs, upto)
        chosen: list[str] = []
        used = 0
        j = end - 1
        while j >= 0:
            seq = self.seqs[j]
            if seq not in kept_seqs:
                cost = self.costs[j]
                if used + cost > budget:
                    break
                chosen.append(self.texts[j])
                used += cost
            j -= 1
        chosen.reverse()
        self.tokens = head_tokens + used  # each line's cost counts its line break
        if j < 0:
            return "\n".join([head, *chosen])
        omitted = j + 1 - sum(1 for seq in kept_seqs if seq <= self.seqs[j] and _has_line(self, seq))
        marker = f"… {omitted:,} earlier steps omitted …"
        self.tokens += counter.count(marker) + 1
        return "\n".join([head, marker, *chosen])


def _has_line(lines: SummaryLines, seq: int) -> bool:
    i = bisect.bisect_left(lines.seqs, seq)
    return i < len(lines.seqs) and lines.seqs[i] == seq
