"""The budget's cost model applied to a step: which edits of the view pay, and when.

docs/budget.md has the model; :mod:`ctxline.cost` the formulas. A request bills
``alpha C + w U`` (C tokens read from the cache, U processed anew, ``w`` the write
price). An edit set that starts at view index ``p`` re-processes what the previous
request had cached from ``p`` to its end (R tokens) and saves D tokens on this and every
later step it stays in force (N, :func:`~ctxline.cost.expected_steps`), so

    gain(p) = D(p) (w + alpha N) - (w - alpha) R(p)

and every edit after ``p`` rides along for free once the cache breaks at ``p``.
:func:`plan_edits` finds the ``p`` with the largest gain, among those that save at least
``need`` tokens when the request must shrink. Over the pressure line :func:`should_wait`
applies the ski-rental rule: keep the view while the extra cache reads waiting has cost
are less than what the reduction would re-process.

    plan = plan_edits(candidates, prefix, inputs, total=T, pressure=P)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ctxline.cost import CachePricing, rewrite_cost, wait_cost
from ctxline.record.events import Reduction
from ctxline.view.candidates import Candidate
from ctxline.view.edits import SHORT, TEXT
from ctxline.view.report import CostReport

__all__ = ["BudgetInputs", "EditPlan", "edit_reductions", "plan_edits", "should_wait"]


@dataclass(frozen=True, slots=True)
class BudgetInputs:
    """What the cost model knows at a step, all of it from the record and the options."""

    pricing: CachePricing
    steps: int
    """Requests logged so far in the timeline."""
    growth: float
    """History tokens added per step, averaged over recent requests."""
    previous_history: int | None
    """History tokens of the previous request (what its cache holds)."""
    excess: int = 0
    """Σ (total − target) over the latest requests kept over the pressure line."""
    waited: int = 0


@dataclass(frozen=True, slots=True)
class EditPlan:
    """The edits from view index ``cut`` on, and what the model expects of them."""

    cut: int
    edits: tuple[Candidate, ...]
    saved: int
    rewritten: int
    steps: float
    gain: float

    def report(self, decision: str, inputs: BudgetInputs, threshold: float) -> CostReport:
        return CostReport(
            decision,
            inputs.pricing.alpha,
            inputs.pricing.write_premium,
            round(self.steps, 1),
            round(self.gain),
            round(threshold),
            self.saved,
            self.rewritten,
        )


def plan_edits(
    candidates: Sequence[Candidate],
    prefix: Callable[[int], int],
    inputs: BudgetInputs,
    *,
    total: int,
    pressure: int,
    need: int = 0,
) -> EditPlan | None:
    """The cut with the largest expected gain (saving at least ``need``), or None.

    ``prefix(i)`` is the tokens of the view before index ``i``. Scanned from the newest
    candidate back, so each cut's saving is the sum of the candidates after it.
    """
    pricing = inputs.pricing
    a, w = pricing.alpha, pricing.write_premium
    cached = inputs.previous_history
    done, growth = float(max(inputs.steps, 1)), inputs.growth
    best_k, best = -1, (0.0, 0, 0, 0.0)
    saved = 0
    for k in range(len(candidates) - 1, -1, -1):  # the formulas of cost.edit_gain / expected_steps, inlined
        c = candidates[k]
        saved += c.saved
        if saved < need:
            continue
        before = prefix(c.index)
        rewritten = cached - before if cached is not None and cached > before else 0
        steps = done
        if growth > 0:
            room = pressure - (total - saved)
            steps = min(steps, room / growth if room > 0 else 0.0)
        steps = max(steps, 1.0)
        gain = saved * (w + a * steps) - (w - a) * rewritten
        if best_k < 0 or gain > best[0]:
            best_k, best = k, (gain, saved, rewritten, steps)
    if best_k < 0:
        return None
    gain, saved, rewritten, steps = best
    c = candidates[best_k]
    return EditPlan(c.index, tuple(candidates[best_k:]), saved, rewritten, steps, gain)


def room_price(rewritten: float, room: float, pricing: CachePricing) -> float:
    """What one step of room costs: the rewrite, spread over the steps it buys."""
    return rewrite_cost(rewritten, pricing) / max(room, 1.0)


def should_wait(
    inputs: BudgetInputs, *, total: int, target: int, weight: float = 1.0
) -> tuple[bool, CostReport]:
    """Over the pressure line: wait while the reads waiting costs stay under the buy price.

    Rent: ``alpha (T - target)`` per step kept over the line (this one included); buy:
    ``weight (w - alpha) target``, what a reduction to the target re-processes, weighted
    for what else it costs (a cache break, the room given up under the limit;
    ``PrepareOptions.reduce_weight``). Waiting until the rent paid equals the buy price
    costs at most twice the better of reducing at once and never reducing (the
    ski-rental rule), and a session that ends first never pays the rewrite.
    """
    pricing = inputs.pricing
    rent = wait_cost(inputs.excess + max(0, total - target), pricing)
    buy = weight * rewrite_cost(target, pricing)
    wait = rent < buy
    return wait, CostReport(
        "wait" if wait else "reduce",
        pricing.alpha,
        pricing.write_premium,
        rent=round(rent),
        buy=round(buy),
        waited=inputs.waited,
    )


def edit_reductions(plan: EditPlan) -> list[Reduction]:
    """The plan as reduction events: folds, short trims (stubs and elided arguments),
    and offloads (previews)."""
    folds = {str(c.seq): c.later for c in plan.edits if c.kind == "fold"}
    short = [c for c in plan.edits if c.kind in ("trim", "args")]
    previews = [c for c in plan.edits if c.kind == "offload"]
    texts = [c for c in plan.edits if c.kind == "text"]
    out: list[Reduction] = []
    if folds:
        saved = sum(c.saved for c in plan.edits if c.kind == "fold")
        out.append(Reduction("fold", refs=folds, saved_tokens=saved))
    if short:
        out.append(
            Reduction(
                "trim",
                seqs=tuple(c.seq for c in short),
                saved_tokens=sum(c.saved for c in short),
                meta={"form": SHORT},
            )
        )
    if previews:
        out.append(
            Reduction(
                "trim",
                seqs=tuple(c.seq for c in previews),
                saved_tokens=sum(c.saved for c in previews),
            )
        )
    if texts:
        out.append(
            Reduction(
                "trim",
                seqs=tuple(c.seq for c in texts),
                saved_tokens=sum(c.saved for c in texts),
                meta={"form": TEXT},
            )
        )
    return out
