"""Staged exposure: the tools a model may call, narrowed by phase, with the tools array stable.

Why: past about ten actions a model picks among them less reliably (the report flags
it), and most tasks move through phases — look around, then change, then check — that
each need a few. Changing the tools array per phase would break the provider's cache
at its very start, so :class:`StagedTools` leaves the array as it is and tells the
provider which of its tools are callable now: OpenAI's
``tool_choice={"type": "allowed_tools", "allowed_tools": {"mode": "auto", "tools": [...]}}``.
Anthropic has no such field (its ``tool_choice`` is ``auto``, ``any``, ``tool`` or
``none``), so there every offered tool stays callable and the report says so.

The phase is the latest ``state`` event of the source ``key`` (``State("phase", "edit")``,
appended by the app), so every request can be rebuilt from the record; an unknown or
cleared phase narrows nothing. The report's ``exposure`` section lists what was allowed
and whether it was sent.

    stages = StagedTools({"explore": ["read_file", "list_dir"], "edit": ["write_file"]},
                         always=["read_result"])
    ctx = Context(store, "s", sources=[stages])
    ctx.append(State("phase", "explore"))
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ctxline.errors import ValidationError
from ctxline.record.events import State, StoredEvent
from ctxline.sources.base import BaseSource, SourceStep, StepContext
from ctxline.sources.guide import MessageKind

__all__ = ["PhaseFold", "StagedTools"]


class PhaseFold:
    """The current phase: the latest string value of the ``state`` source ``key``."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.phase: str | None = None

    def feed(self, stored: StoredEvent) -> Sequence[MessageKind]:
        event = stored.event
        if isinstance(event, State) and event.source == self.key:
            value = event.value
            self.phase = value if isinstance(value, str) and not event.cleared else None
        return ()


class StagedTools(BaseSource):
    """Allow, at each step, only the tools of the current phase (see the module docstring)."""

    def __init__(
        self,
        stages: Mapping[str, Sequence[str]],
        *,
        key: str = "phase",
        always: Sequence[str] = (),
        name: str = "stages",
    ) -> None:
        for phase, tools in stages.items():
            if isinstance(tools, str) or not all(isinstance(t, str) and t for t in tools):
                raise ValidationError(
                    f"phase {phase!r}: expected a list of tool names, got {tools!r}",
                    field=f"stages.{phase}",
                )
        self.stages = {phase: tuple(tools) for phase, tools in stages.items()}
        self.key = key
        self.always = tuple(always)
        self.name = name

    def fold(self) -> PhaseFold:
        return PhaseFold(self.key)

    def step(self, fold: PhaseFold, ctx: StepContext) -> SourceStep:
        phase = fold.phase
        if phase is None or phase not in self.stages:
            return SourceStep(meta={"phase": phase} if phase is not None else {})
        allowed = tuple(dict.fromkeys([*self.stages[phase], *self.always]))
        return SourceStep(allowed_tools=allowed, meta={"phase": phase})
