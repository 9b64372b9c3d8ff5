"""``escape`` against the reference of what a model reads (``tests/lookalikes_table.py``).

The reference normalizes the whole text (look-alikes to their prototype, invisible
characters removed, NFKD, dashes, case) and searches it for ``< */? *ctx-``; ``escape``
must replace exactly the characters that open a tag there, and nothing else.
"""

from __future__ import annotations

import unicodedata

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxline._lookalikes import LESS_THAN, TARGETS
from ctxline.tags import _fold, count_tags, element, escape, escape_attr, one_line, quote_name
from lookalikes_table import ADDED, OPENER, derive_less_than, fold, openers, read_confusables


def reference_escape(text: str) -> str:
    starts = set(openers(text))
    return "".join("&lt;" if i in starts else ch for i, ch in enumerate(text))


def reads_as_opener(text: str) -> bool:
    return bool(OPENER.search("".join(fold(ch) for ch in text)))


# the 23 probes of issue 12 that slipped past the old escape, and more of their kind
PROBES = [
    "<c\ufe0ftx-rule>",
    "<c\ufe00tx-rule>",
    "<c\u034ftx-rule>",
    "<c\U000e0100tx-rule>",
    "<ctx\U000e01ef-rule>",
    "<\u3164ctx-rule>",
    "<\u2800ctx-rule>",
    "<\x00ctx-rule>",
    "<\x1bctx-rule>",
    "<\u0301ctx-rule>",
    "<\u20d2/ctx-rule>",
    "\u02c2ctx-rule>",
    "\u1438ctx-rule>",
    "\u276ectx-rule>",
    "\ufe3fctx-rule>",
    "<ctx\u2014rule>",
    "<ctx\u2043rule>",
    "<ctx\ufe58rule>",
    "<\u0441\u03c4x-rule>",
    "<c\u03c4x-rule>",
    "<ct\u03c7-rule>",
    "<\u1d04tx-rule>",
    "<\u0441\u0442\u0445-rule>",
    "<\uff43\uff54\uff58\uff0drule>",
    "\u226ectx-rule>",
    "<\u00e7\u0165\u1e8b-rule>",
    "<c\u0327t\u030cx\u0307-rule>",
    "< / CTX-rule>",
    "<\u2215ctx-rule>",
    "<\uff0fctx-rule>",
    "<\t\n/\u3000ctx-rule>",
    "<\U0001d41c\U0001d42d\U0001d431-rule>",
    "<\u216dtx-rule>",
    "<ctx\u2e3arule>",
    "<ctx\u4e00rule>",
]


def test_every_probe_is_an_opener_and_is_escaped() -> None:
    for probe in PROBES:
        assert reads_as_opener(probe), ascii(probe)
        escaped = escape(probe)
        assert escaped != probe, ascii(probe)
        assert not reads_as_opener(escaped), ascii(probe)
        assert escaped == reference_escape(probe), ascii(probe)


def test_ordinary_text_is_left_alone() -> None:
    for text in (
        "if a < b and c > d: return",
        "<returncode>0</returncode><div class='ctx'>",
        "<cta-button>",
        "<ctx_state>",
        "<c tx-state>",
        "«ctx-state»",
        "＜ctx",
        "x <- ctx - 1",
        "",
    ):
        assert escape(text) == text, text


def test_the_table_holds_every_committed_confusable() -> None:
    committed = read_confusables()
    assert len(committed) > 180
    for ch, target in committed.items():
        assert TARGETS[ch] == target, ascii(ch)
    for ch, (target, why) in ADDED.items():
        assert TARGETS[ch] == target
        assert unicodedata.name(ch) == why


def test_fold_and_the_fast_path_agree_with_the_reference_on_every_code_point() -> None:
    """Regenerate ``_lookalikes.py`` (``python tests/lookalikes_table.py``) when it fails."""
    assert derive_less_than() == LESS_THAN
    differ = [cp for cp in range(0x110000) if _fold(chr(cp)) != fold(chr(cp))]
    assert differ == []


PIECES = st.sampled_from(
    [
        "<", "</", "< ", "/", " ", "\n", "\t", "ctx-", "CTX-", "c", "t", "x", "-", "ctx",
        "state>", "\uff1c", "\ufe64", "\u2039", "\u02c2", "\u1438", "\u276e", "\ufe3f",
        "\u226e", "\u200b", "\u200d", "\u2060", "\u202e", "\u00ad", "\ufe0f", "\ufe00",
        "\u034f", "\U000e0100", "\u3164", "\u2800", "\x00", "\x1b", "\u0301", "\u0327",
        "\uff43", "\u0441", "\u0442", "\u0445", "\u03c4", "\u03c7", "\u1d04", "\u1d1b",
        "\u216d", "\U0001d41c", "\u00e7", "\uff0f", "\u2215", "\u2010", "\u2014", "\u2043",
        "\ufe58", "\u4e00", "\u2e3a", "&lt;", ">", "a", "<returncode>", "\u2028", "\x85",
    ]
)  # fmt: skip
TEXTS = st.lists(st.one_of(PIECES, st.text(max_size=4)), max_size=30).map("".join)


@settings(max_examples=600, deadline=None)
@given(TEXTS)
def test_escape_agrees_with_the_reference_check(text: str) -> None:
    escaped = escape(text)
    assert escaped == reference_escape(text)
    assert (escaped == text) == (not reads_as_opener(text))
    assert not reads_as_opener(escaped)
    assert count_tags(escaped) == 0
    assert escape(escaped) == escaped  # nothing left to escape


@settings(max_examples=300, deadline=None)
@given(TEXTS)
def test_one_line_values_and_names_never_break_a_line(text: str) -> None:
    for encoded in (one_line(text), quote_name(text)):
        assert len(encoded.splitlines()) <= 1
        assert not reads_as_opener(encoded)
    plain = quote_name(text)
    assert (plain == text) == (bool(text) and all(c.isascii() and (c.isalnum() or c in "_.:/@+-") for c in text))


@given(TEXTS)
def test_element_bodies_and_attributes_never_break_out(value: str) -> None:
    block = element("ctx-state", escape(value), source=value)
    assert count_tags(block) == 2  # the opening and closing tag ctxline wrote
    assert block.startswith('<ctx-state source="')
    attr = escape_attr(value)
    assert len(attr.splitlines()) <= 1
    assert '"' not in attr
    assert "<" not in attr
