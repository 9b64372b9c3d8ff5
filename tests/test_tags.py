"""Escaping: no text ctxline did not write can open or close a ctx- tag, whatever it holds."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxline.tags import count_tags, element, escape
from lookalikes_table import openers


def reference_escape(text: str) -> str:
    """The reference reading (tests/lookalikes_table.py): normalize the whole text the way a
    model reads it, find every opener there, and map it back to the ``<`` that starts it."""
    starts = set(openers(text))
    return "".join("&lt;" if i in starts else ch for i, ch in enumerate(text))


PIECES = st.sampled_from(
    [
        "<",
        "</",
        "< ",
        "/",
        " ",
        "\n",
        "\t",
        "ctx-",
        "CTX-",
        "c",
        "t",
        "x",
        "-",
        "ctx",
        "state>",
        "\uff1c",
        "\ufe64",
        "\u2039",
        "\u200b",
        "\u200d",
        "\u2060",
        "\u202e",
        "\u00ad",
        "\uff43",
        "\u0441",
        "\uff0f",
        "\u2010",
        "&lt;",
        ">",
        "a",
        "<returncode>",
    ]
)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(PIECES, st.text(max_size=4)), max_size=30).map("".join))
def test_escape_matches_the_reference_and_leaves_no_real_tag(text: str) -> None:
    escaped = escape(text)
    assert escaped == reference_escape(text)
    assert count_tags(escaped) == 0
    assert reference_escape(escaped) == escaped  # nothing left to escape
    # only single characters were replaced, each by the four of "&lt;"
    assert (len(escaped) - len(text)) % 3 == 0


@given(st.text(max_size=40))
def test_element_bodies_and_attributes_never_break_out(value: str) -> None:
    block = element("ctx-state", escape(value), source=value)
    assert count_tags(block) == 2  # the opening and closing tag ctxline wrote
    assert block.startswith('<ctx-state source="')
