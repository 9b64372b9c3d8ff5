"""Compaction: the oldest span of the view becomes a summary, a digest and a re-affirmation.

DESIGN §7 and seeds 000/003. The cut falls only between groups (an assistant message
and all its results are one group). The original task and — as far as a quarter of
the target allows, newest first — later user messages stay verbatim. The summary is
made from the record, never from the trimmed view; the digest lists tools used,
saved outputs and files touched; the re-affirmation restates only the rules still in
force (in their latest form) and the current state values, so a revoked rule or a
cleared value can never come back through a summary. The guide says re-affirmation
is not a new change and grants nothing.

The default summarizer is extractive and deterministic (offline). A summarizer is any
callable ``(events, max_tokens, counter) -> str``; its text is escaped like tool output.

    reduction = plan_compaction(view, events, ...)
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import datetime

from ctxline.record.events import (
    AssistantMessage,
    Notification,
    Reduction,
    Rule,
    State,
    StoredEvent,
    ToolCall,
    ToolResult,
    UserMessage,
)
from ctxline.render.openai import arguments_text
from ctxline.sources.base import Block
from ctxline.sources.guide import MessageKind
from ctxline.sources.rules import rule_block, rule_in_force
from ctxline.sources.state import state_block
from ctxline.tags import element, escape, one_line, quote_name
from ctxline.tokens.counters import TokenCounter
from ctxline.view.edits import groups as _groups
from ctxline.view.measure import ViewMessage

__all__ = [
    "COMPACTION_KINDS",
    "Summarizer",
    "compaction_block",
    "extractive_summary",
    "plan_compaction",
]

Summarizer = Callable[[Sequence[StoredEvent], int, TokenCounter], str]

COMPACTION_KINDS = (
    MessageKind(
        "ctx-summary",
        "a summary of earlier history that was compacted",
        "It stands for the events it covers; the messages after it continue from there.",
    ),
    MessageKind(
        "ctx-digest",
        "tools used, saved outputs and files touched in the compacted span",
        "Read a saved output with read_result when you need its content.",
    ),
    MessageKind(
        "ctx-reaffirm",
        "the rules still in force and the current state values as of the summary",
        "It restates the present; it is not a new change and grants no permission.",
    ),
)

_FILE_KEYS = ("path", "file_path", "filename", "file", "notebook_path")
_FILE_IN_TEXT = re.compile(
    r"(?<![\w/.-])((?:[\w.-]+/)*[\w-]+\.(?:py|js|ts|tsx|jsx|go|rs|java|c|h|cpp|md|txt|json|yaml|yml|toml|cfg|ini|sh|rb|ex|exs|html|css))\b"
)


def _clip(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _line(ev: StoredEvent, calls: dict[str, ToolCall]) -> str | None:
    e = ev.event
    if isinstance(e, UserMessage):
        return f"[{ev.seq}] user: {_clip(e.text, 300)}"
    if isinstance(e, AssistantMessage) and e.text.strip():
        return f"[{ev.seq}] assistant: {_clip(e.text, 200)}"
    if isinstance(e, ToolResult):
        call = calls.get(e.call_id)
        name = call.name if call is not None else (e.name or "tool")
        args = _clip(arguments_text(call.arguments), 120) if call is not None else ""
        status = "error" if e.is_error else "ok"
        first = next((line for line in e.content.splitlines() if line.strip()), "")
        return f"[{ev.seq}] {quote_name(name)}({args}) → {status}: {_clip(first, 120)}"
    if isinstance(e, Notification):
        return f"[{ev.seq}] notification from {quote_name(e.source)}: {_clip(e.text, 160)}"
    return None


def extractive_summary(
    events: Sequence[StoredEvent], max_tokens: int, counter: TokenCounter
) -> str:
    """A deterministic line-per-step digest of ``events``, kept within ``max_tokens``.

    When it is too long the oldest lines go first (a marker says how many). Lines are
    made newest first and only until the budget is spent, so the cost of a compaction
    does not grow with the length of the record beyond one cheap pass.
    """
    calls: dict[str, ToolCall] = {}
    for ev in events:
        if isinstance(ev.event, AssistantMessage):
            for call in ev.event.tool_calls:
                calls[call.id] = call
    head = f"Summary of record seq 1–{events[-1].seq if events else 0} (extractive, made by ctxline from the record):"
    budget = max_tokens - counter.count(head) - 16
    kept: list[str] = []
    used = 0
    index = len(events) - 1
    while index >= 0:
        line = _line(events[index], calls)
        if line is not None:
            cost = counter.count(line) + 1
            if used + cost > budget:
                break
            kept.append(line)
            used += cost
        index -= 1
    kept.reverse()
    if index < 0:
        return "\n".join([head, *kept])
    omitted = sum(1 for ev in events[: index + 1] if _line_kind(ev))
    return "\n".join([head, f"… {omitted:,} earlier steps omitted …", *kept])


def _line_kind(ev: StoredEvent) -> bool:
    """Whether :func:`_line` gives a line for ``ev`` (without making it)."""
    e = ev.event
    return isinstance(e, UserMessage | ToolResult | Notification) or (
        isinstance(e, AssistantMessage) and bool(e.text.strip())
    )


class SpanFold:
    """Running facts about the record up to a seq: tools used, files touched, rules, state.

    A compaction's digest and re-affirmation describe everything up to its cut; folding
    the record once, forward, keeps each new compaction O(new events).
    """

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self.upto = 0
        self.last_id = ""
        self.tools: Counter[str] = Counter()
        self.files: dict[str, None] = {}
        self.rules: dict[tuple[str, str], Rule] = {}
        self.state: dict[str, State] = {}

    def advance(self, events: Sequence[StoredEvent], upto: int) -> SpanFold:
        """Fold ``events`` up to seq ``upto`` (starting over if they are another record)."""
        if upto < self.upto or (self.upto and events[self.upto - 1].id != self.last_id):
            self._reset()
        for ev in events[self.upto : upto]:
            e = ev.event
            if isinstance(e, AssistantMessage):
                for call in e.tool_calls:
                    self._call(call)
            elif isinstance(e, Rule):
                if e.op in ("set", "replace"):
                    self.rules[(e.scope, e.rule_id)] = e
                else:
                    self.rules.pop((e.scope, e.rule_id), None)
            elif isinstance(e, State):
                if e.cleared:
                    self.state.pop(e.source, None)
                else:
                    self.state[e.source] = e
        if upto > self.upto:
            self.upto, self.last_id = upto, events[upto - 1].id
        return self

    def _call(self, call: ToolCall) -> None:
        self.tools[call.name] += 1
        args = call.arguments
        if isinstance(args, dict):
            for key in _FILE_KEYS:
                value = args.get(key)
                if isinstance(value, str) and value:
                    self.files.pop(value, None)
                    self.files[value] = None
            texts = [v for v in args.values() if isinstance(v, str)]
        else:
            texts = [args] if isinstance(args, str) else []
        for text in texts:
            for match in _FILE_IN_TEXT.findall(text[:600]):
                self.files.pop(match, None)
                self.files[match] = None

    def digest(self, handles: dict[int, str]) -> str:
        """Three lines, each ctxline's: tool names quoted unless plain, paths on one line."""
        saved = [f"seq {seq}: {ref}" for seq, ref in sorted(handles.items()) if seq <= self.upto]
        tools = ", ".join(f"{quote_name(name)} ×{n}" for name, n in sorted(self.tools.items()))
        files = ", ".join(one_line(path) for path in list(self.files)[-25:])
        return "\n".join(
            [
                "tools used: " + (tools or "none"),
                "saved outputs (read_result): " + ("; ".join(saved[-12:]) or "none"),
                "files touched: " + (files or "none"),
            ]
        )

    def reaffirm(self, now: datetime | None = None) -> list[str]:
        """One line per rule in force and per state value (their text on one line)."""
        rules = [_line_block(rule_block(r)) for r in self.rules.values() if rule_in_force(r, now)]
        return rules + [_line_block(state_block(s)) for s in self.state.values()]


def _line_block(block: Block) -> str:
    """A block on one line: its body escaped with line breaks written as escapes."""
    body = None if block.body is None else one_line(block.body)
    return element(block.tag, body, **dict(block.attrs))


def digest(events: Sequence[StoredEvent], handles: dict[int, str]) -> str:
    """Tools used with counts, saved outputs and files touched in ``events``."""
    upto = events[-1].seq if events else 0
    return (
        SpanFold().advance(events, upto).digest(handles) if events else SpanFold().digest(handles)
    )


def compaction_block(
    reduction: Reduction,
    events: Sequence[StoredEvent],
    handles: dict[int, str],
    fold: SpanFold | None = None,
    extra: Sequence[str] = (),
) -> str:
    """The user-role message that stands for the compacted span; ``extra`` are rendered
    blocks the sources restate (see :meth:`~ctxline.sources.base.Source.reaffirm`)."""
    span = (fold or SpanFold()).advance(events, reduction.upto_seq)
    affirm = [*span.reaffirm(), *extra]
    blocks = [
        element("ctx-summary", escape(reduction.summary), upto_seq=str(reduction.upto_seq)),
        element("ctx-digest", escape(span.digest(handles))),
        element("ctx-reaffirm", "\n" + "\n".join(affirm) + "\n" if affirm else ""),
    ]
    return "\n".join(blocks)


def plan_compaction(
    view: Sequence[ViewMessage],
    events: Sequence[StoredEvent],
    *,
    fixed_tokens: int,
    target: int,
    counter: TokenCounter,
    summary_tokens: int,
    previous_upto: int,
    summarizer: Summarizer = extractive_summary,
    keep_users: bool = True,
    ceiling: int | None = None,
) -> Reduction | None:
    """The compaction that brings the view under ``target``, or None if there is no span to cut.

    ``fixed_tokens`` is what the request costs outside history (tools, system, tail).
    With ``keep_users=False`` only the original task stays verbatim (the last resort
    before :class:`~ctxline.errors.ContextOverflow`). The most recent group is kept
    whenever it fits under ``ceiling`` (default ``target``), so the model never wakes up
    from a compaction without its last step.
    """
    task_seq = next((ev.seq for ev in events if isinstance(ev.event, UserMessage)), None)
    task_tokens = next((vm.tokens for vm in view if task_seq and vm.message.seq == task_seq), 0)
    budget_summary = min(summary_tokens, max(200, target // 5))
    reserve = fixed_tokens + task_tokens + budget_summary + 200  # digest and re-affirmation
    user_budget = target // 4 if keep_users else 0
    recent_budget = target - reserve - user_budget // 2
    groups = _groups(view)
    kept_from = len(view)
    used = 0
    for index, (start, end) in enumerate(reversed(groups)):
        cost = sum(vm.tokens for vm in view[start:end])
        first = view[start].message
        budget = recent_budget
        if index == 0:  # the last group may use the room up to the ceiling
            budget = max(recent_budget, (ceiling or target) - reserve)
        if first.seq <= previous_upto or used + cost > budget:
            break
        used += cost
        kept_from = start
    # the cut falls before the first kept message (or after everything)
    upto = view[kept_from].message.seq - 1 if kept_from < len(view) else events[-1].seq
    if upto <= previous_upto or (task_seq is not None and upto < task_seq):
        return None
    keep: list[int] = []
    if task_seq is not None:
        keep.append(task_seq)
    spent = 0
    for vm in reversed(view[:kept_from]):
        seq = vm.message.seq
        event = events[seq - 1].event if seq else None
        if isinstance(event, UserMessage) and seq != task_seq and seq <= upto:
            if spent + vm.tokens > user_budget:
                break
            keep.append(seq)
            spent += vm.tokens
    keep.sort()
    span = [ev for ev in events[:upto] if ev.seq not in keep]
    summary = summarizer(span, budget_summary, counter)
    removed = sum(vm.tokens for vm in view[:kept_from] if vm.message.seq not in keep)
    return Reduction(
        "compact",
        upto_seq=upto,
        keep=tuple(keep),
        summary=summary,
        saved_tokens=max(0, removed - counter.count(summary) - 200),
        meta={
            "summarizer": getattr(summarizer, "__name__", "custom"),
            "kept_recent_tokens": used,
        },
    )
