"""Exact scoring of short answers, and accuracy with 95 % Wilson intervals.

A reply is reduced to the one answer its kind allows, then compared exactly:

- ``date``: the first ``YYYY-MM-DD`` in the reply;
- ``number``: the first integer (digits, or a number word up to twenty);
- ``yesno``: the first ``yes`` or ``no`` word;
- ``name``: the candidate (branch, language, ``any``) mentioned first.

Anything else scores wrong; nothing is fuzzy-matched.

    >>> extract("The date is 2026-11-03.", "date", ())
    '2026-11-03'
    >>> wilson(40, 50)
    (0.6696, 0.8876)
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence

from ctxline.eval.probes import AnswerKind

__all__ = ["extract", "is_correct", "wilson"]

_DATE = re.compile(r"\b(\d{4})-(\d{1,2})-(\d{1,2})\b")
_INT = re.compile(r"(?<![\d.])-?\d+(?![\d-])")
_WORDS = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
    "twenty",
]
_NUMBER_WORD = re.compile(r"\b(" + "|".join(_WORDS) + r")\b", re.IGNORECASE)
_YESNO = re.compile(r"\b(yes|no)\b", re.IGNORECASE)
_STAMP = re.compile(r"^\s*\[\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\]\s*")


def extract(reply: str, kind: AnswerKind, candidates: Sequence[str]) -> str | None:
    """The answer ``reply`` gives, normalized, or None when it gives none."""
    text = _STAMP.sub("", reply.strip())  # a time stamp echoed from the plain views' format
    if kind == "date":
        m = _DATE.search(text)
        return f"{m.group(1)}-{int(m.group(2)):02d}-{int(m.group(3)):02d}" if m else None
    if kind == "number":
        digits = _INT.search(text)
        word = _NUMBER_WORD.search(text)
        if digits and (word is None or digits.start() < word.start()):
            return str(int(digits.group()))
        return str(_WORDS.index(word.group(1).lower())) if word else None
    if kind == "yesno":
        m = _YESNO.search(text)
        return m.group(1).lower() if m else None
    found: list[tuple[int, str]] = []
    lowered = text.lower()
    for name in candidates:
        m = re.search(r"(?<![\w-])" + re.escape(name.lower()) + r"(?![\w-])", lowered)
        if m:
            found.append((m.start(), name))
    return min(found)[1] if found else None


def is_correct(reply: str, answer: str, kind: AnswerKind, candidates: Sequence[str]) -> bool:
    got = extract(reply, kind, candidates)
    return got is not None and got.lower() == answer.lower()


def wilson(successes: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """The 95 % Wilson score interval of ``successes`` out of ``n`` (rounded to 4 places)."""
    if n == 0:
        return (0.0, 1.0)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (round(max(0.0, centre - half), 4), round(min(1.0, centre + half), 4))


def mean(values: Iterable[float]) -> float | None:
    items = list(values)
    return round(math.fsum(items) / len(items), 1) if items else None
