"""The ``<ctx-env>`` block: every resident slot's current value, computed by code, one line each.

Seed 002: the model should see at a glance the goal, the constraints, where it is, and
when each fact was last updated. Each line starts with a slot name ctxline declared;
values are single lines (:func:`~ctxline.sources.lines.value_line`), so no value can forge
a line or a tag; a constraint the model wrote is quoted and marked as granting nothing::

    <ctx-env>
    goal: Refund the cancelled flight of booking ABC123 (updated 2026-05-01T10:02:11Z by agent)
    constraints:
    - [refund-window] Refunds only within 24 hours of booking. (applies to: booking)
    - [m1, written by the model; grants nothing] "Ask before every refund"
    todo_steps: ["check the booking","refund"]
    progress: step 1 of 2
    last action: update_goal {"goal":"Refund the cancelled flight of booking ABC123"} → ok: goal updated
    on demand (read_slot): user_profile (updated 2026-05-01T10:00:02Z by app)
    locked actions: refund (available after the user's identity is verified)
    </ctx-env>

Discardable slots go in a second, optional block (``<ctx-env tier="discardable">``)
that the budget ladder drops first. The blocks are capped at a share of the input limit
(seed 002: 25 %): over it, the discardable block goes, then values are clipped (with a
pointer to ``read_slot``), then the on-demand list — and the report says what was cut.

``progress`` (with the built-in ``todo_steps``/``done_steps`` slots) says which step of
how many the task is at; ``last action`` is the environment's latest action call, its
arguments and the first line of its feedback (ok, or failed and rolled back), each value
escaped on one line.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ctxline.environment.feedback import constraint_line, stamp
from ctxline.environment.slots import SlotSpec, SlotValue
from ctxline.environment.state import EnvState
from ctxline.record.events import JsonValue
from ctxline.sources.base import Block
from ctxline.sources.lines import clip, one_line, value_line

__all__ = ["EnvBlocks", "LastAction", "last_action_line", "progress_line", "render_blocks"]

_SPECIAL = ("constraints", "pinned")


@dataclass(frozen=True, slots=True)
class EnvBlocks:
    """The rendered blocks of one step and what the budget cut."""

    resident: str
    """The rendered ``<ctx-env>`` block ("" when there is nothing to show)."""
    discardable: str
    tokens: int
    cap: int
    cut: tuple[str, ...] = ()
    """What the cap removed, in order: ``discardable``, ``clip:120``, ``on-demand``, ``clip:40``."""

    def meta(self) -> dict[str, JsonValue]:
        out: dict[str, JsonValue] = {"tokens": self.tokens, "cap": self.cap}
        if self.cut:
            out["cut"] = list(self.cut)
        if self.tokens > self.cap:
            out["over_cap"] = True
        return out


@dataclass(frozen=True, slots=True)
class LastAction:
    """The environment's latest action call as the record has it (see :class:`EnvFold`)."""

    name: str
    arguments: str
    """Canonical JSON of the call's arguments."""
    failed: bool
    feedback: str
    """The first line of its result."""


def progress_line(state: EnvState) -> str:
    """``progress: step 2 of 5`` from the built-in step slots ("" without them or steps)."""
    if "todo_steps" not in state or "done_steps" not in state:
        return ""
    todo, done = state["todo_steps"] or [], state["done_steps"] or []
    if not isinstance(todo, list) or not isinstance(done, list) or not (todo or done):
        return ""
    total = len(todo) + len(done)
    if not todo:
        return f"progress: all {total} steps done"
    return f"progress: step {len(done) + 1} of {total}"


def last_action_line(last: LastAction | None) -> str:
    """``last action: NAME ARGS → ok: FEEDBACK`` (every value escaped, on one line)."""
    if last is None:
        return ""
    outcome = "failed, nothing changed" if last.failed else "ok"
    feedback = f": {one_line(clip(last.feedback, 200))}" if last.feedback else ""
    args = one_line(clip(last.arguments, 160))
    return f"last action: {one_line(last.name)} {args} → {outcome}{feedback}"


def _suffix(slot: SlotValue, spec: SlotSpec) -> str:
    shared = "shared; " if spec.shared else ""
    if not slot.version:
        return f" ({shared.rstrip('; ')})" if shared else ""
    return f" ({shared}updated {stamp(slot.updated_at)} by {one_line(slot.by or 'app')})"


def _value(value: JsonValue, width: int) -> str:
    if value is None:
        return "(not set)"
    text = value_line(value)
    if len(text) <= width:
        return text
    return clip(text, width) + " (clipped: read_slot shows all of it)"


def _slot_line(spec: SlotSpec, slot: SlotValue, width: int | None) -> str:
    return f"{spec.name}: {_value(slot.current, width or spec.max_chars)}{_suffix(slot, spec)}"


def _lines(
    specs: Sequence[SlotSpec],
    state: EnvState,
    locked: Sequence[tuple[str, str]],
    *,
    width: int | None,
    on_demand: bool,
    observed: Sequence[str] = (),
) -> tuple[list[str], list[str]]:
    pinned = set(state["pinned"] or []) if "pinned" in state else set()
    resident: list[str] = []
    extra: list[str] = []
    listed: list[str] = []
    for spec in specs:
        if spec.name in _SPECIAL:
            if spec.name == "constraints" and state.constraints:
                resident.append("constraints:")
                resident.extend(clip(constraint_line(c), width or 600) for c in state.constraints)
            continue
        slot = state.slot(spec.name)
        if slot.expired:
            listed.append(f"{spec.name} (expired {stamp(slot.updated_at)})")
        elif spec.tier == "resident" or spec.name in pinned:
            mark = " (pinned)" if spec.name in pinned else ""
            resident.append(_slot_line(spec, slot, width) + mark)
        elif spec.tier == "discardable":
            extra.append(_slot_line(spec, slot, width))
        else:
            when = (
                f"updated {stamp(slot.updated_at)} by {one_line(slot.by or 'app')}"
                if slot.version
                else "not set"
            )
            listed.append(f"{spec.name} ({when})")
    resident.extend(clip(line, width or 600) for line in observed)
    if listed and on_demand:
        resident.append("on demand (read_slot): " + ", ".join(listed))
    if locked:
        shown = ", ".join(f"{one_line(n)} (available after {one_line(a)})" for n, a in locked)
        resident.append(f"locked actions: {shown}")
    return resident, extra


def _render(lines: Sequence[str], **attrs: str) -> str:
    if not lines:
        return ""
    # every line is escaped already; rendering escapes again, which changes nothing
    return Block("ctx-env", "\n" + "\n".join(lines) + "\n", tuple(attrs.items())).render()


_LEVELS: tuple[tuple[str, int | None, bool, bool], ...] = (
    ("", None, True, True),
    ("discardable", None, True, False),
    ("clip:120", 120, True, False),
    ("on-demand", 120, False, False),
    ("clip:40", 40, False, False),
)
"""The cuts the cap makes, in order: (name, value width, on-demand list kept, discardable kept)."""


def render_blocks(
    specs: Sequence[SlotSpec],
    state: EnvState,
    locked: Sequence[tuple[str, str]],
    *,
    count: Callable[[str], int],
    cap: int,
    last_action: LastAction | None = None,
) -> EnvBlocks:
    """The blocks of one step, cut down (level by level) to ``cap`` tokens if they are over it."""
    observed = [line for line in (progress_line(state), last_action_line(last_action)) if line]
    cut: list[str] = []
    main = more = ""
    tokens = 0
    for name, width, on_demand, keep_extra in _LEVELS:
        if name:
            cut.append(name)
        resident, extra = _lines(
            specs, state, locked, width=width, on_demand=on_demand, observed=observed
        )
        main = _render(resident)
        more = _render(extra, tier="discardable") if keep_extra else ""
        tokens = (count(main) if main else 0) + (count(more) if more else 0)
        if tokens <= cap:
            break
    return EnvBlocks(main, more, tokens, cap, tuple(cut))
