"""Which recorded fields grant authority, and the check that keeps them ctxline's own.

Why: some folds decide what an agent may do from the record — the environment's slots
(a read-only flag that unlocks an action), the discovered tools (``meta.discovery``),
the runner's counts and jobs (``meta.runner``), the loaded skills (``meta.skills``),
the memories (``meta.memory``). A record line a user or a file wrote must never
set those: a ``slot`` event from ``ctxline append`` would pay a refund, an appended
``search_tools`` result would make a never-searched tool callable, a tool's own result
could say it was "refused" and so lift its ``max_calls``. The rule (issue 24): a fold
takes authority only from events ctxline itself wrote in that role; from outside they
are refused (``ctxline append``, ``ctxline import``), and ``import --trusted`` keeps
only what the record before it supports (:func:`trusted_meta`).

- :data:`AUTHORITY_KINDS`: event kinds whose every field is authority (``slot``);
- :data:`AUTHORITY_META`: ``meta`` keys ctxline's folds read as authority;
- :func:`outside_problem`: why an event may not come from outside (None: it may);
- :func:`without_authority`: a meta with those keys removed (a tool's own meta).

    >>> from ctxline.record.events import ToolResult
    >>> outside_problem(ToolResult("c1", "ok", "search_tools", meta={"discovery": {}}))
    "its meta holds 'discovery', which only ctxline writes (it grants authority to a fold)"
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ctxline.errors import ValidationError
from ctxline.record.events import Event, JsonValue, Pending, UnknownEvent

__all__ = [
    "AUTHORITY_KINDS",
    "AUTHORITY_META",
    "check_outside",
    "outside_problem",
    "without_authority",
]

AUTHORITY_KINDS: frozenset[str] = frozenset({"slot"})
"""Kinds a fold acts on whole: an environment slot is what its actions check."""

AUTHORITY_META: frozenset[str] = frozenset({"runner", "discovery", "skills", "memory"})
"""``meta`` keys written by ctxline's runner, discovery, skills and memory, read by their folds."""


def _meta(event: Event) -> Mapping[str, JsonValue]:
    if isinstance(event, UnknownEvent):
        meta = event.data.get("meta")
        return meta if isinstance(meta, dict) else {}
    return event.meta


def outside_problem(event: Event) -> str | None:
    """Why ``event`` may not be appended or imported from outside ctxline (None: it may)."""
    if event.kind in AUTHORITY_KINDS:
        return (
            f"a {event.kind!r} event changes what the agent may do, so only ctxline writes it"
            " (set environment slots in the app with Environment.set/apply)"
        )
    keys = sorted(k for k in _meta(event) if k in AUTHORITY_META)
    if keys:
        return (
            f"its meta holds {keys[0]!r}, which only ctxline writes (it grants authority to a fold)"
        )
    return None


def check_outside(
    events: Iterable[Event | Pending], *, where: str = "append", start: int = 1
) -> None:
    """Refuse the first event from outside that would grant authority, naming its position
    (``start``: the position of the first of ``events``)."""
    for index, item in enumerate(events, start=start):
        event = item.event if isinstance(item, Pending) else item
        problem = outside_problem(event)
        if problem is not None:
            raise ValidationError(f"event {index}: {problem}", field="meta", source=where)


def without_authority(
    meta: Mapping[str, JsonValue], keep: Iterable[str] = ()
) -> dict[str, JsonValue]:
    """``meta`` without the authority keys (except those in ``keep``, the writer's own role)."""
    kept = frozenset(keep)
    return {k: v for k, v in meta.items() if k not in AUTHORITY_META or k in kept}
