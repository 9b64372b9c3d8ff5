"""Edits to the view and the texts that stand for what they hide.

:class:`ViewEdits` is the fold of a timeline's ``reduction`` events: which results are
trimmed to a preview, which are folded into a reference to a later identical one, and
the compaction in force. :func:`preview` (an output too large for the view: head and
tail lines), :func:`trimmed` (an older output the model has already read: a short stub),
:func:`elide_arguments` (the long texts of an older call's arguments) and
:func:`fold_reference` are the texts the model reads in their place, each with the
handle ``read_result`` pages the saved text back from; :func:`groups` cuts a view into
assistant groups (an assistant message and all its results), the unit nothing may split.

A ``trim`` reduction whose ``meta["form"]`` is ``"short"`` shows its results as
:func:`trimmed` stubs and its assistant messages with elided arguments; without it (the
form before this one), as :func:`preview`.

    >>> fold_reference("ls", 12)
    '[same output as the later call to ls with the same arguments (record seq 12); it is shown there]'
    >>> trimmed("a\\nb\\nc", "sha256:ab", tokens=3).splitlines()[0]
    '[older output trimmed: 5 characters, 3 lines, ~3 tokens; read_result(handle="sha256:ab", page=1) returns it whole]'
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import assert_never

from ctxline.record.blobs import blob_ref
from ctxline.record.events import JsonValue, Reduction
from ctxline.view.measure import ViewMessage

__all__ = [
    "ARGUMENT_MIN_CHARS",
    "HUGE_CHARS",
    "READER",
    "SHORT",
    "TEXT",
    "ViewEdits",
    "elide_arguments",
    "fold_reference",
    "groups",
    "iter_lines",
    "line_count",
    "preview",
    "protected_recent",
    "reader_of",
    "trimmed",
]

SHORT = "short"
"""``meta["form"]`` of a trim shown as :func:`trimmed` stubs and elided arguments."""
TEXT = "text"
"""``meta["form"]`` of a trim of assistant messages whose text shows as a :func:`preview`
(the last resort when the newest group alone does not fit)."""
READER = "read_result"
"""The tool a stand-in points at when the request offers it (see :func:`reader_of`)."""
ARGUMENT_MIN_CHARS = 800
"""A string in an older call's arguments is elided only from this length on (~200 tokens)."""


@dataclass
class ViewEdits:
    """The reductions in force for a timeline, folded from its Reduction events."""

    trimmed: set[int]
    folded: dict[int, int]
    compact: Reduction | None = None
    short: set[int] = field(default_factory=set)
    """Trimmed seqs shown in the short form (:data:`SHORT`)."""
    texts: set[int] = field(default_factory=set)
    """Assistant seqs whose text shows as a preview (:data:`TEXT`)."""
    version: int = 0
    """How many reductions were applied (what caches keyed on the edits compare)."""

    @classmethod
    def empty(cls) -> ViewEdits:
        return cls(set(), {})

    def apply(self, reduction: Reduction) -> None:
        self.version += 1
        match reduction.action:
            case "trim":
                form = reduction.meta.get("form")
                if form == TEXT:
                    self.texts.update(reduction.seqs)
                    return
                self.trimmed.update(reduction.seqs)
                if form == SHORT:
                    self.short.update(reduction.seqs)
                else:
                    self.short.difference_update(reduction.seqs)
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


def iter_lines(text: str) -> Iterator[str]:
    """``text.splitlines()``, one line at a time (a huge output is never split whole)."""
    start = 0
    for match in _BREAK.finditer(text):
        yield text[start : match.start()]
        start = match.end()
    if start < len(text):
        yield text[start:]


_ASCII_BREAKS = ("\x0b", "\x0c", "\x1c", "\x1d", "\x1e")
_WIDE_BREAKS = ("\x85", "\u2028", "\u2029")


def line_count(content: str) -> int:
    """``len(content.splitlines())`` without the list (a preview and a stub of a huge
    output both say it: count it once and hand it to both as ``lines``), by ``str.count``
    per break kind, each rare kind looked for first with ``str.find`` (memchr: 7x faster
    than a count) — no match objects: the regex pass took 5 s on a 200 MB output (issue 25)."""

    def number(brk: str) -> int:
        return content.count(brk) if content.find(brk) >= 0 else 0

    count = content.count("\n")
    if content.find("\r") >= 0:
        count += content.count("\r") - content.count("\r\n")
    count += sum(map(number, _ASCII_BREAKS))
    if not content.isascii():  # O(1) on a str
        count += sum(map(number, _WIDE_BREAKS))
    if content and _BREAK.fullmatch(content[-1]) is None:
        count += 1  # a last line without a break
    return count


def _huge_lines(
    content: str, keep: int, tail: int, width: int, count: int | None = None
) -> tuple[int, list[str], list[str]]:
    """``content.splitlines()`` as far as a preview reads it — the number of lines, the
    first ``keep`` and the last ``tail``, each clipped to ``width + 1`` characters (all a
    preview shows) — without a list of millions of lines or a copy of a huge line
    (``count``: the number of lines, when the caller has it)."""
    first: list[str] = []
    start = 0
    for match in _BREAK.finditer(content):
        if len(first) >= keep:
            break
        first.append(content[start : min(match.start(), start + width + 1)])
        start = match.end()
    else:
        if start < len(content) and len(first) < keep:  # a last line without a break
            first.append(content[start : start + width + 1])
    window = 1 << 16
    while True:  # the last lines: a slice of the end that holds more than ``tail`` breaks
        piece = content[-window:]
        last = piece.splitlines()
        if len(last) > tail or window >= len(content):
            break
        window *= 4
    lines = line_count(content) if count is None else count
    return lines, first, [line[: width + 1] for line in last[-tail:]]


def preview(
    content: str,
    handle: str,
    *,
    tokens: int,
    head_lines: int = 12,
    tail_lines: int = 6,
    width: int = 240,
    noun: str = "output",
    reader: str | None = READER,
    lines: int | None = None,
) -> str:
    """A short stand-in for a long output: size, handle, first and last lines.

    ``reader``: the tool this request offers to read a saved text back (None: none is
    offered, and the stand-in points at no tool); ``lines``: :func:`line_count` of a huge
    ``content``, when the caller has it (it is not counted again)."""
    if len(content) > HUGE_CHARS:
        count, first, last = _huge_lines(content, head_lines + tail_lines, tail_lines, width, lines)
    else:
        split = content.splitlines()
        count, first, last = len(split), split, split[-tail_lines:]

    def cut(line: str) -> str:
        return line if len(line) <= width else line[: width - 1] + "…"

    where = (
        f' The full output is saved; read it with {reader}(handle="{handle}", page=1).]'
        if reader
        else f" The full {noun} is saved as {handle}; no tool in this request reads it back.]"
    )
    intro = (
        f"[{noun} shown as a preview: {len(content):,} characters, {count:,} lines,"
        f" ~{tokens:,} tokens.{where}"
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


def trimmed(
    content: str,
    handle: str,
    *,
    tokens: int,
    width: int = 160,
    reader: str | None = READER,
    lines: int | None = None,
) -> str:
    """The stub of an older output: its size, its handle, its first and last line
    (``reader``, ``lines``: as for :func:`preview`)."""
    if len(content) > HUGE_CHARS:
        count, first, last = _huge_lines(content, 1, 1, width, lines)
    else:
        split = content.splitlines()
        count, first, last = len(split), split[:1], split[-1:]
    where = (
        f'{reader}(handle="{handle}", page=1) returns it whole'
        if reader
        else f"saved whole as {handle}; no tool in this request reads it back"
    )
    intro = (
        f"[older output trimmed: {len(content):,} characters, {count:,} lines,"
        f" ~{tokens:,} tokens; {where}]"
    )

    def cut(line: str) -> str:
        return line if len(line) <= width else line[: width - 1] + "…"

    shown = [line for line in (first + last if count > 1 else first) if line.strip()]
    return "\n".join([intro, *(cut(line) for line in shown)])


def elide_arguments(
    arguments: JsonValue, min_chars: int = ARGUMENT_MIN_CHARS, *, reader: str | None = READER
) -> tuple[JsonValue, dict[str, str]]:
    """``arguments`` with every string of ``min_chars`` or more replaced by a stub.

    Returns the new arguments and the elided texts by handle (for the blob store). Keys,
    numbers and short strings stay as they were, so the call still reads as the call it
    was (a file write keeps its path, an edit its file name).

    >>> args, texts = elide_arguments({"path": "a.py", "content": "x" * 900})
    >>> args["path"], args["content"][:40]
    ('a.py', '[900 characters elided; read_result(hand')
    """
    texts: dict[str, str] = {}

    def walk(value: JsonValue) -> JsonValue:
        if isinstance(value, str):
            if len(value) < min_chars:
                return value
            handle = blob_ref(value.encode())
            texts[handle] = value
            if reader is None:
                return f"[{len(value):,} characters elided; saved as {handle}]"
            return f'[{len(value):,} characters elided; {reader}(handle="{handle}", page=1) returns them]'
        if isinstance(value, dict):
            return {k: walk(v) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v) for v in value]
        return value

    return walk(arguments), texts


def reader_of(tool_names: Iterable[str]) -> str | None:
    """The read-back tool among the tools a request offers, or None: a stand-in never
    points the model at a tool it was not given (builtin tools turned off, an
    integration that binds its own tools).

    >>> reader_of(["bash", "read_result"]), reader_of(["bash"])
    ('read_result', None)
    """
    return READER if READER in tool_names else None


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
