"""ctxline's own kinds from a file: refused, or restored from a ctxline export — checked.

Why: the ``guide``, ``tools``, ``request``, ``reduction`` and ``status`` kinds carry
authority (the system prompt, the tool list, the step counter, the view's edits, the
status bar), so they count only when ctxline's planner wrote them in this store. A file
is not that: :func:`refuse_own_kinds` stops an import at the first one, naming its kind,
file and line (the CLI exits 2). ``ctxline import --trusted`` is the one exception, for
restoring a ctxline export, and even then nothing is taken on faith —
:func:`restore_sessions` checks and re-derives every own event from the record before it:

- ``guide``: its version must be the sha256 of its text, and the text must be ctxline's
  guide composed from message kinds ctxline knows (``known_kinds``) — it is composed
  again from those kinds, so no stored text reaches the system prompt;
- ``tools``: name, description and parameters only; a tool named like one of ctxline's
  built-ins gets the built-in's spec, so a restored list never replaces them (and the
  next step re-adopts the Context's own tools anyway; descriptions and schemas are
  escaped when rendered);
- ``request``: its step must be its position among the timeline's requests and its
  ``upto_seq`` the event before it (the planner counts headers, it never reads a step
  number); a logged time reading and status block must be what code derives;
- ``reduction``: it may only refer to earlier events of the kind it edits;
- ``status``: every line must be what :class:`~ctxline.sources.status.StatusFold`
  computes from the record before it (:mod:`ctxline.sources.status_check`).

A kind added later to :data:`~ctxline.record.events.OWN_KINDS` without a check here is
refused even with ``--trusted``.

    sessions = restore_sessions(load_tree(path), trusted=False)  # raises on an own kind
    events = restore_events(located, trusted=True, session=sid, file=name)  # as they are read
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace
from datetime import UTC, datetime

from ctxline.discovery.fold import CALL_TOOL, SEARCH_TOOLS
from ctxline.discovery.source import REVEALED_KIND
from ctxline.errors import ValidationError
from ctxline.importers import ImportedSession
from ctxline.memory.source import MEMORY_KIND
from ctxline.record.authority import (
    AUTHORITY_KINDS,
    AUTHORITY_META,
    outside_problem,
    without_authority,
)
from ctxline.record.events import (
    OWN_KINDS,
    AssistantMessage,
    Event,
    Guide,
    JsonValue,
    Pending,
    Reduction,
    RequestHeader,
    Slot,
    StatusSnapshot,
    StoredEvent,
    ToolCall,
    ToolResult,
    Tools,
    UnknownEvent,
    UserMessage,
)
from ctxline.skills.source import READ_SKILL
from ctxline.sources.current import CURRENT_KIND
from ctxline.sources.dynamic import DYNAMIC_KIND
from ctxline.sources.guide import (
    CORE_KINDS,
    GUIDE_HEADING,
    GUIDE_INTRO,
    JOBS_KIND,
    LEGACY_GUIDE_HEADINGS,
    MessageKind,
    guide_version,
)
from ctxline.sources.slots import ENV_KIND
from ctxline.sources.status import STATUS_KIND
from ctxline.sources.status_check import StatusChecker
from ctxline.sources.timectx import TIME_KIND, TimeReading
from ctxline.tools.builtin import BUILTIN_TOOLS
from ctxline.view.compaction import COMPACTION_KINDS

__all__ = [
    "KNOWN_KINDS",
    "TrustedMeta",
    "refuse_own_kinds",
    "refuse_own_kinds_at",
    "restore_events",
    "restore_sessions",
]

KNOWN_KINDS: tuple[MessageKind, ...] = (
    *CORE_KINDS,
    STATUS_KIND,
    TIME_KIND,
    DYNAMIC_KIND,
    CURRENT_KIND,
    ENV_KIND,
    MEMORY_KIND,
    REVEALED_KIND,
    JOBS_KIND,
    *COMPACTION_KINDS,
)
"""The message kinds whose guide lines a restored guide may hold: every fixed one ctxline
defines. The skills line is not among them: its catalog is the app's skills directory, which
an export does not carry, so a guide holding it is refused rather than taken on trust."""

_SHA = re.compile(r"sha256:[0-9a-f]{64}")
_TOOL_KEYS = frozenset({"name", "description", "parameters"})
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _refused(
    session: str, file: str | None, index: int, line: int | None, kind: str, why: str
) -> ValidationError:
    where = "" if line is not None else f" (event {index + 1} of session {session!r})"
    return ValidationError(f"a {kind!r} event{where}: {why}", field="kind", line=line, source=file)


_NOT_FROM_OUTSIDE = (
    "that kind is ctxline's own record (written by its step planner) and is not taken from outside"
)


def refuse_own_kinds_at(pending: Pending, *, line: int, source: str) -> None:
    """Refuse one event of ``ctxline append`` that is of an own kind, or that would grant
    authority to a fold (:mod:`ctxline.record.authority`), naming its line."""
    kind = pending.event.kind
    if kind in OWN_KINDS:
        raise ValidationError(
            f"a {kind!r} event: {_NOT_FROM_OUTSIDE}", field="kind", line=line, source=source
        )
    problem = outside_problem(pending.event)
    if problem is not None:
        raise ValidationError(
            f"a {kind!r} event: {problem}; it is not taken from outside",
            field="kind" if kind in AUTHORITY_KINDS else "meta",
            line=line,
            source=source,
        )


def refuse_own_kinds(sessions: Iterable[ImportedSession]) -> list[ImportedSession]:
    """``sessions`` unchanged, or a :class:`ValidationError` at the first own kind."""
    out = list(sessions)
    for imported in out:
        session, file = _names(imported)
        for _ in restore_events(_located(imported), trusted=False, session=session, file=file):
            pass
    return out


def restore_sessions(
    sessions: Iterable[ImportedSession],
    *,
    trusted: bool,
    known_kinds: Sequence[MessageKind] = KNOWN_KINDS,
) -> list[ImportedSession]:
    """The sessions to import: own kinds refused, or (``trusted``) checked and re-derived."""
    if not trusted:
        return refuse_own_kinds(sessions)
    out = []
    for imported in sessions:
        session, file = _names(imported)
        events = restore_events(
            _located(imported), trusted=True, session=session, file=file, known_kinds=known_kinds
        )
        out.append(replace(imported, events=[p for p, _ in events]))
    return out


def _located(imported: ImportedSession) -> Iterator[tuple[Pending, int | None]]:
    lines = imported.lines
    return ((p, lines[i] if i < len(lines) else None) for i, p in enumerate(imported.events))


def _names(imported: ImportedSession) -> tuple[str, str | None]:
    file = imported.meta.get("file")
    return imported.id, file if isinstance(file, str) else None


def restore_events(
    events: Iterable[tuple[Pending, int | None]],
    *,
    trusted: bool,
    session: str,
    file: str | None,
    known_kinds: Sequence[MessageKind] = KNOWN_KINDS,
) -> Iterator[tuple[Pending, int | None]]:
    """One session's events (each with its file line), checked as they are read: an own
    kind refused (naming its kind, file and line), or (``trusted``) checked against the
    events before it and re-derived. Holds a byte per event, never the events."""
    state = _Restore(known_kinds) if trusted else None
    for index, (pending, line) in enumerate(events):
        event = pending.event
        if state is None:
            kind = event.kind
            if kind in OWN_KINDS:
                raise _refused(
                    session,
                    file,
                    index,
                    line,
                    kind,
                    f"{_NOT_FROM_OUTSIDE}; restore a ctxline export with --trusted",
                )
            problem = outside_problem(event)
            if problem is not None:
                why = f"{problem}; it is not taken from outside"
                raise _refused(session, file, index, line, kind, why)
            yield pending, line
            continue
        try:
            event = state.event(event)
        except ValueError as exc:
            raise _refused(session, file, index, line, event.kind, str(exc)) from None
        restored = replace(pending, event=event)
        at = pending.at or _EPOCH
        state.fed(StoredEvent(index + 1, pending.id or f"#{index + 1}", at, event))
        yield restored, line


_RUNNER_KEPT = frozenset({"agent", "job", "ms", "interrupted", "transaction", "renamed_ids"})
"""The runner's marks a restore keeps: they only add spend, list a job (whose output the
resumed run reports lost) or describe a call. ``refused`` is dropped: a restored refusal
counts as a run, so an edited export can never lift a ``max_calls``."""


class TrustedMeta:
    """``import --trusted``: the authority ``meta`` of each event kept only where the record
    before it supports it (the call it answers, by name and arguments); the rest dropped.

    A ``slot`` event must name its writer (``by``) and, when an action wrote it, a call of
    the reply before it with that action's name; an app-written value is restored as the
    export holds it (an export does not carry the environment's declarations to check it
    against: ``--trusted`` is for exports you made — docs/trust.md).
    """

    def __init__(self) -> None:
        self.calls: dict[str, ToolCall] = {}

    def check(self, event: Event) -> Event:
        if isinstance(event, Slot):
            by, call_id, action = (event.meta.get(k) for k in ("by", "call", "action"))
            call = self.calls.get(call_id) if isinstance(call_id, str) else None
            if not isinstance(by, str) or (
                call_id is not None and (call is None or call.name != action)
            ):
                raise ValueError(
                    "its 'by'/'call'/'action' do not name a writer and a call of the reply"
                    " before it, so it is not restored"
                )
            return event
        if isinstance(event, AssistantMessage):
            self.calls = {c.id: c for c in event.tool_calls}
            return replace(event, meta=self._runner(event.meta))
        if isinstance(event, ToolResult):
            return replace(event, meta=self._result(event))
        if isinstance(event, UnknownEvent):
            meta = event.data.get("meta")
            if isinstance(meta, dict) and set(meta) & AUTHORITY_META:
                data = {**event.data, "meta": without_authority(meta)}
                return UnknownEvent(event.kind, data)
            return event
        meta = getattr(event, "meta", None)
        if isinstance(meta, dict) and set(meta) & AUTHORITY_META:
            return replace(event, meta=self._runner(meta))
        return event

    @staticmethod
    def _runner(meta: dict[str, JsonValue]) -> dict[str, JsonValue]:
        out = without_authority(meta, ("memory",))
        runner = meta.get("runner")
        if isinstance(runner, dict):
            kept = {k: v for k, v in runner.items() if k in _RUNNER_KEPT}
            if kept:
                out["runner"] = kept
        return out

    def _result(self, event: ToolResult) -> dict[str, JsonValue]:
        out = self._runner(event.meta)
        call = self.calls.get(event.call_id)
        if call is None or call.name != event.name:
            out.pop("runner", None)  # it answers no call of the last reply: nothing it says counts
            return out
        args = call.arguments if isinstance(call.arguments, dict) else {}
        discovery = event.meta.get("discovery")
        if isinstance(discovery, dict):
            revealed = discovery.get("revealed")
            tool = discovery.get("tool")
            if call.name == SEARCH_TOOLS and isinstance(revealed, list):
                names: list[JsonValue] = [n for n in revealed if isinstance(n, str)]
                out["discovery"] = {
                    "query": str(discovery.get("query", ""))[:500],
                    "revealed": names,
                }
            elif call.name == CALL_TOOL and isinstance(tool, str) and args.get("name") == tool:
                out["discovery"] = {"tool": tool}
        skills = event.meta.get("skills")
        if isinstance(skills, dict) and call.name == READ_SKILL:
            loaded, handle = skills.get("loaded"), skills.get("handle")
            if isinstance(loaded, str) and isinstance(handle, str) and args.get("name") == loaded:
                out["skills"] = {"loaded": loaded, "handle": handle}
        return out


_RESULT, _USER = 1, 2
"""What :class:`_Restore` keeps of each event before: whether it is a tool result or a
user message (the only facts a reduction's check needs)."""


class _Restore:
    """One session's events in order, with what the checks need from before each: a
    kind flag per event and the status fold, never the events themselves."""

    def __init__(self, known: Sequence[MessageKind]) -> None:
        self.known = {kind.line(): kind for kind in known}
        self.kinds = bytearray()
        self.requests = 0
        self.status = StatusChecker()
        self.builtins = {tool.spec.name: tool.spec for tool in BUILTIN_TOOLS}
        self.marks = TrustedMeta()

    @property
    def count(self) -> int:
        """Events before the one being checked."""
        return len(self.kinds)

    def fed(self, stored: StoredEvent) -> None:
        """``stored`` (as restored) is the next event before the ones still to check."""
        event = stored.event
        flag = _RESULT if isinstance(event, ToolResult) else _USER if isinstance(event, UserMessage) else 0
        self.kinds.append(flag)
        self.status.feed(stored)

    def event(self, event: Event) -> Event:
        event = self.marks.check(event)
        match event:
            case Guide():
                return self.guide(event)
            case Tools():
                return self.tools(event)
            case RequestHeader():
                return self.request(event)
            case Reduction():
                return self.reduction(event)
            case StatusSnapshot():
                why = self.status.check(event.text)
                if why is not None:
                    raise ValueError(f"not the status ctxline computes from the record: {why}")
                return event
        if event.kind in OWN_KINDS:  # a kind this version cannot check
            raise ValueError(
                "this version of ctxline cannot check that kind, so it is not restored"
            )
        return event

    def guide(self, event: Guide) -> Guide:
        if event.version != guide_version(event.text):
            raise ValueError("its version is not the sha256 of its text")
        lines = event.text.split("\n")
        heading = lines[0]
        if (
            heading not in (GUIDE_HEADING, *LEGACY_GUIDE_HEADINGS)
            or lines[1:4] != ["", GUIDE_INTRO, ""]
            or len(lines) < 5
        ):
            raise ValueError("its text is not a guide ctxline composes")
        for line in lines[4:]:
            if line not in self.known:
                raise ValueError(f"its line {line[:80]!r} is not a message kind ctxline knows")
        text = "\n".join(
            [heading, "", GUIDE_INTRO, "", *(self.known[x].line() for x in lines[4:])]
        )
        return Guide(guide_version(text), text, event.meta)

    def tools(self, event: Tools) -> Tools:
        out: list[dict[str, JsonValue]] = []
        names: set[str] = set()
        for i, tool in enumerate(event.tools):
            name, description, parameters = (
                tool.get("name"),
                tool.get("description", ""),
                tool.get("parameters", {}),
            )
            if set(tool) - _TOOL_KEYS:
                raise ValueError(f"tool {i} has fields other than name, description, parameters")
            if not isinstance(name, str) or not name or name in names:
                raise ValueError(f"tool {i} needs a unique non-empty string name")
            if not isinstance(description, str) or not isinstance(parameters, dict):
                raise ValueError(
                    f"tool {name!r}: description must be a string, parameters an object"
                )
            names.add(name)
            spec = self.builtins.get(name)
            if spec is not None:  # ctxline's own tool: its spec is code's, never the file's
                tool = {
                    "name": spec.name,
                    "description": spec.description,
                    "parameters": spec.parameters,
                }
            out.append(dict(tool))
        return replace(event, tools=tuple(out))

    def request(self, event: RequestHeader) -> RequestHeader:
        self.requests += 1
        seq = self.count + 1
        if event.step != self.requests:
            raise ValueError(
                f"it says step {event.step}, but it is request {self.requests} of this timeline"
            )
        if event.upto_seq != seq - 1:
            raise ValueError(f"it covers events up to seq {event.upto_seq}, but it is event {seq}")
        if not _SHA.fullmatch(event.sha256):
            raise ValueError("its sha256 is not 'sha256:' and 64 hex digits")
        step = event.report.get("step")
        if step is not None and step != event.step:
            raise ValueError(f"its report says step {step!r}")
        meta = event.inputs.get("meta")
        status = meta.get("status") if isinstance(meta, dict) else None
        time = status.get("time") if isinstance(status, dict) else None
        if isinstance(time, dict):
            try:
                derived = TimeReading.from_json(time)
            except ValidationError as exc:
                raise ValueError(f"its time reading: {exc}") from None
            if derived.text != time.get("text"):
                raise ValueError("its time reading's text is not the one its fields give")
        tail = event.inputs.get("tail")
        for text in tail if isinstance(tail, list) else []:
            if (
                isinstance(text, str)
                and text.startswith("<ctx-status>")
                and text.endswith("</ctx-status>")
            ):
                why = self.status.check(text[len("<ctx-status>") : -len("</ctx-status>")])
                if why is not None:
                    raise ValueError(f"its status block is not what the record gives: {why}")
        return event

    def reduction(self, event: Reduction) -> Reduction:
        seq = self.count + 1

        def result(at: int) -> bool:
            return 0 < at < seq and self.kinds[at - 1] == _RESULT

        if event.saved_tokens < 0:
            raise ValueError("negative saved_tokens")
        if event.action == "trim" and not all(result(s) for s in event.seqs):
            raise ValueError("it trims events that are not earlier tool results")
        if event.action == "fold":
            for key, later in event.refs.items():
                if not (key.isdigit() and result(int(key)) and result(later) and later > int(key)):
                    raise ValueError("it folds results into ones that are not later tool results")
        if event.action == "compact":
            if not 0 < event.upto_seq < seq:
                raise ValueError(f"it compacts up to seq {event.upto_seq}, not an earlier event")
            for kept in event.keep:
                if not (0 < kept <= event.upto_seq and self.kinds[kept - 1] == _USER):
                    raise ValueError(f"it keeps seq {kept}, not a user message it compacts")
        return event
