"""What a step and a run return: plain values, and the JSON ``ctxline run --json`` prints.

``stop_reason`` is one of :data:`STOP_REASONS`:

- ``final``: the model answered without tool calls (and no job was running);
- ``max_turns`` / ``max_tokens`` / ``max_cost``: a limit of :class:`~.guards.Limits`;
- ``stop_condition``: the app's ``stop_when`` said so;
- ``context_overflow``: protected content alone exceeds the input limit;
- ``compaction_failed``: the last-resort compaction failed or saved too little;
- ``model_error``: the model call failed (``error`` says how);
- ``running``: the task has not stopped (a step-level caller asked early).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal

from ctxline.models.base import ModelReply
from ctxline.record.events import Event, JsonValue, ToolResult

__all__ = ["STOP_REASONS", "RunResult", "StepResult"]

STOP_REASONS = (
    "final",
    "max_turns",
    "max_tokens",
    "max_cost",
    "stop_condition",
    "context_overflow",
    "compaction_failed",
    "model_error",
    "running",
)


@dataclass(frozen=True, slots=True)
class StepResult:
    """One step: the model's reply, the results of its calls, the notifications drained."""

    turn: int
    reply: ModelReply | None = None
    results: tuple[ToolResult, ...] = ()
    notifications: tuple[Event, ...] = ()
    done: bool = False
    stop_reason: str = ""
    error: str = ""


@dataclass(frozen=True, slots=True)
class RunResult:
    """A run's outcome; every figure covers the whole task as the record holds it."""

    session: str
    final: str
    stop_reason: str
    turns: int
    tool_calls: int
    usage: Mapping[str, int]
    """input (cached included), cache_read, cache_write, output — sub-agents included."""
    cost_usd: Decimal | None
    unpriced: tuple[str, ...] = ()
    agents: Mapping[str, Mapping[str, JsonValue]] = field(default_factory=dict)
    """Per sub-agent session: its own usage, cost, turns, stop reason."""
    calibration: Mapping[str, JsonValue] = field(default_factory=dict)
    """ctxline's count of each request against the provider's reported input."""
    error: str = ""
    resumed: bool = False
    own: Mapping[str, JsonValue] = field(default_factory=dict)
    """This agent's own figures (what a parent records for it)."""

    def to_json(self) -> dict[str, JsonValue]:
        return {
            "session": self.session,
            "final": self.final,
            "stop_reason": self.stop_reason,
            "turns": self.turns,
            "tool_calls": self.tool_calls,
            "usage": dict(self.usage),
            "cost_usd": None if self.cost_usd is None else str(self.cost_usd),
            "unpriced": list(self.unpriced),
            "agents": {k: dict(v) for k, v in self.agents.items()},
            "calibration": dict(self.calibration),
            "error": self.error,
            "resumed": self.resumed,
        }
