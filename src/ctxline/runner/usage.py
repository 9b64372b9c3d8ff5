"""Usage and cost: one ``usage`` event per model call, totals per agent, priced per model.

Why: "what did this run cost, and which agent spent it" is the first question after a
run, and sub-agents hide their spending in other frameworks. Every model call appends a
:class:`~ctxline.record.events.ModelUsage` event (input, cache read, cache write,
output, model, latency, and ctxline's own count of the request beside the provider's),
so totals are a fold of the record and survive a crash. A sub-agent's totals come back
in the ``meta`` of the parent's tool result; :class:`Totals` adds them up per agent.
Prices come from the dated table :mod:`ctxline.pricing`; a model without a price has
no cost (``None``, never a guess) and is listed in ``unpriced``.

    >>> t = Totals()
    >>> t.add_call(ModelUsage("openai:gpt-4.1", input=1_000, cache_read=800, output=10))
    >>> t.usage()
    {'input': 1000, 'cache_read': 800, 'cache_write': 0, 'output': 10}
    >>> str(t.cost_usd())
    '0.00088'
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from ctxline.models.base import ModelReply
from ctxline.pricing import BilledUsage, PriceTable, cost, price_for
from ctxline.record.events import JsonValue, ModelUsage
from ctxline.record.jsonvalue import get_array, get_int

__all__ = ["USAGE_FIELDS", "Totals", "call_cost", "price_name", "usage_from_reply"]

USAGE_FIELDS = ("input", "cache_read", "cache_write", "output")


def usage_from_reply(
    reply: ModelReply, *, model: str, estimated: int | None, step: int | None, latency_s: float
) -> ModelUsage:
    """The ``usage`` event of one call (``model`` is the client's ``kind:name``)."""
    u = reply.usage
    meta: dict[str, JsonValue] = {}
    if reply.model and reply.model != model.partition(":")[2]:
        meta["response_model"] = reply.model
    if reply.finish_reason:
        meta["finish_reason"] = reply.finish_reason
    return ModelUsage(
        model,
        int(u["input"]),
        int(u["cache_read"]),
        int(u["cache_write"]),
        int(u["output"]),
        max(0, round(latency_s * 1000)),
        estimated,
        step,
        meta,
    )


def price_name(model: str) -> str:
    """The name the price table is asked about: ``openai:gpt-4.1`` → ``gpt-4.1``."""
    kind, sep, name = model.partition(":")
    return name if sep and kind in ("openai", "anthropic") else model


def call_cost(event: ModelUsage, table: PriceTable | None = None) -> Decimal | None:
    """USD of one call, or None when the model has no price."""
    price = price_for(price_name(event.model), table)
    if price is None:
        return None
    uncached = max(0, event.input - event.cache_read - event.cache_write)
    billed = BilledUsage(
        input_tokens=uncached,
        output_tokens=event.output,
        cache_read_tokens=min(event.cache_read, event.input),
        cache_write_tokens=event.cache_write,
    )
    return cost(billed, price).total


@dataclass
class Totals:
    """Running totals of one agent (and the agents it spawned)."""

    calls: int = 0
    tokens: dict[str, int] = field(default_factory=lambda: dict.fromkeys(USAGE_FIELDS, 0))
    latency_ms: int = 0
    cost: Decimal = Decimal(0)
    priced_calls: int = 0
    unpriced: set[str] = field(default_factory=set)
    estimates: list[tuple[int, int]] = field(default_factory=list)
    """(ctxline's count, provider's input) per call where both are known."""
    estimated_sum: int = 0
    reported_sum: int = 0
    """The sums of ``estimates``' two columns, kept as calls come (read every step)."""
    children: dict[str, dict[str, JsonValue]] = field(default_factory=dict)
    """Per spawned agent (session id): its totals as :meth:`to_json` gave them."""
    table: PriceTable | None = None

    def add_call(self, event: ModelUsage) -> None:
        self.calls += 1
        for name in USAGE_FIELDS:
            self.tokens[name] += getattr(event, name)
        self.latency_ms += event.latency_ms
        price = call_cost(event, self.table)
        if price is None:
            self.unpriced.add(event.model)
        else:
            self.cost += price
            self.priced_calls += 1
        if event.estimated_input is not None and event.input > 0:
            self.estimates.append((event.estimated_input, event.input))
            self.estimated_sum += event.estimated_input
            self.reported_sum += event.input

    def add_child(self, session: str, data: dict[str, JsonValue]) -> None:
        """A sub-agent's totals (its ``to_json``), its own children flattened in."""
        nested = data.get("agents")
        if isinstance(nested, dict):
            for name, value in nested.items():
                if isinstance(value, dict):
                    self.children[str(name)] = value
        own = {k: v for k, v in data.items() if k != "agents"}
        self.children[session] = own

    # --- figures ----------------------------------------------------------------------

    def usage(self, *, with_children: bool = True) -> dict[str, int]:
        out = dict(self.tokens)
        if with_children:
            for child in self.children.values():  # every descendant, flattened: own figures
                usage = child.get("own_usage")
                if isinstance(usage, dict):
                    for name in USAGE_FIELDS:
                        out[name] += get_int(usage, name)
        return out

    def cost_usd(self, *, with_children: bool = True) -> Decimal | None:
        """USD spent (None when no call had a price)."""
        total = self.cost if self.priced_calls else None
        if with_children:
            for child in self.children.values():
                value = child.get("own_cost_usd")
                if value is not None:
                    total = (total or Decimal(0)) + Decimal(str(value))
        return total

    def all_unpriced(self) -> list[str]:
        names = set(self.unpriced)
        for child in self.children.values():
            names.update(str(n) for n in get_array(child, "unpriced"))
        return sorted(names)

    def tokens_spent(self) -> int:
        """Input plus output tokens, sub-agents included (what a token budget counts)."""
        usage = self.usage()
        return usage["input"] + usage["output"]

    def calibration(self) -> dict[str, JsonValue]:
        """ctxline's count of each request against the provider's input (for calibration).

        ``mean_error`` is the mean of ``(estimated - reported) / reported``.
        """
        if not self.estimates:
            return {
                "n": 0,
                "estimated": 0,
                "reported": 0,
                "mean_error": None,
                "max_abs_error": None,
            }
        errors = [(e - r) / r for e, r in self.estimates]
        return {
            "n": len(errors),
            "estimated": self.estimated_sum,
            "reported": self.reported_sum,
            "mean_error": round(math.fsum(errors) / len(errors), 4),
            "max_abs_error": round(max(abs(x) for x in errors), 4),
        }

    def to_json(self, **more: Any) -> dict[str, JsonValue]:
        """Own figures (``own_*``), totals with the children, and the children by session."""
        own_cost = self.cost if self.priced_calls else None
        total = self.cost_usd()
        return {
            **more,
            "model_calls": self.calls,
            "usage": self.usage(),
            "own_usage": self.usage(with_children=False),
            "own_cost_usd": None if own_cost is None else str(own_cost),
            "cost_usd": None if total is None else str(total),
            "unpriced": self.all_unpriced(),
            "latency_ms": self.latency_ms,
            "agents": dict(self.children),
        }
