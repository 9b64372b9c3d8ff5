"""Seed 001's cost model for replace vs append: formulas, boundary, provider table."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxline.cost import (
    PROVIDER_PRICING,
    CachePricing,
    append_cost,
    choose_strategy,
    decide_for_provider,
    replace_cost,
)
from ctxline.errors import ValidationError


def test_formulas() -> None:
    # C_replace = (N-1)(1-a)R ; C_append = a S N (N-1) / 2
    assert replace_cost(0.5, R=200, N=4) == 3 * 0.5 * 200
    assert append_cost(0.5, S=100, N=4) == 0.5 * 100 * 4 * 3 / 2
    assert replace_cost(0.5, R=200, N=4, write_premium=1.25) == 3 * 0.75 * 200
    assert replace_cost(0.1, R=1000, N=1) == 0 == append_cost(0.1, S=500, N=1)


def test_boundary_flips_exactly_where_the_formula_says() -> None:
    # a S N / 2 = 0.5 * 100 * 4 / 2 = 100 ; (1 - a) R = 0.5 R -> boundary at R = 200
    tie = choose_strategy(alpha=0.5, S=100, R=200, N=4)
    assert tie.c_append == tie.c_replace == 300
    assert tie.strategy == "replace"  # equality keeps one current status
    assert choose_strategy(alpha=0.5, S=100, R=200.001, N=4).strategy == "append"
    assert choose_strategy(alpha=0.5, S=100, R=199.999, N=4).strategy == "replace"
    # same boundary approached through S: append while S < 200
    assert choose_strategy(alpha=0.5, S=199.999, R=200, N=2).strategy == "append"
    assert choose_strategy(alpha=0.5, S=200, R=200, N=2).strategy == "replace"
    # and through N: a S N / 2 < (1 - a) R  <=>  N < 2 (1 - a) R / (a S) = 2 * 0.9 * 1000 / 20 = 90
    assert choose_strategy(alpha=0.1, S=200, R=1000, N=89).strategy == "append"
    assert choose_strategy(alpha=0.1, S=200, R=1000, N=90).strategy == "replace"
    assert choose_strategy(alpha=0.1, S=200, R=1000, N=91).strategy == "replace"


def test_write_premium_moves_the_boundary() -> None:
    # w - a = 1.5 - 0.5 = 1 -> boundary at R = 100 for a S N / 2 = 100
    assert choose_strategy(0.5, S=100, R=100, N=4, write_premium=1.5).strategy == "replace"
    assert choose_strategy(0.5, S=100, R=101, N=4, write_premium=1.5).strategy == "append"
    assert choose_strategy(0.5, S=100, R=101, N=4).strategy == "replace"


def test_one_update_or_none_never_appends() -> None:
    for n in (0, 1):
        d = choose_strategy(alpha=0.1, S=10, R=10_000, N=n)
        assert d.strategy == "replace"
        assert d.c_replace == d.c_append == 0


def test_free_cache_reads_always_append_and_no_caching_replaces() -> None:
    assert choose_strategy(alpha=0.0, S=10_000, R=1, N=50).strategy == "append"
    assert choose_strategy(alpha=1.0, S=1, R=10_000, N=50).strategy == "replace"


@given(
    alpha=st.floats(0, 1),
    S=st.floats(0, 1e6),
    R=st.floats(0, 1e6),
    N=st.integers(2, 10_000),
)
def test_decision_matches_the_seed_criterion(alpha: float, S: float, R: float, N: int) -> None:
    a, s, r = Fraction(alpha), Fraction(S), Fraction(R)
    append = a * s * N / 2 < (1 - a) * r  # seed 001: prefer append when a S N / 2 < (1 - a) R
    assert choose_strategy(alpha, S, R, N).strategy == ("append" if append else "replace")


def test_decision_reports_its_inputs() -> None:
    d = choose_strategy(alpha=0.1, S=200, R=3000, N=20, write_premium=1.25)
    assert d.to_json() == {
        "strategy": "append",
        "c_replace": d.c_replace,
        "c_append": d.c_append,
        "inputs": {"alpha": 0.1, "write_premium": 1.25, "S": 200, "R": 3000, "N": 20},
    }
    assert d.c_replace == pytest.approx(19 * 1.15 * 3000)
    assert d.c_append == pytest.approx(0.1 * 200 * 20 * 19 / 2)


def test_provider_table() -> None:
    assert PROVIDER_PRICING["anthropic"] == CachePricing(
        0.1, 1.25, PROVIDER_PRICING["anthropic"].note
    )
    assert {"anthropic", "openai", "deepseek"} <= set(PROVIDER_PRICING)
    d = decide_for_provider("anthropic", S=200, R=3000, N=20)
    assert d.inputs["alpha"] == 0.1
    assert d.inputs["write_premium"] == 1.25
    assert d.inputs["provider"] == "anthropic"
    custom = {"mine": CachePricing(0.5)}
    assert decide_for_provider("mine", S=100, R=200, N=4, pricing=custom).strategy == "replace"
    with pytest.raises(ValidationError, match="no cache pricing for provider 'x'"):
        decide_for_provider("x", S=1, R=1)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"alpha": 1.5}, "alpha"),
        ({"alpha": -0.1}, "alpha"),
        ({"S": -1}, "S"),
        ({"R": -1}, "R"),
        ({"N": -1}, "N"),
        ({"write_premium": 0.5}, "write_premium"),
    ],
)
def test_invalid_inputs(kwargs: dict[str, float], field: str) -> None:
    args: dict[str, float] = {"alpha": 0.1, "S": 1, "R": 1, "N": 3, **kwargs}
    with pytest.raises(ValidationError) as info:
        choose_strategy(**args)
    assert info.value.field == field
