"""Transactions: every change an action makes is staged, validated, then written at once.

Seed 002 (4.3): state updates and action execution belong in one transaction; a failed
consistency check rolls back to the last consistent state. Here an action — or every
call of one model turn, when the environment is declared so — stages its changes on a
:class:`Tx` (a draft over the current slots). In order:

1. the gate of each call: role, ``unlock`` (its phase), the argument schema, the
   preconditions and the ``precheck`` — a problem means the call is not executed;
2. ``apply(tx, args)`` stages slot changes; each one is checked against the slot's
   policy, the action's ``affects`` and the slot's schema;
3. the validators (the environment's and each action's) run on the resulting state;
4. only then ``perform`` — a business action's side effect — runs, in call order.

Any failure in 1–3 rolls everything back: no event is produced, and every call gets
feedback naming the violated rule and how to satisfy it. Success gives the ``slot``
events for the caller to append in one atomic append with the results. A ``perform``
that raises keeps what already happened (earlier calls' side effects are recorded);
its own changes are dropped and the later calls do not run.

    outcomes = run_transaction(specs, slots, [Attempt("c1", goal_action, {"goal": "…"})],
                               validators=(), now=now, role="agent")
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Literal, NoReturn

from ctxline.environment import feedback
from ctxline.environment.actions import ActionSpec, Check, check_problem, precheck_problems
from ctxline.environment.block import strip_copied_meta
from ctxline.environment.slots import SlotSpec, SlotValue, apply_change
from ctxline.environment.state import EnvState
from ctxline.record.events import JsonValue, Slot
from ctxline.record.jsonvalue import as_object
from ctxline.tools.errors import detailed_tool_error

__all__ = [
    "Attempt",
    "Outcome",
    "PerformTimeout",
    "Rollback",
    "Staged",
    "Status",
    "Tx",
    "finish",
    "result_text",
    "run_transaction",
    "stage",
]

Status = Literal[
    "done", "refused", "locked", "invalid", "precheck", "rolled_back", "error", "conflict"
]

STAGED = -1
"""The version of a change that is staged, not yet in the record."""


class Rollback(Exception):
    """Raised inside ``apply`` (``tx.fail``) or by a failed check: the transaction ends, nothing is written."""

    def __init__(self, rule: str, problem: str, fix: str = "") -> None:
        super().__init__(f"{rule}: {problem}")
        self.rule, self.problem, self.fix = rule, problem, fix


def _uncopied(value: JsonValue) -> JsonValue:
    """A model's value without the block's notes copied along with it (see block.py)."""
    if isinstance(value, str):
        return strip_copied_meta(value)
    if isinstance(value, list):
        return [strip_copied_meta(v) if isinstance(v, str) else v for v in value]
    return value


class Tx:
    """The draft of one transaction: read the state, stage changes (see the module docstring)."""

    def __init__(
        self,
        specs: Mapping[str, SlotSpec],
        slots: Mapping[str, SlotValue],
        *,
        now: datetime,
        role: str,
        meta: Mapping[str, JsonValue] | None = None,
    ) -> None:
        self._specs = specs
        self._slots = dict(slots)
        self.now, self.role = now, role
        self.meta = dict(meta or {})
        self.events: list[Slot] = []
        self.action: ActionSpec | None = None
        self.call_id = ""

    @property
    def state(self) -> EnvState:
        """The state with the changes staged so far."""
        return EnvState(self._specs, self._slots, now=self.now, role=self.role)

    def get(self, name: str) -> JsonValue:
        return self.state[name]

    def set(self, name: str, value: JsonValue) -> None:
        self._change(Slot(name, "set", value))

    def append(self, name: str, *items: JsonValue) -> None:
        if items:
            self._change(Slot(name, "append", list(items)))

    def clear(self, name: str) -> None:
        self._change(Slot(name, "clear"))

    def fail(self, rule: str, problem: str, fix: str = "") -> NoReturn:
        """Roll the transaction back with this feedback."""
        raise Rollback(rule, problem, fix)

    def _change(self, event: Slot) -> None:
        spec = self.state.spec(event.name)
        action = self.action
        if action is not None and self.role != "app":
            if event.name not in action.affects:
                raise ValueError(
                    f"action {action.name!r} changes slot {event.name!r}, which it does not declare"
                    f" in affects {list(action.affects)}"
                )
            if spec.policy == "append" and event.op != "append":
                raise ValueError(
                    f"slot {event.name!r} is append-only: {action.name!r} may only add items"
                )
        if self.role != "app" and event.value is not None:
            event = replace(event, value=_uncopied(event.value))
        old = self._slots.get(event.name) or SlotValue(event.name, spec.default)
        new = apply_change(old, event, STAGED, self.now)
        if new.value is not None:
            problem = spec.problem(new.value)
            if problem is not None:
                raise Rollback(
                    f"the schema of slot {event.name}",
                    f"the new value does not fit: {problem}",
                    f"give {event.name} a value that fits its schema",
                )
        meta: dict[str, JsonValue] = {**self.meta, "by": self.role}
        if action is not None:
            meta["action"] = action.name
        if self.call_id:
            meta["call"] = self.call_id
        self._slots[event.name] = replace(new, by=self.role)
        self.events.append(replace(event, meta=meta))


@dataclass(frozen=True, slots=True)
class Attempt:
    """One call of a transaction: its id, the action (None: unknown name) and the arguments."""

    call_id: str
    name: str
    action: ActionSpec | None
    arguments: JsonValue = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one call gets: the result text, whether it failed, and the events to append."""

    content: str
    status: Status
    events: tuple[Slot, ...] = ()
    rule: str = ""
    """The violated rule of a rollback (for tests and logs; the content says it too)."""

    @property
    def is_error(self) -> bool:
        return self.status != "done"


def result_text(value: Any) -> str:
    """A ``perform``'s return value as text: a string as it is, anything else as JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, indent=2, default=str)


def _gate(attempt: Attempt, state: EnvState) -> Outcome | None:
    action = attempt.action
    assert action is not None
    if action.roles and state.role not in (*action.roles, "app"):
        return Outcome(feedback.not_allowed(action.name, action.roles, state.role), "refused")
    args = attempt.arguments if isinstance(attempt.arguments, dict) else {}
    if action.unlock is not None:
        problem = check_problem(action.unlock, state, args)
        if problem is not None:
            after = action.unlock.fix or action.unlock.rule
            return Outcome(
                feedback.locked(action.name, after, problem), "locked", rule=action.unlock.rule
            )
    problem = action.arguments_problem(attempt.arguments)
    if problem is not None:
        text = feedback.wrong_arguments(action.name, problem, dict(action.parameters))
        return Outcome(text, "invalid")
    found = [f"{c.rule}: {p}" for c in action.preconditions if (p := check_problem(c, state, args))]
    found += precheck_problems(action.precheck, args, state)
    if found:
        return Outcome(feedback.not_executed(action.name, found), "precheck")
    return None


def _linked(attempt: Attempt, state: EnvState) -> str:
    action = attempt.action
    if action is None or not isinstance(attempt.arguments, dict):
        return ""
    touched = action.touched(attempt.arguments)
    return feedback.linked_constraints(touched, state.linked(touched))


def _with(text: str, *extra: str) -> str:
    return "\n\n".join(p for p in (text, *extra) if p)


def _fail_all(
    attempts: Sequence[Attempt], index: int, failed: Outcome, state: EnvState
) -> list[Outcome]:
    out = []
    for i, attempt in enumerate(attempts):
        if i == index:
            out.append(replace(failed, content=_with(failed.content, _linked(attempt, state))))
        else:
            text = feedback.turn_rolled_back(
                attempts[index].name, index + 1, failed.content.split("\n")[0]
            )
            out.append(
                Outcome(_with(text, _linked(attempt, state)), "rolled_back", rule=failed.rule)
            )
    return out


def _unknown(attempt: Attempt, names: Sequence[str]) -> Outcome:
    known = ", ".join(names) or "none"
    return Outcome(
        f"Not done: there is no environment action named {attempt.name!r}. Actions: {known}.",
        "refused",
    )


@dataclass
class Staged:
    """A transaction that passed its gates and validators: its changes, before any side effect."""

    attempts: Sequence[Attempt]
    spans: list[tuple[int, int, str]]
    tx: Tx
    after: EnvState

    @property
    def events(self) -> list[Slot]:
        return self.tx.events


def stage(
    specs: Mapping[str, SlotSpec],
    slots: Mapping[str, SlotValue],
    attempts: Sequence[Attempt],
    *,
    validators: Sequence[Check] = (),
    now: datetime,
    role: str,
    meta: Mapping[str, JsonValue] | None = None,
    actions: Sequence[str] = (),
) -> Staged | list[Outcome]:
    """Steps 1-3 of the module docstring: the staged transaction, or the outcomes of its failure."""
    tx = Tx(specs, slots, now=now, role=role, meta=meta)
    before = tx.state
    spans: list[tuple[int, int, str]] = []
    for i, attempt in enumerate(attempts):
        if attempt.action is None:
            return _fail_all(attempts, i, _unknown(attempt, actions), before)
        gate = _gate(attempt, tx.state)
        if gate is not None:
            return _fail_all(attempts, i, gate, before)
        tx.action, tx.call_id = attempt.action, attempt.call_id
        start = len(tx.events)
        try:
            text = attempt.action.apply(tx, dict(as_object(attempt.arguments, "arguments")))
        except Rollback as rb:
            failed = Outcome(
                feedback.rolled_back(rb.rule, rb.problem, rb.fix), "rolled_back", rule=rb.rule
            )
            return _fail_all(attempts, i, failed, before)
        except Exception as exc:  # the app's bug, told to the model as a detailed error
            failed = Outcome(detailed_tool_error(exc, attempt.name, attempt.arguments), "error")
            return _fail_all(attempts, i, failed, before)
        spans.append((start, len(tx.events), text or ""))
    after = tx.state
    checks = [
        *validators,
        *(c for a in attempts if a.action is not None for c in a.action.validators),
    ]
    for check in checks:
        problem = check_problem(check, after, {})
        if problem is not None:
            text = feedback.rolled_back(check.rule, problem, check.fix)
            if len(attempts) > 1:
                text += "\nEvery call of this turn was rolled back with it: they apply together."
            return [
                Outcome(_with(text, _linked(a, before)), "rolled_back", rule=check.rule)
                for a in attempts
            ]
    return Staged(attempts, spans, tx, after)


def run_transaction(
    specs: Mapping[str, SlotSpec],
    slots: Mapping[str, SlotValue],
    attempts: Sequence[Attempt],
    *,
    validators: Sequence[Check] = (),
    now: datetime,
    role: str,
    meta: Mapping[str, JsonValue] | None = None,
    actions: Sequence[str] = (),
) -> list[Outcome]:
    """Run ``attempts`` as ONE transaction over ``slots`` (see the module docstring); one
    :class:`Outcome` per attempt, in order. Nothing here writes: the events are on the outcomes."""
    staged = stage(
        specs,
        slots,
        attempts,
        validators=validators,
        now=now,
        role=role,
        meta=meta,
        actions=actions,
    )
    return staged if isinstance(staged, list) else finish(staged)


def finish(staged: Staged) -> list[Outcome]:
    """Step 4: run the side effects in call order; the outcomes with their events."""
    return _perform(staged.attempts, staged.spans, staged.tx, staged.after)


class PerformTimeout(TimeoutError):
    """A ``perform`` that ran past its action's ``timeout`` (abandoned, maybe still running)."""


def _bounded(action: Any, arguments: dict[str, Any], after: EnvState) -> Any:
    """``action.perform(arguments, after)`` in a daemon thread, abandoned at ``action.timeout``
    (a hung side effect never hangs the run; issue 24)."""
    box: list[tuple[bool, Any]] = []

    def work() -> None:
        try:
            box.append((True, action.perform(arguments, after)))
        except BaseException as exc:
            box.append((False, exc))

    thread = threading.Thread(target=work, name=f"ctxline-perform-{action.name}", daemon=True)
    thread.start()
    thread.join(action.timeout)
    if not box:
        raise PerformTimeout(
            f"the side effect took longer than {action.timeout:g} s and was abandoned; it may"
            " still complete, so check its result before trying again"
        )
    ok, value = box[0]
    if not ok:
        raise value
    return value


def _perform(
    attempts: Sequence[Attempt], spans: Sequence[tuple[int, int, str]], tx: Tx, after: EnvState
) -> list[Outcome]:
    out: list[Outcome] = []
    for i, (attempt, (start, end, text)) in enumerate(zip(attempts, spans, strict=True)):
        action = attempt.action
        assert action is not None
        events = tuple(tx.events[start:end])
        if action.perform is not None:
            try:
                done = result_text(_bounded(action, dict(as_object(attempt.arguments, "arguments")), after))
            except Exception as exc:
                out.append(
                    Outcome(detailed_tool_error(exc, attempt.name, attempt.arguments), "error")
                )
                for _later in attempts[i + 1 :]:
                    reason = f"call {i + 1} ({attempt.name}) failed while it ran, so this call did not run"
                    out.append(
                        Outcome(f"Not run: {reason}. Nothing of it was changed.", "rolled_back")
                    )
                return out
            text = _with(text, done)
        out.append(
            Outcome(
                _with(text or "Done.", feedback.changed_lines(events), _linked(attempt, after)),
                "done",
                events,
            )
        )
    return out
