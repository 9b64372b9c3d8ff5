"""The status bar as a source: where ``<ctx-status>`` goes each step, and the time context.

Seeds 001 and 004. The status bar is computed by code from the record
(:class:`~ctxline.sources.status.StatusFold`) and goes where the strategy says:

- ``replace``: as the tail — the last user-role message, replaced on every step;
- ``append``: persisted into history as a ``status`` event, so earlier ones stay cached;
- ``auto``: seed 001's cost model (:func:`~ctxline.cost.decide_for_provider`) picks one
  from the provider's cached-read price, the status size S, the history growth per
  step R and the expected number of steps N — decided at the start of each turn, so
  the mode does not flip inside a turn.

Every input of that decision comes from the record: R from the history tokens logged in
earlier request headers, the last decision and the last time reading from their inputs.
So a fresh process decides exactly what a long-running worker decides.

    Context(store, "s", status=StatusConfig(time=TimeConfig("Europe/Berlin")), status_mode="auto")
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from ctxline.cost import StrategyDecision, cache_pricing, choose_strategy
from ctxline.errors import ValidationError
from ctxline.record.events import Event, JsonValue, RequestHeader, StatusSnapshot, StoredEvent
from ctxline.sources.base import BaseSource, SourceStep, StepContext, TailItem
from ctxline.sources.guide import MessageKind
from ctxline.sources.status import STATUS_KIND, StatusConfig, StatusFold, says_nothing
from ctxline.sources.timectx import TIME_KIND, TimeReading, reading_from_fold, render_time

__all__ = [
    "STATUS_MODES",
    "StatusMode",
    "StatusSource",
    "StatusSourceFold",
    "parse_status_mode",
]

StatusMode = Literal["replace", "append", "auto", "off"]
STATUS_MODES: tuple[StatusMode, ...] = ("replace", "append", "auto", "off")
GROWTH_WINDOW = 20
"""How many recent steps' history growth R is averaged over."""


def parse_status_mode(value: str) -> StatusMode:
    """``value`` as a status mode; a clear error for anything else."""
    for mode in STATUS_MODES:
        if value == mode:
            return mode
    raise ValidationError(
        f"status must be one of {', '.join(STATUS_MODES)}; got {value!r}", field="status"
    )


class StatusSourceFold:
    """The status fold, plus what earlier requests logged (growth, decision, time reading)."""

    def __init__(self, config: StatusConfig) -> None:
        self.status = StatusFold(config)
        self.growth: list[int] = []
        self.last_history: int | None = None
        self.reading: TimeReading | None = None
        self.strategy: Literal["replace", "append"] | None = None
        self.decision: dict[str, JsonValue] | None = None
        self.decided_turn: int | None = None

    def feed(self, stored: StoredEvent) -> Sequence[MessageKind]:
        self.status.feed(stored)
        event = stored.event
        if isinstance(event, RequestHeader):
            self._logged(event)
        return ()

    def _logged(self, header: RequestHeader) -> None:
        tokens = header.report_field("tokens")
        history = tokens.get("history") if isinstance(tokens, dict) else None
        if isinstance(history, int):
            if self.last_history is not None and history >= self.last_history:
                self.growth.append(history - self.last_history)
                del self.growth[:-GROWTH_WINDOW]
            self.last_history = history
        meta = header.inputs.get("meta")
        status = meta.get("status") if isinstance(meta, dict) else None
        if not isinstance(status, dict):
            return
        strategy = status.get("strategy")
        if strategy in ("replace", "append"):
            self.strategy = "append" if strategy == "append" else "replace"
        decision = status.get("decision")
        self.decision = decision if isinstance(decision, dict) else self.decision
        turn = status.get("decided_turn")
        self.decided_turn = turn if isinstance(turn, int) else self.decided_turn
        time = status.get("time")
        if isinstance(time, dict):
            try:
                self.reading = TimeReading.from_json(time)
            except ValidationError:
                self.reading = None


class StatusSource(BaseSource):
    """The ``<ctx-status>`` block of each step, placed by ``mode`` (see the module docstring)."""

    name = "status"

    def __init__(
        self, config: StatusConfig, mode: StatusMode = "auto", *, expected_steps: int = 30
    ) -> None:
        if mode not in STATUS_MODES or mode == "off":
            raise ValidationError(
                f"status must be one of replace, append, auto; got {mode!r}", field="status"
            )
        self.config = config
        self.mode = mode
        self.expected_steps = expected_steps

    def kinds(self) -> Sequence[MessageKind]:
        time = self.config.time  # an appended status leaves the clock to a <ctx-time> block
        own = time is not None and (time.placement == "system" or self.mode != "replace")
        return (STATUS_KIND, TIME_KIND) if own else (STATUS_KIND,)

    def fold(self) -> StatusSourceFold:
        return StatusSourceFold(self.config)

    def history(self, event: Event) -> None:
        return None  # a StatusSnapshot is ctxline's own kind: the view renders it

    def step(self, fold: StatusSourceFold, ctx: StepContext) -> SourceStep:
        status, time_cfg = fold.status, self.config.time
        reading = None
        if time_cfg is not None:
            reading = reading_from_fold(status.turn, ctx.now, time_cfg, fold.reading)
        in_system = time_cfg is not None and time_cfg.placement == "system"
        body = status.body(time_reading=None if in_system else reading, at=ctx.now)
        strategy, decision, decided = self._strategy(fold, body, ctx)
        meta: dict[str, JsonValue] = {"strategy": strategy}
        if reading is not None:
            meta["time"] = reading.to_json()
        if decision is not None:
            meta["decision"] = decision
        if decided is not None:
            meta["decided_turn"] = decided
        system = render_time(reading) if in_system and reading is not None else ""
        if strategy == "append":
            # appended snapshots stay in history: the clock goes to the tail, so only the
            # newest reading is in the request, never one per snapshot
            clock: tuple[TailItem, ...] = ()
            if reading is not None and not in_system:
                body = status.body(time_reading=None, at=ctx.now)
                clock = (TailItem("time", render_time(reading)),)
            events = () if says_nothing(body) else (StatusSnapshot(body),)
            return SourceStep(events=events, tail=clock, system=system, meta=meta)
        if says_nothing(body):  # a status with nothing to say is not sent
            return SourceStep(system=system, meta=meta)
        block = TailItem("status", f"<ctx-status>{body}</ctx-status>")
        return SourceStep(tail=(block,), system=system, meta=meta)

    def _strategy(
        self, fold: StatusSourceFold, body: str, ctx: StepContext
    ) -> tuple[Literal["replace", "append"], dict[str, JsonValue] | None, int | None]:
        if self.mode != "auto":
            return ("append" if self.mode == "append" else "replace"), None, None
        turn = fold.status.turn.turn_seq
        strategy = fold.strategy or "replace"
        if fold.decided_turn == turn or not fold.growth:
            return strategy, fold.decision, fold.decided_turn
        opts = ctx.options  # alpha and w as the budget takes them: the model's price, the options
        pricing = cache_pricing(
            opts.provider, opts.model, read=opts.cache_read, write=opts.cache_write
        )
        decision: StrategyDecision = choose_strategy(
            pricing.alpha,
            S=ctx.counter.count(f"<ctx-status>{body}</ctx-status>"),
            R=max(sum(fold.growth) / len(fold.growth), 1.0),
            N=self.expected_steps,
            write_premium=pricing.write_premium,
        )
        decision.inputs["provider"] = opts.provider
        return decision.strategy, decision.to_json(), turn
