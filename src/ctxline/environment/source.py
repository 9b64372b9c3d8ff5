"""The environment as a context source: its fold, its block each step, its actions as tools.

:class:`EnvFold` folds the record: the local slots (``slot`` events), the last snapshot
of the block, and what earlier requests logged under ``meta.environment`` — the block's
hash, the placement decided and when, the blackboard versions the view showed (the base
of the next write), the history growth per step. So a fresh process plans exactly what
a long-running one plans.

:class:`EnvironmentSource` does, each step:

1. record the expiry of every local slot whose TTL ran out (a ``slot`` ``expire`` event
   in the step's one atomic append);
2. read the blackboard, if there is one;
3. render ``<ctx-env>`` (resident and pinned slots, constraints, the on-demand list,
   locked actions) and the optional discardable block, capped at ``budget_share`` of the
   input limit (:mod:`~ctxline.environment.block`);
4. place it (:mod:`~ctxline.environment.placement`): in the tail, or — when it changed —
   appended to history as a ``slot`` ``snapshot`` event; ``auto`` decides at the first
   step of each user turn from the record (the block's size, how often it changed, the
   history growth), so the placement does not flip inside a turn;
5. log the decision, the block's tokens and cap, what the cap cut and the board
   versions shown, under the request's ``inputs.meta.environment``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

from ctxline.environment.actions import check_problem
from ctxline.environment.block import EnvBlocks, LastAction, render_blocks
from ctxline.environment.placement import decide_placement
from ctxline.environment.slots import SlotFold, SlotValue
from ctxline.environment.state import EnvState
from ctxline.record.events import (
    AssistantMessage,
    Event,
    JsonValue,
    RequestHeader,
    Slot,
    StoredEvent,
    ToolResult,
    UserMessage,
)
from ctxline.record.jsonvalue import JsonObject
from ctxline.sources.base import BaseSource, Block, SourceStep, StepContext, TailItem
from ctxline.sources.guide import MessageKind
from ctxline.sources.slots import ENV_KIND
from ctxline.sources.status import shown_arguments
from ctxline.tools.base import Tool

if TYPE_CHECKING:
    from ctxline.environment.env import Environment

__all__ = ["ENV_KIND", "BoardRead", "EnvFold", "EnvironmentSource", "environment_meta"]

DISCARDABLE_PRIORITY = -10
GROWTH_WINDOW = 20
WARMUP_STEPS = 5
"""``auto`` keeps the tail until this many steps show how often the block changes."""
REDECIDE_STEPS = 10
"""``auto`` decides again at a new user turn, or after this many steps of one turn."""


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]



@dataclass(frozen=True, slots=True)
class BoardRead:
    """What a step shows of the shared blackboard: its values, and the ``board`` meta
    (name, head, versions) the request logs."""

    values: Mapping[str, SlotValue]
    meta: dict[str, JsonValue]

class EnvFold:
    """The environment's fold over one timeline (see the module docstring)."""

    def __init__(self, name: str, actions: frozenset[str] = frozenset()) -> None:
        self.name = name
        self.actions = actions
        """The environment's action names: their latest call is the block's ``last action``."""
        self.calls: dict[str, tuple[str, str]] = {}
        self.last_action: LastAction | None = None
        self.slots = SlotFold()
        self.snapshot: str | None = None
        self.snapshot_seq = 0
        self.turn_seq = 0
        self.steps = 0
        self.changes = 0
        self.last_sha: str | None = None
        self.placement: Literal["tail", "append"] | None = None
        self.decision: dict[str, JsonValue] | None = None
        self.decided_turn: int | None = None
        self.decided_step = 0
        self.board_seen: dict[str, int] = {}
        self.growth: list[int] = []
        self._history: int | None = None

    def feed(self, stored: StoredEvent) -> Sequence[MessageKind]:
        event = stored.event
        if isinstance(event, Slot):
            if event.op == "snapshot":
                if event.name == self.name and isinstance(event.value, str):
                    self.snapshot, self.snapshot_seq = event.value, stored.seq
            else:
                self.slots.feed(stored)
        elif isinstance(event, UserMessage):
            self.turn_seq = stored.seq
        elif isinstance(event, AssistantMessage):
            for call in event.tool_calls:
                if call.name in self.actions:
                    self.calls[call.id] = (call.name, shown_arguments(call))
        elif isinstance(event, ToolResult):
            called = self.calls.pop(event.call_id, None)
            if called is not None:
                lines = event.content.strip().splitlines()
                self.last_action = LastAction(*called, event.is_error, lines[0] if lines else "")
        elif isinstance(event, RequestHeader):
            self._logged(event)
        return ()

    def _logged(self, header: RequestHeader) -> None:
        tokens = header.report_field("tokens")
        history = tokens.get("history") if isinstance(tokens, dict) else None
        if isinstance(history, int):
            if self._history is not None and history >= self._history:
                self.growth.append(history - self._history)
                del self.growth[:-GROWTH_WINDOW]
            self._history = history
        meta = header.inputs.get("meta")
        mine = meta.get(self.name) if isinstance(meta, dict) else None
        if not isinstance(mine, dict):
            return
        self.steps += 1
        sha = mine.get("sha")
        if isinstance(sha, str):
            if self.last_sha is not None and sha != self.last_sha:
                self.changes += 1
            self.last_sha = sha
        placement = mine.get("placement")
        if placement in ("tail", "append"):
            self.placement = "append" if placement == "append" else "tail"
        decision = mine.get("decision")
        self.decision = decision if isinstance(decision, dict) else self.decision
        turn = mine.get("decided_turn")
        if isinstance(turn, int) and "decision" in mine and mine.get("decided_now"):
            self.decided_step = self.steps
        self.decided_turn = turn if isinstance(turn, int) else self.decided_turn
        board = mine.get("board")
        versions = board.get("versions") if isinstance(board, dict) else None
        if isinstance(versions, dict):
            self.board_seen = {str(k): int(v) for k, v in versions.items() if isinstance(v, int)}


class EnvironmentSource(BaseSource):
    """An :class:`~ctxline.environment.Environment` as a source (see the module docstring)."""

    def __init__(self, env: Environment) -> None:
        self.env = env
        self.name = env.name

    def kinds(self) -> Sequence[MessageKind]:
        return (ENV_KIND,)

    def fold(self) -> EnvFold:
        return EnvFold(self.name, frozenset(self.env.actions))

    # snapshots render through the history source ctxline.sources.slots (every view does)

    def tools(self) -> Sequence[Tool]:
        return self.env.tools()

    def reaffirm(self, fold: EnvFold) -> Sequence[Block]:
        # the tail restates everything every step; a snapshot cut away by a compaction is restated
        if fold.placement == "append" and fold.snapshot is not None:
            return (Block("ctx-env", fold.snapshot),)
        return ()

    # --- a step -----------------------------------------------------------------------

    def prefetch(self) -> BoardRead | None:
        """The shared blackboard as the step will show it, read before the step (which reads
        no store); None without a board."""
        board = self.env.board
        if board is None:
            return None
        values = dict(board.refresh())
        versions: JsonObject = {n: board.get(n).version for n in self.env.shared}
        return BoardRead(values, {"name": board.name, "head": board.head, "versions": versions})

    def step(self, fold: EnvFold, ctx: StepContext) -> SourceStep:
        env = self.env
        events: list[Event] = []
        local = dict(fold.slots.values)
        for spec in env.specs.values():
            slot = local.get(spec.name)
            if (
                spec.ttl is None
                or spec.shared
                or slot is None
                or slot.expired
                or slot.value is None
            ):
                continue
            if slot.updated_at is not None and slot.updated_at + spec.ttl <= ctx.now:
                ttl = spec.ttl.total_seconds()
                events.append(Slot(spec.name, "expire", meta={"by": "ctxline", "ttl_s": ttl}))
                local[spec.name] = replace(slot, expired=True, by="ctxline", updated_at=ctx.now)
        meta: dict[str, JsonValue] = {}
        board_values: Mapping[str, SlotValue] = {}
        if env.board is not None:
            got = ctx.prefetched.get(self.name)
            read = got if isinstance(got, BoardRead) else self.prefetch()  # a caller that did not
            assert read is not None
            board_values = read.values
            meta["board"] = read.meta
        state = EnvState(env.specs, {**local, **{n: board_values[n] for n in env.shared if n in board_values}},
                         now=ctx.now, role=env.role)  # fmt: skip
        locked = []
        for action in env.actions.values():
            unlock = action.unlock
            if unlock is None or (action.roles and env.role not in action.roles):
                continue
            if check_problem(unlock, state, {}) is not None:
                locked.append((action.name, unlock.fix or unlock.rule))
        cap = max(int(ctx.options.input_limit * env.budget_share), 1)
        blocks = render_blocks(
            list(env.specs.values()),
            state,
            locked,
            count=ctx.counter.count,
            cap=cap,
            last_action=fold.last_action,
        )
        placement, decision, decided, now = self._placement(fold, blocks, ctx)
        budget = blocks.meta()
        budget["share"] = env.budget_share
        meta.update(placement=placement, sha=_sha(blocks.resident), budget=budget)
        if decision is not None:
            meta["decision"] = decision
        if decided is not None:
            meta["decided_turn"] = decided
        if now:
            meta["decided_now"] = True
        tail: list[TailItem] = []
        if blocks.resident:
            if placement == "tail":
                tail.append(TailItem(self.name, blocks.resident))
            elif _body(blocks.resident) != fold.snapshot:
                events.append(
                    Slot(self.name, "snapshot", _body(blocks.resident), {"by": "ctxline"})
                )
        if blocks.discardable:
            item = TailItem(
                f"{self.name}/discardable", blocks.discardable, False, DISCARDABLE_PRIORITY
            )
            tail.append(item)
        return SourceStep(events=tuple(events), tail=tuple(tail), meta=meta)

    def _placement(
        self, fold: EnvFold, blocks: EnvBlocks, ctx: StepContext
    ) -> tuple[Literal["tail", "append"], dict[str, JsonValue] | None, int | None, bool]:
        mode = self.env.placement
        if mode != "auto":
            return ("append" if mode == "append" else "tail"), None, None, False
        current = fold.placement or "tail"
        fresh = (
            fold.decided_turn != fold.turn_seq or fold.steps - fold.decided_step >= REDECIDE_STEPS
        )
        if not fresh or fold.steps < WARMUP_STEPS or not blocks.resident:
            return current, fold.decision, fold.decided_turn, False
        T = float(self.env.expected_steps)
        rate = min(max(fold.changes / max(fold.steps - 1, 1), 1 / T), 1.0)
        N = rate * T
        growth = sum(fold.growth) / len(fold.growth) if fold.growth else 0.0
        decision = decide_placement(
            ctx.options.provider, S=blocks.tokens, T=T, N=N, R=growth / rate
        )
        return decision.placement, decision.to_json(), fold.turn_seq, True


def _body(rendered: str) -> str:
    """The body of a rendered ``<ctx-env>`` block (what a snapshot event keeps)."""
    start = rendered.index(">") + 1
    return rendered[start : rendered.rindex("</ctx-env>")]


def environment_meta(header: RequestHeader, name: str = "environment") -> dict[str, Any]:
    """What a logged request recorded of the environment (placement, budget, board versions)."""
    meta = header.inputs.get("meta")
    mine = meta.get(name) if isinstance(meta, dict) else None
    return dict(mine) if isinstance(mine, dict) else {}
