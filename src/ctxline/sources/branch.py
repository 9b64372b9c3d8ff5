"""Branch identity (seed 000): after a fork, the view says which timeline this is.

The store knows a timeline's ancestry; the view shows a ``<ctx-branch>`` block at each
fork point, with the identity as attributes and as a sentence (a small model read the
attributes-only form badly in ``ctxline eval``: it answered the parent's name).

    >>> branch_block(BranchMark("experiment", "main", 12)).tag
    'ctx-branch'
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ctxline.sources.base import BaseSource, Block
from ctxline.sources.guide import BRANCH_KIND, MessageKind
from ctxline.tags import quote_name

__all__ = ["BRANCH_KIND", "BranchMark", "BranchSource", "branch_block", "render_branch"]



@dataclass(frozen=True, slots=True)
class BranchMark:
    """A fork point in a timeline's ancestry: the view shows ``name``'s identity there."""

    name: str
    parent: str
    fork_seq: int


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
        self.marks = tuple(sorted(marks, key=lambda m: m.fork_seq))

    def kinds(self) -> Sequence[MessageKind]:
        return (BRANCH_KIND,) if self.marks else ()
