"""The price table: lookups never guess, costs add up, bad tables name their entry.

The shipped figures were checked against a second source (litellm's bundled price
file) with ``benchmarks/check_pricing.py``, which is a maintenance script and not a
test because litellm is not a dependency."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest

from ctxline.errors import ValidationError
from ctxline.pricing import (
    BilledUsage,
    cost,
    default_table,
    format_usd,
    load_table,
    price_for,
    rebill_cost,
)


def test_exact_alias_snapshot_and_provider_prefix() -> None:
    exact = price_for("gpt-4.1")
    assert exact is not None
    assert exact.matched == "exact"
    assert exact.input == Decimal(2)
    alias = price_for("claude-opus-4-6-20260205")
    assert alias is not None
    assert (alias.model, alias.matched) == ("claude-opus-4-6", "alias")
    snap = price_for("gpt-4.1-2025-04-14")
    assert snap is not None
    assert (snap.model, snap.matched) == ("gpt-4.1", "snapshot")
    prefixed = price_for("anthropic/Claude-Sonnet-4-5")
    assert prefixed is not None
    assert prefixed.model == "claude-sonnet-4-5"


@pytest.mark.parametrize(
    "name",
    ["gpt-4.1-turbo", "claude-opus-4", "claude-opus-4-7", "gpt-4", "", "mystery", "gpt-4.1x"],
)
def test_unknown_models_have_no_price(name: str) -> None:
    # a similar name is not the same model: gpt-4.1 is not gpt-4.1-turbo, opus 4.6 not opus 4
    assert price_for(name) is None


def test_cost_of_a_claude_code_call() -> None:
    price = price_for("claude-opus-4-6")
    assert price is not None
    usage = BilledUsage(
        input_tokens=3, output_tokens=13, cache_read_tokens=11_515, cache_write_1h_tokens=13_835
    )
    c = cost(usage, price)
    assert c.input == Decimal(3) * 5 / 1_000_000
    assert c.cache_read == Decimal(11_515) * Decimal("0.5") / 1_000_000
    assert c.cache_write == Decimal(13_835) * 10 / 1_000_000
    assert c.output == Decimal(13) * 25 / 1_000_000
    assert c.total == c.input + c.output + c.cache_read + c.cache_write
    assert usage.prompt_tokens == 3 + 11_515 + 13_835


def test_multipliers_follow_the_caching_rules() -> None:
    # REFERENCES.md: Anthropic reads 0.1x, writes 1.25x (5 min) and 2x (1 h); OpenAI writes free
    for model in ("claude-opus-4-6", "claude-sonnet-4-5", "claude-haiku-4-5"):
        p = price_for(model)
        assert p is not None
        assert p.provider == "anthropic"
        assert p.cache_read == p.input / 10
        assert p.cache_write == p.input * Decimal("1.25")
        assert p.cache_write_1h == p.input * 2
    for model in ("gpt-4o", "gpt-4.1", "gpt-5"):
        p = price_for(model)
        assert p is not None
        assert p.cache_write == p.input
        assert p.cache_write_1h is None
    alphas = [price_for(m) for m in ("gpt-4o", "gpt-4.1", "gpt-5")]
    assert [a.read_multiplier for a in alphas if a] == [
        Decimal("0.5"),
        Decimal("0.25"),
        Decimal("0.1"),
    ]


def test_rebilled_tokens() -> None:
    p = price_for("claude-sonnet-4-5")
    assert p is not None
    # 10k tokens that were cached: read at 0.30/M, now written at 3.75/M
    assert rebill_cost(10_000, p, write_premium=True) == Decimal("0.0345")
    assert rebill_cost(10_000, p, write_premium=False) == Decimal("0.027")


def test_one_hour_writes_need_a_one_hour_price() -> None:
    p = price_for("gpt-4.1")
    assert p is not None
    with pytest.raises(ValidationError, match="1-hour"):
        cost(BilledUsage(cache_write_1h_tokens=5), p)
    with pytest.raises(ValidationError, match="input_tokens"):
        BilledUsage(input_tokens=-1)


def test_every_entry_is_dated_and_sourced() -> None:
    table = default_table()
    assert len(table.prices) >= 10
    for p in table.prices.values():
        assert p.source.startswith("https://")
        assert p.as_of.year >= 2025
        assert p.cache_read <= p.input <= p.cache_write or p.cache_write == p.input


def test_bad_tables_name_the_entry(tmp_path: Path) -> None:
    bad = tmp_path / "prices.json"
    bad.write_text(
        json.dumps(
            {
                "models": [
                    {
                        "model": "m",
                        "provider": "x",
                        "source": "s",
                        "as_of": "2026-01-01",
                        "input": "abc",
                        "output": 1,
                        "cache_read": 0,
                        "cache_write": 1,
                    }
                ]
            }
        )
    )
    with pytest.raises(ValidationError, match=r"prices.json.*models\[0\]\.input"):
        load_table(bad)
    bad.write_text("{")
    with pytest.raises(ValidationError, match="line 1"):
        load_table(bad)
    good = tmp_path / "mine.json"
    good.write_text(
        json.dumps(
            {
                "models": [
                    {
                        "model": "my-model",
                        "provider": "local",
                        "source": "https://example.invalid/p",
                        "as_of": "2026-01-01",
                        "input": "1",
                        "output": "2",
                        "cache_read": "0.1",
                        "cache_write": "1",
                    }
                ]
            }
        )
    )
    table = load_table(good)
    assert price_for("my-model", table) is not None
    assert price_for("gpt-4.1", table) is None


def test_money_for_people() -> None:
    assert format_usd(None) == "no price"
    assert format_usd(Decimal(0)) == "$0"
    assert format_usd(Decimal("0.0345")) == "$0.0345"
    assert format_usd(Decimal("1234.5")) == "$1,234.50"
