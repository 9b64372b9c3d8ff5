"""Model prices, and what a call (or a cache break) cost: one small, dated table.

Why: "the cache broke" only matters in money, and the money depends on the model:
Anthropic bills a cached read at 0.1× the input price and a cache write at 1.25× (the
5-minute cache) or 2× (the 1-hour cache); OpenAI reads cached tokens at a per-model
discount (0.5× on GPT-4o, 0.25× on GPT-4.1, 0.1× on GPT-5) and charges nothing extra
to write (``../shared/REFERENCES.md``, "Prompt caching rules"). The table is
``ctxline/data/pricing.json``: per model, USD per million tokens for input, output,
cache read and cache write, with the date each entry was transcribed and its source
URL. Lookups accept the exact name, an alias, a dated snapshot of a known name
(``claude-sonnet-4-5-20250929``) and a provider prefix (``openai/gpt-4.1``); any other
name has **no price** — never a guess from a similar name.

    >>> price = price_for("claude-sonnet-4-5-20250929")
    >>> price.model, price.input
    ('claude-sonnet-4-5', Decimal('3'))
    >>> cost(BilledUsage(input_tokens=1_000, cache_read_tokens=100_000), price).total
    Decimal('0.033')
    >>> price_for("gpt-4.1-turbo-preview") is None
    True
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from decimal import Decimal, InvalidOperation
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Literal

from ctxline.errors import ValidationError

__all__ = [
    "MILLION",
    "BilledUsage",
    "Cost",
    "ModelPrice",
    "PriceTable",
    "cost",
    "default_table",
    "format_usd",
    "load_table",
    "parse_table",
    "price_for",
    "rebill_cost",
]

MILLION = Decimal(1_000_000)

Match = Literal["exact", "alias", "snapshot"]

_SNAPSHOT = re.compile(r"-(?:\d{8}|\d{4}-\d{2}-\d{2}|latest)$")
"""A dated snapshot (or ``-latest``) of a known model name."""
_PROVIDER_PREFIX = re.compile(r"^(?:openai|anthropic)[/:]")


@dataclass(frozen=True, slots=True)
class ModelPrice:
    """USD per million tokens for one model, and where the figures come from."""

    model: str
    """The table's name for it (the canonical name, not the one looked up)."""
    provider: str
    input: Decimal
    output: Decimal
    cache_read: Decimal
    cache_write: Decimal
    """An input token written to the cache (Anthropic's 5-minute cache; = input on OpenAI)."""
    cache_write_1h: Decimal | None
    """Anthropic's 1-hour cache write; None where the provider has none."""
    as_of: date
    source: str
    matched: Match = "exact"
    """How the looked-up name was found: the name, an alias, or a dated snapshot of it."""

    @property
    def read_multiplier(self) -> Decimal:
        """Cached-read price / input price (the α of seed 001's cost model)."""
        return self.cache_read / self.input if self.input else Decimal(0)


@dataclass(frozen=True, slots=True)
class BilledUsage:
    """Tokens of one model call, as providers report them (no token in two fields).

    ``input_tokens`` are the uncached input tokens (Anthropic's ``input_tokens``; on
    OpenAI, ``prompt_tokens - cached_tokens``).
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    """Written to the 5-minute cache (or to a cache that costs nothing extra)."""
    cache_write_1h_tokens: int = 0

    def __post_init__(self) -> None:
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValidationError(f"expected a count >= 0, got {value!r}", field=name)

    @property
    def prompt_tokens(self) -> int:
        """Every input token of the call, cached or not."""
        return (
            self.input_tokens
            + self.cache_read_tokens
            + self.cache_write_tokens
            + self.cache_write_1h_tokens
        )


@dataclass(frozen=True, slots=True)
class Cost:
    """USD of one call, by what was billed."""

    input: Decimal
    output: Decimal
    cache_read: Decimal
    cache_write: Decimal

    @property
    def total(self) -> Decimal:
        return self.input + self.output + self.cache_read + self.cache_write


@dataclass(frozen=True, slots=True)
class PriceTable:
    """Prices by canonical name, and the aliases that point at them."""

    prices: Mapping[str, ModelPrice]
    aliases: Mapping[str, str]

    def lookup(self, model: str) -> ModelPrice | None:
        """The price of ``model``, or None when the table does not know it (see the module doc)."""
        name = _PROVIDER_PREFIX.sub("", model.strip().lower())
        found = self._find(name)
        if found is not None:
            return found
        if _SNAPSHOT.search(name):
            base = self._find(_SNAPSHOT.sub("", name))
            if base is not None:
                return _with_match(base, "snapshot")
        return None

    def _find(self, name: str) -> ModelPrice | None:
        if name in self.prices:
            return self.prices[name]
        target = self.aliases.get(name)
        return None if target is None else _with_match(self.prices[target], "alias")


def _with_match(price: ModelPrice, matched: Match) -> ModelPrice:
    return ModelPrice(
        price.model,
        price.provider,
        price.input,
        price.output,
        price.cache_read,
        price.cache_write,
        price.cache_write_1h,
        price.as_of,
        price.source,
        matched,
    )


def _decimal(
    entry: Mapping[str, object], key: str, where: str, *, optional: bool = False
) -> Decimal | None:
    value = entry.get(key)
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValidationError(
            f"expected a price in USD per million tokens, got {value!r}", field=f"{where}.{key}"
        )
    try:
        out = Decimal(str(value))
    except InvalidOperation:
        raise ValidationError(f"not a number: {value!r}", field=f"{where}.{key}") from None
    if not out.is_finite() or out < 0:
        raise ValidationError(f"expected a price >= 0, got {value!r}", field=f"{where}.{key}")
    return out


def _text(entry: Mapping[str, object], key: str, where: str) -> str:
    value = entry.get(key)
    if not isinstance(value, str) or not value.strip():
        raise ValidationError("required string is missing", field=f"{where}.{key}")
    return value


def _required(entry: Mapping[str, object], key: str, where: str) -> Decimal:
    value = _decimal(entry, key, where)
    if value is None:
        raise ValidationError("required price is missing", field=f"{where}.{key}")
    return value


def _entry(entry: object, where: str) -> tuple[ModelPrice, Sequence[str]]:
    if not isinstance(entry, dict):
        raise ValidationError("expected an object", field=where)
    model, provider, source = (_text(entry, k, where) for k in ("model", "provider", "source"))
    try:
        as_of = date.fromisoformat(str(entry.get("as_of")))
    except ValueError:
        raise ValidationError(
            f"expected a date YYYY-MM-DD, got {entry.get('as_of')!r}", field=f"{where}.as_of"
        ) from None
    aliases = entry.get("aliases", [])
    if not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases):
        raise ValidationError("expected a list of names", field=f"{where}.aliases")
    input_, output, read, write = (
        _required(entry, k, where) for k in ("input", "output", "cache_read", "cache_write")
    )
    price = ModelPrice(
        model.strip().lower(),
        provider,
        input_,
        output,
        read,
        write,
        _decimal(entry, "cache_write_1h", where, optional=True),
        as_of,
        source,
    )
    return price, [a.strip().lower() for a in aliases]


def parse_table(data: object, source: str) -> PriceTable:
    """A table from the decoded JSON of ``pricing.json``'s format; names the bad entry."""
    if not isinstance(data, dict) or not isinstance(data.get("models"), list):
        raise ValidationError(
            "expected an object with a list of models", source=source, field="models"
        )
    prices: dict[str, ModelPrice] = {}
    aliases: dict[str, str] = {}
    for i, raw in enumerate(data["models"]):
        try:
            price, names = _entry(raw, f"models[{i}]")
        except ValidationError as exc:
            raise exc.located(source=source) from None
        for name in (price.model, *names):
            if name in prices or name in aliases:
                raise ValidationError(
                    f"model {name!r} is listed twice", source=source, field=f"models[{i}]"
                )
        prices[price.model] = price
        aliases.update((name, price.model) for name in names)
    return PriceTable(prices, aliases)


def load_table(path: str | Path) -> PriceTable:
    """A price table from a JSON file in the format of ``ctxline/data/pricing.json``."""
    try:
        data = json.loads(Path(path).read_text("utf-8"))
    except json.JSONDecodeError as exc:
        raise ValidationError(
            f"not valid JSON ({exc.msg})", source=str(path), line=exc.lineno
        ) from None
    return parse_table(data, str(path))


@cache
def default_table() -> PriceTable:
    """The table shipped with ctxline (read once)."""
    text = resources.files("ctxline").joinpath("data/pricing.json").read_text("utf-8")
    return parse_table(json.loads(text), "ctxline/data/pricing.json")


def price_for(model: str, table: PriceTable | None = None) -> ModelPrice | None:
    """The price of ``model`` (see the module doc for how names match), or None: no price."""
    return (table or default_table()).lookup(model)


def cost(usage: BilledUsage, price: ModelPrice) -> Cost:
    """What ``usage`` cost at ``price``. 1-hour cache writes without a 1-hour price raise."""
    write_1h = Decimal(0)
    if usage.cache_write_1h_tokens:
        if price.cache_write_1h is None:
            raise ValidationError(
                f"{price.model} has no 1-hour cache price, but the usage has 1-hour writes",
                field="cache_write_1h_tokens",
            )
        write_1h = usage.cache_write_1h_tokens * price.cache_write_1h
    return Cost(
        input=usage.input_tokens * price.input / MILLION,
        output=usage.output_tokens * price.output / MILLION,
        cache_read=usage.cache_read_tokens * price.cache_read / MILLION,
        cache_write=(usage.cache_write_tokens * price.cache_write + write_1h) / MILLION,
    )


def rebill_cost(tokens: int, price: ModelPrice, *, write_premium: bool) -> Decimal:
    """The extra USD of ``tokens`` that were cached and had to be processed again.

    They would have been read at ``cache_read``; instead they cost the cache-write price
    (``write_premium``: the request writes the cache, as Anthropic's ``cache_control``
    does) or the plain input price (OpenAI's automatic cache).
    """
    paid = price.cache_write if write_premium else price.input
    return tokens * (paid - price.cache_read) / MILLION


def format_usd(amount: Decimal | None) -> str:
    """Money for people: ``$0.0123``, ``$12.34``; ``no price`` for None."""
    if amount is None:
        return "no price"
    if amount == 0:
        return "$0"
    if abs(amount) >= 1:
        return f"${amount:,.2f}"
    return f"${amount:.4f}" if abs(amount) >= Decimal("0.0001") else f"${amount:.2e}"
