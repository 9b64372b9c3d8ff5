"""Limits enforced where the tool runs, never by asking the model (seeds 001 and 002).

Why: a status bar that says ``phone_call (3/3 max)`` is advice; an agent that calls a
fourth time must not reach the phone. The guards decide from the record (the
:class:`~.ledger.Ledger`), before anything runs:

- **max_calls** (per tool, from its metadata): the call past it is refused and never
  executed; the status bar shows ``N/max``;
- **repeat**: the ``repeat_limit``-th identical call in a row (same tool, same canonical
  arguments) is refused with a hint to change course;
- **repeated failure**: when the same call fails ``fail_hint_after`` times in a row, its
  error result ends with a strategy hint (seed 001: check, list, then give up and look
  for an alternative);
- **turns and budget**: the task's model calls, its tokens (input + output, sub-agents
  included) and its cost are checked before each model call; the run stops with a clear
  ``stop_reason`` instead of sending a request that would pass them (the token count
  of the next request is calibrated on the provider's reports for the earlier ones).

A refusal is an error result the model reads: what was refused, the arguments, why, and
a hint — the same layers as a detailed error, without a traceback (nothing ran).

    Limits(max_turns=20, max_tokens=200_000, repeat_limit=4, fail_hint_after=2)
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Literal

from ctxline.errors import ValidationError
from ctxline.record.events import JsonValue, ToolCall
from ctxline.runner.ledger import Ledger
from ctxline.runner.tools import ToolMeta
from ctxline.sources.status import call_key
from ctxline.view.options import PrepareOptions

__all__ = [
    "Limits",
    "Refusal",
    "RefusalKind",
    "budget_stop",
    "check_call",
    "fitted_options",
    "refusal_text",
    "strategy_hint",
]

RefusalKind = Literal["unknown_tool", "max_calls", "repeat", "denied", "invalid_event", "budget"]


@dataclass(frozen=True, slots=True)
class Limits:
    max_turns: int = 30
    """Model calls per task (the task's record counts them, so a resumed run goes on counting)."""
    max_tokens: int | None = None
    """Input + output tokens per task, sub-agents included (None: no budget)."""
    max_cost: Decimal | float | None = None
    """USD per task, sub-agents included (None: no budget; needs a priced model)."""
    tool_timeout: float = 300.0
    """Seconds a call may take when its tool sets no ``timeout``."""
    repeat_limit: int = 4
    """The N-th identical call in a row is refused (0: off)."""
    fail_hint_after: int = 2
    """The same call failing this many times in a row gets the strategy hint (0: off)."""
    max_parallel: int = 8
    """Calls of one reply that run at once."""

    def __post_init__(self) -> None:
        for name in ("max_turns", "max_parallel"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValidationError(f"expected an integer >= 1, got {value!r}", field=name)
        for name in ("repeat_limit", "fail_hint_after"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0 or value == 1:
                raise ValidationError(
                    f"expected 0 (off) or an integer >= 2, got {value!r}", field=name
                )
        if self.max_tokens is not None and self.max_tokens < 1:
            raise ValidationError(
                f"expected tokens >= 1, got {self.max_tokens!r}", field="max_tokens"
            )
        if self.max_cost is not None and not Decimal(str(self.max_cost)) > 0:
            raise ValidationError(f"expected USD > 0, got {self.max_cost!r}", field="max_cost")
        if not self.tool_timeout > 0:
            raise ValidationError(
                f"expected seconds > 0, got {self.tool_timeout!r}", field="tool_timeout"
            )


@dataclass(frozen=True, slots=True)
class Refusal:
    kind: RefusalKind
    reason: str
    hint: str


def _arguments(arguments: JsonValue) -> str:
    if isinstance(arguments, str):
        return arguments
    try:
        return json.dumps(arguments, ensure_ascii=False, indent=2, sort_keys=True, default=repr)
    except (TypeError, ValueError):
        return repr(arguments)


def refusal_text(call: ToolCall, refusal: Refusal) -> str:
    """The error result of a refused call: what, the arguments, why, and a hint."""
    return "\n\n".join(
        [
            f"Error: the call to {call.name!r} was refused and not run: {refusal.reason}",
            "Arguments:\n" + _arguments(call.arguments),
            "Hint: " + refusal.hint,
        ]
    )


def check_call(
    ledger: Ledger,
    call: ToolCall,
    meta: ToolMeta,
    limits: Limits,
    *,
    allowed_in_batch: int = 0,
    name: str | None = None,
) -> Refusal | None:
    """Whether ``call`` may run: a :class:`Refusal` when a limit forbids it.

    ``allowed_in_batch`` counts the calls of the same tool already allowed in this reply
    (they have no result in the record yet); ``name`` is the tool that runs when it is
    not ``call.name`` (``call_tool``'s inner tool: ``max_calls`` counts that one).
    """
    tool = name or call.name
    if limits.repeat_limit:
        key = call_key(call)
        streak = ledger.streak_before(call.id, key, limits.repeat_limit)
        if len(streak) + 1 >= limits.repeat_limit:
            return Refusal(
                "repeat",
                f"this is the same call {len(streak) + 1} times in a row "
                f"(the limit is {limits.repeat_limit - 1})",
                "Repeating it will not give a different result. Read the earlier results, then "
                "change the arguments, use another tool, or explain what is blocking you.",
            )
    if meta.max_calls is not None:
        ran = ledger.ran.get(tool, 0) + allowed_in_batch
        if ran >= meta.max_calls:
            return Refusal(
                "max_calls",
                f"{tool} may run {meta.max_calls} time{'s' if meta.max_calls != 1 else ''}"
                f" in this session and has run {ran} ({ran}/{meta.max_calls} max)",
                f"Do not call {tool!r} again: work with the results you have, use another "
                "tool, or tell the user the limit was reached.",
            )
    return None


def strategy_hint(ledger: Ledger, call: ToolCall, limits: Limits) -> str | None:
    """The hint for a call that just failed, when the same call failed right before it too."""
    if not limits.fail_hint_after:
        return None
    before = ledger.streak_before(call.id, call_key(call), limits.fail_hint_after)
    failed = 1
    for entry in before:
        if entry.state == "refused":
            continue
        if entry.state != "failed":
            break
        failed += 1
    if failed < limits.fail_hint_after:
        return None
    return (
        f"Strategy: this exact call has now failed {failed} times in a row. Stop retrying it. "
        "Check your assumptions first (does the path, id or name exist? list or search to find "
        "the right one), then try a different approach; if nothing works, say what blocks you."
    )


def _reported_ratio(ledger: Ledger) -> float:
    """The provider's input tokens over ctxline's count of the same requests (1.0 before
    any report)."""
    totals = ledger.totals
    return totals.reported_sum / totals.estimated_sum if totals.estimated_sum else 1.0


def fitted_options(ledger: Ledger, options: PrepareOptions) -> PrepareOptions | None:
    """``options`` with the input limit shrunk by how far the provider's counts of this
    task's earlier requests exceeded ctxline's, or None when they did not (by over 2 %).

    ctxline counts with its tokenizer (o200k unless told); a model with another one would get
    requests that fit ctxline's count and overflow the server's window (Qwen2.5's counts
    4.5–10.7 % more than o200k on the bundled sessions, docs/runner.md). The limit is
    rounded down to 64 tokens so a drifting ratio does not change it every step.
    """
    ratio = _reported_ratio(ledger)
    if ratio <= 1.02:
        return None
    limit = int(options.input_limit / ratio) // 64 * 64
    if limit <= 0:
        return None
    return replace(options, context_window=limit + options.max_output)


def budget_stop(ledger: Ledger, limits: Limits, next_input: int) -> str | None:
    """The stop reason before a model call whose request ctxline counts at ``next_input``
    tokens, or None.

    The count is scaled by what the provider reported for this task's earlier calls
    (its tokenizer is not ctxline's), so the token budget is passed by at most the
    output of the last reply.
    """
    if ledger.turns >= limits.max_turns:
        return "max_turns"
    if limits.max_tokens is not None:
        predicted = next_input
        if ledger.totals.estimated_sum and next_input:
            predicted = round(next_input * _reported_ratio(ledger))
        if ledger.totals.tokens_spent() + predicted > limits.max_tokens:
            return "max_tokens"
    if limits.max_cost is not None:
        spent = ledger.totals.cost_usd()
        if spent is not None and spent >= Decimal(str(limits.max_cost)):
            return "max_cost"
    return None
