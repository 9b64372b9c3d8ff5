"""The reduction ladder: what to change in the view when a request nears its limit.

Seed 003 and DESIGN §6. Over the pressure line (default 0.8 × input limit) the rungs
run in order, each re-measuring the whole request, until it is under the target
(default 0.6 — the gap is the hysteresis that lets the following steps append again
and keep the prefix cached):

1. :func:`fold_duplicates` — same tool, same canonical arguments, same full content:
   earlier copies become a reference to the latest one;
2. :func:`drop_dynamic` — optional tail items, lowest priority first;
3. :func:`drop_tools` — optional (discovered, unused) tool schemas;
4. :func:`trim_outputs` — older, completed, successful results become a preview and a
   handle (errors and the recent groups are kept). When trimming alone cannot reach the
   goal, the trims wait for the compaction, which hides most of them anyway;
5. :func:`compact` — the oldest span becomes a summary, a digest and a re-affirmation.

A rung is a plain callable ``(reducer, goal) -> bool``; the list is configurable. If the
request is still over the input limit, the ladder runs once more as a last resort
(goal 0.95 × limit, no recent groups protected, compaction keeps only the task). Edits
are :class:`~ctxline.record.events.Reduction` events, so the record is never changed and
every request can be rebuilt. Never removed: the persona and guide, the original task,
required tail items, forced tools, the call/result pairing.

    run_ladder(reducer, DEFAULT_RUNGS, LadderConfig())
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from ctxline.errors import CompactionError, ContextOverflow
from ctxline.record.codec import canonical_json
from ctxline.record.events import Reduction, StoredEvent, ToolResult, UserMessage
from ctxline.tokens.counters import TokenCounter
from ctxline.view.compaction import Summarizer, plan_compaction
from ctxline.view.edits import ViewEdits, fold_reference, preview, protected_recent
from ctxline.view.measure import FRAMING_TOKENS, ViewMessage
from ctxline.view.options import PrepareOptions
from ctxline.view.report import Action, TokenSections

__all__ = [
    "DEFAULT_RUNGS",
    "Goal",
    "LadderConfig",
    "Reducer",
    "Rung",
    "compact",
    "drop_dynamic",
    "drop_tools",
    "fold_duplicates",
    "run_ladder",
    "trim_outputs",
]


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
    """A result is trimmed only if its preview saves more tokens than this."""


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

    def view(self) -> list[ViewMessage]:
        """The history as it is now, message by message with its tokens."""
        ...

    def handle(self, seq: int) -> str:
        """The blob handle of the result at ``seq``."""
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

    deferred: list[Reduction]
    """Trims that wait for the compaction (applied if it cannot be made)."""
    failures: list[tuple[bool, str]]
    """(in the last resort, why) of each compaction that could not be made."""


Rung = Callable[[Reducer, Goal], bool]


def fold_duplicates(r: Reducer, goal: Goal) -> bool:
    """Rung 1: earlier copies of an identical result refer to the latest one."""
    view, events, edits = r.view(), r.events, r.edits
    calls = {c.id: (c.name, canonical_json(c.arguments)) for vm in view for c in vm.message.tool_calls}
    results = [
        vm
        for vm in view
        if vm.message.role == "tool"
        and vm.message.seq
        and vm.message.seq not in edits.trimmed
        and vm.message.seq not in edits.folded
        and vm.message.call_id in calls
        and isinstance(events[vm.message.seq - 1].event, ToolResult)
    ]
    latest: dict[tuple[str, bytes, str], int] = {}
    for vm in results:
        event = events[vm.message.seq - 1].event
        assert isinstance(event, ToolResult)
        latest[(*calls[vm.message.call_id], event.content)] = vm.message.seq
    refs: dict[str, int] = {}
    saved = 0
    for vm in results:
        event = events[vm.message.seq - 1].event
        assert isinstance(event, ToolResult)
        name, args = calls[vm.message.call_id]
        later = latest[(name, args, event.content)]
        if later != vm.message.seq:
            ref_tokens = r.counter.count(fold_reference(name, later)) + FRAMING_TOKENS
            if vm.tokens > ref_tokens:
                refs[str(vm.message.seq)] = later
                saved += vm.tokens - ref_tokens
    if not refs:
        return False
    r.reduce(Reduction("fold", refs=refs, saved_tokens=saved))
    return True


def drop_dynamic(r: Reducer, goal: Goal) -> bool:
    """Rung 2: optional tail items go, lowest priority first, until the goal is met."""
    dropped: list[str] = []
    for item_id, _ in sorted(r.optional_tail(), key=lambda item: item[1]):
        if r.total <= goal.tokens:
            break
        dropped.append(item_id)
        r.drop_tail(dropped)
    return bool(dropped)


def drop_tools(r: Reducer, goal: Goal) -> bool:
    """Rung 3: optional tool schemas (discovered, not used recently), least needed first,
    until their tokens cover the excess; one cut per step. Core, required and forced
    tools are never optional; with no discoverable tools there is nothing to drop."""
    excess = r.total - goal.tokens
    chosen: list[str] = []
    for name, tokens in r.optional_tools():
        if excess <= 0:
            break
        chosen.append(name)
        excess -= tokens
    if not chosen:
        return False
    r.drop_tools(chosen)
    return True


def trim_outputs(r: Reducer, goal: Goal) -> bool:
    """Rung 4: older, completed, successful results become a preview and a handle."""
    view, events, edits = r.view(), r.events, r.edits
    protected = protected_recent(view, goal.keep_groups)
    trimmed: list[int] = []
    saved = 0
    total = r.total
    for i, vm in enumerate(view):
        if total - saved <= goal.tokens:
            break
        seq = vm.message.seq
        if (
            vm.message.role != "tool"
            or not seq
            or i in protected
            or vm.message.is_error
            or seq in edits.trimmed
            or seq in edits.folded
        ):
            continue
        event = events[seq - 1].event
        if not isinstance(event, ToolResult):
            continue
        short = r.counter.count(preview(event.content, r.handle(seq), tokens=vm.tokens))
        if vm.tokens > short + FRAMING_TOKENS + r.config.trim_min_saving:
            trimmed.append(seq)
            saved += vm.tokens - short - FRAMING_TOKENS
    if not trimmed:
        return False
    trim = Reduction("trim", seqs=tuple(trimmed), saved_tokens=saved)
    if total - saved > goal.trigger:  # not enough: the compaction hides most of these
        r.deferred[:] = [trim]
        return False
    r.reduce(trim)
    return True


def compact(r: Reducer, goal: Goal) -> bool:
    """Rung 5: the oldest span becomes a summary, a digest and a re-affirmation.

    When it cannot be made (a summarizer error, too small a saving), nothing is written
    for it: the deferred trims are applied instead and the failure is kept in
    ``r.failures`` (reported when the request is sent; :class:`CompactionError` from
    :func:`run_ladder` when the last resort failed and the request still does not fit).
    """
    deferred, r.deferred[:] = list(r.deferred), []
    reduction: Reduction | None
    try:
        reduction = _plan(r, r.view(), goal)
        total, minimum = r.total, r.options.min_compaction_saving
        if not goal.last_resort and reduction is not None and reduction.saved_tokens < minimum * total:
            raise CompactionError(
                f"a compaction up to seq {reduction.upto_seq} would save only"
                f" {reduction.saved_tokens:,} of {total:,} tokens (the minimum is"
                f" {minimum:.0%}); the record and the last summary are unchanged"
            )
    except CompactionError as exc:
        r.failures.append((goal.last_resort, str(exc)))
        reduction = None
    if reduction is None:
        if deferred:
            r.reduce(*deferred)
            return True
        return False
    r.reduce(reduction)
    return True


def _plan(r: Reducer, view: list[ViewMessage], goal: Goal) -> Reduction | None:
    opts, cfg = r.options, r.config
    limit = opts.input_limit
    compact_in_force = r.edits.compact
    history = sum(vm.tokens for vm in view)
    last = goal.last_resort
    try:
        return plan_compaction(
            view,
            r.events,
            fixed_tokens=r.total - history,
            target=int(limit * (cfg.last_resort_compact_target if last else opts.compact_target)),
            counter=r.counter,
            summary_tokens=int(opts.summary_tokens * (cfg.last_resort_summary_share if last else 1)),
            previous_upto=compact_in_force.upto_seq if compact_in_force is not None else 0,
            summarizer=r.summarizer,
            keep_users=not last,
            ceiling=int(limit * (cfg.last_resort_compact_target if last else opts.target)),
        )
    except CompactionError:
        raise
    except Exception as exc:  # any summarizer failure: nothing is written
        raise CompactionError(f"the summarizer failed: {type(exc).__name__}: {exc}") from exc


DEFAULT_RUNGS: tuple[Rung, ...] = (fold_duplicates, drop_dynamic, drop_tools, trim_outputs, compact)
"""DESIGN §6 order: fold, drop dynamic items, drop tool schemas, trim, compact."""


def run_ladder(r: Reducer, rungs: Sequence[Rung], config: LadderConfig) -> None:
    """Reduce the step until it is under the target; raise if it cannot fit the input limit.

    A compaction that failed while the request still fits is reported as
    ``compact_failed``; :class:`ContextOverflow` names each section when protected
    content alone is over the limit.
    """
    opts = r.options
    limit = opts.input_limit
    if r.total <= opts.pressure_line:
        return
    passes = (
        Goal(opts.target_line, opts.target_line, opts.keep_groups),
        Goal(int(limit * config.last_resort_goal), limit, 0, last_resort=True),
    )
    for goal in passes:
        if goal.last_resort and r.total <= limit:
            break
        for rung in rungs:
            if r.total <= goal.tokens:
                break
            rung(r, goal)
    if r.total <= limit:
        if r.failures:
            r.note(Action("compact_failed", reason=r.failures[-1][1]))
        return
    last_resort_failures = [reason for last, reason in r.failures if last]
    if last_resort_failures:
        raise CompactionError(last_resort_failures[-1])
    tokens = r.tokens
    task = task_tokens(r.view(), r.events)
    raise ContextOverflow(
        limit,
        {
            "tools": tokens.tools,
            "system": tokens.system,
            "original task": task,
            "rest of history": tokens.history - task,
            "tail": tokens.tail,
        },
    )


def task_tokens(view: Sequence[ViewMessage], events: Sequence[StoredEvent]) -> int:
    """Tokens of the original task (the first user message) in the view."""
    task = next((e for e in events if isinstance(e.event, UserMessage)), None)
    if task is None:
        return 0
    return next((vm.tokens for vm in view if vm.message.seq == task.seq), 0)
