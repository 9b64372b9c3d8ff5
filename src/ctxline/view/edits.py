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
    lines = content.splitlines()

    def cut(line: str) -> str:
        return line if len(line) <= width else line[: width - 1] + "…"

    intro = (
        f"[output shown as a preview: {len(content):,} characters, {len(lines):,} lines,"
        f" ~{tokens:,} tokens. The full output is saved; read it with"
        f' read_result(handle="{handle}", page=1).]'
    )
    if len(lines) <= head_lines + tail_lines:
        body = [cut(line) for line in lines]
        if sum(len(b) for b in body) > width * (head_lines + tail_lines):
            body = [content[: width * head_lines] + "…"]
        return "\n".join([intro, *body])
    omitted = len(lines) - head_lines - tail_lines
    return "\n".join(
        [
            intro,
            *(cut(line) for line in lines[:head_lines]),
            f"… {omitted:,} lines omitted …",
            *(cut(line) for line in lines[-tail_lines:]),
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
