"""Where the ``<ctx-env>`` block goes: the tail every step, or appended to history on change.

Seed 001's cost model compares *replacing* a status block with *appending* a new copy.
In ctxline's layout the tail is the last message of every request, so it sits after the
cached prefix: a tail block of S tokens is read uncached at every one of T steps. A copy
appended when the block changes is written once (at the cache-write price w) and read
cached (α) by every later step. Over T steps with N changes at an even pace, in units
of the normal input price per token::

    C_tail   ≈ T S
    C_append ≈ N S w + α S N T / 2

Appending wins when the block changes rarely (``N (w + α T / 2) < T``); the tail wins when
it changes often, and always keeps exactly one, current copy where the model looks
first — so equality goes to the tail. Neither placement ever breaks the cached prefix.
Seed 001's own formula (:func:`ctxline.cost.choose_strategy`, built for a status block
that stays *in place* between updates, with R tokens after it re-read on replacement)
is computed beside it and reported, so the two can be compared with the measured cost
(``benchmarks/bench_environment.py``).

    >>> decide_placement("anthropic", S=120, T=30, N=25, R=400).placement
    'tail'
    >>> decide_placement("anthropic", S=120, T=30, N=2, R=4_000).placement
    'append'
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from ctxline.cost import PROVIDER_PRICING, CachePricing, choose_strategy
from ctxline.errors import ValidationError
from ctxline.record.events import JsonValue

__all__ = [
    "PLACEMENTS",
    "Placement",
    "PlacementDecision",
    "append_cost",
    "decide_placement",
    "tail_cost",
]

Placement = Literal["tail", "append", "auto"]
PLACEMENTS: tuple[Placement, ...] = ("tail", "append", "auto")


def tail_cost(S: float, T: float) -> float:
    """``T S``: the block read uncached at every step."""
    return T * S


def append_cost(S: float, T: float, N: float, alpha: float, write_premium: float = 1.0) -> float:
    """``N S w + α S N T / 2``: each copy written once, then read cached by the later steps."""
    return N * S * write_premium + alpha * S * N * T / 2


@dataclass(frozen=True, slots=True)
class PlacementDecision:
    placement: Literal["tail", "append"]
    c_tail: float
    c_append: float
    seed001: str
    """What seed 001's replace/append formula would pick (``replace`` ≈ tail)."""
    inputs: dict[str, JsonValue]

    def to_json(self) -> dict[str, JsonValue]:
        return {
            "placement": self.placement,
            "c_tail": round(self.c_tail, 3),
            "c_append": round(self.c_append, 3),
            "seed001": self.seed001,
            "inputs": dict(self.inputs),
        }


def decide_placement(
    provider: str,
    *,
    S: float,
    T: float,
    N: float,
    R: float,
    pricing: Mapping[str, CachePricing] = PROVIDER_PRICING,
) -> PlacementDecision:
    """The cheaper placement for a block of ``S`` tokens over ``T`` steps with ``N`` changes
    (``R``: history tokens between two changes, for seed 001's formula)."""
    found = pricing.get(provider)
    if found is None:
        raise ValidationError(
            f"no cache pricing for provider {provider!r} (known: {', '.join(pricing)})",
            field="provider",
        )
    for name, value in (("S", S), ("T", T), ("N", N), ("R", R)):
        if value < 0:
            raise ValidationError(f"{name} must be >= 0, got {value!r}", field=name)
    alpha, w = found.alpha, found.write_premium
    c_tail = tail_cost(S, T)
    c_append = append_cost(S, T, N, alpha, w)
    seed = choose_strategy(alpha, S, R, N, w).strategy
    inputs: dict[str, JsonValue] = {
        "provider": provider, "alpha": alpha, "write_premium": w,
        "S": S, "T": T, "N": round(N, 3), "R": round(R, 1),
    }  # fmt: skip
    return PlacementDecision(
        "append" if c_append < c_tail else "tail", c_tail, c_append, seed, inputs
    )
