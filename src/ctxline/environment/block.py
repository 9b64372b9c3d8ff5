"""The ``<ctx-env>`` block: every resident slot's current value, computed by code, one line each.

Seed 002: the model should see at a glance the goal, the constraints, where it is, and
when each fact was last updated. Each line starts with a slot name ctxline declared;
values are single lines (:func:`~ctxline.sources.lines.value_line`), so no value can forge
a line or a tag; a constraint the model wrote is quoted and marked as granting nothing.
What ctxline says *about* a value (when and by whom it changed, shared, pinned, clipped)
goes between the slot's name and the colon, never after the value: a model that copies
the value back copies only the value (a model once grew its goal by one
``(updated …Z by agent)`` per write). :func:`strip_copied_meta` removes such a copy from
a model's write all the same::

    <ctx-env>
    goal (updated 2026-05-01T10:02:11Z by agent): Refund the cancelled flight of booking ABC123
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

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ctxline.environment.feedback import constraint_line, stamp
from ctxline.environment.slots import SlotSpec, SlotValue
from ctxline.environment.state import EnvState
from ctxline.record.events import JsonValue
from ctxline.record.jsonvalue import as_array
from ctxline.sources.base import Block
from ctxline.sources.lines import clip, one_line, value_line

__all__ = [
    "EnvBlocks",
    "LastAction",
    "last_action_line",
    "progress_line",
    "render_blocks",
    "strip_copied_meta",
]

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


def _notes(slot: SlotValue, spec: SlotSpec, *extra: str) -> str:
    """What the line says about the value, as `` (…)`` between the name and the colon."""
    notes = ["shared"] if spec.shared else []
    if slot.version:
        notes.append(f"updated {stamp(slot.updated_at)} by {one_line(slot.by or 'app')}")
    notes.extend(e for e in extra if e)
    return f" ({'; '.join(notes)})" if notes else ""


_CLIPPED = "clipped: read_slot shows all of it"


def _value(value: JsonValue, width: int) -> tuple[str, str]:
    """The value as shown, and the note when it was clipped."""
    if value is None:
        return "(not set)", ""
    text = value_line(value)
    if len(text) <= width:
        return text, ""
    return clip(text, width), _CLIPPED


def _slot_line(spec: SlotSpec, slot: SlotValue, width: int | None, *, pinned: bool = False) -> str:
    text, clipped = _value(slot.current, width or spec.max_chars)
    notes = _notes(slot, spec, "pinned" if pinned else "", clipped)
    return f"{spec.name}{notes}: {text}"


_STAMP = r"(?:\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ|never)"
_NOTE = rf"(?:shared|pinned|{re.escape(_CLIPPED)}|updated {_STAMP} by [^();:]{{1,80}})"
_COPIED_SUFFIX = re.compile(rf"\s*\((?:{_NOTE})(?:; ?{_NOTE})*\)\s*$")
_COPIED_PREFIX = re.compile(
    rf"^\s*(?:[A-Za-z_][\w.-]{{0,63}})?\s*\((?:{_NOTE})(?:; ?{_NOTE})*\):\s+"
)


def strip_copied_meta(text: str) -> str:
    """``text`` without the block's notes a model copied along with a value.

    Both the notes of this block (``goal (updated …Z by agent): value``, copied whole) and
    those of earlier versions that followed the value (``value (updated …Z by agent)``,
    any number of times) are removed; other text is left as it is.

    >>> strip_copied_meta("find the file (updated 2026-05-01T10:02:11Z by agent) (pinned)")
    'find the file'
    """
    out = _COPIED_PREFIX.sub("", text, count=1)
    while True:
        shorter = _COPIED_SUFFIX.sub("", out, count=1)
        if shorter == out:
            return out if out.strip() else text
        out = shorter


def _lines(
    specs: Sequence[SlotSpec],
    state: EnvState,
    locked: Sequence[tuple[str, str]],
    *,
    width: int | None,
    on_demand: bool,
    observed: Sequence[str] = (),
) -> tuple[list[str], list[str]]:
    pinned = set(as_array(state["pinned"] or [])) if "pinned" in state else set()
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
            resident.append(_slot_line(spec, slot, width, pinned=spec.name in pinned))
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
