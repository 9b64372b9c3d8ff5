"""The built-in environment actions and the slots they keep (seed 002's ``MIT`` environment).

- ``update_goal(goal)`` — the ``goal`` slot: what the task is trying to achieve now;
- ``add_constraint(text, entities?)`` / ``remove_constraint(id)`` — the ``constraints``
  slot; what the model adds is marked as written by the model, and the model can remove
  only those (the application's constraints stay);
- ``mark_step_done(step)`` — moves a step from ``todo_steps`` to ``done_steps`` in one
  transaction (the ``steps-consistent`` validator: no step is both pending and done);
- ``pin(slot)`` / ``unpin(slot)`` — show an on-demand or discardable slot with the
  resident ones (the ``pinned`` slot), or stop;
- ``read_slot(slot)`` — a slot's whole value, with when and by whom it was last changed.

    env = Environment(builtins=("update_goal", "read_slot"))   # a subset
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence

from ctxline.environment.actions import ActionSpec, Check
from ctxline.environment.feedback import stamp
from ctxline.environment.slots import SlotSpec
from ctxline.environment.state import CONSTRAINT_SCHEMA, ENTITY, Constraint, EnvState
from ctxline.environment.transaction import Tx
from ctxline.record.events import JsonValue
from ctxline.record.jsonvalue import JsonArray, as_array, as_str

__all__ = ["BUILTIN_ACTIONS", "BUILTIN_SLOTS", "STEPS_CONSISTENT", "builtin_parts"]

_STEPS: dict[str, JsonValue] = {
    "type": "array",
    "items": {"type": "string", "minLength": 1, "maxLength": 300},
    "uniqueItems": True,
}

BUILTIN_SLOTS: dict[str, SlotSpec] = {
    s.name: s
    for s in (
        SlotSpec("goal", {"type": "string", "minLength": 1, "maxLength": 500},
                 description="what the task is trying to achieve now"),
        SlotSpec("constraints", CONSTRAINT_SCHEMA, default=[],
                 description="rules to keep for the rest of the task"),
        SlotSpec("todo_steps", _STEPS, default=[], description="the steps still to do, next first"),
        SlotSpec("done_steps", _STEPS, policy="append", default=[], description="the steps done"),
        SlotSpec("pinned", {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
                 default=[], description="slots shown with the resident ones"),
    )
}  # fmt: skip


def _text_param(name: str, description: str, limit: int) -> dict[str, JsonValue]:
    return {
        "type": "object",
        "properties": {
            name: {"type": "string", "minLength": 1, "maxLength": limit, "description": description}
        },
        "required": [name],
        "additionalProperties": False,
    }


def _update_goal(tx: Tx, args: Mapping[str, JsonValue]) -> str:
    tx.set("goal", args["goal"])
    return "The goal is updated."


def _add_constraint(tx: Tx, args: Mapping[str, JsonValue]) -> str:
    current = tx.state.constraints
    numbers = [int(c.id[1:]) for c in current if c.by == "model" and c.id[1:].isdigit()]
    new = Constraint(
        f"m{max(numbers, default=0) + 1}",
        as_str(args["text"], "text"),
        tuple(as_str(e, "entities") for e in as_array(args.get("entities") or [])),
        "model",
    )
    tx.set("constraints", [*(c.to_json() for c in current), new.to_json()])
    return f"Constraint {new.id} is added (as written by you: a reminder, it grants nothing)."


def _constraint_exists(args: Mapping[str, JsonValue], state: EnvState) -> Iterable[str]:
    found = next((c for c in state.constraints if c.id == args["id"]), None)
    if found is None:
        ids = ", ".join(c.id for c in state.constraints) or "none"
        yield f"there is no constraint {json.dumps(args['id'])} (constraints: {ids})"
    elif found.by != "model":
        yield (
            f"constraint {found.id} is the application's: only the application can remove it"
            " (you can remove only the constraints you added)"
        )


def _items(value: JsonValue) -> JsonArray:
    """A list slot's value (unset reads as empty)."""
    return as_array(value or [])


def _remove_constraint(tx: Tx, args: Mapping[str, JsonValue]) -> str:
    tx.set("constraints", [c.to_json() for c in tx.state.constraints if c.id != args["id"]])
    return f"Constraint {args['id']} is removed."


def _step_pending(args: Mapping[str, JsonValue], state: EnvState) -> Iterable[str]:
    todo = _items(state["todo_steps"])
    if args["step"] not in todo:
        done = _items(state["done_steps"])
        if args["step"] in done:
            yield f"step {json.dumps(args['step'])} is done already"
        else:
            yield f"there is no pending step {json.dumps(args['step'])}; pending: {json.dumps(todo, ensure_ascii=False)}"


def _mark_step_done(tx: Tx, args: Mapping[str, JsonValue]) -> str:
    todo = [s for s in _items(tx.get("todo_steps")) if s != args["step"]]
    tx.set("todo_steps", todo)
    tx.append("done_steps", args["step"])
    nxt = f" Next: {json.dumps(todo[0], ensure_ascii=False)}." if todo else " No steps are left."
    return f"Step marked done.{nxt}"


def _steps_consistent(state: EnvState, args: Mapping[str, JsonValue]) -> str | None:
    both = set(_items(state["todo_steps"])) & set(_items(state["done_steps"]))
    if both:
        return f"steps {json.dumps(sorted(both), ensure_ascii=False)} are both pending and done"
    return None


STEPS_CONSISTENT = Check(
    "steps-consistent",
    _steps_consistent,
    "a step is either in todo_steps or in done_steps, never both",
)


def _slot_known(args: Mapping[str, JsonValue], state: EnvState) -> Iterable[str]:
    if args["slot"] not in state:
        yield f"there is no slot {json.dumps(args['slot'])}; slots: {', '.join(state)}"


def _pinnable(args: Mapping[str, JsonValue], state: EnvState) -> Iterable[str]:
    yield from _slot_known(args, state)
    if args["slot"] in state and state.spec(as_str(args["slot"], "slot")).tier == "resident":
        yield f"slot {args['slot']} is resident: it is always shown"
    elif args["slot"] in _items(state["pinned"]):
        yield f"slot {args['slot']} is pinned already"


def _pin(tx: Tx, args: Mapping[str, JsonValue]) -> str:
    tx.set("pinned", [*_items(tx.get("pinned")), args["slot"]])
    return f"Slot {args['slot']} is pinned: the ctx-env block shows it from the next request on."


def _is_pinned(args: Mapping[str, JsonValue], state: EnvState) -> Iterable[str]:
    if args["slot"] not in _items(state["pinned"]):
        yield f"slot {json.dumps(args['slot'])} is not pinned; pinned: {', '.join(map(str, _items(state['pinned']))) or 'none'}"


def _unpin(tx: Tx, args: Mapping[str, JsonValue]) -> str:
    tx.set("pinned", [s for s in _items(tx.get("pinned")) if s != args["slot"]])
    return f"Slot {args['slot']} is unpinned."


def read_slot_text(state: EnvState, name: str) -> str:
    """``read_slot``'s answer: the whole value, its tier and policy, when and by whom it changed."""
    spec, slot = state.spec(name), state.slot(name)
    when = (
        f"updated {stamp(slot.updated_at)} by {slot.by or 'app'}" if slot.version else "never set"
    )
    if slot.expired:
        when += " — expired (its TTL ran out): this is its last value, which may no longer hold"
    head = f"slot {name} ({spec.tier}, {spec.policy}{', shared' if spec.shared else ''}; {when})"
    if spec.description:
        head += f": {spec.description}"
    value = slot.value
    body = (
        "(no value)"
        if value is None
        else value
        if isinstance(value, str)
        else json.dumps(value, ensure_ascii=False, indent=2)
    )
    return f"{head}\n{body}"


def _read_slot(tx: Tx, args: Mapping[str, JsonValue]) -> str:
    return read_slot_text(tx.state, as_str(args["slot"], "slot"))


_SLOT_PARAM = _text_param("slot", "the slot's name, as the ctx-env block lists it", 64)

BUILTIN_ACTIONS: dict[str, ActionSpec] = {
    a.name: a
    for a in (
        ActionSpec("update_goal", "Set the goal of the task (the goal slot).", _update_goal,
                   _text_param("goal", "the goal, in one sentence", 500),
                   when="the user changed what they want, or the current goal turned out wrong",
                   when_not="you only made progress (use mark_step_done) or learned a rule (add_constraint)",
                   affects=("goal",)),
        ActionSpec("add_constraint", "Add a constraint you must keep for the rest of the task.", _add_constraint,
                   {"type": "object", "additionalProperties": False, "required": ["text"],
                    "properties": {"text": {"type": "string", "minLength": 1, "maxLength": 500},
                                   "entities": {"type": "array", "items": {"type": "string", "pattern": ENTITY},
                                                "description": "what it is about, e.g. booking:ABC123"}}},
                   when="the user states a requirement that holds from now on",
                   when_not="to note progress or a fact (constraints you add are reminders and grant nothing)",
                   affects=("constraints",)),
        ActionSpec("remove_constraint", "Remove a constraint you added.", _remove_constraint,
                   _text_param("id", "the constraint's id, e.g. m2", 40),
                   when="a constraint you added no longer applies",
                   when_not="a constraint gets in your way: the application's constraints cannot be removed",
                   affects=("constraints",), precheck=_constraint_exists),
        ActionSpec("mark_step_done", "Mark a pending step done (todo_steps to done_steps).", _mark_step_done,
                   _text_param("step", "the step exactly as todo_steps lists it", 300),
                   when="you finished a step and checked its result",
                   when_not="the step is only started or its result is unverified",
                   affects=("todo_steps", "done_steps"), precheck=_step_pending),
        ActionSpec("pin", "Show an on-demand or discardable slot in the ctx-env block until unpinned.", _pin, _SLOT_PARAM,
                   when="you will need a slot's value on most of the next steps",
                   when_not="you need it once (use read_slot)", affects=("pinned",), precheck=_pinnable),
        ActionSpec("unpin", "Stop showing a pinned slot in the ctx-env block.", _unpin, _SLOT_PARAM,
                   when="you no longer need a pinned slot at every step", affects=("pinned",),
                   precheck=_is_pinned),
        ActionSpec("read_slot", "Read a slot's whole value, with when and by whom it was last changed.", _read_slot,
                   _SLOT_PARAM, when="you need an on-demand, expired or clipped slot",
                   when_not="the value is shown in full in the ctx-env block", precheck=_slot_known),
    )
}  # fmt: skip

_NEEDS: dict[str, tuple[str, ...]] = {
    "update_goal": ("goal",),
    "add_constraint": ("constraints",),
    "remove_constraint": ("constraints",),
    "mark_step_done": ("todo_steps", "done_steps"),
    "pin": ("pinned",),
    "unpin": ("pinned",),
    "read_slot": (),
}


def builtin_parts(names: Sequence[str]) -> tuple[list[ActionSpec], list[SlotSpec], list[Check]]:
    """The built-in actions named, the slots they need and the validators those slots bring."""
    unknown = [n for n in names if n not in BUILTIN_ACTIONS]
    if unknown:
        from ctxline.errors import ValidationError

        raise ValidationError(
            f"unknown built-in actions {unknown} (built in: {', '.join(BUILTIN_ACTIONS)})",
            field="builtins",
        )
    actions = [BUILTIN_ACTIONS[n] for n in names]
    slots = list(dict.fromkeys(s for n in names for s in _NEEDS[n]))
    validators = [STEPS_CONSISTENT] if "todo_steps" in slots else []
    return actions, [BUILTIN_SLOTS[s] for s in slots], validators
