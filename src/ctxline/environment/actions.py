"""Environment actions: what the model may do to its workspace, declared once (seed 002).

An :class:`ActionSpec` is the seed's ``EnvironmentAction``: a name, a description that
says when to use it and when not to, a parameter schema, the slots it affects, the
roles allowed to call it and its preconditions — plus what the seed's later chapters
add: an optional ``unlock`` check (staged exposure: the action is offered from the first
request and refused with "available after …" until it passes, so the tool schemas never
change), validators of the resulting state, a ``precheck`` over (arguments, state) that
runs before anything, the argument → entity map that links constraints, and for a
business action ``perform``, the side effect, run only once everything validated.

``apply(tx, args)`` stages changes on a :class:`~ctxline.environment.transaction.Tx` and
returns the result text; it never touches the world. A :class:`Check` is a rule name,
a test over (state, arguments) — None or True when it holds, False or a sentence saying
what is wrong when it does not — and how to satisfy it.

    refund = ActionSpec(
        "refund", "Refund a booking to its original payment method.", apply_refund,
        parameters={"type": "object", "properties": {"booking_id": {"type": "string"}},
                    "required": ["booking_id"], "additionalProperties": False},
        when="the user asked for a refund and the booking is eligible",
        when_not="the user only asks what a refund would be",
        affects=("bookings",), entities={"booking_id": "booking"},
        precheck=booking_exists, unlock=identity_verified, perform=payments.refund,
    )
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ctxline.environment.slots import _validator, schema_problem
from ctxline.environment.state import EnvState
from ctxline.errors import ValidationError
from ctxline.record.events import JsonValue
from ctxline.record.jsonvalue import get_object
from ctxline.render.neutral import ToolSpec

if TYPE_CHECKING:
    from ctxline.environment.transaction import Tx

__all__ = [
    "NO_PARAMETERS",
    "ActionSpec",
    "Apply",
    "Check",
    "Perform",
    "Precheck",
    "allowed_tools_choice",
    "check_problem",
    "precheck_problems",
]

TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
"""What every provider accepts as a function name."""
NO_PARAMETERS: dict[str, JsonValue] = {
    "type": "object",
    "properties": {},
    "additionalProperties": False,
}

Apply = Callable[["Tx", Mapping[str, JsonValue]], "str | None"]
Precheck = Callable[[Mapping[str, JsonValue], EnvState], "Iterable[str] | str | None"]
Perform = Callable[[Mapping[str, JsonValue], EnvState], Any]


@dataclass(frozen=True)
class Check:
    """A named rule over (state, arguments) (see the module docstring)."""

    rule: str
    test: Callable[[EnvState, Mapping[str, JsonValue]], bool | str | None]
    fix: str = ""
    """How to satisfy it (the feedback says it; an ``unlock`` check's is "available after …")."""
    description: str = ""
    """What it requires, for the action's description (the rule name when empty)."""


def check_problem(check: Check, state: EnvState, args: Mapping[str, JsonValue]) -> str | None:
    """What is wrong (None when the check holds). A check that raises fails closed."""
    try:
        verdict = check.test(state, args)
    except Exception as exc:  # a broken check must not let an action through
        return f"the check could not run ({type(exc).__name__}: {exc})"
    if verdict is None or verdict is True:
        return None
    if verdict is False:
        return check.description or f"{check.rule} does not hold"
    return str(verdict)


def precheck_problems(
    precheck: Precheck | None, args: Mapping[str, JsonValue], state: EnvState
) -> list[str]:
    """The problems a pre-check found (empty: none). A pre-check that raises is a problem."""
    if precheck is None:
        return []
    try:
        found = precheck(args, state)
    except Exception as exc:
        return [f"the pre-check could not run ({type(exc).__name__}: {exc})"]
    if found is None:
        return []
    if isinstance(found, str):
        return [found] if found else []
    return [str(p) for p in found if p]


@dataclass(frozen=True)
class ActionSpec:
    """An environment or business action (see the module docstring)."""

    name: str
    description: str
    apply: Apply
    parameters: Mapping[str, JsonValue] = field(default_factory=lambda: dict(NO_PARAMETERS))
    when: str = ""
    when_not: str = ""
    affects: tuple[str, ...] = ()
    roles: tuple[str, ...] = ()
    """Roles allowed to call it (empty: every role)."""
    preconditions: tuple[Check, ...] = ()
    precheck: Precheck | None = None
    unlock: Check | None = None
    validators: tuple[Check, ...] = ()
    entities: Mapping[str, str] = field(default_factory=dict)
    """Argument name → entity kind (``{"booking_id": "booking"}``): the constraints naming
    that entity are restated in the result."""
    perform: Perform | None = None
    timeout: float = 120.0
    """Seconds ``perform`` may take; past them the call is abandoned (an error result: its
    side effect may still complete) and the run goes on."""
    _args: Any = field(init=False, repr=False, compare=False, default=None)

    def __post_init__(self) -> None:
        if not TOOL_NAME.match(self.name):
            raise ValidationError(
                f"action name {self.name!r} must be 1-64 letters, digits, '_' or '-'",
                field="actions",
            )
        if self.parameters.get("type") != "object":
            raise ValidationError(
                f"action {self.name!r}: parameters must be a JSON schema of type object",
                field=f"actions.{self.name}.parameters",
            )
        if not (isinstance(self.timeout, int | float) and self.timeout > 0):
            raise ValidationError(
                f"action {self.name!r}: timeout must be seconds > 0, got {self.timeout!r}",
                field=f"actions.{self.name}.timeout",
            )
        object.__setattr__(self, "_args", _validator(dict(self.parameters), self.name))
        props = get_object(self.parameters, "properties")
        for arg in self.entities:
            if arg not in props:
                raise ValidationError(
                    f"action {self.name!r}: entity argument {arg!r} is not a parameter",
                    field=f"actions.{self.name}.entities",
                )

    def arguments_problem(self, arguments: JsonValue) -> str | None:
        if not isinstance(arguments, dict):
            return f"the arguments must be a JSON object, got {type(arguments).__name__}"
        return schema_problem(self._args, arguments)

    def touched(self, args: Mapping[str, JsonValue]) -> set[str]:
        """The entities this call names (``booking:ABC123``)."""
        out: set[str] = set()
        for arg, kind in self.entities.items():
            value = args.get(arg)
            values = value if isinstance(value, list) else [value]
            out.update(f"{kind}:{v}" for v in values if isinstance(v, str | int) and str(v))
        return out

    def tool_spec(self) -> ToolSpec:
        """The schema the model sees: static, whatever the state (it never breaks the cache)."""
        parts = [self.description.strip()]
        if self.when:
            parts.append(f"Use it when {self.when.strip()}.")
        if self.when_not:
            parts.append(f"Do not use it when {self.when_not.strip()}.")
        needs = [c.description or c.rule for c in self.preconditions]
        if needs:
            parts.append("Requires: " + "; ".join(needs) + ".")
        if self.unlock is not None:
            parts.append(f"Available after {self.unlock.fix or self.unlock.rule}.")
        if self.roles:
            parts.append("Roles: " + ", ".join(self.roles) + ".")
        if self.affects:
            parts.append("Changes: " + ", ".join(self.affects) + ".")
        return ToolSpec(self.name, " ".join(p for p in parts if p), dict(self.parameters))


def allowed_tools_choice(names: Iterable[str], mode: str = "auto") -> dict[str, JsonValue]:
    """OpenAI's ``tool_choice`` that restricts a call to ``names`` while every schema stays in
    ``tools`` (the provider's allowed-tools mechanism; Chat Completions form)."""
    if mode not in ("auto", "required"):
        raise ValidationError(f"mode must be auto or required, got {mode!r}", field="mode")
    tools: list[JsonValue] = [{"type": "function", "function": {"name": n}} for n in names]
    return {"type": "allowed_tools", "allowed_tools": {"mode": mode, "tools": tools}}
