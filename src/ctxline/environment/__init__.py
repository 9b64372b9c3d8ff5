"""The context as an environment the model observes and acts on (seed 002).

Instead of a transcript the model must re-read to know where it stands, an environment
gives it typed **slots** (the goal, the constraints, the steps, the app's own state —
bookings, a profile) shown in one ``<ctx-env>`` block computed by code each step, and
**actions** to change them (``update_goal``, ``add_constraint``, ``mark_step_done``,
``pin``, ``read_slot``, and the app's business actions). Every action runs in a
**transaction**: its gates (role, phase, arguments, preconditions, pre-check), the
slot policies and schemas, then the validators on the resulting state; a failure rolls
everything back, writes nothing, and answers in words — the rule violated and how to
satisfy it. Success is one atomic append of the result and its ``slot`` events. The
constraints an action touches are restated in its result; locked actions answer
"available after …" while every schema stays offered (the cache holds); several agents
share slots through a **blackboard** with optimistic concurrency.

    from ctxline.environment import ActionSpec, Check, Constraint, Environment, SlotSpec
    from ctxline.runner import Agent

    env = Environment(
        [SlotSpec("bookings", {"type": "object"}, policy="read-only")],
        [refund],                      # an ActionSpec with a precheck and a perform
        validators=[no_double_refund],
        constraints=[Constraint("refund-window", "Refunds only within 24 h of booking.", ("booking",))],
    )
    agent = Agent(model, environment=env)

See ``docs/environment.md``.
"""

from ctxline.environment.actions import (
    NO_PARAMETERS,
    ActionSpec,
    Check,
    allowed_tools_choice,
)
from ctxline.environment.block import EnvBlocks, render_blocks
from ctxline.environment.board import Blackboard
from ctxline.environment.builtin import BUILTIN_ACTIONS, BUILTIN_SLOTS, STEPS_CONSISTENT
from ctxline.environment.env import APP, Environment, Rejected
from ctxline.environment.placement import PlacementDecision, decide_placement
from ctxline.environment.slots import POLICIES, TIERS, SlotSpec, SlotValue
from ctxline.environment.source import ENV_KIND, EnvFold, EnvironmentSource, environment_meta
from ctxline.environment.state import Constraint, EnvState, UnknownSlot
from ctxline.environment.transaction import Outcome, Rollback, Tx

__all__ = [
    "APP",
    "BUILTIN_ACTIONS",
    "BUILTIN_SLOTS",
    "ENV_KIND",
    "NO_PARAMETERS",
    "POLICIES",
    "STEPS_CONSISTENT",
    "TIERS",
    "ActionSpec",
    "Blackboard",
    "Check",
    "Constraint",
    "EnvBlocks",
    "EnvFold",
    "EnvState",
    "Environment",
    "EnvironmentSource",
    "Outcome",
    "PlacementDecision",
    "Rejected",
    "Rollback",
    "SlotSpec",
    "SlotValue",
    "Tx",
    "UnknownSlot",
    "allowed_tools_choice",
    "decide_placement",
    "environment_meta",
    "render_blocks",
]
