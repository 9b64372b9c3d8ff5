"""Whether a status bar's text is one ctxline computes from the record (a trusted restore).

A ``status`` snapshot (and the status block in a logged request's tail) is ctxline's own
text. When an export is restored (``ctxline import --trusted``) the text comes from a
file, so it is checked line by line against what :class:`~ctxline.sources.status.StatusFold`
derives from the events before it: the TODO lines, the call counts and failures, the
warnings are the record's, exactly; what the app configured and the record does not hold
— the call limits, the environment values, the time zone of the timestamps — must be in
the form code writes (a limit consistent with its count, one-line escaped values, a
timestamp denoting the same instant, a time reading consistent with the turn). Anything
else — a line the code would not write, a count that differs — is refused.

    check_status_body(snapshot.text, events_before)  # None, or why it is not ctxline's
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import datetime, timedelta

from ctxline.errors import ValidationError
from ctxline.record.events import StoredEvent
from ctxline.sources.status import EMPTY_STATUS as EMPTY
from ctxline.sources.status import StatusConfig, StatusFold
from ctxline.sources.timectx import (
    ELAPSED_LABEL,
    FIRST_TURN,
    NOW_LABEL,
    format_elapsed,
    format_now,
    zone_info,
)
from ctxline.tags import one_line, quote_name

__all__ = ["StatusChecker", "check_status_body"]

RULE_SECTIONS = ("rules in force:", "rules ended (no longer in force):")
SECTIONS = ("todo:", *RULE_SECTIONS, "tool calls:", "warnings:", "environment:", "time:")
_TIMES = re.compile(r" \(created (\S+?)(?:, updated (\S+?))?\)$")
_LIMIT = re.compile(r" \((\d+)/([1-9]\d*) max(, limit reached)?\)$")
_UNCALLED = re.compile(r"^- (.+) invoked 0 times \(0/([1-9]\d*) max\)$")
_NOW = re.compile(r"^(\S+) \((.+)\)$")
_ENV = ("cwd", "os", "shell", "python")


class StatusChecker:
    """Checks status texts along one timeline, folding the record once (O(events))."""

    def __init__(self) -> None:
        self.fold = StatusFold(StatusConfig(fail_threshold=1, repeat_threshold=1))

    def feed(self, stored: StoredEvent) -> None:
        """The next event of the record (a streamed restore feeds them one by one)."""
        self.fold.feed(stored)

    def check(self, body: str, events: Sequence[StoredEvent] | None = None) -> str | None:
        """Why ``body`` (the text inside ``<ctx-status>``) is not what ctxline computes from
        ``events`` (the record before it; None: the events fed so far), or None when every
        line is."""
        fold = self.fold if events is None else self.fold.update(events)
        if not (body.startswith("\n") and body.endswith("\n")) or len(body) < 2:
            return "the text does not start and end with a line break"
        lines = body[1:-1].split("\n")
        if lines == [EMPTY]:
            if fold.todo.items() or fold.counts:
                return f'"{EMPTY}", but the record has TODO items or tool calls'
            return None
        sections: dict[str, list[str]] = {}
        order: list[str] = []
        for line in lines:
            if line in SECTIONS:
                if line in sections or (order and SECTIONS.index(line) < SECTIONS.index(order[-1])):
                    return f"section {line!r} is repeated or out of order"
                sections[line] = []
                order.append(line)
            elif not order or not line.startswith("- "):
                return f"a line ctxline does not write: {line[:80]!r}"
            else:
                sections[order[-1]].append(line)
        if any(not body_lines for body_lines in sections.values()):
            return "an empty section"
        why = self._rules(sections)
        if why is not None:
            return f"rules: {why}"
        for header, check in (
            ("todo:", self._todo),
            ("tool calls:", self._calls),
            ("warnings:", self._warnings),
            ("environment:", self._environment),
            ("time:", self._time),
        ):
            why = check(sections.get(header, []))
            if why is not None:
                return f"{header[:-1]}: {why}"
        return None

    def _rules(self, sections: dict[str, list[str]]) -> str | None:
        """The rule sections as the fold renders them at some step time: before every
        expiry, or at one of the rules' expiries (which timed rules have lapsed)."""
        shown = [
            "\n".join([header, *sections[header]]) for header in RULE_SECTIONS if header in sections
        ]
        fold = self.fold
        zone = zone_info(fold.config.zone)
        expiries = sorted({r.expires_at for r in fold.rules.values() if r.expires_at is not None})
        for at in (None, *expiries):
            if fold.rule_sections(zone, at) == shown:
                return None
        return "the rules shown are not the rules in force and ended in the record"

    def _todo(self, lines: list[str]) -> str | None:
        items = self.fold.todo.items()
        if len(lines) != len(items):
            return f"{len(lines)} lines, but the record has {len(items)} TODO items"
        for line, item in zip(lines, items, strict=True):
            match = _TIMES.search(line)
            if match is None:
                return f"no created time: {line[:80]!r}"
            created, updated = match.group(1), match.group(2)
            if not _same_instant(created, item.created_at):
                return f"item {item.id!r} was not created at {created}"
            if (updated is None) != (item.updated_at == item.created_at):
                return f"item {item.id!r}: the updated time does not match the record"
            if updated is not None and not _same_instant(updated, item.updated_at):
                return f"item {item.id!r} was not updated at {updated}"
            head = f"- [{one_line(item.status)}] {one_line(item.id)}: {one_line(item.content)}"
            if line[: match.start()] != head:
                return f"item {item.id!r} does not read as the record has it"
        return None

    def _calls(self, lines: list[str]) -> str | None:
        fold = self.fold
        names = list(fold.counts)
        if len(lines) < len(names):
            return f"{len(lines)} lines, but {len(names)} tools were called"
        for line, tool in zip(lines, names, strict=False):
            n = fold.counts[tool]
            base = f"- {quote_name(tool)} invoked {n} time{'' if n == 1 else 's'}"
            failed = fold.failures.get(tool, 0)
            if failed:
                base += f", {failed} failed"
            if line == base:
                continue
            limit = _LIMIT.fullmatch(line[len(base) :]) if line.startswith(base) else None
            if limit is None or int(limit.group(1)) != n:
                return f"the line of {tool!r} does not match its count in the record"
            if bool(limit.group(3)) != (n >= int(limit.group(2))):
                return f"the limit of {tool!r} does not match its count"
        for line in lines[len(names) :]:
            uncalled = _UNCALLED.match(line)
            if uncalled is None:
                return f"a line no tool call in the record gives: {line[:80]!r}"
            shown = uncalled.group(1)
            try:
                tool = json.loads(shown) if shown.startswith('"') else shown
            except ValueError:
                return f"not a tool name: {shown[:80]!r}"
            if not isinstance(tool, str) or quote_name(tool) != shown or tool in fold.counts:
                return f"not a tool name ctxline writes, or a called tool: {shown[:80]!r}"
        return None

    def _warnings(self, lines: list[str]) -> str | None:
        found = [*self.fold.warnings(), self.fold.repeat_run()]
        possible = [f"- {w.line()}" for w in found if w is not None]
        at = 0
        for line in lines:
            while at < len(possible) and possible[at] != line:
                at += 1
            if at == len(possible):
                return f"a warning the record does not give: {line[:80]!r}"
            at += 1
        return None

    def _environment(self, lines: list[str]) -> str | None:
        labels = [label for label in _ENV for line in lines if line.startswith(f"- {label}: ")]
        if len(labels) != len(lines) or labels != sorted(set(labels), key=_ENV.index):
            return "lines other than cwd, os, shell and python, once each and in that order"
        for label, line in zip(labels, lines, strict=True):
            value = line[len(label) + 4 :]
            if not value or one_line(value) != value:
                return f"the {label} is not one escaped line"
        return None

    def _time(self, lines: list[str]) -> str | None:
        if not lines:
            return None
        now_prefix, elapsed_prefix = f"- {NOW_LABEL}: ", f"- {ELAPSED_LABEL}: "
        if (
            len(lines) != 2
            or not lines[0].startswith(now_prefix)
            or not lines[1].startswith(elapsed_prefix)
        ):
            return "not the two lines of a time reading"
        match = _NOW.match(lines[0][len(now_prefix) :])
        try:
            if match is None:
                raise ValueError
            zone_info(match.group(2))
            now = datetime.fromisoformat(match.group(1))
            if format_now(now, match.group(2)) != match.group(0):
                raise ValueError
        except (ValueError, ValidationError):
            return "the time is not written as ctxline writes it"
        elapsed = lines[1][len(elapsed_prefix) :]
        baseline = self.fold.turn.baseline_at
        if baseline is None:
            allowed = {FIRST_TURN}
        else:
            low = max(0, int((now - baseline) // timedelta(seconds=1)))
            allowed = {format_elapsed(low), format_elapsed(low + 1)}
        if elapsed not in allowed:
            return f"elapsed {elapsed!r} does not match the record ({' or '.join(sorted(allowed))})"
        return None


def _same_instant(text: str, at: datetime) -> bool:
    try:
        shown = datetime.fromisoformat(text)
    except ValueError:
        return False
    return (
        shown.tzinfo is not None
        and shown.isoformat(timespec="seconds") == text
        and shown == at.replace(microsecond=0)
    )


def check_status_body(body: str, events: Sequence[StoredEvent]) -> str | None:
    """Why ``body`` is not a status ctxline computes from ``events`` (None: it is)."""
    return StatusChecker().check(body, events)
