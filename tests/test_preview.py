"""A preview of a huge output reads only what it shows, and shows what a short one would.

Over ``HUGE_CHARS`` a preview never splits the whole output into lines (a 200 MB build
log would become millions of line objects); it must give exactly the text the plain
``splitlines()`` path gives, for every kind of line break.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxline.view import edits
from ctxline.view.edits import preview, trimmed

_PIECES = st.lists(
    st.one_of(
        st.text(alphabet="ab c<-x", min_size=0, max_size=30),
        st.sampled_from(
            ["\n", "\r\n", "\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029", "\n\n"]
        ),
        st.just("y" * 700),  # a line longer than the width
    ),
    max_size=80,
)


@settings(max_examples=300, deadline=None)
@given(pieces=_PIECES, head=st.integers(1, 5), tail=st.integers(1, 5), width=st.integers(4, 60))
def test_the_huge_path_gives_the_plain_paths_preview(
    pieces: list[str], head: int, tail: int, width: int
) -> None:
    content = "".join(pieces)
    plain = preview(content, "sha256:x", tokens=9, head_lines=head, tail_lines=tail, width=width)
    stub = trimmed(content, "sha256:x", tokens=9, width=width)
    lines = edits.line_count(content)
    assert lines == len(content.splitlines())
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(edits, "HUGE_CHARS", -1)
        huge = preview(content, "sha256:x", tokens=9, head_lines=head, tail_lines=tail, width=width)
        # the count handed in (counted once for both forms) changes nothing
        counted = preview(
            content, "sha256:x", tokens=9, head_lines=head, tail_lines=tail, width=width,
            lines=lines,
        )
        huge_stub = trimmed(content, "sha256:x", tokens=9, width=width, lines=lines)
    assert huge == plain
    assert counted == plain
    assert huge_stub == stub


def test_a_big_output_is_previewed_by_its_ends() -> None:
    content = "".join(f"line {i}\n" for i in range(2_000_000))  # ~25 MB, over HUGE_CHARS
    assert len(content) > edits.HUGE_CHARS
    text = preview(content, "sha256:x", tokens=1)
    assert "2,000,000 lines" in text
    assert "line 0\n" in text
    assert text.endswith("line 1999999")
    assert "1,999,982 lines omitted" in text
