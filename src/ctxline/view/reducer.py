"""What a rung of the ladder sees and is given: the step as a :class:`Reducer`, a :class:`Goal`.

The ladder (:mod:`ctxline.view.ladder`) and its rungs only use this protocol, so a rung
of the app's own (``Context(rungs=...)``) gets the same view of the step: the request's
sizes, the view, the edits that may apply (priced by :mod:`ctxline.view.budget`), and
``reduce`` to record edits and measure again.

    def my_rung(r: Reducer, goal: Goal) -> bool: ...
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from ctxline.record.events import Reduction, StoredEvent
from ctxline.tokens.counters import TokenCounter
from ctxline.view.budget import BudgetInputs
from ctxline.view.candidates import Candidate
from ctxline.view.compaction import Summarizer, SummaryLines
from ctxline.view.edits import ViewEdits
from ctxline.view.measure import ViewMessage
from ctxline.view.options import PrepareOptions
from ctxline.view.report import Action, Considered, CostReport, TokenSections

__all__ = ["Goal", "LadderConfig", "Reducer", "Rung"]


@dataclass(frozen=True, slots=True)
class LadderConfig:
    """The ladder's constants (every one of them named here, none in the code)."""

    last_resort_goal: float = 0.95
    """Second pass: folds and trims aim at this share of the input limit."""
    last_resort_compact_target: float = 0.9
    """Second pass: the compaction reduces to this share and keeps only the task."""
    last_resort_summary_share: float = 0.25
    """Second pass: the summary gets this share of ``summary_tokens``."""
    trim_min_saving: int = 32
    """An edit is considered only if it saves more tokens than this."""


@dataclass(frozen=True, slots=True)
class Goal:
    """Where a pass of the ladder stops, and how hard it may cut."""

    tokens: int
    """Stop as soon as the request is at or under this."""
    trigger: int
    """Compaction runs only when the cheaper rungs cannot get under this."""
    keep_groups: int
    last_resort: bool = False


class Reducer(Protocol):
    """The step being reduced, as the rungs see it."""

    @property
    def total(self) -> int: ...

    @property
    def tokens(self) -> TokenSections: ...

    @property
    def options(self) -> PrepareOptions: ...

    @property
    def counter(self) -> TokenCounter: ...

    @property
    def events(self) -> Sequence[StoredEvent]: ...

    @property
    def edits(self) -> ViewEdits: ...

    @property
    def summarizer(self) -> Summarizer: ...

    @property
    def config(self) -> LadderConfig: ...

    @property
    def budget(self) -> BudgetInputs:
        """What the cost model knows (pricing, steps so far, growth, the last request)."""
        ...

    def view(self) -> Sequence[ViewMessage]:
        """The history as it is now, message by message with its tokens."""
        ...

    def candidates(self, goal: Goal, *, fresh: bool = False) -> list[Candidate]:
        """The edits that may apply now (``fresh``: the newest group's results too)."""
        ...

    def prefix(self, index: int) -> int:
        """Tokens of the view before message ``index``."""
        ...

    def hints(self) -> tuple[Sequence[int] | None, SummaryLines | None, Sequence[int] | None]:
        """For compaction: the user messages' view indexes, the summary lines, prefix sums."""
        ...

    def optional_tail(self) -> list[tuple[str, int]]:
        """(id, priority) of the optional tail items still shown."""
        ...

    def reduce(self, *reductions: Reduction) -> None:
        """Record these view edits for this step and measure again."""
        ...

    def drop_tail(self, ids: Sequence[str]) -> None: ...

    def optional_tools(self) -> list[tuple[str, int]]:
        """(name, schema tokens) of the optional tool schemas still offered, least
        needed first (never a forced or required tool)."""
        ...

    def drop_tools(self, names: Sequence[str]) -> None:
        """Offer the tools without ``names`` from this request on, and measure again."""
        ...

    def note(self, action: Action) -> None:
        """Report an action that changed nothing (a compaction that could not be made)."""
        ...

    def decide(self, report: CostReport) -> None:
        """Report the cost model's decision (the last one of the step stands)."""
        ...

    def consider(self, considered: Considered) -> None:
        """Report what a rung weighed and what it took (every rung that ran is listed)."""
        ...

    deferred: list[Reduction]
    """Trims that wait for the compaction (applied if it cannot be made)."""
    failures: list[tuple[bool, str]]
    """(in the last resort, why) of each compaction that could not be made."""


Rung = Callable[[Reducer, Goal], bool]
