"""Edits to the view and the texts that stand for what they hide.

:class:`ViewEdits` is the fold of a timeline's ``reduction`` events: which results are
trimmed to a preview, which are folded into a reference to a later identical one, and
the compaction in force. :func:`preview` and :func:`fold_reference` are the texts the
model reads in their place; :func:`groups` cuts a view into assistant groups (an
assistant message and all its results), the unit nothing may split.

    >>> fold_reference("ls", 12)
    '[same output as the later call to ls with the same arguments (record seq 12); it is shown there]'
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import assert_never

from ctxline.record.events import Reduction
from ctxline.view.measure import ViewMessage

__all__ = ["ViewEdits", "fold_reference", "groups", "preview", "protected_recent"]


@dataclass
class ViewEdits:
    """The reductions in force for a timeline, folded from its Reduction events."""

    trimmed: set[int]
    folded: dict[int, int]
    compact: Reduction | None = None

    @classmethod
    def empty(cls) -> ViewEdits:
        return cls(set(), {})

    def apply(self, reduction: Reduction) -> None:
        match reduction.action:
            case "trim":
                self.trimmed.update(reduction.seqs)
            case "fold":
                self.folded.update({int(k): v for k, v in reduction.refs.items()})
            case "compact":
                self.compact = reduction
            case _:
                assert_never(reduction.action)

    def hidden(self, seq: int) -> bool:
        c = self.compact
        return c is not None and seq <= c.upto_seq and seq not in c.keep


HUGE_CHARS = 8_000_000
"""Over this many characters a preview never splits the whole output into lines."""

# the boundaries str.splitlines() splits at
_BREAK = re.compile("\r\n|[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


def _huge_lines(content: str, keep: int, tail: int, width: int) -> tuple[int, list[str], list[str]]:
    """``content.splitlines()`` as far as a preview reads it — the number of lines, the
    first ``keep`` and the last ``tail``, each clipped to ``width + 1`` characters (all a
    preview shows) — without a list of millions of lines or a copy of a huge line."""
    count, start = 0, 0
    first: list[str] = []
    for match in _BREAK.finditer(content):
        if len(first) < keep:
            first.append(content[start : min(match.start(), start + width + 1)])
        start = match.end()
        count += 1
    if start < len(content):  # a last line without a break
        count += 1
        if len(first) < keep:
            first.append(content[start : start + width + 1])
    window = 1 << 16
    while True:  # the last lines: a slice of the end that holds more than ``tail`` breaks
        piece = content[-window:]
        last = piece.splitlines()
        if len(last) > tail or window >= len(content):
            break
        window *= 4
    return count, first, [line[: width + 1] for line in last[-tail:]]


def preview(
    content: str,
    handle: str,
    *,
    tokens: int,
    head_lines: int = 12,
    tail_lines: int = 6,
    width: int = 240,
) -> str:
    """A short stand-in for a long output: size, handle, first and last lines."""
    if len(content) > HUGE_CHARS:
        count, first, last = _huge_lines(content, head_lines + tail_lines, tail_lines, width)
    else:
        lines = content.splitlines()
        count, first, last = len(lines), lines, lines[-tail_lines:]

    def cut(line: str) -> str:
        return line if len(line) <= width else line[: width - 1] + "…"

    intro = (
        f"[output shown as a preview: {len(content):,} characters, {count:,} lines,"
        f" ~{tokens:,} tokens. The full output is saved; read it with"
        f' read_result(handle="{handle}", page=1).]'
    )
    if count <= head_lines + tail_lines:
        body = [cut(line) for line in first]
        if sum(len(b) for b in body) > width * (head_lines + tail_lines):
            body = [content[: width * head_lines] + "…"]
        return "\n".join([intro, *body])
    omitted = count - head_lines - tail_lines
    return "\n".join(
        [
            intro,
            *(cut(line) for line in first[:head_lines]),
            f"… {omitted:,} lines omitted …",
            *(cut(line) for line in last),
        ]
    )


def fold_reference(name: str, later_seq: int) -> str:
    return (
        f"[same output as the later call to {name} with the same arguments (record seq {later_seq});"
        " it is shown there]"
    )


def groups(messages: Sequence[ViewMessage]) -> list[tuple[int, int]]:
    """(start, end) index ranges of groups: an assistant message with its results, or one message."""
    out: list[tuple[int, int]] = []
    i = 0
    while i < len(messages):
        j = i + 1
        if messages[i].message.role == "assistant":
            while j < len(messages) and messages[j].message.role == "tool":
                j += 1
        out.append((i, j))
        i = j
    return out


def protected_recent(messages: Sequence[ViewMessage], keep_groups: int) -> set[int]:
    """Indexes of the messages in the last ``keep_groups`` assistant groups."""
    seen = 0
    protected: set[int] = set()
    for start, end in reversed(groups(messages)):
        if messages[start].message.role == "assistant":
            seen += 1
            if seen > keep_groups:
                break
        protected.update(range(start, end))
    return protected
