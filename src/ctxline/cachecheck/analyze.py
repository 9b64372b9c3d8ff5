"""Where another agent's prompt cache missed, why, and what each miss cost.

Per call: the tokens read from the cache, written to it and sent uncached. A call
*expects* to read what the call before it left in the cache (that call's cache read
plus its cache write); reading less is a **miss**, and the tokens lost were written
again (billed at the write price instead of the read price). Every miss, and the
first call of a log (a cold start), gets one cause from :data:`CAUSES`, checked in
this order:

``cold-start``, ``model``, ``compaction`` (a compact boundary since the call before),
``expired`` (idle past the cache's lifetime), ``new-turn`` (a new user turn after
turns with thinking: Anthropic's API drops earlier turns' thinking blocks, so the
messages after the system prompt no longer match), ``system-or-tools`` (nothing read
at all, not even the system prompt: it or the tools changed; neither is in the log),
then from the blocks the calls were sent: ``timestamp`` (the first differing block
differs only in a date or time), ``reorder``, ``history`` (a block before the end
changed: a rewind or an edit); else ``outside-log`` (the log's history extends the
previous call's, so what changed is not recorded).

    report = check_file(Path("session.jsonl"))
    [(row.call, row.cause) for row in report.rows if row.status != "hit"]
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from ctxline.cachecheck.claude import Call, ContentBlock, read_calls
from ctxline.pricing import MILLION, ModelPrice, PriceTable, cost, price_for

__all__ = ["CAUSES", "CacheReport", "CallRow", "check_calls", "check_file"]

CAUSES: dict[str, str] = {
    "cold-start": "the first call in this log: nothing earlier to reuse",
    "model": "the model changed (each model has its own cache)",
    "compaction": "a compaction replaced the history with a summary",
    "expired": "idle longer than the cache lives (5 minutes; 1 hour for 1-hour writes)",
    "new-turn": "a new user turn after turns with thinking: the API drops earlier thinking blocks, "
    "so the messages after the system prompt changed",
    "system-or-tools": "nothing was read, not even the system prompt: the system prompt or the tools "
    "changed (neither is in the log)",
    "timestamp": "a block differs only in a date or time",
    "reorder": "the same blocks were sent in another order",
    "history": "an earlier block changed (a rewind or an edit)",
    "outside-log": "the logged history extends the previous call: what changed is not in the log",
}
"""Every miss gets one of these causes."""

TTL_5M, TTL_1H = 300, 3600
_TIME = re.compile(
    r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?|\b\d{1,2}:\d{2}(?::\d{2})?\b"
)


@dataclass(frozen=True, slots=True)
class CallRow:
    call: int
    line: int
    at: str
    model: str
    uncached: int
    cache_read: int
    cache_write: int
    cache_write_1h: int
    output: int
    expected_read: int
    status: str
    """``hit``, ``miss`` or ``cold`` (the first call)."""
    lost: int
    """Tokens the call expected to read from the cache but wrote again."""
    cause: str
    first_difference: str
    """The first block that differs from the call before ('' when the log shows none)."""
    gap_s: float | None
    cost: Decimal | None
    miss_cost: Decimal | None

    @property
    def prompt(self) -> int:
        return self.uncached + self.cache_read + self.cache_write + self.cache_write_1h

    def to_json(self) -> dict[str, Any]:
        return {
            "call": self.call,
            "line": self.line,
            "at": self.at,
            "model": self.model,
            "uncached": self.uncached,
            "cache_read": self.cache_read,
            "cache_write": self.cache_write,
            "cache_write_1h": self.cache_write_1h,
            "output": self.output,
            "expected_read": self.expected_read,
            "status": self.status,
            "lost": self.lost,
            "cause": self.cause,
            "reason": CAUSES.get(self.cause, ""),
            "first_difference": self.first_difference,
            "gap_s": self.gap_s,
            "cost_usd": None if self.cost is None else str(self.cost),
            "miss_cost_usd": None if self.miss_cost is None else str(self.miss_cost),
        }


@dataclass(frozen=True, slots=True)
class CacheReport:
    source: str
    rows: tuple[CallRow, ...]
    unpriced: tuple[str, ...]

    @property
    def misses(self) -> list[CallRow]:
        return [r for r in self.rows if r.status != "hit"]

    @property
    def hit_rate(self) -> float:
        prompt = sum(r.prompt for r in self.rows)
        return sum(r.cache_read for r in self.rows) / prompt if prompt else 0.0

    def total(self, name: str) -> Decimal | None:
        values = [getattr(r, name) for r in self.rows]
        return None if any(v is None for v in values) else sum(values, Decimal(0))

    def to_json(self) -> dict[str, Any]:
        costs = {k: self.total(k) for k in ("cost", "miss_cost")}
        return {
            "source": self.source,
            "calls": len(self.rows),
            "misses": len(self.misses),
            "hit_rate": round(self.hit_rate, 4),
            "cost_usd": None if costs["cost"] is None else str(costs["cost"]),
            "miss_cost_usd": None if costs["miss_cost"] is None else str(costs["miss_cost"]),
            "unpriced_models": list(self.unpriced),
            "causes": CAUSES,
            "rows": [r.to_json() for r in self.rows],
        }


def _first_difference(before: Sequence[ContentBlock], now: Sequence[ContentBlock]) -> int | None:
    for i, block in enumerate(before):
        if i >= len(now) or now[i].digest != block.digest:
            return i
    return None


def _history_cause(prev: Call, cur: Call) -> tuple[str, str]:
    at = _first_difference(prev.blocks, cur.blocks)
    if at is None:
        ran = f"between the calls the user ran {', '.join(cur.commands)}" if cur.commands else ""
        return "outside-log", ran
    old = prev.blocks[at]
    new = cur.blocks[at] if at < len(cur.blocks) else None
    where = f"block {at}: {old.describe()}"
    if (
        new is not None
        and old.type == new.type
        and _TIME.sub("#", old.text) == _TIME.sub("#", new.text)
    ):
        return "timestamp", where
    rest_old = sorted(b.digest for b in prev.blocks[at:])
    rest_new = sorted(b.digest for b in cur.blocks[at : len(prev.blocks)])
    if rest_old == rest_new:
        return "reorder", where
    return "history", where


def _cause(prev: Call, cur: Call, gap: float | None) -> tuple[str, str]:
    if prev.model != cur.model:
        return "model", ""
    if cur.compacted:
        return "compaction", ""
    ttl = (
        TTL_1H if prev.usage.cache_write_1h_tokens and not prev.usage.cache_write_tokens else TTL_5M
    )
    if gap is not None and gap > ttl:
        return "expired", f"idle {gap / 60:.0f} min"
    if gap is not None and gap > TTL_5M and cur.usage.cache_read_tokens == 0:
        return (
            "expired",
            f"idle {gap / 60:.0f} min (the system prompt's breakpoint lives 5 minutes)",
        )
    if cur.new_turn and cur.thinking_before and cur.usage.cache_read_tokens > 0:
        first = next((i for i, b in enumerate(prev.blocks) if b.type == "thinking"), None)
        return (
            "new-turn",
            "" if first is None else f"block {first}: {prev.blocks[first].describe()}",
        )
    if cur.usage.cache_read_tokens == 0:
        return "system-or-tools", ""
    return _history_cause(prev, cur)


def _price(
    model: str, table: PriceTable | None, memo: dict[str, ModelPrice | None]
) -> ModelPrice | None:
    if model not in memo:
        memo[model] = price_for(model, table)
    return memo[model]


def check_calls(calls: Sequence[Call], source: str, table: PriceTable | None = None) -> CacheReport:
    """The cache report of ``calls`` (one transcript's, in order)."""
    rows: list[CallRow] = []
    prices: dict[str, ModelPrice | None] = {}
    for k, cur in enumerate(calls):
        u = cur.usage
        prev = calls[k - 1] if k else None
        gap = None
        if prev is not None and prev.at is not None and cur.at is not None:
            gap = (cur.at - prev.at).total_seconds()
        expected = (
            prev.usage.cache_read_tokens
            + prev.usage.cache_write_tokens
            + prev.usage.cache_write_1h_tokens
            if prev
            else 0
        )
        if prev is None:
            status, cause, where = "cold", "cold-start", ""
        elif u.cache_read_tokens < expected:
            status = "miss"
            cause, where = _cause(prev, cur, gap)
        else:
            status, cause, where = "hit", "", ""
        lost = max(expected - u.cache_read_tokens, 0) if status == "miss" else 0
        price = _price(cur.model, table, prices)
        call_cost = miss_cost = None
        if price is not None and (price.cache_write_1h is not None or not u.cache_write_1h_tokens):
            call_cost = cost(u, price).total
            written = u.cache_write_tokens + u.cache_write_1h_tokens
            write_price = (
                price.cache_write_1h
                if u.cache_write_1h_tokens and price.cache_write_1h is not None
                else price.cache_write
            )
            share = Decimal(
                min(lost, written)
            )  # the lost tokens were written again (or sent uncached)
            miss_cost = (
                share * (write_price - price.cache_read) / MILLION
                if status == "miss"
                else Decimal(0)
            )
        rows.append(
            CallRow(
                cur.index,
                cur.line,
                cur.at.isoformat(timespec="seconds") if cur.at else "",
                cur.model,
                u.input_tokens,
                u.cache_read_tokens,
                u.cache_write_tokens,
                u.cache_write_1h_tokens,
                u.output_tokens,
                expected,
                status,
                lost,
                cause,
                where,
                gap,
                call_cost,
                miss_cost,
            )
        )
    unpriced = tuple(sorted(m for m, p in prices.items() if p is None))
    return CacheReport(source, tuple(rows), unpriced)


def check_file(path: Path, table: PriceTable | None = None) -> CacheReport:
    """The cache report of one Claude Code transcript."""
    return check_calls(read_calls(path), str(path), table)
