"""Reading JSON that did not come from ctxline: limits, clear errors, large lines.

Why: ``json.loads`` on hostile input fails with a ``ValueError`` for an integer of more
than 4,300 digits, a ``RecursionError`` for deep nesting, or eats memory for a huge
line; each must instead be a :class:`~ctxline.errors.ValidationError` naming the line
and, where it can tell, the field (exit 2 from the CLI). The limits:

* integers: at most :data:`MAX_INT_DIGITS` digits (Python's own limit);
* nesting: at most :data:`MAX_DEPTH` objects and lists deep;
* a JSONL line: at most :data:`MAX_LINE_BYTES`; a file to import: :data:`MAX_FILE_BYTES`.

A line over :data:`LARGE_LINE_BYTES` (a tool output of hundreds of MB) is read by
:func:`parse_json_bytes` without ``json``'s growing buffer for its long strings: each
string over a MiB is decoded a piece at a time and joined once, so a 200 MB line costs
about twice its size at the peak instead of three times.

    value = parse_json('{"n": 1}', line=3)
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from typing import IO, Any

from ctxline.errors import ValidationError
from ctxline.record.store.chain import field_path, json_depth

__all__ = [
    "LARGE_LINE_BYTES",
    "MAX_DEPTH",
    "MAX_FILE_BYTES",
    "MAX_INT_DIGITS",
    "MAX_LINE_BYTES",
    "LongInteger",
    "json_depth",
    "parse_int",
    "parse_json",
    "parse_json_bytes",
    "read_line",
]

MAX_DEPTH = 200
"""JSON nested deeper than this (objects and lists) is refused where it is read."""
MAX_INT_DIGITS = 4300
"""Python's own limit for turning digits into an integer (``sys.get_int_max_str_digits``)."""
MAX_LINE_BYTES = 512 * 1024 * 1024
"""One JSONL line (a file's, or ``ctxline append``'s stdin) may hold at most this."""
MAX_FILE_BYTES = 1024 * 1024 * 1024
"""A file to import may hold at most this (split larger logs)."""

Buffer = bytes | bytearray
LARGE_LINE_BYTES = 8 * 1024 * 1024
"""Lines over this are read by the piecewise path of :func:`parse_json_bytes`."""
PIECE_BYTES = 1024 * 1024


class LongInteger(Exception):
    """An integer with more digits than Python turns into a number (raised while parsing)."""

    def __init__(self, digits: int) -> None:
        self.digits = digits


def parse_int(text: str) -> int:
    """``parse_int`` for ``json.loads``: refuses integers over :data:`MAX_INT_DIGITS` digits."""
    digits = len(text) - (text[:1] == "-")
    if digits > MAX_INT_DIGITS:
        raise LongInteger(digits)
    return int(text)


_STRING_OR_LONG = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|-?\d{' + str(MAX_INT_DIGITS + 1) + ",}")
_KEY_BEFORE = re.compile(r'"((?:[^"\\]|\\.){1,200})"\s*:[\s\[,\d.eE+-]*$')


def _locate_long(text: str, line: int | None) -> tuple[int | None, str | None]:
    """The line and the key of the first integer too long to read (outside strings)."""
    for m in _STRING_OR_LONG.finditer(text):
        if m.group().startswith('"'):
            continue
        key = _KEY_BEFORE.search(text, max(0, m.start() - 4000), m.start())
        where = line if line is not None else text.count("\n", 0, m.start()) + 1
        return where, key.group(1) if key else None
    return line, None


def parse_json(text: str | bytes, *, line: int | None = None) -> Any:
    """``json.loads`` with errors that name the line (the document's, or ``line``) and,
    where it can tell, the field.

    Refused: integers of more than :data:`MAX_INT_DIGITS` digits, nesting deeper than
    :data:`MAX_DEPTH`, and (given ``line``) a line over :data:`MAX_LINE_BYTES`. NaN and
    Infinity are read as floats, as Python writes them; every value that goes into an
    event or a meta passes through ``clean_json``, which turns them into text.
    """
    if line is not None and len(text) > MAX_LINE_BYTES:
        raise ValidationError(
            f"the line is {len(text):,} characters long; at most {MAX_LINE_BYTES:,} are read",
            line=line,
        )
    try:
        value = json.loads(text, parse_int=parse_int)
    except LongInteger as exc:
        decoded = text.decode("utf-8", "replace") if isinstance(text, bytes) else text
        where, key = _locate_long(decoded, line)
        raise ValidationError(
            f"an integer of {exc.digits:,} digits; at most {MAX_INT_DIGITS:,} are read"
            " (quote it as a string)",
            line=where,
            field=key,
        ) from None
    except json.JSONDecodeError as exc:
        where = line if line is not None else exc.lineno
        raise ValidationError(f"invalid JSON: {exc.msg} (column {exc.colno})", line=where) from None
    except RecursionError:
        raise ValidationError(
            f"invalid JSON: nested more than {MAX_DEPTH} levels deep", line=line
        ) from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValidationError(f"invalid JSON: {exc}", line=line) from None
    deep = json_depth(value, MAX_DEPTH)
    if deep is not None:
        raise ValidationError(
            f"JSON nested more than {MAX_DEPTH} levels deep",
            line=line,
            field=field_path(deep) or None,
        )
    return value


def _strings(raw: Buffer) -> Iterator[tuple[int, int]]:
    """``(start, end)`` of each JSON string token, quotes included (``bytes.find``, not a
    regex: the engine's backtracking stack would grow with every escape of a long one)."""
    pos = raw.find(b'"')
    while pos >= 0:
        end = raw.find(b'"', pos + 1)
        while end > 0:
            back = 0
            while raw[end - back - 1] == 0x5C:
                back += 1
            if back % 2 == 0:
                break
            end = raw.find(b'"', end + 1)
        if end < 0:
            return  # unterminated: the parser will say where
        yield pos, end + 1
        pos = raw.find(b'"', end + 1)


_HIGH_SURROGATE = re.compile(rb"\\u[dD][89abAB][0-9a-fA-F]{2}$")


def _escaped(body: Buffer, pos: int) -> bool:
    """Whether a cut before ``body[pos]`` would split an escape (``\\x``, ``\\uXXXX``, or
    a high surrogate from its low half)."""
    back = 0
    while pos - back - 1 >= 0 and body[pos - back - 1] == 0x5C:
        back += 1
    if back % 2:
        return True
    start = body.rfind(b"\\", max(0, pos - 5), pos)
    if start >= 0 and body[start + 1 : start + 2] == b"u":
        run = 0
        while start - run - 1 >= 0 and body[start - run - 1] == 0x5C:
            run += 1
        if run % 2 == 0:
            return True
    return bool(_HIGH_SURROGATE.search(body, max(0, pos - 6), pos))


def _decode_string(raw: Buffer, start: int, end: int) -> list[str]:
    """The JSON string whose body is ``raw[start:end]``, decoded a piece at a time (the
    pieces: they are joined once the raw bytes are gone)."""
    pieces: list[str] = []
    pos = start
    while pos < end:
        cut = min(end, pos + PIECE_BYTES)
        while cut < end and ((raw[cut] & 0xC0) == 0x80 or _escaped(raw, cut)):
            cut += 1
        text = raw[pos:cut].decode("utf-8", "replace")
        pieces.append(json.loads('"' + text + '"'))
        pos = cut
    return pieces


def _restore(value: Any, marker: str, big: list[list[str]]) -> Any:
    """``value`` with each placeholder string replaced by its long string, joined here
    (each string's pieces are dropped as soon as it is whole)."""

    def one(item: Any) -> Any:
        if isinstance(item, str) and item.startswith(marker):
            n = int(item[len(marker) :])
            whole = "".join(big[n])
            big[n] = []
            return whole
        return item

    root = [value]
    stack: list[Any] = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            for i, item in enumerate(node):
                node[i] = one(item)
                if isinstance(item, dict | list):
                    stack.append(item)
        elif isinstance(node, dict):
            for key in [k for k in node if k.startswith(marker)]:
                node[one(key)] = node.pop(key)
            for key, item in node.items():
                node[key] = one(item)
                if isinstance(item, dict | list):
                    stack.append(item)
    return root[0]


def read_line(stream: IO[bytes], limit: int) -> bytearray:
    """One line of ``stream`` (up to ``limit + 1`` bytes), read a MiB at a time into one
    growing buffer: ``readline`` of a 200 MB line would hold its chunks and their join."""
    buf = bytearray()
    while len(buf) <= limit:
        chunk = stream.readline(min(PIECE_BYTES, limit + 1 - len(buf)))
        if not chunk:
            break
        buf += chunk
        if chunk.endswith(b"\n"):
            break
    return buf


def parse_json_bytes(box: list[bytes] | list[bytearray], *, line: int | None = None) -> Any:
    """The JSON value of the bytes in ``box`` (UTF-8, invalid bytes as U+FFFD), with the
    limits of :func:`parse_json`. ``box`` is emptied, so the caller holds no copy while
    the value is built; a line over :data:`LARGE_LINE_BYTES` has its long strings decoded
    a piece at a time (see the module doc)."""
    raw = box.pop()
    if len(raw) <= LARGE_LINE_BYTES:
        text = raw.decode("utf-8", "replace")
        del raw
        return parse_json(text, line=line)
    marker = f"\x00ctxline-{os.urandom(8).hex()}:"
    big: list[list[str]] = []
    skeleton: list[Buffer] = []
    last = 0
    try:
        for start, end in _strings(raw):
            if end - start <= PIECE_BYTES:
                continue
            skeleton.append(raw[last:start])
            skeleton.append(json.dumps(marker + str(len(big))).encode())
            big.append(_decode_string(raw, start + 1, end - 1))
            last = end
    except (ValueError, RecursionError) as exc:
        raise ValidationError(f"invalid JSON: {exc}", line=line) from None
    skeleton.append(raw[last:])
    del raw
    value = parse_json(b"".join(skeleton).decode("utf-8", "replace"), line=line)
    return _restore(value, marker, big)
