"""The reduction ladder: what to change in the view when a request nears its limit.

Seed 003 and DESIGN §6. Over the pressure line (default 0.8 × input limit) the ladder
plans view edits, cheapest first, re-measuring after each rung, until the request is
under the target (default 0.6 — the gap is the hysteresis that lets the following
steps append again and keep the prefix cached):

1. fold exact duplicates — same tool, same canonical arguments, same full content:
   earlier copies become a reference to the latest one;
2. trim older, completed, successful results to a preview and a handle (errors and
   the recent groups are kept);
3. compact the oldest span into a summary, a digest and a re-affirmation of the rules
   and state still in force (see :mod:`ctxline.view.compaction`).

Edits are :class:`~ctxline.record.events.Reduction` events appended to the record, so the
record itself is never changed and every request can be rebuilt. Never removed:
the persona and guide, the original task, the call/result pairing.

    edits = plan_reductions(view, options, counter, events)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ctxline.record.events import Reduction, StoredEvent, ToolResult, canonical_json
from ctxline.render.neutral import NeutralMessage
from ctxline.tokens.counters import TokenCounter

__all__ = ["ViewEdits", "ViewMessage", "fold_reference", "plan_reductions", "preview"]


@dataclass
class ViewEdits:
    """The reductions in force for a timeline, folded from its Reduction events."""

    trimmed: set[int]
    folded: dict[int, int]
    compact: Reduction | None = None

    @classmethod
    def empty(cls) -> ViewEdits:
        return cls(set(), {})

    def apply(self, reduction: Reduction) -> None:
        if reduction.action == "trim":
            self.trimmed.update(reduction.seqs)
        elif reduction.action == "fold":
            self.folded.update({int(k): v for k, v in reduction.refs.items()})
        elif reduction.action == "compact":
            self.compact = reduction

    def hidden(self, seq: int) -> bool:
        c = self.compact
        return c is not None and seq <= c.upto_seq and seq not in c.keep


@dataclass(frozen=True, slots=True)
class ViewMessage:
    """One message of the current view, as the ladder sees it."""

    message: NeutralMessage
    tokens: int


def preview(content: str, handle: str, *, tokens: int, head_lines: int = 12, tail_lines: int = 6, width: int = 240) -> str:
    """A short stand-in for a long output: size, handle, first and last lines."""
    lines = content.splitlines()

    def cut(line: str) -> str:
        return line if len(line) <= width else line[: width - 1] + "…"

    intro = (
        f"[output shown as a preview: {len(content):,} characters, {len(lines):,} lines,"
        f" ~{tokens:,} tokens. The full output is saved; read it with"
        f' read_result(handle="{handle}", page=1).]'
    )
    if len(lines) <= head_lines + tail_lines:
        body = [cut(line) for line in lines]
        if sum(len(b) for b in body) > width * (head_lines + tail_lines):
            body = [content[: width * head_lines] + "…"]
        return "\n".join([intro, *body])
    omitted = len(lines) - head_lines - tail_lines
    return "\n".join(
        [
            intro,
            *(cut(line) for line in lines[:head_lines]),
            f"… {omitted:,} lines omitted …",
            *(cut(line) for line in lines[-tail_lines:]),
        ]
    )


def fold_reference(name: str, later_seq: int) -> str:
    return (
        f"[same output as the later call to {name} with the same arguments (record seq {later_seq});"
        " it is shown there]"
    )


def _groups(messages: Sequence[ViewMessage]) -> list[tuple[int, int]]:
    """(start, end) index ranges of groups: an assistant message with its results, or one message."""
    out: list[tuple[int, int]] = []
    i = 0
    while i < len(messages):
        j = i + 1
        if messages[i].message.role == "assistant":
            while j < len(messages) and messages[j].message.role == "tool":
                j += 1
        out.append((i, j))
        i = j
    return out


def _protected_recent(messages: Sequence[ViewMessage], keep_groups: int) -> set[int]:
    """Indexes of the messages in the last ``keep_groups`` assistant groups."""
    seen = 0
    protected: set[int] = set()
    for start, end in reversed(_groups(messages)):
        if messages[start].message.role == "assistant":
            seen += 1
            if seen > keep_groups:
                break
        protected.update(range(start, end))
    return protected


def plan_reductions(
    view: Sequence[ViewMessage],
    *,
    total: int,
    target: int,
    counter: TokenCounter,
    events: Sequence[StoredEvent],
    edits: ViewEdits,
    keep_groups: int,
    handle_of: dict[int, str],
) -> tuple[list[Reduction], int]:
    """Fold and trim edits that bring ``total`` toward ``target``; returns them and the new total.

    ``events`` is the timeline (index = seq − 1); ``handle_of`` maps a result's seq to
    its blob handle. Compaction, the last rung, is planned by the caller when this
    is not enough.
    """
    reductions: list[Reduction] = []
    calls: dict[str, tuple[str, bytes]] = {}
    for vm in view:
        for call in vm.message.tool_calls:
            calls[call.id] = (call.name, canonical_json(call.arguments))
    # rung 1: fold exact duplicates (earlier copies refer to the latest one)
    latest: dict[tuple[str, bytes, str], int] = {}
    results = [
        (i, vm)
        for i, vm in enumerate(view)
        if vm.message.role == "tool"
        and vm.message.seq
        and vm.message.seq not in edits.trimmed
        and vm.message.seq not in edits.folded
    ]
    for _, vm in results:
        event = events[vm.message.seq - 1].event
        if isinstance(event, ToolResult) and vm.message.call_id in calls:
            name, args = calls[vm.message.call_id]
            latest[(name, args, event.content)] = vm.message.seq
    refs: dict[str, int] = {}
    saved = 0
    for _, vm in results:
        event = events[vm.message.seq - 1].event
        if not isinstance(event, ToolResult) or vm.message.call_id not in calls:
            continue
        name, args = calls[vm.message.call_id]
        later = latest[(name, args, event.content)]
        if later != vm.message.seq:
            ref_tokens = counter.count(fold_reference(name, later)) + 4
            if vm.tokens > ref_tokens:
                refs[str(vm.message.seq)] = later
                saved += vm.tokens - ref_tokens
    if refs:
        reductions.append(Reduction("fold", refs=refs, saved_tokens=saved))
        total -= saved
    if total <= target:
        return reductions, total
    # rung 2: trim older, completed, successful results, oldest first
    protected = _protected_recent(view, keep_groups)
    trimmed: list[int] = []
    saved = 0
    for i, vm in results:
        if total - saved <= target:
            break
        seq = vm.message.seq
        if i in protected or vm.message.is_error or str(seq) in refs:
            continue
        event = events[seq - 1].event
        if not isinstance(event, ToolResult) or seq not in handle_of:
            continue
        short = counter.count(preview(event.content, handle_of[seq], tokens=vm.tokens)) + 4
        if vm.tokens > short + 32:
            trimmed.append(seq)
            saved += vm.tokens - short
    if trimmed:
        reductions.append(Reduction("trim", seqs=tuple(trimmed), saved_tokens=saved))
        total -= saved
    return reductions, total
