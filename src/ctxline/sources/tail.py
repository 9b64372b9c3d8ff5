"""The end of the request: the status bar, the time context and the app's dynamic context.

Seeds 001, 003 and 004. The status bar is computed by code from the record
(:class:`~ctxline.sources.status.StatusFold`) and goes where the strategy says:

- ``replace``: as the tail — the last user-role message, replaced on every step;
- ``append``: persisted into history as a ``status`` event, so earlier ones stay cached;
- ``auto``: seed 001's cost model (:func:`~ctxline.cost.decide_for_provider`) picks one
  from the provider's cached-read price, the status size S, the history growth per
  step R and the expected number of steps N — decided at the start of each turn, so
  the mode does not flip inside a turn.

Dynamic context is an app callback called once per request; its items are never
reused from an earlier step and never written to the record (they are in the request
log). An empty result is said explicitly.

    driver = StatusDriver(StatusConfig(time=TimeConfig("Europe/Berlin")), mode="auto")
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from ctxline.cost import Decision, decide_for_provider
from ctxline.errors import ValidationError
from ctxline.record.events import JsonValue, StoredEvent
from ctxline.sources.guide import MessageKind
from ctxline.sources.status import StatusConfig, StatusFold
from ctxline.sources.timectx import TimeReading, reading_from_fold, render_time
from ctxline.tags import element, escape
from ctxline.tokens.counters import TokenCounter

__all__ = [
    "DYNAMIC_KIND",
    "NO_APP_STATE",
    "DynamicItem",
    "DynamicSource",
    "StatusDriver",
    "StatusStep",
    "render_dynamic",
]

StatusMode = Literal["replace", "append", "auto", "off"]
STATUS_MODES = ("replace", "append", "auto", "off")
NO_APP_STATE = "no app state provided this step"

DYNAMIC_KIND = MessageKind(
    "ctx-dynamic",
    "state the app provides for this request only (id names the item)",
    "It is current now; it is not kept in history and is given again when it still applies.",
)


@dataclass(frozen=True, slots=True)
class DynamicItem:
    id: str
    text: str
    required: bool = False
    priority: int = 0
    """Higher is kept longer; optional items go lowest priority first under pressure."""


DynamicSource = Callable[[], Sequence[DynamicItem]]


def render_dynamic(items: Sequence[DynamicItem]) -> str:
    if not items:
        return element("ctx-dynamic", NO_APP_STATE)
    return "\n".join(element("ctx-dynamic", escape(item.text), id=item.id) for item in items)


@dataclass(frozen=True, slots=True)
class StatusStep:
    block: str
    strategy: Literal["replace", "append"]
    reading: TimeReading | None
    decision: Decision | None
    system_time: str

    def meta(self) -> dict[str, JsonValue]:
        out: dict[str, JsonValue] = {"strategy": self.strategy}
        if self.reading is not None:
            out["time"] = self.reading.to_json()
        if self.decision is not None:
            out["decision"] = self.decision.to_json()
        return out


class StatusDriver:
    """The status bar of one timeline across steps (fold, last time reading, strategy)."""

    def __init__(
        self,
        config: StatusConfig,
        mode: str = "auto",
        *,
        provider: str = "openai",
        expected_steps: int = 30,
    ) -> None:
        if mode not in STATUS_MODES:
            raise ValidationError(
                f"status must be one of {', '.join(STATUS_MODES)}; got {mode!r}", field="status"
            )
        self.config = config
        self.mode = mode
        self.provider = provider
        self.expected_steps = expected_steps
        self.fold = StatusFold(config)
        self.reading: TimeReading | None = None
        self._strategy: Literal["replace", "append"] = "replace" if mode != "append" else "append"
        self._decided_turn: int | None = None
        self._decision: Decision | None = None
        self._growth: list[int] = []
        self._last_history: int | None = None

    def observe(self, history_tokens: int) -> None:
        """The history size of the request just prepared (R is measured from these)."""
        if self._last_history is not None and history_tokens >= self._last_history:
            self._growth.append(history_tokens - self._last_history)
            del self._growth[:-20]
        self._last_history = history_tokens

    def step(
        self, events: Sequence[StoredEvent], now: datetime, counter: TokenCounter
    ) -> StatusStep:
        self.fold.update(events)
        time_cfg = self.config.time
        reading = None
        if time_cfg is not None:
            reading = reading_from_fold(self.fold.turn, now, time_cfg, self.reading)
            self.reading = reading
        in_system = time_cfg is not None and time_cfg.placement == "system"
        block = self.fold.render(time_reading=None if in_system else reading)
        system_time = render_time(reading) if in_system and reading is not None else ""
        if self.mode == "auto" and self._decided_turn != self.fold.turn.turn_seq and self._growth:
            size = counter.count(block)
            growth = sum(self._growth) / len(self._growth)
            self._decision = decide_for_provider(
                self.provider, S=size, R=max(growth, 1.0), N=self.expected_steps
            )
            self._strategy = self._decision.strategy
            self._decided_turn = self.fold.turn.turn_seq
        return StatusStep(block, self._strategy, reading, self._decision, system_time)
