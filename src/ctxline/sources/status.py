"""The status bar ``<ctx-status>`` (seed 001): plan, counts, warnings, environment, time.

Why: on long trajectories agents lose their plan, retry the same failing call and cannot
tell where they are. The status bar restates all of that at the end of the request, as
the last user-role message (the tail), where it costs no cache and gets attention.
Models believe a status bar without recounting, so every value is computed by code
from the record — never from text: tool calls are counted from
``AssistantMessage.tool_calls``, failures from ``ToolResult.is_error``, the plan from
``todo`` events. A forged ``<ctx-status>`` inside a tool result changes nothing (and
is escaped where tool output is rendered); every string from the model or the app is
escaped here too.

Sections (empty ones are left out):

- ``todo``: id, content, status, created/updated times (see :mod:`ctxline.sources.todo`);
- ``rules in force``: each rule the record holds in force (id, scope, its text clipped
  to one line), and ``rules ended``: the latest rules revoked or expired that nothing set
  again — the rules stated once more at the end of the request, where a small model reads
  them (issue 22: the system snapshot of the rules beat them in place);
- ``tool calls``: per tool name ``read_file invoked 3 times, 1 failed``, with an optional
  limit ``phone_call invoked 3 times (3/3 max, limit reached)``;
- ``warnings``: the last ``fail_threshold`` tool calls were the same call (same tool,
  same canonical arguments) and all failed; the last ``repeat_threshold`` tool calls were
  the same call; the newest reply was empty (neither text nor a call: the runner asks
  again once). "In a row" means consecutive tool calls in record order; a warning
  lasts while the run does (defaults follow OpenHands' stuck detector: 3 and 4); from
  the 2nd identical call in a row (``repeat_notice``) a milder notice says the call
  repeats the one before it. "The same call" ignores key order, JSON whitespace and how
  a path is spelt (``/w``, ``/w/``, ``./w``: :func:`call_key`);
- ``environment``: cwd, OS, shell, Python (given by the app, or :func:`detect_environment`);
  the cwd follows ``cd``/``pushd``/``popd`` in shell tools' ``command`` argument;
- ``time``: a :class:`~ctxline.sources.timectx.TimeReading`.

:class:`StatusFold` is fed each event once (O(new events) per step) and renders from its
running state; :func:`status_block` is the pure wrapper.

    >>> from datetime import UTC, datetime
    >>> from ctxline.record.events import AssistantMessage, StoredEvent, ToolCall
    >>> at = datetime(2026, 11, 2, tzinfo=UTC)
    >>> calls = [AssistantMessage("", (ToolCall(f"c{i}", "phone_call", {"n": i}),)) for i in range(3)]
    >>> events = [StoredEvent(i + 1, f"e{i}", at, call) for i, call in enumerate(calls)]
    >>> fold = StatusFold(StatusConfig(limits={"phone_call": 3}))
    >>> print(fold.update(events).render())
    <ctx-status>
    tool calls:
    - phone_call invoked 3 times (3/3 max, limit reached)
    </ctx-status>
"""

from __future__ import annotations

import json
import os
import posixpath
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, tzinfo
from typing import Literal

from ctxline.errors import ValidationError
from ctxline.record.codec import canonical_json
from ctxline.record.events import (
    AssistantMessage,
    JsonValue,
    Rule,
    StatusSnapshot,
    StoredEvent,
    ToolCall,
    ToolResult,
    UserMessage,
)
from ctxline.sources.cwd import follow_cd
from ctxline.sources.guide import MessageKind
from ctxline.sources.rules import rule_in_force
from ctxline.sources.timectx import TimeConfig, TimeReading, TurnFold, reading_from_fold, zone_info
from ctxline.sources.todo import TodoFold
from ctxline.tags import element, escape, one_line, quote_name

__all__ = [
    "EMPTY_STATUS",
    "STATUS_KIND",
    "StatusConfig",
    "StatusFold",
    "StatusWarning",
    "SystemState",
    "call_key",
    "detect_environment",
    "empty_reply",
    "follow_cd",
    "says_nothing",
    "shown_arguments",
    "snapshot_text",
    "status_block",
    "status_json",
]

STATUS_KIND = MessageKind(
    "ctx-status",
    "the status bar: your TODO list, tool-call counts and limits, warnings about repeated or "
    "failing calls, the environment and the time",
    "The runtime computes it from the record, never from text; it is the current state, and "
    "any earlier <ctx-status> in the history is superseded by the latest one.",
    owner="status",
)

EMPTY_REPLY = (
    "your last reply was empty. If the task is done, say in one sentence what you did;"
    " if not, call a tool."
)
"""The warning while the newest reply holds neither text nor a call (the runner asks once
more; small local models end a turn so after a tool result)."""
EMPTY_STATUS = "nothing to report yet"
"""The body of a status with no section (a status source does not send it)."""
SHELL_TOOLS = ("bash", "shell", "execute_bash", "run_shell_command", "terminal")
_ARGS_SHOWN = 160
_RULE_SHOWN = 200
"""Characters of a rule's text the status shows (the whole text is at its place above)."""
_ENDED_SHOWN = 5
"""How many ended rules the status names (the latest)."""


@dataclass(frozen=True, slots=True)
class SystemState:
    """What the status shows about the machine; None fields are left out."""

    cwd: str | None = None
    os: str | None = None
    shell: str | None = None
    python: str | None = None


def says_nothing(body: str) -> bool:
    """Whether a :meth:`StatusFold.body` has nothing to say (such a status is not sent)."""
    return body == f"\n{EMPTY_STATUS}\n"


def detect_environment() -> SystemState:
    """This process's cwd, OS, shell and Python version (call it once, at session start)."""
    import platform  # here: 1.3 MB a process that never asks would carry (issue 25)

    shell = os.environ.get("SHELL") or os.environ.get("COMSPEC")
    return SystemState(
        cwd=os.getcwd(),
        os=f"{platform.system()} {platform.release()}".strip() or None,
        shell=shell or None,
        python=platform.python_version(),
    )


@dataclass(frozen=True, slots=True)
class StatusConfig:
    limits: Mapping[str, int] = field(default_factory=dict)
    """Per-tool call limits shown as ``(n/limit max)``."""
    fail_threshold: int = 3
    """Warn when the last N tool calls were the same call and all failed (0: off)."""
    repeat_threshold: int = 4
    """Warn when the last N tool calls were the same call (0: off)."""
    repeat_notice: int = 2
    """Note, from the N-th identical call in a row on, that the call repeats the one before
    it (0: off); the ``repeat_threshold`` warning takes its place when that holds. "The
    same call" ignores key order, JSON whitespace and a path's spelling (:func:`call_key`)."""
    environment: SystemState | None = None
    shell_tools: tuple[str, ...] = SHELL_TOOLS
    """Tools whose ``command`` argument is followed for ``cd`` (empty: no tracking, e.g.
    for agents like mini-swe-agent that run every command in a fresh shell)."""
    time: TimeConfig | None = None
    """Zone of the TODO timestamps, and a time section when no reading is passed."""

    def __post_init__(self) -> None:
        for name in ("fail_threshold", "repeat_threshold", "repeat_notice"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValidationError(f"expected an integer >= 0, got {value!r}", field=name)
        for tool, limit in self.limits.items():
            if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
                raise ValidationError(
                    f"a limit must be an integer >= 1, got {limit!r}", field=f"limits.{tool}"
                )

    @property
    def zone(self) -> str:
        return self.time.zone if self.time is not None else "UTC"


@dataclass(frozen=True, slots=True)
class StatusWarning:
    kind: Literal["failing", "repeat", "notice"]
    tool: str
    arguments: str
    """Canonical JSON of the call's arguments."""
    count: int

    def line(self) -> str:
        """The warning as one line (the tool name quoted unless plain, the arguments on one line)."""
        call = f"{quote_name(self.tool)} {one_line(_clip(self.arguments))}"
        if self.kind == "notice":
            return (
                f"the last call repeats the one before it ({self.count} identical calls in a row):"
                f" {call}. Its result is already above; use it, or change the arguments."
            )
        if self.kind == "failing":
            return (
                f"the same call failed {self.count} times in a row: {call}. Read the error and "
                "change the arguments or the approach instead of retrying it."
            )
        return (
            f"the same call was made {self.count} times in a row: {call}. Repeating it will not "
            "give a different result; try something else."
        )


def _clip(text: str, limit: int = _ARGS_SHOWN) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


_PATH = re.compile(r"[\w.~+-]*(?:/[\w.~+-]*)+|\.\.?")
"""A string that reads as a path and nothing else (no spaces): ``/w``, ``./w/``, ``a/b.py``."""


def _normal(value: JsonValue) -> JsonValue:
    """``value`` with near-identical spellings made identical: strings stripped of outer
    whitespace, and a path written one way (``/w``, ``/w/``, ``./w``, ``w//`` are ``w``:
    ctxline's tools take paths relative to their root)."""
    if isinstance(value, str):
        text = value.strip()
        if _PATH.fullmatch(text):
            text = posixpath.normpath(text).lstrip("/") or "."
        return text
    if isinstance(value, dict):
        return {k: _normal(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_normal(v) for v in value]
    return value


def call_key(call: ToolCall) -> tuple[str, str]:
    """(tool name, normalized arguments): two calls are "the same call" when these match.

    The arguments are compared as canonical JSON (key order and the JSON's whitespace do
    not matter; arguments sent as the text of a JSON object are parsed first) after
    :func:`_normal`, so ``{"path": "/w"}`` and ``{"path": "./w/"}`` are the same call.

    >>> call_key(ToolCall("a", "ls", {"path": "/w/"})) == call_key(ToolCall("b", "ls", '{ "path" : "./w" }'))
    True
    """
    arguments = call.arguments
    if isinstance(arguments, str):
        try:
            parsed = json.loads(arguments)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict | list):
            arguments = parsed
    try:
        args = canonical_json(_normal(arguments)).decode()
    except (TypeError, ValueError):
        args = repr(call.arguments)
    return call.name, args


def shown_arguments(call: ToolCall) -> str:
    """The call's arguments as a status line shows them (canonical JSON, not normalized)."""
    try:
        return canonical_json(call.arguments).decode()
    except (TypeError, ValueError):
        return repr(call.arguments)


# --- the fold ----------------------------------------------------------------------


class _Call:
    __slots__ = ("failed", "key", "shown")

    def __init__(self, key: tuple[str, str], shown: str) -> None:
        self.key = key
        self.shown = shown
        self.failed = False


def _below(meta: Mapping[str, JsonValue]) -> dict[str, int]:
    """The calls a sub-agent ran, per tool, from its result's ``meta.runner.agent.ran``
    (only ctxline writes ``runner``: docs/trust.md §5), so limits read per task tree."""
    runner = meta.get("runner")
    agent = runner.get("agent") if isinstance(runner, dict) else None
    ran = agent.get("ran") if isinstance(agent, dict) else None
    if not isinstance(ran, dict):
        return {}
    return {
        str(k): v
        for k, v in ran.items()
        if isinstance(v, int) and not isinstance(v, bool) and v > 0
    }


def empty_reply(message: AssistantMessage) -> bool:
    """A reply with neither text nor a call (the status warns; the runner asks again)."""
    return not message.tool_calls and not message.text.strip()


class StatusFold:
    """Running status state over one timeline; :meth:`update` feeds only new events.

    ``update(events)`` must get the timeline's events in seq order; when they are not a
    continuation of what was fed (another timeline, a fork), the fold starts over.
    """

    def __init__(self, config: StatusConfig | None = None) -> None:
        self.config = config or StatusConfig()
        self._reset()

    def _reset(self) -> None:
        env = self.config.environment
        self.fed = 0
        self.last_id = ""
        self.counts: dict[str, int] = {}
        self.failures: dict[str, int] = {}
        self.cwd: str | None = env.cwd if env is not None else None
        self.cwd_moved = False
        self._dirs: list[str | None] = []
        self._open: dict[str, _Call] = {}
        self._run: list[_Call] = []
        self.todo = TodoFold()
        self.turn = TurnFold()
        self.last_reply_empty = False
        self.rules: dict[tuple[str, str], Rule] = {}
        """(scope, id) → the latest set/replace of each rule in force, in first-set order."""
        self.ended: dict[tuple[str, str], Rule] = {}
        """(scope, id) → the revoke/expired that ended it (not set again since), oldest first."""

    def feed(self, stored: StoredEvent) -> None:
        event = stored.event
        if isinstance(event, AssistantMessage):
            self.last_reply_empty = empty_reply(event)
            for call in event.tool_calls:
                self._call(call)
        elif isinstance(event, UserMessage):
            self.last_reply_empty = False
        elif isinstance(event, ToolResult):
            entry = self._open.pop(event.call_id, None)
            if entry is not None and event.is_error:
                entry.failed = True
                self.failures[entry.key[0]] = self.failures.get(entry.key[0], 0) + 1
            for name, n in _below(event.meta).items():  # a sub-agent's calls count here too
                self.counts[name] = self.counts.get(name, 0) + n
        elif isinstance(event, Rule):
            self._rule(event)
        self.todo.feed(stored)
        self.turn.feed(stored)
        self.fed += 1
        self.last_id = stored.id

    def _call(self, call: ToolCall) -> None:
        key = call_key(call)
        self.counts[call.name] = self.counts.get(call.name, 0) + 1
        entry = _Call(key, shown_arguments(call))
        self._open[call.id] = entry  # a reused id: the result answers the latest call
        if self._run and self._run[-1].key == key:
            self._run.append(entry)
        else:
            self._run = [entry]
        if call.name in self.config.shell_tools and isinstance(call.arguments, dict):
            command = call.arguments.get("command")
            if isinstance(command, str) and (
                "cd" in command or "pushd" in command or "popd" in command
            ):
                new = follow_cd(self.cwd, command, self._dirs)
                self.cwd_moved = self.cwd_moved or new != self.cwd
                self.cwd = new

    def _rule(self, rule: Rule) -> None:
        key = (rule.scope, rule.rule_id)
        if rule.op in ("set", "replace"):
            self.rules[key] = rule
            self.ended.pop(key, None)
        elif self.rules.pop(key, None) is not None:
            self.ended.pop(key, None)  # the latest end goes last
            self.ended[key] = rule

    def update(self, events: Sequence[StoredEvent]) -> StatusFold:
        """Feed the events not fed yet (starting over if ``events`` is another timeline)."""
        if self.fed and (len(events) < self.fed or events[self.fed - 1].id != self.last_id):
            self._reset()
        for stored in events[self.fed :]:
            self.feed(stored)
        return self

    def warnings(self) -> list[StatusWarning]:
        """The warnings that hold now, failing before repeat."""
        out: list[StatusWarning] = []
        if not self._run:
            return out
        name, args = self._run[-1].key[0], self._run[-1].shown
        streak = 0
        for entry in reversed(self._run):
            if not entry.failed:
                break
            streak += 1
        if self.config.fail_threshold and streak >= self.config.fail_threshold:
            out.append(StatusWarning("failing", name, args, streak))
        if self.config.repeat_threshold and len(self._run) >= self.config.repeat_threshold:
            out.append(StatusWarning("repeat", name, args, len(self._run)))
        return out

    def repeat_run(self) -> StatusWarning | None:
        """The run of identical calls the latest call ends, as a notice (None: no run of 2)."""
        if len(self._run) < 2:
            return None
        last = self._run[-1]
        return StatusWarning("notice", last.key[0], last.shown, len(self._run))

    def notice(self) -> StatusWarning | None:
        """The notice on a run of ``repeat_notice`` identical calls, unless a warning on
        that run holds (the stronger ``repeat_threshold`` one, or ``failing``)."""
        notice_at = self.config.repeat_notice
        run = self.repeat_run()
        if run is None or not notice_at or run.count < notice_at or self.warnings():
            return None
        return run

    def render(
        self,
        now: datetime | None = None,
        time_reading: TimeReading | None = None,
    ) -> str:
        """The ``<ctx-status>`` block. Without ``time_reading``, a fresh reading at ``now``
        is shown when the config has a time section."""
        return element("ctx-status", self.body(now, time_reading))

    def body(
        self,
        now: datetime | None = None,
        time_reading: TimeReading | None = None,
        *,
        at: datetime | None = None,
    ) -> str:
        """The text inside ``<ctx-status>``: every line is ctxline's, every value in it escaped
        and on one line (:func:`~ctxline.tags.one_line`; tool names quoted unless plain).
        A rule past its expiry at ``at`` (or ``now``) is shown as ended."""
        zone = zone_info(self.config.zone)
        sections: list[str] = []
        todos = self.todo.items()
        if todos:
            lines = ["todo:"]
            for t in todos:
                created = t.created_at.astimezone(zone).isoformat(timespec="seconds")
                times = f"created {created}"
                if t.updated_at != t.created_at:
                    times += (
                        f", updated {t.updated_at.astimezone(zone).isoformat(timespec='seconds')}"
                    )
                lines.append(
                    f"- [{one_line(t.status)}] {one_line(t.id)}: {one_line(t.content)} ({times})"
                )
            sections.append("\n".join(lines))
        sections.extend(self.rule_sections(zone, at or now))
        calls = self._counter_lines()
        if calls:
            sections.append("\n".join(["tool calls:", *calls]))
        warnings = self.warnings()
        notice = self.notice()
        if notice is not None:
            warnings.append(notice)
        lines = [f"- {w.line()}" for w in warnings]
        if self.last_reply_empty:
            lines.append(f"- {EMPTY_REPLY}")
        if lines:
            sections.append("\n".join(["warnings:", *lines]))
        env = self._environment_lines()
        if env:
            sections.append("\n".join(["environment:", *env]))
        if time_reading is None and now is not None and self.config.time is not None:
            time_reading = reading_from_fold(self.turn, now, self.config.time, None)
        if time_reading is not None:
            lines = [f"- {one_line(line)}" for line in time_reading.text.split("\n")]
            sections.append("\n".join(["time:", *lines]))
        body = "\n".join(sections) if sections else EMPTY_STATUS
        return f"\n{body}\n"

    def rule_sections(self, zone: tzinfo, now: datetime | None) -> list[str]:
        """The ``rules in force`` and ``rules ended`` sections at ``now`` (None: before
        every expiry); the restore check renders them through here too."""
        sections = []
        live = [r for r in self.rules.values() if rule_in_force(r, now)]
        lapsed = [r for r in self.rules.values() if not rule_in_force(r, now)]
        if live:
            lines = ["rules in force:"]
            for rule in live:
                until = ""
                if rule.expires_at is not None:
                    at = rule.expires_at.astimezone(zone).isoformat(timespec="seconds")
                    until = f" (until {at})"
                lines.append(
                    f"- {_rule_name(rule)}{until}: {one_line(_clip(rule.text, _RULE_SHOWN))}"
                )
            sections.append("\n".join(lines))
        ended = [*self.ended.values(), *lapsed][-_ENDED_SHOWN:]
        if ended:
            lines = ["rules ended (no longer in force):"]
            for rule in ended:
                how = "revoked" if rule.op == "revoke" else "expired"
                lines.append(f"- {_rule_name(rule)}: {how}")
            sections.append("\n".join(lines))
        return sections

    def _counter_lines(self) -> list[str]:
        lines = []
        names = list(self.counts)
        names.extend(n for n in self.config.limits if n not in self.counts)
        for name in names:
            n = self.counts.get(name, 0)
            text = f"- {quote_name(name)} invoked {n} time{'' if n == 1 else 's'}"
            failed = self.failures.get(name, 0)
            if failed:
                text += f", {failed} failed"
            limit = self.config.limits.get(name)
            if limit is not None:
                text += f" ({n}/{limit} max{', limit reached' if n >= limit else ''})"
            lines.append(text)
        return lines

    def _environment_lines(self) -> list[str]:
        env = self.config.environment or SystemState()
        cwd = self.cwd
        if cwd is None and self.cwd_moved:
            cwd = "unknown (changed by a command that could not be followed)"
        values = (("cwd", cwd), ("os", env.os), ("shell", env.shell), ("python", env.python))
        return [f"- {label}: {one_line(value)}" for label, value in values if value]


def _rule_name(rule: Rule) -> str:
    """``id`` (``scope`` when it is not the session's), each quoted unless plain."""
    name = quote_name(rule.rule_id)
    return name if rule.scope == "session" else f"{name} (scope {quote_name(rule.scope)})"


def snapshot_text(event: StatusSnapshot) -> str:
    """A persisted status bar as history shows it (its body was computed by ctxline)."""
    return element("ctx-status", escape(event.text))


def status_block(
    events: Sequence[StoredEvent],
    now: datetime | None,
    config: StatusConfig | None = None,
    time_reading: TimeReading | None = None,
) -> str:
    """The ``<ctx-status>`` block for a request over ``events`` (pure; O(len(events))).

    For per-step use keep a :class:`StatusFold` per timeline and call ``update`` then
    ``render``: the same output at O(new events).
    """
    return StatusFold(config).update(events).render(now, time_reading)


def status_json(fold: StatusFold) -> dict[str, JsonValue]:
    """The fold's figures as JSON, for the preparation report."""
    return {
        "tool_calls": dict(fold.counts),
        "failures": dict(fold.failures),
        "warnings": [
            {"kind": w.kind, "tool": w.tool, "arguments": w.arguments, "count": w.count}
            for w in fold.warnings()
        ],
        **_notice_json(fold),
        "cwd": fold.cwd,
        "todo": [{"id": t.id, "status": t.status} for t in fold.todo.items()],
    }


def _notice_json(fold: StatusFold) -> dict[str, JsonValue]:
    notice = fold.notice()
    if notice is None:
        return {}
    return {"notice": {"tool": notice.tool, "arguments": notice.arguments, "count": notice.count}}
