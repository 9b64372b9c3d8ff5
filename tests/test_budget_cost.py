"""The budget's cost model: billed input, an edit's gain, the horizon, pricing per model.

docs/budget.md derives these; the tests pin the formulas, their boundaries, and that
seed 001's replace-or-append rule is the same model.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxline.cost import (
    PROVIDER_PRICING,
    CachePricing,
    billed_input,
    cache_pricing,
    choose_strategy,
    edit_gain,
    expected_steps,
    rewrite_cost,
    wait_cost,
)
from ctxline.errors import ValidationError
from ctxline.view.budget import BudgetInputs, plan_edits, should_wait
from ctxline.view.candidates import Candidate
from ctxline.view.options import PrepareOptions

OPENAI_STYLE = CachePricing(0.1, 1.0)
ANTHROPIC_STYLE = CachePricing(0.1, 1.25)


def test_billed_input_in_both_pricing_styles() -> None:
    # 10,000 tokens, 9,000 read from the cache
    assert billed_input(9_000, 10_000, OPENAI_STYLE) == pytest.approx(900 + 1_000)
    assert billed_input(9_000, 10_000, ANTHROPIC_STYLE) == pytest.approx(900 + 1_250)
    # the same as alpha T + (w - alpha) U
    for pricing in (OPENAI_STYLE, ANTHROPIC_STYLE):
        a, w = pricing.alpha, pricing.write_premium
        assert billed_input(9_000, 10_000, pricing) == pytest.approx(a * 10_000 + (w - a) * 1_000)


def test_edit_gain_is_the_formula() -> None:
    # D (w + a N) - (w - a) R
    assert edit_gain(2_000, 3_000, 20, OPENAI_STYLE) == pytest.approx(2_000 * 3 - 0.9 * 3_000)
    assert edit_gain(2_000, 3_000, 20, ANTHROPIC_STYLE) == pytest.approx(2_000 * 3.25 - 1.15 * 3_000)
    assert rewrite_cost(3_000, ANTHROPIC_STYLE) == pytest.approx(1.15 * 3_000)
    assert wait_cost(500, OPENAI_STYLE) == pytest.approx(50)


def test_edit_gain_boundary() -> None:
    # D (w + a N) = (w - a) R  <=>  R = D (w + a N) / (w - a) = 1000 * 2 / 0.9
    boundary = 1_000 * 2 / 0.9
    assert edit_gain(1_000, boundary - 1, 10, OPENAI_STYLE) > 0
    assert edit_gain(1_000, boundary + 1, 10, OPENAI_STYLE) < 0


@given(
    saved=st.integers(0, 100_000),
    rewritten=st.integers(0, 200_000),
    steps=st.floats(1, 1_000),
    alpha=st.floats(0, 1),
    premium=st.floats(1, 3),
)
def test_gain_grows_with_saving_and_horizon_and_falls_with_rewrite(
    saved: int, rewritten: int, steps: float, alpha: float, premium: float
) -> None:
    p = CachePricing(alpha, premium)
    base = edit_gain(saved, rewritten, steps, p)
    assert edit_gain(saved + 100, rewritten, steps, p) >= base
    assert edit_gain(saved, rewritten, steps + 1, p) >= base - 1e-6
    assert edit_gain(saved, rewritten + 100, steps, p) <= base + 1e-6


@given(
    alpha=st.floats(0.01, 0.99),
    size=st.integers(1, 5_000),
    after=st.integers(0, 50_000),
    updates=st.integers(2, 200),
)
def test_seed_001_replace_or_append_is_the_same_model(
    alpha: float, size: int, after: int, updates: int
) -> None:
    """Replacing a stale status (the edit: D = S, R = what was appended after it) pays,
    over the mean remaining horizon N/2 and leaving out the now-term w D, exactly when
    seed 001 says replace: alpha S N / 2 >= (1 - alpha) R."""
    p = CachePricing(alpha, 1.0)
    margin = edit_gain(size, after, updates / 2, p) - p.write_premium * size
    assert margin == pytest.approx(alpha * size * updates / 2 - (1 - alpha) * after, abs=1e-6)
    decision = choose_strategy(alpha, size, after, updates)
    if abs(margin) > 1e-6:
        assert (decision.strategy == "replace") == (margin > 0)


def test_expected_steps_is_the_lindy_estimate_capped_by_room() -> None:
    assert expected_steps(40, growth=0, room=1_000) == 40
    assert expected_steps(40, growth=500, room=5_000) == 10
    assert expected_steps(0, growth=500, room=5_000) == 1  # at least this step
    assert expected_steps(40, growth=500, room=-100) == 1


def test_pricing_comes_from_the_model_then_the_provider_then_the_options() -> None:
    sonnet = cache_pricing("anthropic", "claude-sonnet-4-5")
    assert (sonnet.alpha, sonnet.write_premium) == pytest.approx((0.1, 1.25))
    assert cache_pricing("openai", "gpt-4.1").alpha == pytest.approx(0.25)
    assert cache_pricing("openai", "gpt-4.1").write_premium == 1.0
    unknown = cache_pricing("openai", "a-model-nobody-priced")
    assert unknown.alpha == PROVIDER_PRICING["openai"].alpha
    forced = cache_pricing("anthropic", "claude-sonnet-4-5", read=0.2, write=2.0)
    assert (forced.alpha, forced.write_premium) == (0.2, 2.0)
    no_cache = cache_pricing("somewhere-else")
    assert (no_cache.alpha, no_cache.write_premium) == (1.0, 1.0)  # nothing to gain from a cache
    with pytest.raises(ValidationError, match="write_premium"):
        cache_pricing("openai", write=0.5)


def _inputs(steps: int = 50, history: int | None = 10_000) -> BudgetInputs:
    return BudgetInputs(OPENAI_STYLE, steps, growth=200.0, previous_history=history)


def test_plan_edits_picks_the_cut_with_the_largest_gain() -> None:
    prefix = {0: 0, 10: 2_000, 20: 9_000, 30: 9_500}.__getitem__
    cands = [
        Candidate(10, 11, "trim", 300),  # early: breaks the cache for 8,000 tokens
        Candidate(20, 21, "trim", 2_000),
        Candidate(30, 31, "offload", 400),
    ]
    plan = plan_edits(cands, prefix, _inputs(), total=12_000, pressure=40_000)
    assert plan is not None
    assert [c.seq for c in plan.edits] == [21, 31]  # the cut at 20: everything after it rides along
    assert plan.saved == 2_400
    assert plan.rewritten == 1_000
    assert plan.gain == pytest.approx(edit_gain(2_400, 1_000, plan.steps, OPENAI_STYLE))
    for k in range(3):  # and no other cut gains more
        saved = sum(c.saved for c in cands[k:])
        rewritten = 10_000 - prefix(cands[k].index)
        assert edit_gain(saved, rewritten, plan.steps, OPENAI_STYLE) <= plan.gain + 1e-6


def test_plan_edits_that_must_save_takes_the_latest_cut_that_does() -> None:
    prefix = {10: 2_000, 20: 9_000}.__getitem__
    cands = [Candidate(10, 11, "trim", 3_000), Candidate(20, 21, "trim", 500)]
    plan = plan_edits(cands, prefix, _inputs(), total=12_000, pressure=40_000, need=3_200)
    assert plan is not None
    assert plan.cut == 10
    assert plan.saved == 3_500
    assert plan_edits(cands, prefix, _inputs(), total=12_000, pressure=40_000, need=9_000) is None


def test_ski_rental_waits_until_the_rent_reaches_the_rewrite() -> None:
    # buy = (w - a) target = 0.9 * 6000 = 5400; rent = a (excess + T - target)
    waiting = BudgetInputs(OPENAI_STYLE, 10, 100.0, 8_000, excess=40_000, waited=20)
    wait, report = should_wait(waiting, total=8_000, target=6_000)
    assert wait
    assert report.decision == "wait"
    assert report.rent == round(0.1 * (40_000 + 2_000))
    assert report.buy == round(0.9 * 6_000)
    done = BudgetInputs(OPENAI_STYLE, 10, 100.0, 8_000, excess=52_000, waited=26)
    wait, report = should_wait(done, total=8_000, target=6_000)
    assert not wait
    assert report.decision == "reduce"
    # a dearer cached read makes waiting dearer: it reduces sooner
    dear = BudgetInputs(CachePricing(0.5, 1.0), 10, 100.0, 8_000, excess=5_000, waited=2)
    assert should_wait(dear, total=8_000, target=6_000)[0] is False


def test_a_heavier_reduction_price_waits_longer() -> None:
    # buy = weight (w - a) target: 5,400 at weight 1, 16,200 at weight 3; rent = 0.1 x 62,000
    inputs = BudgetInputs(OPENAI_STYLE, 10, 100.0, 8_000, excess=60_000, waited=30)
    assert should_wait(inputs, total=8_000, target=6_000)[0] is False
    wait, report = should_wait(inputs, total=8_000, target=6_000, weight=3.0)
    assert wait
    assert report.buy == round(3 * 0.9 * 6_000)


def test_reduce_weight_is_checked_and_old_headers_weigh_the_plain_rewrite() -> None:
    with pytest.raises(ValidationError, match="reduce_weight"):
        PrepareOptions(reduce_weight=0.5)
    logged = PrepareOptions().to_json()
    assert PrepareOptions.from_json(logged).reduce_weight == 3.0
    del logged["reduce_weight"]
    assert PrepareOptions.from_json(logged).reduce_weight == 1.0
