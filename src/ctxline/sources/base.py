"""The one seam for context sources: state, rules, notifications, status, time, todo, …

A source is the component that emits a kind of block and knows how the model should
read it (seed 000). It is a plain object with six small methods (the :class:`Source`
Protocol; :class:`BaseSource` gives do-nothing defaults):

- ``kinds()``: the guide lines it always contributes (its ``ctx-`` tags and reading rules);
- ``fold()``: a fresh :class:`Fold` over the record. The view feeds it every event once,
  in order; ``feed`` returns the guide kinds that event brings (the guide lists a kind
  only once the timeline uses it). Folds are caches of the record: a fold fed from the
  start and one fed incrementally must agree, so a step is the same cold or warm;
- ``history(event)``: the :class:`Block` an event of its kind shows at its place in
  history, or None — a pure function of the event;
- ``step(fold, ctx)``: what it adds to this request (:class:`SourceStep`): events to
  append before it (an expired rule, a status snapshot), tail items, a system block,
  and what to log in the request's inputs;
- ``tools()``: the tools it offers, as (spec, handler) pairs;
- ``reaffirm(fold)``: the blocks a compaction must restate (inside ``<ctx-reaffirm>``),
  from a fold fed up to the compaction's cut — what is still in force there (a loaded
  skill, a slot's value), so a summary never loses it.

Blocks are rendered by ctxline, never by the source: the body and attribute values are
escaped (:func:`ctxline.tags.escape`), so a source that copies tool output into a
block cannot forge a tag.

    class Weather(BaseSource):
        name = "weather"
        def kinds(self): return (MessageKind("ctx-weather", "today's weather", "Current."),)
        def step(self, fold, ctx): return SourceStep(tail=(TailItem("weather", Block("ctx-weather", "sunny")),))

    Context(store, "s", sources=[Weather()])
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ctxline.record.events import Event, JsonValue, StoredEvent
from ctxline.sources.guide import MessageKind
from ctxline.tags import element, escape

if TYPE_CHECKING:
    from typing_extensions import TypeVar

    from ctxline.tokens.counters import TokenCounter
    from ctxline.tools.base import Tool
    from ctxline.view.options import PrepareOptions

    F = TypeVar("F", default=Any)
    """The fold type of a source (a bare ``Source`` is ``Source[Any]``)."""
else:
    from typing import TypeVar

    F = TypeVar("F")  # Python 3.11's TypeVar takes no default; type checkers read the one above

__all__ = [
    "BaseSource",
    "Block",
    "DynamicItem",
    "Fold",
    "NoFold",
    "Prefetching",
    "Source",
    "SourceStep",
    "StepContext",
    "TailItem",
]


@dataclass(frozen=True, slots=True)
class Block:
    """A ``ctx-`` element. ctxline escapes ``body`` and the attribute values when rendering."""

    tag: str
    body: str | None = None
    attrs: tuple[tuple[str, str | None], ...] = ()

    def render(self) -> str:
        body = None if self.body is None else escape(self.body)
        return element(self.tag, body, **dict(self.attrs))


@dataclass(frozen=True, slots=True)
class TailItem:
    """One block of the tail (the last user-role message, replaced every step).

    Optional items (``required=False``) are dropped under pressure, lowest ``priority``
    first (rung 2 of the ladder); required ones never are.
    """

    id: str
    text: str
    """The rendered block (``Block.render()``)."""
    required: bool = True
    priority: int = 0


@dataclass(frozen=True, slots=True)
class DynamicItem:
    """State the app gives for this request only (seed 003's dynamic context)."""

    id: str
    text: str
    required: bool = False
    priority: int = 0
    """Higher is kept longer; optional items go lowest priority first under pressure."""


@dataclass(frozen=True, slots=True)
class StepContext:
    """What a source sees when a request is planned (all of it from the step's inputs)."""

    now: datetime
    events: Sequence[StoredEvent]
    """The record so far, in seq order (including this step's earlier events)."""
    options: PrepareOptions
    counter: TokenCounter
    dynamic: tuple[DynamicItem, ...] = ()
    """The app's dynamic items of this step (evaluated before the step)."""
    prefetched: Mapping[str, object] = field(default_factory=dict)
    """What each :class:`Prefetching` source read before the step, by source name: a
    step reads no store, so a source that needs one reads it in ``prefetch()``."""


@dataclass(frozen=True, slots=True)
class SourceStep:
    """What a source adds to one request."""

    events: tuple[Event, ...] = ()
    """Appended before the request, in the step's one atomic append."""
    tail: tuple[TailItem, ...] = ()
    system: str = ""
    """A rendered block appended to the system prompt (a cache break whenever it changes)."""
    meta: Mapping[str, JsonValue] = field(default_factory=dict)
    """Logged in the request's inputs under the source's name (never rendered)."""
    allowed_tools: tuple[str, ...] | None = None
    """The offered tools the model may call at this step (None: all of them). The tools
    array stays as it is (the cache holds); the provider is told through its own field
    where it has one (OpenAI's ``allowed_tools`` tool choice), and the report says so."""


class Fold(Protocol):
    """A running fold over one timeline's record, fed each event once, in seq order."""

    def feed(self, stored: StoredEvent) -> Sequence[MessageKind]:
        """Take one event; return the guide kinds it brings (usually none)."""
        ...


class NoFold:
    """The fold of a source that keeps nothing."""

    def feed(self, stored: StoredEvent) -> Sequence[MessageKind]:
        return ()


@runtime_checkable
class Source(Protocol[F]):
    """A context source (see the module docstring), generic in its fold type ``F``:
    ``fold()`` makes an ``F`` and ``step`` and ``reaffirm`` get that ``F`` back, fed.

        class Counter(BaseSource):
            def fold(self) -> Tally: ...
            def step(self, fold: Tally, ctx: StepContext) -> SourceStep: ...

        counted: Source[Tally] = Counter()  # the checker holds step to Tally

    A bare ``Source`` is ``Source[Any]`` (what the view holds: one of each kind)."""

    @property
    def name(self) -> str: ...

    def kinds(self) -> Sequence[MessageKind]: ...

    def fold(self) -> F: ...

    def history(self, event: Event) -> Block | None: ...

    def step(self, fold: F, ctx: StepContext) -> SourceStep: ...

    def tools(self) -> Sequence[Tool]: ...

    def reaffirm(self, fold: F) -> Sequence[Block]: ...


@runtime_checkable
class Prefetching(Protocol):
    """A source that reads a store for its step: ``prefetch()`` runs before the (pure)
    step and what it returns reaches ``step`` as ``ctx.prefetched[source.name]``. What the
    step makes of it is logged in the request's inputs (its tail text and meta), so a
    rebuild never reads the store again."""

    @property
    def name(self) -> str: ...

    def prefetch(self) -> object: ...


class BaseSource:
    """Do-nothing defaults for a :class:`Source`; override what the source needs."""

    name = "source"

    def kinds(self) -> Sequence[MessageKind]:
        return ()

    def fold(self) -> Any:
        return NoFold()

    def history(self, event: Event) -> Block | None:
        return None

    def step(self, fold: Any, ctx: StepContext) -> SourceStep:
        return SourceStep()

    def tools(self) -> Sequence[Tool]:
        return ()

    def reaffirm(self, fold: Any) -> Sequence[Block]:
        return ()
