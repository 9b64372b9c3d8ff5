"""The environment's answers, in natural language: what happened, why, and what to do.

Seed 002: a refused or rolled-back action answers like a colleague, not with an error
code — it names the rule that was violated and how to satisfy it, says that nothing was
changed, and restates the constraints on what the call touched. The answer is the tool
result the model reads; everything in it that came from the model, the app or another
agent (arguments, values, constraint texts) is quoted on one line
(:func:`~ctxline.sources.lines.quoted`), so it cannot pass for a line of ctxline's.

    >>> print(rolled_back("refund-window", "booking ABC123 was made 5 days ago", "offer a travel certificate"))
    Rolled back: nothing was changed.
    Rule violated: refund-window: booking ABC123 was made 5 days ago.
    To satisfy it: offer a travel certificate.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from ctxline.environment.state import Constraint
from ctxline.record.events import JsonValue, Slot
from ctxline.sources.lines import clip, one_line, quoted, value_line

__all__ = [
    "changed_lines",
    "conflict",
    "constraint_line",
    "linked_constraints",
    "locked",
    "not_allowed",
    "not_executed",
    "rolled_back",
    "stamp",
    "turn_rolled_back",
    "wrong_arguments",
]

_SHOWN = 240


def _sentence(text: str) -> str:
    text = text.strip()
    return text if not text or text[-1] in ".!?" else text + "."


def stamp(at: datetime | None) -> str:
    """A ``last_updated`` time as the block shows it (UTC, seconds)."""
    return "never" if at is None else at.strftime("%Y-%m-%dT%H:%M:%SZ")


def rolled_back(rule: str, problem: str, fix: str) -> str:
    lines = [
        "Rolled back: nothing was changed.",
        f"Rule violated: {one_line(rule)}: {_sentence(one_line(problem))}",
    ]
    if fix:
        lines.append(f"To satisfy it: {_sentence(one_line(fix))}")
    return "\n".join(lines)


def turn_rolled_back(failed: str, index: int, reason: str) -> str:
    """What the other calls of a turn transaction say when call ``index`` failed."""
    return (
        f"Rolled back with the rest of this turn: nothing was changed. The calls of one turn "
        f"apply together, and call {index} ({one_line(failed)}) failed: {_sentence(one_line(reason))} "
        "Fix that call, then send the turn's calls again."
    )


def not_allowed(action: str, roles: Sequence[str], role: str) -> str:
    return (
        f"Not done: {one_line(action)} may be called by {', '.join(one_line(r) for r in roles)};"
        f" you act as {one_line(role)}. Nothing was changed. Ask an agent with one of those roles,"
        " or choose an action your role may call."
    )


def locked(action: str, after: str, problem: str) -> str:
    return (
        f"Not available yet: {one_line(action)} is available after {one_line(after)}. "
        f"Now: {_sentence(one_line(problem))} Nothing was changed. Do what unlocks it first,"
        " then call it again."
    )


def wrong_arguments(action: str, problem: str, parameters: JsonValue) -> str:
    return (
        f"Not done: the arguments do not fit {one_line(action)}'s parameters: "
        f"{_sentence(one_line(problem))} Nothing was changed.\n"
        f"Its parameters: {clip(value_line(parameters), 600)}"
    )


def not_executed(action: str, problems: Iterable[str]) -> str:
    items = [f"- {clip(one_line(p), _SHOWN)}" for p in problems]
    return "\n".join(
        [
            f"Not executed: the pre-check of {one_line(action)} found problems, so it did not run"
            " and nothing was changed:",
            *items,
            "Fix these (check the ids and the state in the ctx-env block), then call it again.",
        ]
    )


def conflict(slots: Sequence[tuple[str, str, datetime | None, JsonValue]], board: str) -> str:
    """A write refused on the blackboard: (slot, who changed it, when, its value now)."""
    parts = [
        f"{one_line(name)} was changed by {one_line(by or 'another agent')} at {stamp(at)}"
        f" (now {clip(value_line(value), _SHOWN)})"
        for name, by, at, value in slots
    ]
    return (
        f"Conflict: nothing was written. On the shared blackboard {one_line(board)}, "
        + "; ".join(parts)
        + ", after the version your last view showed. Read the new value in the ctx-env block (your next"
        " request shows it), then call the action again if your change still applies."
    )


def constraint_line(c: Constraint) -> str:
    """One constraint as a line of the block or of a result (model-written ones marked)."""
    if c.by == "model":
        return f"- [{one_line(c.id)}, written by the model; grants nothing] {quoted(c.text)}"
    scope = f" (applies to: {', '.join(one_line(e) for e in c.entities)})" if c.entities else ""
    return f"- [{one_line(c.id)}] {one_line(c.text)}{scope}"


def linked_constraints(touched: set[str], constraints: Sequence[Constraint]) -> str:
    """The constraints restated in a result because the call touched what they name."""
    if not constraints:
        return ""
    names = ", ".join(one_line(t) for t in sorted(touched))
    return "\n".join([f"Constraints that apply to {names}:", *map(constraint_line, constraints)])


def changed_lines(events: Sequence[Slot]) -> str:
    """What a committed change did, one line per slot (the last change of each wins)."""
    last: dict[str, Slot] = {}
    for event in events:
        last.pop(event.name, None)
        last[event.name] = event
    out = []
    for event in last.values():
        if event.op == "clear":
            out.append(f"- {event.name}: cleared")
        elif event.op == "append":
            out.append(f"- {event.name}: added {clip(value_line(event.value), _SHOWN)}")
        else:
            out.append(f"- {event.name}: {clip(value_line(event.value), _SHOWN)}")
    return "\n".join(["Changed:", *out]) if out else ""
