"""What changed between two consecutive requests, why, and what the cache break cost.

A provider caches a request's prefix in order: tools, system, then the messages. The
next request reuses it only as far as it extends it; from the first unit that differs
on, every token the previous request had cached is processed again (re-billed).
:func:`compare` walks two rebuilt requests (:class:`~ctxline.web.data.Rebuilt`) unit
by unit, names the first difference, its section, the record event that caused it and
one cause from :data:`CAUSES`, and prices the re-billed tokens with
:mod:`ctxline.pricing` (at the cache-write price where the request writes Anthropic's
cache, since those tokens are written again; else at the input price).

A request whose only difference is the previous request's tail (the status bar, time
and dynamic context, replaced on every step) is no break: nothing cached was lost.

Re-billed tokens are those of the parts after the difference that the previous request
sent too (and so had cached): a message kept verbatim by a compaction, every history
message after a changed guide. New content (a summary, the messages since the last
request, a replaced tail) is not counted: it was never cached. Counts are by part;
providers cache in steps (OpenAI from 1,024 tokens in 128-token steps, Anthropic at its
breakpoints, from 1,024–4,096 tokens by model), so a bill can differ by up to a step.

    diff = compare(previous, current, events)
    diff.broke, diff.cause, diff.rebilled_tokens, diff.cost
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from decimal import Decimal

from ctxline.pricing import ModelPrice, price_for, rebill_cost
from ctxline.record.events import Guide, Reduction, StoredEvent, SystemMessage, Tools
from ctxline.record.jsonvalue import as_object, get_array, get_int, get_object
from ctxline.sources.branch import BranchMark
from ctxline.web.data import Part, Rebuilt, rebuild_steps

__all__ = ["CAUSES", "Diff", "RunStep", "analyze_run", "common_prefix", "compare"]

CAUSES: dict[str, str] = {
    "model": "the model changed (nothing is cached across models)",
    "tools": "the tool schemas changed",
    "system": "the system prompt (persona) changed",
    "guide": "the guide changed (a message kind was added or removed)",
    "timestamp": "a timestamp in the system prompt changed",
    "compaction": "a compaction replaced the older history with a summary",
    "trim": "old tool outputs were trimmed to previews",
    "fold": "duplicate tool results were folded",
    "reorder": "the same messages were sent in another order",
    "history": "a history message changed",
    "tail": "the tail (status, time, dynamic context) took the place of cached messages",
}
"""Every cache break gets one of these causes. A request that differs from the one before
only in that one's tail (replaced on every step, never cached) is not a break."""

SNIPPET = 1_500
"""Characters of the old and new text shown around a difference."""


@dataclass(frozen=True, slots=True)
class Diff:
    """How ``step`` differs from the request before it (``previous``)."""

    previous: int
    step: int
    broke: bool
    """The request does not extend the previous one in cache order."""
    first_byte: int
    """Offset of the first differing byte of the two bodies (their common prefix length)."""
    byte_section: str
    """The section of the current body that byte falls in ('' when in neither's parts)."""
    byte_seq: int
    index: int
    """Index of the first differing unit (a :class:`Part`) in cache order; -1 when none."""
    section: str
    cause: str
    """A key of :data:`CAUSES` ('' when nothing broke)."""
    cause_seq: int
    """The record event that caused it (a reduction, guide, tools, or the changed message); 0 if none."""
    shared_tokens: int
    previous_tokens: int
    rebilled_tokens: int
    cost: Decimal | None
    """USD of the re-billed tokens; None when the model has no price."""
    price: ModelPrice | None
    old_text: str
    new_text: str

    @property
    def reason(self) -> str:
        return CAUSES.get(self.cause, "")


@dataclass(frozen=True, slots=True)
class RunStep:
    """One step of a run, for the timeline page and its chart."""

    step: int
    header_seq: int
    composition: dict[str, int]
    total: int
    budget: dict[str, int]
    actions: tuple[dict[str, object], ...]
    error: str | None
    diff: Diff | None


def common_prefix(a: bytes, b: bytes) -> int:
    """Length of the common prefix of two byte strings (binary search over memcmp)."""
    lo, hi = 0, min(len(a), len(b))
    if a[:hi] == b[:hi]:
        return hi
    while lo < hi:  # invariant: a[:lo] == b[:lo] and a[:hi] != b[:hi]
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _key(part: Part) -> tuple[str, str, str, str, bool]:
    """What a provider's cache sees of a part: its content, not the record seq behind it."""
    m = part.message
    return (part.section, part.role, part.text, m.call_id if m else "", bool(m and m.is_error))


def _locate_byte(parts: Sequence[Part], offset: int) -> Part | None:
    """The part whose bytes hold ``offset`` (between two parts: the one that starts next)."""
    inside = [p for p in parts if any(a <= offset < b for a, b in p.spans)]
    if inside:  # the persona and the guide share the system message: name the persona
        return inside[0]
    after = [
        (min(a for a, _ in p.spans if a >= offset), p.index)
        for p in parts
        if any(a >= offset for a, _ in p.spans)
    ]
    return parts[min(after)[1]] if after else None


def _cause(
    prev: Rebuilt, cur: Rebuilt, part: Part, old: Part | None, between: Sequence[StoredEvent]
) -> tuple[str, int]:
    kinds = {type(ev.event): ev.seq for ev in between}
    if part.section == "tools":
        return "tools", kinds.get(Tools, 0)
    if part.section == "guide":
        return "guide", kinds.get(Guide, 0)
    if part.section == "system":
        if prev.header.inputs.get("system_suffix") != cur.header.inputs.get("system_suffix"):
            return "timestamp", cur.header_seq
        guide_changed = Guide in kinds and SystemMessage not in kinds
        if guide_changed or (old is not None and old.section == "guide"):
            return "guide", kinds.get(Guide, 0)
        return "system", kinds.get(SystemMessage, 0)
    if part.section == "tail" or (old is not None and old.section == "tail"):
        return "tail", cur.header_seq
    reductions = [ev for ev in between if isinstance(ev.event, Reduction)]
    for action, cause in (("compact", "compaction"), ("trim", "trim"), ("fold", "fold")):
        hit = next(
            (
                ev
                for ev in reductions
                if isinstance(ev.event, Reduction) and ev.event.action == action
            ),
            None,
        )
        if hit is not None:
            return cause, hit.seq
    old_msgs = [_key(p) for p in prev.parts if p.message is not None]
    new_msgs = [_key(p) for p in cur.parts if p.message is not None][: len(old_msgs)]
    if old_msgs != new_msgs and sorted(map(repr, old_msgs)) == sorted(map(repr, new_msgs)):
        return "reorder", part.seq
    return "history", part.seq


def _rebilled(before: Sequence[Part], after: Sequence[Part]) -> int:
    """Tokens of the parts of ``after`` that ``before`` sent too (each part counted once)."""
    left = Counter(_key(p) for p in before)
    total = 0
    for part in after:
        key = _key(part)
        if left[key] > 0:
            left[key] -= 1
            total += part.tokens
    return total


def compare(prev: Rebuilt, cur: Rebuilt, events: Sequence[StoredEvent], *, base: int = 0) -> Diff:
    """The difference of ``cur`` from ``prev`` (both rebuilt with parts); ``events`` the
    timeline's from seq ``base + 1`` on (``base=prev.header_seq``: only those between)."""
    between = events[prev.header_seq - base : cur.header_seq - 1 - base]
    first_byte = common_prefix(prev.body, cur.body)
    at = _locate_byte(cur.parts, first_byte)
    index, section, old = -1, "", None
    if prev.model != cur.model:
        index, section = 0, "tools" if cur.parts and cur.parts[0].section == "tools" else "system"
    else:
        for i, old_part in enumerate(prev.parts):
            if i >= len(cur.parts) or _key(old_part) != _key(cur.parts[i]):
                index, old = i, old_part
                section = cur.parts[i].section if i < len(cur.parts) else old_part.section
                if old_part.section == "tail":
                    section = "tail"
                break
    # Only the previous request's tail differs (the status bar, time or dynamic context
    # replaced on every step): what it replaced was never cached, so nothing was lost.
    tail_only = index == len(prev.parts) - 1 and old is not None and old.section == "tail"
    broke = index >= 0 and not tail_only
    start = max(index, 0)
    if broke and cur.provider == "anthropic" and section in ("tools", "system", "guide"):
        start = (
            0  # Anthropic caches at its breakpoints (the end of the system text): all or nothing
        )
    if broke or tail_only:
        shared = sum(p.tokens for p in cur.parts[:start])
    else:
        shared = sum(p.tokens for p in prev.parts)
    rebilled = _rebilled(prev.parts[start:], cur.parts[start:]) if broke else 0
    cause, cause_seq = "", 0
    part = cur.parts[index] if broke and index < len(cur.parts) else old
    if broke and prev.model != cur.model:
        cause, cause_seq = "model", cur.header_seq
    elif broke and part is not None:
        cause, cause_seq = _cause(prev, cur, part, old, between)
    price = price_for(cur.model) if cur.model else None
    money = None
    if price is not None:
        money = rebill_cost(
            rebilled, price, write_premium=cur.provider == "anthropic" and cur.cache
        )
    new = cur.parts[index] if broke and index < len(cur.parts) else None
    return Diff(
        prev.step,
        cur.step,
        broke,
        first_byte,
        at.section if at is not None else "",
        at.seq if at is not None else 0,
        index,
        section,
        cause,
        cause_seq,
        shared,
        prev.total,
        rebilled,
        money,
        price,
        old.text[:SNIPPET] if old is not None else "",
        new.text[:SNIPPET] if new is not None else "",
    )


def analyze_run(
    events: Sequence[StoredEvent], branches: Sequence[BranchMark] = ()
) -> Iterator[RunStep]:
    """Every logged request of a timeline with its difference from the one before (streamed)."""
    prev: Rebuilt | None = None
    for cur in rebuild_steps(events, branches):
        report = cur.header.report
        budget = get_object(report, "budget")
        diff = None
        if prev is not None and prev.parts and cur.parts:
            diff = compare(prev, cur, events)
        yield RunStep(
            cur.step,
            cur.header_seq,
            dict(cur.composition),
            cur.total,
            {k: get_int(budget, k) for k in ("input_limit", "pressure_line", "target")},
            tuple(dict(as_object(a, "actions")) for a in get_array(report, "actions")),
            cur.error,
            diff,
        )
        prev = cur if cur.parts else None
