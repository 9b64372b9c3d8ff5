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

import bisect
import re
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from typing import overload

from ctxline.record.events import (
    AssistantMessage,
    Reduction,
    Rule,
    State,
    StoredEvent,
    ToolCall,
    UserMessage,
)
from ctxline.sources.base import Block
from ctxline.sources.guide import MessageKind
from ctxline.sources.rules import rule_block, rule_in_force
from ctxline.sources.state import state_block
from ctxline.tags import element, escape, one_line, quote_name
from ctxline.tokens.counters import TokenCounter
from ctxline.view.measure import ViewMessage
from ctxline.view.summary import SummaryLines, extractive_summary

__all__ = [
    "COMPACTION_KINDS",
    "SpanFold",
    "Summarizer",
    "SummaryLines",
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

SNAPSHOT_EVERY = 64
"""Events between two snapshots of a :class:`SpanFold`."""
_FILE_KEYS = ("path", "file_path", "filename", "file", "notebook_path")
_FILE_IN_TEXT = re.compile(
    r"(?<![\w/.-])((?:[\w.-]+/)*[\w-]+\.(?:py|js|ts|tsx|jsx|go|rs|java|c|h|cpp|md|txt|json|yaml|yml|toml|cfg|ini|sh|rb|ex|exs|html|css))\b"
)


class SpanFold:
    """Running facts about the record up to a seq: tools used, files touched, rules, state.

    A compaction's digest and re-affirmation describe everything up to its cut; folding
    the record once, forward, keeps each new compaction O(new events). It may be folded
    ahead of a cut (a step does it before a compaction is needed): a snapshot every
    :data:`SNAPSHOT_EVERY` events lets it go back to any cut with at most that many
    events to fold again.
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
        self.snapshots: list[tuple[int, str, Counter[str], dict[str, None], dict[tuple[str, str], Rule], dict[str, State]]] = []

    def _back_to(self, events: Sequence[StoredEvent], upto: int) -> None:
        """The latest snapshot at or before ``upto`` of this record (or the start)."""
        snapshots = self.snapshots
        for i in range(len(snapshots) - 1, -1, -1):
            at, last, tools, files, rules, state = snapshots[i]
            if at > len(events) or events[at - 1].id != last:
                del snapshots[i:]  # another record from here on
            elif at <= upto:
                self.upto, self.last_id = at, last
                self.tools, self.files = Counter(tools), dict(files)
                self.rules, self.state = dict(rules), dict(state)
                return
        self._reset()
        self.snapshots = snapshots

    def advance(self, events: Sequence[StoredEvent], upto: int) -> SpanFold:
        """Fold ``events`` up to seq ``upto`` (going back to a snapshot when ``upto`` is
        behind, starting over when they are another record)."""
        if upto < self.upto or (self.upto and events[self.upto - 1].id != self.last_id):
            self._back_to(events, upto)
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
            if ev.seq % SNAPSHOT_EVERY == 0 and (not self.snapshots or self.snapshots[-1][0] < ev.seq):
                self.snapshots.append(
                    (ev.seq, ev.id, Counter(self.tools), dict(self.files), dict(self.rules), dict(self.state))
                )
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

    def digest(self, handles: dict[int, str], reader: str | None = "read_result") -> str:
        """Three lines, each ctxline's: tool names quoted unless plain, paths on one line
        (``reader``: the read-back tool offered, None when there is none)."""
        saved = [f"seq {seq}: {ref}" for seq, ref in sorted(handles.items()) if seq <= self.upto]
        tools = ", ".join(f"{quote_name(name)} ×{n}" for name, n in sorted(self.tools.items()))
        files = ", ".join(one_line(path) for path in list(self.files)[-25:])
        return "\n".join(
            [
                "tools used: " + (tools or "none"),
                f"saved outputs{f' ({reader})' if reader else ''}: " + ("; ".join(saved[-12:]) or "none"),
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
    *,
    reader: str | None = "read_result",
) -> str:
    """The user-role message that stands for the compacted span; ``extra`` are rendered
    blocks the sources restate (see :meth:`~ctxline.sources.base.Source.reaffirm`);
    ``reader`` is the read-back tool the request offers (None: the digest names none)."""
    span = (fold or SpanFold()).advance(events, reduction.upto_seq)
    affirm = [*span.reaffirm(), *extra]
    blocks = [
        element("ctx-summary", escape(reduction.summary), upto_seq=str(reduction.upto_seq)),
        element("ctx-digest", escape(span.digest(handles, reader))),
        element("ctx-reaffirm", "\n" + "\n".join(affirm) + "\n" if affirm else ""),
    ]
    return "\n".join(blocks)


class _Span(Sequence[StoredEvent]):
    """The events up to a cut but those kept verbatim, without copying the record."""

    def __init__(self, events: Sequence[StoredEvent], upto: int, keep: Sequence[int]) -> None:
        self.events, self.keep = events, sorted(k for k in keep if k <= upto)
        self.size = upto - len(self.keep)

    def __len__(self) -> int:
        return self.size

    def _seq(self, index: int) -> int:
        seq = index + 1
        for kept in self.keep:  # a handful: the task and a few later requirements
            if kept <= seq:
                seq += 1
        return seq

    @overload
    def __getitem__(self, index: int) -> StoredEvent: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[StoredEvent]: ...
    def __getitem__(self, index: int | slice) -> StoredEvent | Sequence[StoredEvent]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self.size))]
        if index < 0:
            index += self.size
        if not 0 <= index < self.size:
            raise IndexError(index)
        return self.events[self._seq(index) - 1]


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
    users: Sequence[int] | None = None,
    lines: SummaryLines | None = None,
    prefix: Sequence[int] | None = None,
    estimate: bool = False,
) -> Reduction | None:
    """The compaction that brings the view under ``target``, or None if there is no span to cut.

    ``fixed_tokens`` is what the request costs outside history (tools, system, tail).
    With ``keep_users=False`` only the original task stays verbatim (the last resort
    before :class:`~ctxline.errors.ContextOverflow`). The most recent group is never
    summarized (the model never wakes up from a compaction without its last step, nor
    with its newest results folded into a summary), whatever its size; the groups before
    it are kept while they fit the recent budget.

    The work is O(what is kept): groups are found from the end, and the step's caches
    can give the view indexes of the user messages (``users``), the default summary's
    lines (``lines``) and the view's token prefix sums (``prefix``). With ``estimate``
    the summarizer is not called (it may be a model): the summary is empty and counted
    at its budget, which is what the ladder needs to weigh a compaction against trims.
    """
    task_seq = next((ev.seq for ev in events if isinstance(ev.event, UserMessage)), None)
    task_tokens = next((vm.tokens for vm in view if task_seq and vm.message.seq == task_seq), 0)
    budget_summary = min(summary_tokens, max(200, target // 5))
    reserve = fixed_tokens + task_tokens + budget_summary + 200  # digest and re-affirmation
    user_budget = target // 4 if keep_users else 0
    recent_budget = target - reserve - user_budget // 2
    kept_from = len(view)
    used = 0
    for number, (start, end) in enumerate(_groups_from_end(view)):
        first = view[start].message
        if number > 0 and first.seq <= previous_upto:
            break  # older than the last cut, or ctxline's own block
        cost = sum(vm.tokens for vm in view[start:end])
        if number > 0 and used + cost > recent_budget:
            break
        used += cost
        kept_from = start
    # the cut falls before the first kept message (or after everything)
    first_kept = next((vm.message.seq for vm in view[kept_from:] if vm.message.seq), None)
    upto = first_kept - 1 if first_kept is not None else (events[-1].seq if events else 0)
    if upto <= previous_upto or (task_seq is not None and upto < task_seq):
        return None
    keep: list[int] = []
    if task_seq is not None:
        keep.append(task_seq)
    spent = 0
    user_at = users if users is not None else [
        i for i, vm in enumerate(view[:kept_from]) if _is_user(vm, events)
    ]
    for i in reversed(user_at[: bisect.bisect_left(user_at, kept_from)]):
        vm = view[i]
        seq = vm.message.seq
        if seq != task_seq and seq <= upto and _is_user(vm, events):
            if spent + vm.tokens > user_budget:
                break
            keep.append(seq)
            spent += vm.tokens
    keep.sort()
    if estimate:
        summary, made = "", budget_summary
    elif summarizer is extractive_summary and lines is not None:
        summary = lines.summary(events, upto, keep, budget_summary, counter)
        made = lines.tokens  # from its lines' counts: not counted again
    else:
        summary = summarizer(_Span(events, upto, keep), budget_summary, counter)
        made = counter.count(summary)
    if prefix is not None and kept_from < len(prefix):
        before = prefix[kept_from]
    else:
        before = sum(vm.tokens for vm in view[:kept_from])
    kept_tokens = sum(view[i].tokens for i in user_at if i < kept_from and view[i].message.seq in keep)
    removed = before - kept_tokens
    return Reduction(
        "compact",
        upto_seq=upto,
        keep=tuple(keep),
        summary=summary,
        saved_tokens=max(0, removed - made - 200),
        meta={
            "summarizer": getattr(summarizer, "__name__", "custom"),
            "kept_recent_tokens": used,
        },
    )


def _is_user(vm: ViewMessage, events: Sequence[StoredEvent]) -> bool:
    seq = vm.message.seq
    return vm.message.role == "user" and 0 < seq <= len(events) and isinstance(events[seq - 1].event, UserMessage)


def _groups_from_end(view: Sequence[ViewMessage]) -> Iterator[tuple[int, int]]:
    """(start, end) of the view's groups, newest first, without walking the older ones."""
    end = len(view)
    while end > 0:
        start = end - 1
        while start > 0 and view[start].message.role == "tool":
            start -= 1
        yield start, end
        end = start
