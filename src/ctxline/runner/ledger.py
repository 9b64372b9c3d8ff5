"""The runner's fold of the record: everything a run decides from, and nothing else.

Why: a run must resume after ``kill -9`` exactly where the record says it was, so the
runner keeps no state of its own that the record does not hold. :class:`Ledger` is fed
each stored event once (O(new events) per step) and knows:

- the task: the last user message, the model calls (turns) and tool calls since, the
  usage of those calls and of the sub-agents they spawned (:class:`~.usage.Totals`);
- per tool, how many calls ran in the session (a refused call did not run; an
  interrupted one may have, so it counts);
- the recent calls in record order, with their outcome, for the repeat and the
  repeated-failure guards;
- the calls of the last reply that have no result yet, and the jobs started without a
  completion ``notification``.

What the runner writes for itself lives in ``meta["runner"]`` of its events: ``refused``
(why a call was not run), ``job`` (a job's id), ``agent`` (a sub-agent's totals).

    ledger = Ledger()
    ledger.catch_up(ctx.events)
    ledger.open_calls()     # calls waiting for a result
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from ctxline.pricing import PriceTable
from ctxline.record.events import (
    AssistantMessage,
    JsonValue,
    ModelUsage,
    Notification,
    StoredEvent,
    ToolCall,
    ToolResult,
    UserMessage,
)
from ctxline.runner.usage import Totals
from ctxline.sources.status import call_key, empty_reply

__all__ = ["RECENT", "CallEntry", "JobInfo", "Ledger", "ran_name", "runner_meta"]

RECENT = 256
"""Recent calls kept for the guards (a streak longer than this is still "long enough")."""

State = Literal["open", "ok", "failed", "refused"]


def runner_meta(meta: dict[str, JsonValue]) -> dict[str, JsonValue]:
    value = meta.get("runner")
    return value if isinstance(value, dict) else {}


def ran_name(event: ToolResult) -> str:
    """The tool a result ran: ``call_tool``'s inner tool (``meta.discovery.tool``), else its name."""
    inner = event.meta.get("discovery")
    tool = inner.get("tool") if isinstance(inner, dict) else None
    return tool if isinstance(tool, str) and tool else event.name


@dataclass
class CallEntry:
    call_id: str
    key: tuple[str, str]
    state: State = "open"


@dataclass(frozen=True, slots=True)
class JobInfo:
    job: str
    tool: str
    call_id: str
    seq: int


@dataclass
class Ledger:
    table: PriceTable | None = None
    fed: int = 0
    last_id: str = ""
    ran: dict[str, int] = field(default_factory=dict)
    recent: deque[CallEntry] = field(default_factory=lambda: deque(maxlen=RECENT))
    task_seq: int = 0
    turns: int = 0
    tool_calls: int = 0
    totals: Totals = field(default_factory=Totals)
    last_reply: AssistantMessage | None = None
    answered: set[str] = field(default_factory=set)
    jobs: dict[str, JobInfo] = field(default_factory=dict)
    """Started and not yet notified, by job id."""
    jobs_started: int = 0
    agents_started: int = 0
    notes_after_reply: int = 0
    """Job notifications since the last reply: a final answer before them is stale."""
    empty_replies: int = 0
    """Replies in a row with neither text nor calls (small local models end so after a
    tool result): the first is asked again, a second ends the run."""
    _open: dict[str, CallEntry] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.totals.table = self.table

    def catch_up(self, events: Sequence[StoredEvent]) -> Ledger:
        """Feed the events not fed yet (``events`` is the whole timeline, in seq order)."""
        if self.fed and (len(events) < self.fed or events[self.fed - 1].id != self.last_id):
            raise RuntimeError("the ledger was fed another timeline")  # a bug, never input
        for stored in events[self.fed :]:
            self.feed(stored)
        return self

    def feed(self, stored: StoredEvent) -> None:
        event = stored.event
        self.fed += 1
        self.last_id = stored.id
        if isinstance(event, UserMessage):
            self.task_seq = stored.seq
            self.turns = self.tool_calls = 0
            self.totals = Totals(table=self.table)
            self.last_reply, self.answered = None, set()
            self.empty_replies = 0
        elif isinstance(event, AssistantMessage):
            self.empty_replies = self.empty_replies + 1 if empty_reply(event) else 0
            self.turns += 1
            self.tool_calls += len(event.tool_calls)
            self.last_reply, self.answered = event, set()
            self.notes_after_reply = 0
            for call in event.tool_calls:
                new = CallEntry(call.id, call_key(call))
                self.recent.append(new)
                self._open[call.id] = new
        elif isinstance(event, ToolResult):
            self.answered.add(event.call_id)
            meta = runner_meta(event.meta)
            entry: CallEntry | None = self._open.pop(event.call_id, None)
            refused = bool(meta.get("refused"))
            if entry is not None:
                entry.state = "refused" if refused else "failed" if event.is_error else "ok"
            if not refused:
                ran = ran_name(event)
                self.ran[ran] = self.ran.get(ran, 0) + 1
            job = meta.get("job")
            if isinstance(job, str) and job:
                self.jobs_started += 1
                self.jobs[job] = JobInfo(job, event.name, event.call_id, stored.seq)
            agent = meta.get("agent")
            if isinstance(agent, dict):
                self.agents_started += 1
                self.totals.add_child(str(agent.get("session") or event.call_id), agent)
                ran_below = agent.get("ran")  # the child's calls count for the whole tree
                for name, n in (ran_below if isinstance(ran_below, dict) else {}).items():
                    if isinstance(n, int) and not isinstance(n, bool) and n > 0:
                        self.ran[str(name)] = self.ran.get(str(name), 0) + n
        elif isinstance(event, ModelUsage):
            self.totals.add_call(event)
        elif isinstance(event, Notification):
            job = runner_meta(event.meta).get("job")
            if isinstance(job, str):
                self.jobs.pop(job, None)
                self.notes_after_reply += 1

    # --- questions ----------------------------------------------------------------------

    def open_calls(self) -> list[ToolCall]:
        """The calls of the last reply that have no result yet, in call order."""
        if self.last_reply is None:
            return []
        return [c for c in self.last_reply.tool_calls if c.id not in self.answered]

    def final(self) -> str | None:
        """The final answer: the last reply's text when it made no tool calls and no job
        reported since — the model has not read that report yet (None: none yet). A first
        empty reply is no answer: the model is asked again, and the status bar says why."""
        if self.last_reply is None or self.last_reply.tool_calls or self.notes_after_reply:
            return None
        if self.empty_replies == 1:
            return None
        return self.last_reply.text

    def streak_before(self, call_id: str, key: tuple[str, str], limit: int) -> list[CallEntry]:
        """The calls with ``key`` directly before ``call_id`` in record order (at most ``limit``)."""
        entries = list(self.recent)
        index = next(
            (i for i in range(len(entries) - 1, -1, -1) if entries[i].call_id == call_id), None
        )
        if index is None:
            index = len(entries)
        out: list[CallEntry] = []
        for entry in reversed(entries[:index]):
            if entry.key != key or len(out) >= limit:
                break
            out.append(entry)
        return out
