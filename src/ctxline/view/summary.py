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


def _has_text(ev: StoredEvent) -> bool:
    """Whether ``ev`` has a line (what :func:`_line` gives text for), without making it."""
    e = ev.event
    if isinstance(e, AssistantMessage):
        return bool(e.text.strip())
    return isinstance(e, (UserMessage, ToolResult, Notification))


def _line(ev: StoredEvent, calls: dict[str, ToolCall]) -> str | None:
    e = ev.event
    return _line_of(ev, calls.get(e.call_id) if isinstance(e, ToolResult) else None)


def _line_of(ev: StoredEvent, call: ToolCall | None) -> str | None:
    """The line of ``ev``; a result's ``call`` is the latest call with its id before it."""
    e = ev.event
    if isinstance(e, UserMessage):
        return f"[{ev.seq}] user: {_clip(e.text, 300)}"
    if isinstance(e, AssistantMessage) and e.text.strip():
        return f"[{ev.seq}] assistant: {_clip(e.text, 200)}"
    if isinstance(e, ToolResult):
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
    """The lines of :func:`extractive_summary`, noted once per event as the record grows.

    A compaction then costs O(lines it keeps): the summary of any span ``1..upto``
    (less the user messages kept verbatim) is the newest lines that fit, found from the
    end, and the same text :func:`extractive_summary` makes from the span's events. A
    line's text and token count are made when a summary first reaches it (each event
    notes only its seq and, for a result, its call): a Context opening on 20,000 steps
    formatted and counted 40,000 lines it never showed (issue 25).
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
        self.made_from: list[tuple[StoredEvent, ToolCall | None]] = []
        self.texts: list[str | None] = []
        """Made when first needed (None until then), as ``costs`` (-1 until then)."""
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
            e = ev.event
            if _has_text(ev):
                self.seqs.append(ev.seq)
                call = self.calls.get(e.call_id) if isinstance(e, ToolResult) else None
                self.made_from.append((ev, call))
                self.texts.append(None)
                self.costs.append(-1)
            if isinstance(e, AssistantMessage):
                for call in e.tool_calls:
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
                text, cost = self._made(j, counter)
                if used + cost > budget:
                    break
                chosen.append(text)
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

    def _made(self, j: int, counter: TokenCounter) -> tuple[str, int]:
        """Line ``j``'s text and its cost (its tokens and its line break), made once."""
        text, cost = self.texts[j], self.costs[j]
        if text is None:
            made = _line_of(*self.made_from[j])
            assert made is not None  # _has_text said so
            text, cost = made, counter.count(made) + 1
            self.texts[j], self.costs[j] = text, cost
        return text, cost


def _has_line(lines: SummaryLines, seq: int) -> bool:
    i = bisect.bisect_left(lines.seqs, seq)
    return i < len(lines.seqs) and lines.seqs[i] == seq
