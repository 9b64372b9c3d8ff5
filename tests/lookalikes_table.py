"""The reference of what a model reads, and the generator of ``src/ctxline/_lookalikes.py``.

This is the slow, obvious definition that :func:`ctxline.tags.escape` is tested against
(``tests/test_adversarial_unicode.py``): a text is read character by character, each one
becoming zero or more characters of the *normalized* text, and a tag opener is
``< */? *ctx-`` searched in that normalized text. One character reads as:

1. its prototype when Unicode's confusables (``src/ctxline/data/confusables-ctx.txt``, plus
   the additions below) make it a look-alike of ``<``, ``/``, ``-``, ``c``, ``t`` or ``x``;
2. nothing when it is invisible: a default-ignorable code point (variation selectors,
   Hangul fillers, tag characters, …), a format character (Cf), a combining mark (M*) or a
   control character (Cc) that is not whitespace;
3. a space when it is whitespace (``str.isspace``) or a blank (U+2800);
4. otherwise its NFKD decomposition, each part read by the same rules (so ``ĉ`` is ``c``,
   ``＜`` is ``<``, ``≮`` is ``<``), dash punctuation (Pd) as ``-``, ASCII lower-cased.

Run ``python tests/lookalikes_table.py`` to regenerate the module (it scans every code
point with this Python's ``unicodedata``).
"""

from __future__ import annotations

import re
import sys
import unicodedata
from pathlib import Path

__all__ = [
    "ADDED",
    "BLANKS",
    "DEFAULT_IGNORABLE",
    "OPENER",
    "derive_less_than",
    "fold",
    "normalized",
    "openers",
    "read_confusables",
]

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "src" / "ctxline" / "data" / "confusables-ctx.txt"
MODULE = ROOT / "src" / "ctxline" / "_lookalikes.py"

PROTOTYPES = {
    "003C": "<", "002F": "/", "002D": "-", "30FC": "-",
    "0063": "c", "0043": "c", "1D04": "c",
    "0074": "t", "0054": "t", "1D1B": "t",
    "0078": "x", "0058": "x",
}  # fmt: skip

ADDED: dict[str, tuple[str, str]] = {
    # left angle brackets and arrowheads by name, that confusables.txt does not list
    "\u02f1": ("<", "MODIFIER LETTER LOW LEFT ARROWHEAD"),
    "\u2329": ("<", "LEFT-POINTING ANGLE BRACKET"),
    "\u276c": ("<", "MEDIUM LEFT-POINTING ANGLE BRACKET ORNAMENT"),
    "\u2770": ("<", "HEAVY LEFT-POINTING ANGLE BRACKET ORNAMENT"),
    "\u27e8": ("<", "MATHEMATICAL LEFT ANGLE BRACKET"),
    "\u2991": ("<", "LEFT ANGLE BRACKET WITH DOT"),
    "\u3008": ("<", "LEFT ANGLE BRACKET"),
    "\ufe3f": ("<", "PRESENTATION FORM FOR VERTICAL LEFT ANGLE BRACKET"),
    "\u29fc": ("<", "LEFT-POINTING CURVED ANGLE BRACKET"),
    # chi looks like x in most fonts; confusables.txt lists only the capital
    "\u03c7": ("x", "GREEK SMALL LETTER CHI"),
    "\uab53": ("x", "LATIN SMALL LETTER CHI"),
    # a small capital t and c that are their own prototypes
    "\u1d1b": ("t", "LATIN LETTER SMALL CAPITAL T"),
    "\u1d04": ("c", "LATIN LETTER SMALL CAPITAL C"),
    # the prototype of the em-dash family
    "\u30fc": ("-", "KATAKANA-HIRAGANA PROLONGED SOUND MARK"),
}
"""Look-alikes ctxline adds to Unicode's table, with the reason (their name)."""

DEFAULT_IGNORABLE: tuple[tuple[int, int], ...] = (
    (0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160),
    (0x17B4, 0x17B5), (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E),
    (0x2060, 0x206F), (0x3164, 0x3164), (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
)  # fmt: skip
"""Default_Ignorable_Code_Point (Unicode DerivedCoreProperties.txt, 15.0)."""

BLANKS = frozenset("\u2800")
"""Visible-as-nothing characters that are not whitespace to Python (BRAILLE PATTERN BLANK)."""

OPENER = re.compile(r"< */? *ctx-")


def read_confusables(path: Path = DATA) -> dict[str, str]:
    """Source character → prototype (one of ``< / - c t x``) from the committed extract."""
    table: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        m = re.match(r"^([0-9A-F]+) ;\t([0-9A-F]+) ;", line)
        if m and m.group(2) in PROTOTYPES:
            table[chr(int(m.group(1), 16))] = PROTOTYPES[m.group(2)]
    return table


_TABLE: dict[str, str] = {**read_confusables(), **{k: v for k, (v, _) in ADDED.items()}}


def _ignorable(ch: str) -> bool:
    cp = ord(ch)
    if any(lo <= cp <= hi for lo, hi in DEFAULT_IGNORABLE):
        return True
    cat = unicodedata.category(ch)
    return cat in ("Cf", "Mn", "Mc", "Me") or (cat == "Cc" and not ch.isspace())


def _one(ch: str) -> str | None:
    """The reading of one character by rules 1–3, or None when rule 4 applies."""
    if ch in _TABLE:
        return _TABLE[ch]
    if _ignorable(ch):
        return ""
    if ch.isspace() or ch in BLANKS:
        return " "
    return None


def fold(ch: str) -> str:
    """How a model reads one character (see the module docstring)."""
    direct = _one(ch)
    if direct is not None:
        return direct
    out = []
    for part in unicodedata.normalize("NFKD", ch):
        read = _one(part)
        if read is None:
            if unicodedata.category(part) == "Pd":
                read = "-"
            else:
                read = part.lower() if part.isascii() else part
        out.append(read)
    return "".join(out)


def normalized(text: str) -> tuple[str, list[int]]:
    """The normalized text, and for each of its characters the index it came from."""
    chars: list[str] = []
    origin: list[int] = []
    for i, ch in enumerate(text):
        for f in fold(ch):
            chars.append(f)
            origin.append(i)
    return "".join(chars), origin


def openers(text: str) -> list[int]:
    """Indexes (in ``text``) of the characters that open or close a ``ctx-`` tag."""
    norm, origin = normalized(text)
    return [origin[m.start()] for m in OPENER.finditer(norm)]


def derive_less_than() -> str:
    """Every character whose reading holds a ``<`` (the fast path's suspects)."""
    return "".join(chr(cp) for cp in range(0x110000) if "<" in fold(chr(cp)))


def _module() -> str:
    table = dict(sorted(_TABLE.items()))
    lines = [
        '"""Generated by tests/lookalikes_table.py from data/confusables-ctx.txt; do not edit.',
        "",
        "Unicode's confusables (UTS #39, version 13.0.0; (c) Unicode, Inc., terms of use:",
        "https://www.unicode.org/terms_of_use.html) restricted to the characters of a tag opener,",
        "plus ctxline's additions. ``LESS_THAN`` was derived with unicodedata "
        f"{unicodedata.unidata_version}.",
        '"""',
        "",
        '__all__ = ["LESS_THAN", "TARGETS"]',
        "",
        "TARGETS: dict[str, str] = {",
        *(f"    {ch!a}: {target!r},  # {unicodedata.name(ch, '?')}" for ch, target in table.items()),
        "}",
        "",
        f"LESS_THAN = {derive_less_than()!a}",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    MODULE.write_text(_module(), encoding="utf-8")
    sys.stdout.write(f"wrote {MODULE}\n")
