"""Current values where a model looks first: ``<ctx-current>`` at the end of the request.

Why: history shows every ``<ctx-state>`` block where it was appended, and the guide says
a later block from the same source wins — but a small model does not apply that rule
(``ctxline eval``: SmolLM2-135M named the current branch 0 times in 20 from two blocks in
history, 16 in 20 from a plain ``branch: X`` line). So the tail restates, computed by
code from the record, the branch this timeline is on and the current value of every
sourced state, one line each::

    <ctx-current>
    current branch: fix-auth
    current env/date: 2026-11-04
    </ctx-current>

It appears once reading history takes that rule — when some source's value was replaced
(or cleared), or the timeline is a fork — and then lists every current value. It lives
in the tail (replaced every step), so a value that changes never breaks the cached
prefix; history keeps its blocks unchanged. Measured with ``ctxline eval`` on the
embedded model (docs/environment.md), ``current …:`` lines read best per token: the
current date or freeze date 10/20 against 4/20 without the block, the branch name 21/30
against 18/30 for ``branch: X (forked from Y)`` and 16/30 with the parent named. Values are single lines
(:func:`~ctxline.sources.lines.value_line`: escaped, line breaks written as ``\\n``; names
through :func:`~ctxline.tags.quote_name`),
so a state value cannot forge a line of the block or a tag. The item is optional
(dropped under pressure before anything required) and empty timelines get none.

    >>> from datetime import UTC, datetime
    >>> from ctxline.record.events import State, StoredEvent
    >>> fold = CurrentFold()
    >>> at = datetime(2026, 1, 1, tzinfo=UTC)
    >>> for n, day in enumerate(["2026-11-03", "2026-11-04"]):
    ...     _ = fold.feed(StoredEvent(n + 1, f"e{n}", at, State("env/date", day)))
    >>> print(current_block(fold.values, None).render())
    <ctx-current>
    current env/date: 2026-11-04
    </ctx-current>
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ctxline.record.events import JsonValue, State, StoredEvent
from ctxline.sources.base import BaseSource, Block, SourceStep, StepContext, TailItem
from ctxline.sources.branch import BranchMark
from ctxline.sources.guide import MessageKind
from ctxline.sources.lines import value_line
from ctxline.tags import quote_name

__all__ = ["CURRENT_KIND", "CURRENT_PRIORITY", "CurrentFold", "CurrentSource", "current_block"]

CURRENT_KIND = MessageKind(
    "ctx-current",
    "the branch you are on and the current value of every sourced state, computed by ctxline "
    "from the record",
    "These are the values that hold now: they supersede every earlier <ctx-state> block and "
    "fork point in the history.",
)
CURRENT_PRIORITY = 100
"""Optional tail items go lowest priority first; this one goes late."""


class CurrentFold:
    """The current value of every state source (later values win; cleared ones leave), and
    whether history holds a value that a later one replaced."""

    def __init__(self) -> None:
        self.values: dict[str, JsonValue] = {}
        self.seen: set[str] = set()
        self.replaced = False
        """Some source had a value and then another one (or was cleared)."""

    def feed(self, stored: StoredEvent) -> Sequence[MessageKind]:
        event = stored.event
        if not isinstance(event, State):
            return ()
        if event.source in self.seen:
            self.replaced = True
        self.seen.add(event.source)
        if event.cleared:
            self.values.pop(event.source, None)
        else:
            self.values[event.source] = event.value
        # the guide line comes with the first state, as <ctx-state>'s does: a later value
        # must never change the system prompt
        return (CURRENT_KIND,)


def current_block(values: Mapping[str, JsonValue], branch: BranchMark | None) -> Block | None:
    """The ``<ctx-current>`` block (None when there is nothing to restate)."""
    lines = []
    if branch is not None:
        lines.append(f"current branch: {quote_name(branch.name)}")
    lines.extend(
        f"current {quote_name(source)}: {value_line(value)}" for source, value in values.items()
    )
    if not lines:
        return None
    # each line is escaped already; rendering escapes again, which changes nothing
    return Block("ctx-current", "\n" + "\n".join(lines) + "\n")


class CurrentSource(BaseSource):
    """The ``<ctx-current>`` tail item of each step (see the module docstring)."""

    name = "current"

    def __init__(self, marks: Sequence[BranchMark] = ()) -> None:
        self.branch = marks[-1] if marks else None  # oldest first: the last is this timeline

    def kinds(self) -> Sequence[MessageKind]:
        return (CURRENT_KIND,) if self.branch is not None else ()

    def fold(self) -> CurrentFold:
        return CurrentFold()

    def step(self, fold: CurrentFold, ctx: StepContext) -> SourceStep:
        block = current_block(fold.values if fold.replaced else {}, self.branch)
        if block is None:
            return SourceStep()
        item = TailItem("current", block.render(), required=False, priority=CURRENT_PRIORITY)
        return SourceStep(tail=(item,))
