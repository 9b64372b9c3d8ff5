"""The reduction ladder: what to change in the view, and when, priced by the cache.

Seed 003 and DESIGN §6, with seed 001's cost model applied to the whole view
(docs/budget.md, :mod:`ctxline.view.budget`). Each step:

- **under the pressure line** (0.8 × input limit), the lossless edits — fold a
  duplicate, trim an older output to a stub, offload a large one to a preview, elide the
  long texts of an older call — are made only when they pay: their expected saving over
  the coming steps beats ``edit_gain`` times re-sending the whole request. So they come
  in few, large batches, each at the cut that saves most;
- **over the pressure line**, the view waits while waiting is cheaper than reducing
  (ski rental), and always reduces over the input limit. Then the rungs run in order,
  each re-measuring the whole request, until it is under the target (0.6 — the
  hysteresis that lets the following steps append again):

  1. :func:`fold_duplicates` — same tool, same arguments, same content;
  2. :func:`drop_dynamic` — optional tail items, lowest priority first;
  3. :func:`drop_tools` — optional (discovered, unused) tool schemas;
  4. :func:`trim_outputs` — the cut of trims and offloads that reaches the target at
     the least cost, unless a compaction buys room more cheaply (or trims alone cannot
     reach it): then they wait for the compaction;
  5. :func:`compact` — the oldest span becomes a summary, a digest and a
     re-affirmation; the edits after its cut ride along (the cache breaks there anyway).

A rung is a plain callable ``(reducer, goal) -> bool``; the list is configurable. If the
request is still over the input limit, the ladder runs once more as a last resort (goal
0.95 × limit, no recent groups protected, compaction keeps only the task and the newest
group), and then shows the newest results as previews. Edits are
:class:`~ctxline.record.events.Reduction` events, so the record is never changed and
every request can be rebuilt. Never removed: the persona and guide, the original task,
required tail items, forced tools, the call/result pairing, the newest group.

    run_ladder(reducer, DEFAULT_RUNGS, LadderConfig())
"""

from __future__ import annotations

from collections.abc import Sequence

from ctxline.errors import CompactionError, ContextOverflow
from ctxline.record.events import Reduction, StoredEvent, UserMessage
from ctxline.view.budget import (
    EditPlan,
    edit_reductions,
    plan_edits,
    room_price,
    should_wait,
)
from ctxline.view.candidates import Candidate
from ctxline.view.compaction import plan_compaction
from ctxline.view.measure import ViewMessage
from ctxline.view.reducer import Goal, LadderConfig, Reducer, Rung
from ctxline.view.report import Action, Considered, CostReport

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


def _names(cands: Sequence[Candidate]) -> tuple[str, ...]:
    return tuple(f"{c.kind}:{c.seq}" for c in cands)


def fold_duplicates(r: Reducer, goal: Goal) -> bool:
    """Rung 1: earlier copies of an identical result refer to the latest one."""
    folds = [c for c in r.candidates(goal) if c.kind == "fold"]
    plan = plan_edits(folds, r.prefix, r.budget, total=r.total, pressure=r.options.pressure_line)
    if plan is None or plan.gain <= 0:
        if folds:
            r.consider(Considered("fold_duplicates", _names(folds)))
        return False
    r.consider(Considered("fold_duplicates", _names(folds), _names(plan.edits)))
    r.reduce(*edit_reductions(plan))
    return True


def drop_dynamic(r: Reducer, goal: Goal) -> bool:
    """Rung 2: optional tail items go, lowest priority first, until the goal is met."""
    dropped: list[str] = []
    optional = sorted(r.optional_tail(), key=lambda item: item[1])
    for item_id, _ in optional:
        if r.total <= goal.tokens:
            break
        dropped.append(item_id)
        r.drop_tail(dropped)
    if optional:
        names = tuple(f"dynamic:{i}" for i, _ in optional)
        r.consider(Considered("drop_dynamic", names, tuple(f"dynamic:{i}" for i in dropped)))
    return bool(dropped)


def drop_tools(r: Reducer, goal: Goal) -> bool:
    """Rung 3: optional tool schemas (discovered, not used recently), least needed first,
    until their tokens cover the excess; one cut per step. Core, required and forced
    tools are never optional; with no discoverable tools there is nothing to drop."""
    excess = r.total - goal.tokens
    chosen: list[str] = []
    optional = r.optional_tools()
    for name, tokens in optional:
        if excess <= 0:
            break
        chosen.append(name)
        excess -= tokens
    if optional:
        names = tuple(f"tool:{n}" for n, _ in optional)
        r.consider(Considered("drop_tools", names, tuple(f"tool:{n}" for n in chosen)))
    if not chosen:
        return False
    r.drop_tools(chosen)
    return True


def trim_outputs(r: Reducer, goal: Goal) -> bool:
    """Rung 4: the cheapest cut of trims and offloads that gets the request under the goal.

    When no cut gets under ``goal.trigger``, or a compaction buys a step of room for
    less, the trims wait for the compaction (which hides most of them anyway).
    """
    cands = r.candidates(goal)
    if not cands:
        return False
    total, pressure, inputs = r.total, r.options.pressure_line, r.budget
    plan = plan_edits(cands, r.prefix, inputs, total=total, pressure=pressure, need=total - goal.tokens)
    if plan is None and total - sum(c.saved for c in cands) <= goal.trigger:
        plan = plan_edits(cands, r.prefix, inputs, total=total, pressure=pressure, need=total - goal.trigger)
    if plan is None:
        best = plan_edits(cands, r.prefix, inputs, total=total, pressure=pressure)
        r.deferred[:] = edit_reductions(best) if best is not None else []
        chosen = _names(best.edits) if best is not None else ()
        r.consider(Considered("trim_outputs", _names(cands), chosen, deferred=bool(chosen)))
        return False
    if _compaction_is_cheaper(r, goal, plan):
        r.deferred[:] = edit_reductions(plan)
        r.consider(Considered("trim_outputs", _names(cands), _names(plan.edits), deferred=True))
        return False
    r.consider(Considered("trim_outputs", _names(cands), _names(plan.edits)))
    r.reduce(*edit_reductions(plan))
    r.decide(plan.report("edits", inputs, 0))
    return True


def _compaction_is_cheaper(r: Reducer, goal: Goal, plan: EditPlan) -> bool:
    """Whether compacting buys a step of room for less than ``plan`` (docs/budget.md).

    Without a ``compact`` rung the deferred trims are made at the end of the pass."""
    try:
        reduction = _plan(r, goal, estimate=True)
    except CompactionError:
        return False
    if reduction is None or reduction.saved_tokens < r.options.min_compaction_saving * r.total:
        return False
    pricing, pressure, total = r.budget.pricing, r.options.pressure_line, r.total
    after = total - reduction.saved_tokens
    edits_price = room_price(max(0, plan.rewritten - plan.saved), pressure - (total - plan.saved), pricing)
    return room_price(after, pressure - after, pricing) < edits_price


def compact(r: Reducer, goal: Goal) -> bool:
    """Rung 5: the oldest span becomes a summary, a digest and a re-affirmation.

    The edits after the cut are made with it (that part of the view is sent anew
    anyway). When it cannot be made (a summarizer error, too small a saving), nothing is
    written for it: the deferred trims are applied instead and the failure is kept in
    ``r.failures`` (reported when the request is sent; :class:`CompactionError` from
    :func:`run_ladder` when the last resort failed and the request still does not fit).
    """
    deferred, r.deferred[:] = list(r.deferred), []
    reduction: Reduction | None = None
    try:
        reduction = _plan(r, goal)
        total, minimum = r.total, r.options.min_compaction_saving
        if not goal.last_resort and reduction is not None and reduction.saved_tokens < minimum * total:
            raise CompactionError(
                f"a compaction up to seq {reduction.upto_seq} would save only"
                f" {reduction.saved_tokens:,} of {total:,} tokens (the minimum is"
                f" {minimum:.0%}); the record and the last summary are unchanged"
            )
    except CompactionError as exc:
        r.failures.append((goal.last_resort, str(exc)))
        if reduction is not None:
            r.consider(Considered("compact", (f"compact:{reduction.upto_seq}",)))
        reduction = None
    if reduction is None:
        if deferred:
            r.reduce(*deferred)
            return True
        return False
    inputs = r.budget
    r.consider(Considered("compact", (f"compact:{reduction.upto_seq}",), (f"compact:{reduction.upto_seq}",)))
    r.reduce(reduction)
    riders = r.candidates(goal)
    if riders:
        r.reduce(*edit_reductions(EditPlan(riders[0].index, tuple(riders), 0, 0, 0, 0)))
    r.decide(CostReport("compact", inputs.pricing.alpha, inputs.pricing.write_premium, saved=reduction.saved_tokens))
    return True


def _plan(r: Reducer, goal: Goal, *, estimate: bool = False) -> Reduction | None:
    opts, cfg = r.options, r.config
    limit = opts.input_limit
    compact_in_force = r.edits.compact
    view = r.view()
    history = r.tokens.history
    last = goal.last_resort
    users, lines, prefix = r.hints()
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
            users=users,
            lines=lines,
            prefix=prefix,
            estimate=estimate,
        )
    except CompactionError:
        raise
    except Exception as exc:  # any summarizer failure: nothing is written
        raise CompactionError(f"the summarizer failed: {type(exc).__name__}: {exc}") from exc


DEFAULT_RUNGS: tuple[Rung, ...] = (fold_duplicates, drop_dynamic, drop_tools, trim_outputs, compact)
"""DESIGN §6 order: fold, drop dynamic items, drop tool schemas, trim, compact."""

def _edit_under_pressure(r: Reducer) -> None:
    """Under the pressure line: the batch of lossless edits, if it pays enough."""
    opts = r.options
    if opts.edit_gain is None:
        return
    goal = Goal(opts.target_line, opts.target_line, opts.keep_groups)
    cands = r.candidates(goal)
    if not cands:
        return
    inputs, total = r.budget, r.total
    plan = plan_edits(cands, r.prefix, inputs, total=total, pressure=opts.pressure_line)
    if plan is None:
        return
    threshold = opts.edit_gain * inputs.pricing.write_premium * total
    if plan.gain > 0 and plan.gain >= threshold:
        r.consider(Considered("edit", _names(cands), _names(plan.edits)))
        r.reduce(*edit_reductions(plan))
        r.decide(plan.report("edit", inputs, threshold))
    else:
        r.consider(Considered("edit", _names(cands)))
        r.decide(plan.report("keep", inputs, threshold))


def run_ladder(r: Reducer, rungs: Sequence[Rung], config: LadderConfig) -> None:
    """Reduce the step as the cost model says; raise if it cannot fit the input limit.

    A compaction that failed while the request still fits is reported as
    ``compact_failed``; :class:`ContextOverflow` names each section when protected
    content alone is over the limit.
    """
    opts = r.options
    limit = opts.input_limit
    if r.total <= opts.pressure_line:
        _edit_under_pressure(r)
        return
    if opts.defer and r.total <= limit:
        wait, report = should_wait(
            r.budget, total=r.total, target=opts.target_line, weight=opts.reduce_weight
        )
        r.decide(report)
        if wait:
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
        if r.deferred:
            deferred, r.deferred[:] = list(r.deferred), []
            if r.total > goal.trigger:
                r.reduce(*deferred)
    if r.total > limit:
        _preview_newest(r, Goal(limit, limit, 0, last_resort=True))
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


def _preview_newest(r: Reducer, goal: Goal) -> None:
    """Last of all: the newest results become previews, largest first, until it fits."""
    cands = sorted(r.candidates(goal, fresh=True), key=lambda c: -c.saved)
    chosen: list[Candidate] = []
    saved = 0
    for c in cands:
        if r.total - saved <= goal.tokens:
            break
        chosen.append(c)
        saved += c.saved
    if cands:
        r.consider(Considered("preview_newest", _names(cands), _names(chosen)))
    if chosen:
        chosen.sort(key=lambda c: c.index)
        r.reduce(*edit_reductions(EditPlan(chosen[0].index, tuple(chosen), saved, 0, 0, 0)))


def task_tokens(view: Sequence[ViewMessage], events: Sequence[StoredEvent]) -> int:
    """Tokens of the original task (the first user message) in the view."""
    task = next((e for e in events if isinstance(e.event, UserMessage)), None)
    if task is None:
        return 0
    return next((vm.tokens for vm in view if vm.message.seq == task.seq), 0)
