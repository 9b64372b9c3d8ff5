"""The parts of the preparation report that compare and explain: actions, pairing, prefix.

The prefix section says how many tokens the request shares with the previous request
of the same timeline and, where it broke, the first differing message and why.
"""

from __future__ import annotations

from collections.abc import Sequence

from ctxline.record.events import (
    JsonValue,
    Reduction,
)
from ctxline.render.neutral import HistoryBuilder, NeutralMessage
from ctxline.view.cache import PreviousRequest, ViewCache

__all__ = ["action_json", "pairing_json", "prefix_report"]


def action_json(reduction: Reduction) -> dict[str, JsonValue]:
    out: dict[str, JsonValue] = {"action": reduction.action, "saved_tokens": reduction.saved_tokens}
    if reduction.action == "fold":
        out["events"] = sorted(int(k) for k in reduction.refs)
    elif reduction.action == "trim":
        out["events"] = list(reduction.seqs)
    else:
        out["upto_seq"] = reduction.upto_seq
        out["kept"] = list(reduction.keep)
    return out


def pairing_json(builder: HistoryBuilder) -> dict[str, JsonValue]:
    report = builder.report()
    return {
        "repaired": list(report.repaired),
        "orphans": list(report.orphans),
        "duplicates": list(report.duplicates),
        "late": list(report.late),
        "renamed": [list(pair) for pair in report.renamed],
    }


def prefix_report(
    cache: ViewCache,
    fingerprint: tuple[str, str],
    frozen: Sequence[NeutralMessage],
    live: Sequence[NeutralMessage],
    live_tokens: Sequence[int],
    prefix_tokens: int,
) -> dict[str, JsonValue]:
    prev = cache.previous
    if prev is None:
        return {
            "previous_step": None,
            "shared_tokens": 0,
            "shared_messages": 0,
            "first_difference": None,
        }
    if fingerprint[1] != prev.fingerprint[1]:
        return _broken(prev, 0, 0, "tools", "the tool schemas changed")
    if fingerprint[0] != prev.fingerprint[0]:
        return _broken(prev, 0, 0, "system", "the system prompt changed (persona or guide)")
    if prev.generation != cache.generation:  # the view was rendered again: compare it whole
        old = [*prev.frozen[: prev.frozen_count], *prev.live]
        new = [*frozen, *live]
        new_tokens = [*cache.frozen_tokens, *live_tokens]
        same = 0
        for a, b in zip(old, new, strict=False):
            if a != b:
                break
            same += 1
        shared_tokens = prefix_tokens + sum(new_tokens[:same])
        if same == len(old):
            return {
                "previous_step": prev.step,
                "shared_tokens": shared_tokens,
                "shared_messages": same,
                "first_difference": None,
            }
        is_tail = bool(prev.tail) and same == len(old) - 1
        reason = (
            "the tail is replaced on every step"
            if is_tail
            else "a reduction rewrote the view from here"
        )
        return _broken(prev, same, shared_tokens, "tail" if is_tail else "history", reason)
    # everything frozen at the previous step is still there; compare what was live then
    shared = prev.frozen_count
    now_messages = [*frozen[prev.frozen_count :], *live]
    now_tokens = [*cache.frozen_tokens[prev.frozen_count :], *live_tokens]
    shared_tokens = prefix_tokens + cache.frozen_prefix_sum[prev.frozen_count]
    for i, before in enumerate(prev.live):
        if i >= len(now_messages) or now_messages[i] != before:
            is_tail = i >= len(prev.live) - (1 if prev.tail else 0)
            reason = (
                "the tail is replaced on every step" if is_tail else "a history message changed"
            )
            return _broken(
                prev, shared + i, shared_tokens, "tail" if is_tail else "history", reason
            )
        shared_tokens += now_tokens[i]
    return {
        "previous_step": prev.step,
        "shared_tokens": shared_tokens,
        "shared_messages": shared + len(prev.live),
        "first_difference": None,
    }


def _broken(
    prev: PreviousRequest, index: int, shared_tokens: int, section: str, reason: str
) -> dict[str, JsonValue]:
    return {
        "previous_step": prev.step,
        "shared_tokens": shared_tokens,
        "shared_messages": index,
        "first_difference": {"message": index, "section": section, "reason": reason},
    }
