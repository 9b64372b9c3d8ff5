"""Replace or append the status bar: seed 001's cache cost model.

Why: a status bar can be *replaced* (one copy at the tail, removed and re-added on each
update) or *appended* (each update stays in history). Replacing invalidates the cache
from the old status's position on, so the R tokens appended since the last update are
read again at full price; appending keeps the prefix stable but every stale copy is
read again (at the cached price) on every later update. With

- ``S``: tokens of one status block,
- ``R``: tokens appended between two updates (what replacing makes uncached again),
- ``N``: expected number of updates,
- ``alpha``: cached-read price as a fraction of the normal input price,

seed 001 gives, in units of the normal input price per token::

    C_replace ≈ (N - 1)(1 - alpha) R          C_append ≈ alpha S N (N - 1) / 2

and prefers append exactly when ``alpha S N / 2 < (1 - alpha) R`` (equality: replace, the one
that keeps a single, current status). A provider that charges cache *writes* extra
(Anthropic: 1.25x for the 5-minute cache) pays ``write_premium`` instead of 1 for the
re-processed R tokens: ``C_replace ≈ (N - 1)(w - alpha) R``; ``w = 1`` is the seed's formula.
The model leaves out context occupancy and the ambiguity of stale copies (seed 001).

The same accounting prices every edit of the view (docs/budget.md): a request of ``T``
tokens of which ``C`` are read from the cache bills ``alpha C + w (T - C)`` =
``alpha T + (w - alpha) U`` with ``U`` the uncached tokens. An edit that saves ``D``
tokens and changes the view ``R`` tokens before the end of the previous request costs
``(w - alpha) R`` once and saves ``alpha D`` on each of the ``N`` later steps it stays in
force (and ``w D`` now): :func:`edit_gain`. The status bar's choice is the case ``D = S``.

    >>> round(edit_gain(saved=2_000, rewritten=3_000, steps=20, pricing=CachePricing(0.1)), 1)
    3300.0
    >>> choose_strategy(alpha=0.1, S=200, R=3_000, N=20).strategy
    'append'
    >>> choose_strategy(alpha=0.1, S=2_000, R=300, N=20).strategy
    'replace'
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from ctxline.errors import ValidationError
from ctxline.record.events import JsonValue

__all__ = [
    "DEFAULT_EXPECTED_UPDATES",
    "PROVIDER_PRICING",
    "CachePricing",
    "StrategyDecision",
    "append_cost",
    "billed_input",
    "cache_pricing",
    "choose_strategy",
    "decide_for_provider",
    "edit_gain",
    "expected_steps",
    "replace_cost",
    "rewrite_cost",
    "wait_cost",
]

Strategy = Literal["replace", "append"]

DEFAULT_EXPECTED_UPDATES = 30
"""N when the app gives none: a guess, meant to be configured (or measured per session)."""


@dataclass(frozen=True, slots=True)
class CachePricing:
    alpha: float
    """Cached-read price / normal input price."""
    write_premium: float = 1.0
    """Cache-write price / normal input price (1.0 where writes cost nothing extra)."""
    note: str = ""


PROVIDER_PRICING: Mapping[str, CachePricing] = {
    "anthropic": CachePricing(0.1, 1.25, "5-minute cache: reads 0.1x, writes 1.25x"),
    "anthropic-1h": CachePricing(0.1, 2.0, "1-hour cache: reads 0.1x, writes 2x"),
    "openai": CachePricing(
        0.5,
        1.0,
        "automatic caching; 0.5x on the GPT-4o generation, 0.25x on GPT-4.1, 0.1x on GPT-5",
    ),
    "deepseek": CachePricing(0.26, 1.0, "older pricing about 0.26x; V4 at 0.02x or less"),
}
"""Defaults per provider (REFERENCES.md); pass your own table or ``alpha`` to override."""


def _check(alpha: float, S: float, R: float, N: float, write_premium: float) -> None:
    if not 0.0 <= alpha <= 1.0:
        raise ValidationError(f"alpha must be within [0, 1], got {alpha!r}", field="alpha")
    if write_premium < 1.0:
        raise ValidationError(
            f"write_premium must be >= 1, got {write_premium!r}", field="write_premium"
        )
    for name, value in (("S", S), ("R", R), ("N", N)):
        if value < 0:
            raise ValidationError(f"{name} must be >= 0, got {value!r}", field=name)


def replace_cost(alpha: float, R: float, N: float, write_premium: float = 1.0) -> float:
    """``(N - 1)(w - alpha)R``: extra input cost of replacing the status N times."""
    return max(N - 1, 0) * (write_premium - alpha) * R


def append_cost(alpha: float, S: float, N: float) -> float:
    """``alpha S N (N - 1) / 2``: cost of re-reading the stale copies when appending N times."""
    return alpha * S * N * max(N - 1, 0) / 2


@dataclass(frozen=True, slots=True)
class StrategyDecision:
    strategy: Strategy
    c_replace: float
    c_append: float
    inputs: dict[str, JsonValue]

    def to_json(self) -> dict[str, JsonValue]:
        return {
            "strategy": self.strategy,
            "c_replace": self.c_replace,
            "c_append": self.c_append,
            "inputs": dict(self.inputs),
        }


def choose_strategy(
    alpha: float, S: float, R: float, N: float, write_premium: float = 1.0
) -> StrategyDecision:
    """``append`` when ``C_append < C_replace``, else ``replace`` (see the module doc)."""
    _check(alpha, S, R, N, write_premium)
    c_rep = replace_cost(alpha, R, N, write_premium)
    c_app = append_cost(alpha, S, N)
    # decide on the exact values of the given numbers, so the flip is exactly at the boundary
    from fractions import Fraction  # here: it brings decimal, which a Context never needs

    a, s, r, n, w = (Fraction(x) for x in (alpha, S, R, N, write_premium))
    steps = max(n - 1, Fraction(0))
    exact_append = a * s * n * steps / 2
    exact_replace = steps * (w - a) * r
    inputs: dict[str, JsonValue] = {
        "alpha": alpha,
        "write_premium": write_premium,
        "S": S,
        "R": R,
        "N": N,
    }
    return StrategyDecision("append" if exact_append < exact_replace else "replace", c_rep, c_app, inputs)


def decide_for_provider(
    provider: str,
    S: float,
    R: float,
    N: float = DEFAULT_EXPECTED_UPDATES,
    *,
    pricing: Mapping[str, CachePricing] = PROVIDER_PRICING,
) -> StrategyDecision:
    """:func:`choose_strategy` with ``alpha`` and ``write_premium`` from ``pricing[provider]``."""
    found = pricing.get(provider)
    if found is None:
        raise ValidationError(
            f"no cache pricing for provider {provider!r} (known: {', '.join(pricing)})",
            field="provider",
        )
    decision = choose_strategy(found.alpha, S, R, N, found.write_premium)
    decision.inputs["provider"] = provider
    return decision


# --- the whole view: what an edit of the request costs and saves (docs/budget.md) -----


def cache_pricing(
    provider: str,
    model: str | None = None,
    *,
    read: float | None = None,
    write: float | None = None,
    pricing: Mapping[str, CachePricing] = PROVIDER_PRICING,
) -> CachePricing:
    """``alpha`` and ``w`` for a model: the values given, else the model's prices in
    ``ctxline/data/pricing.json`` (cache read / input, cache write / input), else the
    provider's default here.

    >>> cache_pricing("anthropic", "claude-sonnet-4-5")
    CachePricing(alpha=0.1, write_premium=1.25, note='claude-sonnet-4-5')
    >>> cache_pricing("openai", "gpt-4.1").alpha
    0.25
    >>> cache_pricing("openai", "gpt-4.1", read=0.1).alpha
    0.1
    """
    from ctxline.pricing import price_for

    base = pricing.get(provider, CachePricing(1.0, 1.0, "unknown provider: no cache"))
    alpha, premium, note = base.alpha, base.write_premium, base.note
    price = price_for(model) if model else None
    if price is not None and price.input > 0:
        alpha = float(price.cache_read / price.input)
        premium = max(1.0, float(price.cache_write / price.input))
        note = price.model
    if read is not None:
        alpha = read
    if write is not None:
        premium = write
    _check(alpha, 0, 0, 0, premium)
    return CachePricing(alpha, premium, note)


def billed_input(reused: float, total: float, pricing: CachePricing) -> float:
    """``alpha C + w (T - C)``: a request of ``total`` tokens, ``reused`` read from the cache."""
    return pricing.alpha * reused + pricing.write_premium * (total - reused)


def rewrite_cost(tokens: float, pricing: CachePricing) -> float:
    """``(w - alpha) R``: what re-processing ``tokens`` that were cached costs extra."""
    return (pricing.write_premium - pricing.alpha) * tokens


def wait_cost(excess: float, pricing: CachePricing) -> float:
    """``alpha E``: one more step with ``excess`` tokens an edit would have removed."""
    return pricing.alpha * excess


def edit_gain(saved: float, rewritten: float, steps: float, pricing: CachePricing) -> float:
    """``D (w + alpha N) - (w - alpha) R``: the expected saving of an edit of the view.

    ``saved`` (D) tokens leave the request; the view changes ``rewritten`` (R) tokens
    before the end of the previous request, which are then processed again instead of
    read from the cache; the edit stays in force for ``steps`` (N) later steps. Now: the
    R tokens cost ``w`` instead of ``alpha``, minus the D that are gone (``w D``, as they
    would have been part of R). Later: ``alpha D`` per step. Positive: the edit pays.
    """
    a, w = pricing.alpha, pricing.write_premium
    return saved * (w + a * steps) - (w - a) * rewritten


def expected_steps(done: int, growth: float, room: float) -> float:
    """N: how many more steps an edit is expected to stay in force.

    A timeline that has made ``done`` requests is expected to make about as many more
    (the Lindy estimate: no other input is known to the step), but no more than the
    steps left before the view grows by ``room`` at ``growth`` tokens per step and a
    compaction hides the edit anyway.

    >>> expected_steps(40, growth=500, room=5_000)
    10.0
    >>> expected_steps(3, growth=0, room=5_000)
    3.0
    """
    steps = float(max(done, 1))
    if growth > 0:
        steps = min(steps, max(room, 0.0) / growth)
    return max(steps, 1.0)
