"""Walk a recorded trajectory the way its agent lived it, preparing every model call.

At each point where the recorded agent called its model (just before each assistant
message), the events so far are appended and :meth:`Context.prepare` builds the
request ctxline would have sent — reductions included; then the recorded reply and
results are appended. The request time is the append time of the newest event, so a
replay is repeatable. :class:`ReplayStats` measures each request the way the peer
harness in ``../shared/peers`` does (message-granularity prefix reuse, cache breaks,
billed input under two pricing styles: cached reads at α and everything else at 1.0 —
OpenAI's — and cached reads at α with the rest written to the cache at 1.25 —
Anthropic's; ``latest_kept``: the share of steps whose newest history message is in
the view unchanged).

    stats = ReplayStats(alpha=0.1)
    for step in replay_session(store, session, options=PrepareOptions(model="gpt-4.1")):
        stats.add(step)
"""

from __future__ import annotations

import statistics
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ctxline.context import Context
from ctxline.errors import CompactionError, ContextOverflow
from ctxline.importers import ImportedSession
from ctxline.record.events import AssistantMessage, Pending, StoredEvent, ToolResult, UserMessage
from ctxline.record.jsonvalue import as_array, as_int, as_object, dig
from ctxline.record.store import Store
from ctxline.render.neutral import NeutralMessage, escape_json
from ctxline.sources.status import StatusConfig
from ctxline.sources.statusbar import parse_status_mode
from ctxline.tags import escape
from ctxline.tokens.counters import TokenCounter
from ctxline.view.options import PrepareOptions
from ctxline.view.prepare import Preparation

__all__ = [
    "ANTHROPIC_WRITE",
    "REPLAY_EPOCH",
    "ReplayStats",
    "ReplayStep",
    "measured",
    "pairing_errors",
    "replay_session",
    "shows_whole",
]

ANTHROPIC_WRITE = 1.25
"""The Anthropic pricing style's cache-write price (5-minute cache), as a share of input."""

REPLAY_EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
"""The request time used when a trajectory has no timestamps."""


@dataclass(frozen=True, slots=True)
class ReplayStep:
    """One prepared request of a replay, with what the metrics need from the view.

    ``overflow`` is set (and ``prep`` is None) when protected content alone exceeded
    the input limit (or a compaction could not save enough): ctxline refused to build
    the request rather than send it too long or without the original task. The replay
    goes on with the next step.
    """

    session: str
    prep: Preparation | None
    ms: float
    messages: list[NeutralMessage]
    task_kept: bool
    overflow: str | None = None
    latest_kept: bool | None = None
    """Whether the newest history message is in the view unchanged (None: there is none)."""
    latest_fits: bool = True
    """Whether that message fits the fresh limit (a result over it is a preview by design)."""


def pairing_errors(messages: list[NeutralMessage]) -> int:
    """Results without their call before them, plus calls without a result (the peers' count)."""
    calls: set[str] = set()
    answered: set[str] = set()
    errors = 0
    for m in messages:
        if m.role == "tool":
            if m.call_id not in calls:
                errors += 1
            answered.add(m.call_id)
        calls.update(c.id for c in m.tool_calls)
    return errors + len(calls - answered)


def model_calls(events: Sequence[Pending]) -> list[int]:
    """Indexes of the events before which the recorded agent called its model: each
    assistant message once a user message has been seen."""
    calls: list[int] = []
    seen_user = False
    for i, pending in enumerate(events):
        if isinstance(pending.event, AssistantMessage) and seen_user:
            calls.append(i)
        seen_user = seen_user or isinstance(pending.event, UserMessage)
    return calls


def replay_session(
    store: Store,
    session: ImportedSession,
    *,
    options: PrepareOptions,
    counter: TokenCounter | None = None,
    session_id: str | None = None,
    keep_ids: bool = True,
    status: StatusConfig | None = None,
    status_mode: str = "auto",
) -> Iterator[ReplayStep]:
    """Append ``session`` to ``store`` step by step, yielding each prepared request.

    ``session_id`` stores it under another id; ``keep_ids=False`` drops the recorded
    client ids (so one file can be replayed many times into one database).
    """
    sid = session_id or session.id
    ctx = Context(
        store, sid, options=options, counter=counter, status=status, status_mode=parse_status_mode(status_mode)
    )
    task = next((p.event.text for p in session.events if isinstance(p.event, UserMessage)), None)
    task_view = None if task is None else escape(task)
    calls = set(model_calls(session.events))
    batch: list[Pending] = []
    for index, pending in enumerate(session.events):
        if index in calls:
            if batch:
                ctx.append(*batch)
                batch = []
            yield _step(ctx, sid, task_view)
        batch.append(pending if keep_ids else Pending(pending.event, None, pending.at))
    if batch:
        ctx.append(*batch)


def _newest(stored: Sequence[StoredEvent]) -> StoredEvent | None:
    """The last user, assistant or tool message among ``stored``."""
    for ev in reversed(stored):
        if isinstance(ev.event, UserMessage | AssistantMessage | ToolResult):
            return ev
    return None


def shows_whole(messages: Sequence[NeutralMessage], newest: StoredEvent) -> bool:
    """Whether the view shows the message of ``newest`` unchanged (its text, its calls)."""
    event = newest.event
    for m in messages:
        if m.seq != newest.seq:
            continue
        if isinstance(event, ToolResult):
            return m.role == "tool" and m.text == escape(event.content)
        if isinstance(event, UserMessage):
            return m.role == "user" and m.text == escape(event.text)
        if isinstance(event, AssistantMessage):
            shown = [escape_json(c.arguments, escape) for c in event.tool_calls]
            return m.text == escape(event.text) and [c.arguments for c in m.tool_calls] == shown
    return False


def _step(ctx: Context, sid: str, task_view: str | None) -> ReplayStep:
    """Prepare the request of one model call, timed; a refusal is a step too."""
    now = ctx.events[-1].at if ctx.events else REPLAY_EPOCH
    started = time.perf_counter()
    try:
        prep = ctx.prepare(now=now)
    except (ContextOverflow, CompactionError) as exc:
        return ReplayStep(sid, None, (time.perf_counter() - started) * 1000, [], False, str(exc))
    return measured(ctx, sid, prep, (time.perf_counter() - started) * 1000, task_view)


def measured(
    ctx: Context, sid: str, prep: Preparation, ms: float, task_view: str | None
) -> ReplayStep:
    """The replay figures of a request ``ctx`` just prepared (not timed): its view, whether
    the task and the newest history message (the last one appended) are in it unchanged."""
    messages = [vm.message for vm in ctx.view()]
    kept = task_view is not None and any(m.role == "user" and m.text == task_view for m in messages)
    newest = _newest(ctx.events)
    latest = None if newest is None else shows_whole(messages, newest)
    fits = True
    if newest is not None and isinstance(newest.event, ToolResult):
        limit = ctx.options.fresh_limit
        fits = not (limit and ctx.counter.count(newest.event.content) > limit)
    return ReplayStep(sid, prep, ms, messages, kept, None, latest, fits)


@dataclass
class ReplayStats:
    """The replay figures, accumulated step by step (see ``ctxline replay --json``)."""

    alpha: float = 0.1
    write_premium: float = ANTHROPIC_WRITE
    """The Anthropic style's write price (the OpenAI style writes at 1.0)."""
    input_limit: int = 0
    trajectories: int = 0
    steps: int = 0
    peak_tokens: int = 0
    total_tokens: int = 0
    reused_tokens: int = 0
    over_limit_steps: int = 0
    pairing_errors: int = 0
    empty_views: int = 0
    task_kept_steps: int = 0
    latest_steps: int = 0
    latest_kept_steps: int = 0
    latest_fit_steps: int = 0
    latest_fit_kept_steps: int = 0
    breaks: int = 0
    context_overflows: int = 0
    compaction_failures: int = 0
    overflow_sessions: set[str] = field(default_factory=set)
    actions: Counter[str] = field(default_factory=Counter)
    offloads: set[tuple[str, int]] = field(default_factory=set)
    ms: list[float] = field(default_factory=list)
    per_step: list[dict[str, Any]] = field(default_factory=list)
    keep_steps: bool = False

    def add(self, step: ReplayStep) -> None:
        if step.prep is None:
            if step.overflow is not None and "compaction" in step.overflow:
                self.compaction_failures += 1
            else:
                self.context_overflows += 1
            self.overflow_sessions.add(step.session)
            return
        report = step.prep.report
        tokens, budget, prefix = (as_object(report[k], k) for k in ("tokens", "budget", "prefix"))
        total = as_int(tokens["total"], "tokens.total")
        self.input_limit = as_int(budget["input_limit"], "budget.input_limit")
        reused = as_int(prefix["shared_tokens"]) if prefix["previous_step"] is not None else 0
        broke = prefix["previous_step"] is not None and prefix["first_difference"] is not None
        self.steps += 1
        self.peak_tokens = max(self.peak_tokens, total)
        self.total_tokens += total
        self.reused_tokens += reused
        self.over_limit_steps += total > self.input_limit
        self.pairing_errors += pairing_errors(step.messages)
        self.empty_views += not any(m.role in ("user", "assistant", "tool") for m in step.messages)
        self.task_kept_steps += step.task_kept
        if step.latest_kept is not None:
            self.latest_steps += 1
            self.latest_kept_steps += step.latest_kept
            if step.latest_fits:
                self.latest_fit_steps += 1
                self.latest_fit_kept_steps += step.latest_kept
        self.breaks += broke
        for action in as_array(report["actions"], "actions"):
            self.actions[str(dig(action, "action"))] += 1
        for m in step.messages:
            if m.role == "tool" and m.text.startswith("[output shown as a preview") and m.seq:
                self.offloads.add((step.session, m.seq))
        self.ms.append(step.ms)
        if self.keep_steps:
            self.per_step.append(
                {
                    "session": step.session,
                    "step": report["step"],
                    "tokens": tokens,
                    "limit": self.input_limit,
                    "reused": reused,
                    "break": broke,
                    "actions": [dig(a, "action") for a in as_array(report["actions"])],
                }
            )

    def summary(self) -> dict[str, Any]:
        steps = self.steps or 1
        total = self.total_tokens or 1
        billed = self.alpha * self.reused_tokens + (self.total_tokens - self.reused_tokens)
        written = self.total_tokens - self.reused_tokens
        billed_anthropic = self.alpha * self.reused_tokens + self.write_premium * written
        ms = sorted(self.ms)
        return {
            "trajectories": self.trajectories,
            "steps": self.steps,
            "input_limit": self.input_limit,
            "peak_tokens": self.peak_tokens,
            "mean_request_tokens": round(self.total_tokens / steps),
            "over_limit_steps": self.over_limit_steps,
            "pairing_errors": self.pairing_errors,
            "context_overflows": self.context_overflows,
            "compaction_failures": self.compaction_failures,
            "overflow_sessions": sorted(self.overflow_sessions),
            "empty_views": self.empty_views,
            "task_kept": round(self.task_kept_steps / steps, 4),
            "latest_kept": _share(self.latest_kept_steps, self.latest_steps),
            "latest_kept_within_fresh_limit": _share(self.latest_fit_kept_steps, self.latest_fit_steps),
            "prefix_reuse": round(self.reused_tokens / total, 4),
            "cache_breaks_per_100_steps": round(100 * self.breaks / steps, 2),
            "billed_input": round(billed / total, 4),
            "billed_input_tokens": round(billed),
            "billed_input_tokens_per_step": round(billed / steps),
            "billed_input_anthropic": round(billed_anthropic / total, 4),
            "billed_input_tokens_anthropic": round(billed_anthropic),
            "billed_input_tokens_per_step_anthropic": round(billed_anthropic / steps),
            "pricing": {
                "openai": {"cache_read": self.alpha, "cache_write": 1.0},
                "anthropic": {"cache_read": self.alpha, "cache_write": self.write_premium},
            },
            "alpha": self.alpha,
            "actions": dict(sorted(self.actions.items())),
            "compactions": self.actions.get("compact", 0),
            "offloads": len(self.offloads),
            "prepare_ms_p50": round(statistics.median(ms), 3) if ms else None,
            "prepare_ms_p95": round(ms[max(0, int(len(ms) * 0.95) - 1)], 3) if ms else None,
        }


def _share(part: int, whole: int) -> float | None:
    """``part / whole`` to 4 places; None when nothing was measured."""
    return round(part / whole, 4) if whole else None
