"""A run at a glance from its logged request headers alone: no request is rebuilt.

Why: rebuilding a request costs what the record holds up to it, so a page that rebuilt
every request of a long session grew with its square. Each ``request`` header carries
its report's figures — tokens by section, the budget, the ladder's actions, and how far
the request extends the one prepared before it (``report["prefix"]``) — so the session
page draws its chart and its break marks from the headers on the page only; the step and
diff pages rebuild the one or two requests they show.

A replaced tail is not a cache break: the tail (status bar, time, dynamic context) is new
on every step and never cached, so a request whose first difference is the previous
tail reuses everything that was cached (:func:`is_break`).

    steps = header_steps(events)       # the headers among ``events``, in order
    [s.step for s in steps if s.broke]
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ctxline.record.events import RequestHeader, StoredEvent

__all__ = ["HeaderStep", "header_step", "header_steps", "is_break"]

LOGGED_SECTIONS = ("tools", "system", "history", "tail")
"""The sections a header's report counts (the guide is inside ``system``, summaries inside
``history``: telling them apart needs the rebuilt request)."""


def is_break(section: str) -> bool:
    """Whether a first difference in ``section`` loses cached tokens ('' : none at all).

    ``tail``: only the replaced tail differs; what it replaced was never cached.
    """
    return section not in ("", "tail")


def _int(value: object) -> int:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


@dataclass(frozen=True, slots=True)
class HeaderStep:
    """One logged request as its header tells it."""

    step: int
    header_seq: int
    composition: dict[str, int]
    total: int
    budget: dict[str, int]
    actions: tuple[dict[str, object], ...]
    previous_step: int | None
    shared_tokens: int
    """Tokens of the request before this one that this one reuses (its cached prefix)."""
    section: str
    """Where this request first differs from the one before ('' where it extends it)."""
    reason: str

    @property
    def broke(self) -> bool:
        return is_break(self.section)


def header_step(stored: StoredEvent) -> HeaderStep:
    """The figures of one ``request`` event (missing ones are 0: an old or foreign report)."""
    header = stored.event
    assert isinstance(header, RequestHeader)
    report = header.report
    tokens = report.get("tokens")
    tokens = tokens if isinstance(tokens, dict) else {}
    budget = report.get("budget")
    budget = budget if isinstance(budget, dict) else {}
    prefix = report.get("prefix")
    prefix = prefix if isinstance(prefix, dict) else {}
    first = prefix.get("first_difference")
    first = first if isinstance(first, dict) else {}
    actions = report.get("actions")
    previous = prefix.get("previous_step")
    return HeaderStep(
        header.step,
        stored.seq,
        {k: _int(tokens.get(k)) for k in LOGGED_SECTIONS},
        _int(tokens.get("total")),
        {k: _int(budget.get(k)) for k in ("input_limit", "pressure_line", "target")},
        tuple(dict(a) for a in actions if isinstance(a, dict)) if isinstance(actions, list) else (),
        previous if isinstance(previous, int) and not isinstance(previous, bool) else None,
        _int(prefix.get("shared_tokens")),
        str(first.get("section") or ""),
        str(first.get("reason") or ""),
    )


def header_steps(events: Iterable[StoredEvent]) -> list[HeaderStep]:
    """Every ``request`` event among ``events``, in order."""
    return [header_step(ev) for ev in events if isinstance(ev.event, RequestHeader)]
