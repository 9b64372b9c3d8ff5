"""Branch identity (seed 000): after a fork, the view says which timeline this is.

The store knows a timeline's ancestry; the view shows a ``<ctx-branch>`` block at each
fork point, with the identity as attributes and as a sentence (a small model read the
attributes-only form badly in ``ctxline eval``: it answered the parent's name).

    >>> branch_block(BranchMark("experiment", "main", 12)).tag
    'ctx-branch'
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ctxline.sources.base import BaseSource, Block
from ctxline.sources.guide import BRANCH_KIND, MessageKind
from ctxline.tags import quote_name

__all__ = [
    "BRANCH_KIND",
    "BranchMark",
    "BranchSource",
    "ancestry_marks",
    "branch_block",
    "render_branch",
]



@dataclass(frozen=True, slots=True)
class BranchMark:
    """A fork point in a timeline's ancestry: the view shows ``name``'s identity there."""

    name: str
    parent: str
    fork_seq: int


def ancestry_marks(
    timeline: str, info_of: Callable[[str], tuple[str | None, int | None] | None]
) -> list[BranchMark]:
    """The fork points of ``timeline``'s ancestry, oldest first; ``info_of(name)`` gives a
    timeline's (parent, fork seq), None for one that is not there.

    Oldest first by ancestry, not by fork seq: a timeline forked from one that was itself
    forked at the same seq ties on the seq, and sorting on it put the child's mark first,
    so the view said the parent was the current branch (``ctxline eval``'s ``branch``)."""
    marks: list[BranchMark] = []
    name: str | None = timeline
    seen: set[str] = set()
    while name is not None and name not in seen:
        seen.add(name)
        info = info_of(name)
        if info is None:
            break
        parent, fork_seq = info
        if parent is None or fork_seq is None:
            break
        marks.append(BranchMark(name, parent, fork_seq))
        name = parent
    return marks[::-1]


def branch_block(mark: BranchMark) -> Block:
    name, parent = quote_name(mark.name), quote_name(mark.parent)  # one value each, one line
    sentence = (
        f"You are now on branch {name}, forked from {parent} after its event"
        f" {mark.fork_seq}; what follows happened on {name} only."
    )
    attrs = (("name", mark.name), ("parent", mark.parent), ("fork_seq", str(mark.fork_seq)))
    return Block("ctx-branch", sentence, attrs)


def render_branch(mark: BranchMark) -> str:
    return branch_block(mark).render()


class BranchSource(BaseSource):
    """The guide line of ``<ctx-branch>``, present when the timeline has a fork point."""

    name = "branch"

    def __init__(self, marks: Sequence[BranchMark] = ()) -> None:
        self.marks = tuple(marks)  # oldest first (ancestry_marks)

    def kinds(self) -> Sequence[MessageKind]:
        return (BRANCH_KIND,) if self.marks else ()
