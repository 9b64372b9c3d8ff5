"""An agent process writing a shared blackboard, for the concurrency test.

Each round: prepare a request (its view shows the board and logs the versions it saw),
wait for the other process (both have now seen the same versions), then write — the goal
(not commutative: one of the two writes must be refused) and a note (commutative: both
land, one of them rebased). Every outcome is recorded in the agent's own timeline as the
result of the model's call, and reported to the parent.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ctxline import Context
from ctxline.environment import ActionSpec, Blackboard, Environment, SlotSpec, Tx
from ctxline.record.events import AssistantMessage, ToolCall, UserMessage
from ctxline.record.jsonvalue import JsonObject, JsonValue
from ctxline.record.store import SQLiteStore

__all__ = ["NOTES", "board_env", "worker"]

NOTES = SlotSpec("notes", {"type": "array"}, policy="append", default=[], commutative=True)


def board_env(store: SQLiteStore, role: str) -> Environment:
    def note(tx: Tx, args: Mapping[str, JsonValue]) -> str:
        tx.append("notes", args["text"])
        return "Noted."

    params: JsonObject = {
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
        "additionalProperties": False,
    }
    return Environment(
        [NOTES],
        [ActionSpec("add_note", "Add a note for the team.", note, params, affects=("notes",))],
        builtins=("update_goal", "read_slot"),
        board=Blackboard(store, "team"),
        shared=("goal", "notes"),
        role=role,
        placement="tail",
    )


def worker(db: str, role: str, rounds: int, barrier: Any, out: Any) -> None:
    store = SQLiteStore(db, check=False, busy_timeout_ms=30_000)
    try:
        env = board_env(store, role)
        ctx = Context(store, role, sources=[env.source])
        ctx.append(UserMessage("Work with the other agent on the plan."))
        report = []
        for n in range(rounds):
            ctx.prepare()
            barrier.wait(timeout=60)
            turn: tuple[tuple[str, JsonObject], ...] = (
                ("update_goal", {"goal": f"{role} plan {n}"}),
                ("add_note", {"text": f"{role} note {n}"}),
            )
            for name, args in turn:
                call = ToolCall(f"{role}-{name}-{n}", name, args)
                ctx.append(AssistantMessage("", (call,)))
                outcome = env.call(ctx, call)
                ctx.record_outcome(call, outcome)
                report.append(
                    {"call": call.id, "error": outcome.is_error, "content": outcome.content}
                )
            barrier.wait(timeout=60)
        out.put((role, report))
    finally:
        store.close()
