"""``Environment``: slots, actions and validators declared once; a source and tools for a Context.

The facade of :mod:`ctxline.environment`. It declares the slots (the built-in ones its
built-in actions need, and the app's), the actions, the environment's validators, the
initial constraints, the role the agent acts as, and optionally a shared
:class:`~ctxline.environment.board.Blackboard`. It gives:

- :attr:`source`, the context source to hand to a Context (``Agent(environment=env)``
  does it): the ``<ctx-env>`` block each step and the actions as ctxline's own tools;
- :meth:`call` / :meth:`turn`: answer model calls (one transaction each, or one for all
  calls of a turn) without appending — the runner appends each result with its ``slot``
  events in one append;
- :meth:`apply`, :meth:`set`, :meth:`add_items`, :meth:`clear`: the app's own changes
  (a booking loaded from the backend), checked by the same schemas and validators and
  appended in one atomic append; a violation raises :class:`Rejected` and writes nothing;
- :meth:`state`: the values that hold now.

Writes to shared slots go to the blackboard first (optimistic concurrency, see
:mod:`~ctxline.environment.board`); local ones with the result.

    env = Environment([SlotSpec("bookings", BOOKINGS)], [refund], validators=[refund_window],
                      constraints=[Constraint("refund-window", "Refunds only within 24 h.", ("booking",))])
    agent = Agent(model, environment=env)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from functools import cached_property
from typing import Any

from ctxline.environment import feedback
from ctxline.environment.actions import ActionSpec, Check
from ctxline.environment.board import Blackboard
from ctxline.environment.builtin import BUILTIN_ACTIONS, builtin_parts
from ctxline.environment.placement import PLACEMENTS, Placement
from ctxline.environment.slots import SlotSpec, SlotValue, specs_by_name
from ctxline.environment.source import EnvFold, EnvironmentSource
from ctxline.environment.state import Constraint, EnvState
from ctxline.environment.transaction import Attempt, Outcome, Staged, finish, stage
from ctxline.errors import Conflict, CtxlineError, ValidationError
from ctxline.record.events import JsonValue, Slot, StoredEvent, ToolCall
from ctxline.record.store.base import new_ulid, utc_now
from ctxline.tools.base import Tool, ToolEnv, ToolOutcome

__all__ = ["APP", "MAX_REBASES", "Environment", "Rejected"]

APP = "app"
"""The role of the application's own changes: no policy or role restricts it (schemas and
validators still do)."""

MAX_REBASES = 8
"""How often a shared write is tried again when other agents keep writing meanwhile."""


class Rejected(CtxlineError):
    """An app's change that a policy, schema or validator refused (nothing was written)."""

    def __init__(self, outcome: Outcome) -> None:
        super().__init__(outcome.content)
        self.outcome = outcome


def _app_action(
    name: str, apply: Callable[[Any, Mapping[str, Any]], None], affects: Sequence[str]
) -> ActionSpec:
    def run(tx: Any, args: Mapping[str, Any]) -> str:
        apply(tx, args)
        return "Done."

    return ActionSpec(name, "the application's change", run, affects=tuple(affects))


class Environment:
    """An agent's environment (see the module docstring)."""

    def __init__(
        self,
        slots: Sequence[SlotSpec] = (),
        actions: Sequence[ActionSpec] = (),
        validators: Sequence[Check] = (),
        *,
        builtins: bool | Sequence[str] = True,
        constraints: Sequence[Constraint] = (),
        role: str = "agent",
        name: str = "environment",
        board: Blackboard | None = None,
        shared: Sequence[str] = (),
        placement: Placement = "auto",
        budget_share: float = 0.25,
        expected_steps: int = 30,
        turn_transactions: bool = False,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        names = (
            list(BUILTIN_ACTIONS)
            if builtins is True
            else []
            if builtins is False
            else list(builtins)
        )
        b_actions, b_slots, b_checks = builtin_parts(names)
        own = specs_by_name(slots)
        merged = {
            s.name: own.pop(s.name, s) for s in b_slots
        }  # the app may redeclare a built-in slot
        merged.update(own)
        if constraints:
            if "constraints" not in merged:
                raise ValidationError(
                    "constraints need the built-in constraints slot", field="constraints"
                )
            if any(c.by != "app" for c in constraints):
                raise ValidationError("an app's constraint has by='app'", field="constraints")
            initial: list[JsonValue] = [c.to_json() for c in constraints]
            merged["constraints"] = replace(merged["constraints"], default=initial)
        for slot_name in shared:
            if slot_name not in merged:
                raise ValidationError(f"shared slot {slot_name!r} is not declared", field="shared")
            if merged[slot_name].ttl is not None:
                raise ValidationError(
                    f"shared slot {slot_name!r} has a TTL: not supported", field="shared"
                )
            merged[slot_name] = replace(merged[slot_name], shared=True)
        if any(s.shared for s in merged.values()) and board is None:
            raise ValidationError("shared slots need a board=Blackboard(...)", field="board")
        self.specs: dict[str, SlotSpec] = merged
        self.shared = tuple(n for n, s in merged.items() if s.shared)
        self.actions: dict[str, ActionSpec] = {}
        for action in [*b_actions, *actions]:
            self._declare(action)
        self.validators: tuple[Check, ...] = (*b_checks, *validators)
        if placement not in PLACEMENTS:
            raise ValidationError(
                f"placement must be one of {', '.join(PLACEMENTS)}", field="placement"
            )
        if not 0 < budget_share <= 1:
            raise ValidationError(
                f"budget_share must be in (0, 1], got {budget_share!r}", field="budget_share"
            )
        if expected_steps < 1:
            raise ValidationError("expected_steps must be >= 1", field="expected_steps")
        self.role, self.name, self.board = role, name, board
        self.placement: Placement = placement
        self.budget_share, self.expected_steps = budget_share, expected_steps
        self.turn_transactions = turn_transactions
        self.clock = clock

    def _declare(self, action: ActionSpec) -> None:
        if action.name in self.actions:
            raise ValidationError(f"two actions are named {action.name!r}", field="actions")
        for slot_name in action.affects:
            spec = self.specs.get(slot_name)
            if spec is None:
                raise ValidationError(
                    f"action {action.name!r} affects undeclared slot {slot_name!r}", field="actions"
                )
            if spec.policy == "read-only":
                raise ValidationError(
                    f"action {action.name!r} affects {slot_name!r}, which is read-only (the app sets it)",
                    field="actions",
                )
            if spec.shared and action.perform is not None:
                raise ValidationError(
                    f"action {action.name!r} has a side effect and writes shared slot {slot_name!r}:"
                    " write the board from an action of its own",
                    field="actions",
                )
        self.actions[action.name] = action

    def with_role(self, role: str, *, board: Blackboard | None = None) -> Environment:
        """The same declarations, acting as ``role`` — for another agent, with its own
        ``board`` object when the slots are shared (one Blackboard per agent)."""
        other = object.__new__(Environment)
        cached = ("source", "_tools")
        other.__dict__.update({k: v for k, v in self.__dict__.items() if k not in cached})
        other.role = role
        if board is not None:
            other.board = board
        return other

    # --- the source and the tools -------------------------------------------------------

    @cached_property
    def source(self) -> EnvironmentSource:
        return EnvironmentSource(self)

    @cached_property
    def _tools(self) -> tuple[Tool, ...]:
        return tuple(Tool(a.tool_spec(), self._handler) for a in self.actions.values())

    def tools(self) -> tuple[Tool, ...]:
        """The actions as ctxline's own tools (schemas built once: they never change)."""
        return self._tools

    def owns(self, tool_name: str) -> bool:
        return tool_name in self.actions

    def _handler(self, call: ToolCall, env: ToolEnv) -> ToolOutcome:
        return self.call(env, call)

    # --- state ------------------------------------------------------------------------

    def _fold(self, env: ToolEnv) -> EnvFold:
        fold = env.fold(self.name)
        if not isinstance(fold, EnvFold):
            raise ValidationError(
                f"environment {self.name!r} is not a source of this Context: pass "
                "sources=[env.source] (Agent(environment=env) does it)",
                field="environment",
            )
        return fold

    def _slots(self, fold: EnvFold) -> dict[str, SlotValue]:
        slots = dict(fold.slots.values)
        if self.board is not None:
            values = self.board.refresh()
            slots.update({n: values[n] for n in self.shared if n in values})
        return slots

    def state(self, env: ToolEnv, *, now: datetime | None = None) -> EnvState:
        """The values that hold now (the blackboard read fresh)."""
        return EnvState(
            self.specs, self._slots(self._fold(env)), now=now or self.clock(), role=self.role
        )

    # --- model calls ------------------------------------------------------------------

    def call(self, env: ToolEnv, call: ToolCall) -> ToolOutcome:
        """Answer one call to an action as one transaction (nothing appended to ``env``)."""
        return self.turn(env, [call])[0]

    def turn(self, env: ToolEnv, calls: Sequence[ToolCall]) -> list[ToolOutcome]:
        """Answer ``calls`` as ONE transaction: all apply, or none (nothing appended to ``env``)."""
        attempts = [Attempt(c.id, c.name, self.actions.get(c.name), c.arguments) for c in calls]
        outcomes = self._run(self._fold(env), attempts, env_session(env), self.role)
        return [ToolOutcome(o.content, o.is_error, tuple(o.events)) for o in outcomes]

    def _run(
        self, fold: EnvFold, attempts: Sequence[Attempt], session: str, role: str
    ) -> list[Outcome]:
        seen = dict(fold.board_seen)
        meta: dict[str, JsonValue] = {"tx": new_ulid()}
        for _ in range(MAX_REBASES):
            staged = stage(
                self.specs, self._slots(fold), attempts, validators=self.validators,
                now=self.clock(), role=role, meta=meta, actions=list(self.actions),
            )  # fmt: skip
            if isinstance(staged, list):
                return staged
            shared = [e for e in staged.events if self.specs[e.name].shared]
            if not shared:
                return finish(staged)
            assert self.board is not None
            stale = self.board.stale((e.name for e in shared), seen)
            if stale:
                if not all(self.specs[n].commutative for n in stale):
                    return self._conflict(attempts, stale)
                seen.update({n: self.board.get(n).version for n in stale})  # rebase on the latest
                continue
            try:
                stored = self.board.append(shared, author=f"{role}@{session}")
            except Conflict:
                continue  # another agent wrote meanwhile: read again, check again
            return self._committed(staged, stored)
        text = (
            f"Not done: the shared blackboard {self.board.name if self.board else ''} kept changing"
            f" while this write was tried {MAX_REBASES} times; nothing was written. Try again."
        )
        return [Outcome(text, "conflict") for _ in attempts]

    def _conflict(self, attempts: Sequence[Attempt], stale: Sequence[str]) -> list[Outcome]:
        assert self.board is not None
        details = []
        for slot_name in stale:
            slot = self.board.get(slot_name)
            details.append((slot_name, slot.by, slot.updated_at, slot.value))
        text = feedback.conflict(details, self.board.name)
        return [Outcome(text, "conflict", rule="blackboard-conflict") for _ in attempts]

    def _committed(self, staged: Staged, stored: Sequence[StoredEvent]) -> list[Outcome]:
        assert self.board is not None
        outcomes = finish(staged)
        note = (
            f"Written to the shared blackboard {self.board.name} (version {stored[-1].seq}): "
            + ", ".join(dict.fromkeys(s.event.name for s in stored if isinstance(s.event, Slot)))
            + "."
        )
        out = []
        for o in outcomes:
            local = tuple(e for e in o.events if not self.specs[e.name].shared)
            shared = len(local) != len(o.events)
            out.append(
                replace(o, events=local, content=f"{o.content}\n{note}" if shared else o.content)
            )
        return out

    # --- the app's own changes -------------------------------------------------------

    def apply(
        self, ctx: Any, action: str, arguments: Mapping[str, Any] | None = None
    ) -> ToolOutcome:
        """Run an action for the app (not the model): its events appended in one append."""
        outcome = self.turn(ctx, [ToolCall("", action, dict(arguments or {}))])[0]
        if outcome.events:
            ctx.append(*outcome.events)
        return outcome

    def change(
        self,
        ctx: Any,
        name: str,
        affects: Sequence[str],
        apply: Callable[[Any, Mapping[str, Any]], None],
    ) -> list[StoredEvent]:
        """Stage ``apply(tx, {})`` as the app (any policy) and append it; :class:`Rejected` if a
        schema or validator refuses it (nothing written)."""
        app = _app_action(name, apply, affects)
        attempt = Attempt("", name, app, {})
        outcome = self._run(self._fold(ctx), [attempt], env_session(ctx), APP)[0]
        if outcome.is_error:
            raise Rejected(outcome)
        stored: list[StoredEvent] = ctx.append(*outcome.events) if outcome.events else []
        return stored

    def set(self, ctx: Any, name: str, value: JsonValue) -> list[StoredEvent]:
        """Set a slot as the app (read-only ones too), checked and appended atomically."""
        return self.change(ctx, "app_set", (name,), lambda tx, _: tx.set(name, value))

    def add_items(self, ctx: Any, name: str, *items: JsonValue) -> list[StoredEvent]:
        """Append items to a slot as the app (checked, appended atomically)."""
        return self.change(ctx, "app_append", (name,), lambda tx, _: tx.append(name, *items))

    def clear(self, ctx: Any, name: str) -> list[StoredEvent]:
        """Clear a slot as the app (checked, appended atomically)."""
        return self.change(ctx, "app_clear", (name,), lambda tx, _: tx.clear(name))


def env_session(env: Any) -> str:
    """The session of the Context an action runs in (for the board's ``author``)."""
    return str(getattr(env, "session", "") or "")
