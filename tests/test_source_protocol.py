"""Source[F]: the fold type is the Protocol's parameter, and the built-in sources fit theirs.

The annotations below are checked by ``mypy --strict`` (the test suite is part of the
typed tree): each built-in source is a ``Source[ItsFold]``, so ``step`` is held to that
fold. At run time the Protocol behaves as before: ``isinstance`` checks, and a bare
``Source`` (``Source[Any]``) holds any source.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TypeVar

from ctxline import PrepareOptions
from ctxline.record.events import StoredEvent, UserMessage
from ctxline.sources.base import BaseSource, Block, Fold, Source, SourceStep, StepContext
from ctxline.sources.current import CurrentFold, CurrentSource
from ctxline.sources.guide import MessageKind
from ctxline.sources.rules import RuleFold, RuleSource
from ctxline.sources.state import StateFold, StateSource
from ctxline.sources.todo import TodoFold, TodoSource
from ctxline.tokens.counters import get_counter

T0 = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)


@dataclass
class Tally:
    """The fold of the example source: how many user messages it was fed."""

    users: int = 0

    def feed(self, stored: StoredEvent) -> Sequence[MessageKind]:
        self.users += isinstance(stored.event, UserMessage)
        return ()


class Counter(BaseSource):
    name = "counter"

    def fold(self) -> Tally:
        return Tally()

    def step(self, fold: Tally, ctx: StepContext) -> SourceStep:
        return SourceStep(tail=(), meta={"users": fold.users})

    def reaffirm(self, fold: Tally) -> Sequence[Block]:
        return (Block("ctx-count", str(fold.users)),)


F = TypeVar("F", bound=Fold)


def _run(source: Source[F], feed: Sequence[StoredEvent], ctx: StepContext) -> SourceStep:
    """A step typed through the Protocol: the fold made is the fold fed and stepped."""
    fold = source.fold()
    for stored in feed:
        fold.feed(stored)
    return source.step(fold, ctx)


def test_a_source_is_typed_by_its_fold() -> None:
    events = [StoredEvent(i, f"e{i}", T0, UserMessage(f"hi {i}")) for i in (1, 2, 3)]
    ctx = StepContext(T0, events, PrepareOptions(), get_counter("o200k_base"))
    counted: Source[Tally] = Counter()
    assert _run(counted, events, ctx).meta == {"users": 3}
    fed = counted.fold()
    assert isinstance(fed, Tally)
    assert [b.render() for b in counted.reaffirm(fed)] == ["<ctx-count>0</ctx-count>"]


def test_the_built_in_sources_are_sources_of_their_folds() -> None:
    rules: Source[RuleFold] = RuleSource()
    state: Source[StateFold] = StateSource()
    todo: Source[TodoFold] = TodoSource()
    current: Source[CurrentFold] = CurrentSource()
    anything: list[Source] = [rules, state, todo, current, Counter()]
    assert all(isinstance(s, Source) for s in anything)
    assert isinstance(rules.fold(), RuleFold)
    assert isinstance(state.fold(), StateFold)
    assert isinstance(todo.fold(), TodoFold)
    assert isinstance(current.fold(), CurrentFold)
    ctx = StepContext(T0, [], PrepareOptions(), get_counter("o200k_base"))
    assert rules.step(rules.fold(), ctx) == SourceStep()
    assert not isinstance(object(), Source)
