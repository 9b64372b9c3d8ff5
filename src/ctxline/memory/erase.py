"""Forgetting a memory erases its text from the record too, wherever ctxline put it.

Why: a person who asks an agent to forget expects the text gone, and ctxline itself
copied it into sessions: the ``remember`` call's arguments, results of ``memory_read``
and ``memory_search``, and the ``<ctx-memory>`` overview of every logged request that
showed it. :func:`erase_memory` finds those in every session and timeline of the store
and redacts them (:mod:`ctxline.record.store.redaction`: the text becomes a tombstone,
the hash chain still verifies), then forgets the entry, then looks once more for what
was written meanwhile. What it replaces, exactly:

* in a ``remember`` call answered "Remembered m-…" for this entry (or whose text is the
  entry's, spaces aside): the ``text`` argument and every tag, whole;
* in a ``memory_read`` result for this entry: everything after ``Text:``;
* in a line that names the entry's id (the overview, search results): the text shown at
  its end, as ctxline rendered it (escaped, flattened, clipped);
* anywhere else in any event (the user's words, the model's, a summary, arguments that
  were not JSON): a verbatim copy of the whole text — raw, escaped, flattened or JSON
  escaped — when it has at least :data:`MIN_VERBATIM` characters (a shorter one would
  erase unrelated words).

Not erased: a part of the text or a paraphrase in anyone's own words, the model's
queries, session metadata, and what left the store before (exports, backups, the
provider's logs, another process's Context holding the events; the ``forget`` tool
reloads its own Context).

    erased = erase_memory(store, store.memories, entry)
    print(erased.events, "event(s) in", erased.sessions, "session(s)")
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime

from ctxline.record.codec import format_at
from ctxline.record.events import AssistantMessage, Event, StoredEvent, ToolResult
from ctxline.record.store.memories import MemoryBackend, MemoryEntry
from ctxline.record.store.redaction import (
    FieldPath,
    Redaction,
    redact,
    redacted_event,
    scrub_store,
)
from ctxline.tags import escape

__all__ = ["MIN_VERBATIM", "Erased", "erase_memory", "tombstone"]

MIN_VERBATIM = 12
"""A verbatim copy outside ctxline's own renderings is erased when the text is this long."""
_WIDTHS = (80, 120, 160, 300)
"""The widths ctxline renders a memory's text at (CLI, overview, lists, search)."""


@dataclass(frozen=True, slots=True)
class Erased:
    """What :func:`erase_memory` did: the tombstone and the events it redacted."""

    entry: MemoryEntry
    events: int
    sessions: int


def tombstone(memory_id: str) -> str:
    """What stands where a forgotten memory's text was."""
    return f"[erased: forgotten memory {memory_id}]"


def _flat(text: str) -> str:
    return " ".join(text.split())


def _forms(text: str) -> list[str]:
    """The text as ctxline may have rendered it, longest first."""
    from ctxline.memory.source import one_line

    shown = [text, escape(text), _flat(text), _flat(escape(text))]
    shown += [one_line(text, w) for w in _WIDTHS]
    shown += [
        json.dumps(t, ensure_ascii=a)[1:-1] for t in (text, escape(text)) for a in (False, True)
    ]
    return sorted({f for f in shown if f.strip()}, key=len, reverse=True)


def _outside(text: str, tomb: str, edit: object) -> str:
    """``edit`` applied to the parts of ``text`` that are not tombstones already."""
    assert callable(edit)
    return tomb.join(str(edit(part)) for part in text.split(tomb))


class _Eraser:
    def __init__(self, entry: MemoryEntry, text: str, tags: tuple[str, ...]) -> None:
        self.id = entry.id
        self.text = text
        self.tags = tags
        self.tomb = tombstone(entry.id)
        self.forms = _forms(text)
        self.verbatim = [f for f in self.forms if len(_flat(f)) >= MIN_VERBATIM]
        self.why = f"forgotten memory {entry.id}"
        self.at = format_at(datetime.now(UTC))

    def _anywhere(self, part: str) -> str:
        for form in self.verbatim:
            part = part.replace(form, self.tomb)
        return part

    def _line(self, line: str) -> str:
        if self.id not in line:
            return line
        for form in self.forms:  # the text ends a line that names the entry
            if line.endswith(": " + form):
                return line[: len(line) - len(form)] + self.tomb
        return line

    def plain(self, text: str) -> str:
        def edit(part: str) -> str:
            part = "\n".join(self._line(line) for line in part.split("\n"))
            return self._anywhere(part)

        return _outside(text, self.tomb, edit)

    def linked_calls(self, events: list[StoredEvent]) -> set[str]:
        """The ids of the ``remember`` calls that wrote this entry (their results say so),
        and of those whose text is the entry's."""
        calls: set[str] = set()
        for ev in events:
            e = ev.event
            if isinstance(e, ToolResult):
                mem = e.meta.get("memory")
                if isinstance(mem, dict) and mem.get("id") == self.id:
                    calls.add(e.call_id)
            elif isinstance(e, AssistantMessage):
                for c in e.tool_calls:
                    args = c.arguments
                    if c.name == "remember" and isinstance(args, dict):
                        said = args.get("text")
                        if (
                            isinstance(said, str)
                            and _flat(said) == _flat(self.text)
                            and said.strip()
                        ):
                            calls.add(c.id)
        return calls

    def event(self, event: Event, calls: set[str]) -> Event | None:
        remember = (
            {i for i, c in enumerate(event.tool_calls) if c.name == "remember" and c.id in calls}
            if isinstance(event, AssistantMessage)
            else set()
        )
        read = (
            isinstance(event, ToolResult)
            and event.content.startswith(f"{self.id} · ")
            and "\nText:\n" in event.content
        )

        def edit(path: FieldPath, text: str) -> str:
            # ("tool_calls", i, "arguments", "text") and ("tool_calls", i, "arguments", "tags", j)
            in_call = len(path) >= 4 and path[0] == "tool_calls" and path[1] in remember
            if in_call and (path[3] == "text" or (path[3] == "tags" and len(path) == 5)):
                return self.tomb
            if read and path == ("content",):
                head, _, _ = text.partition("\nText:\n")
                return f"{head}\nText:\n{self.tomb}"
            return self.plain(text)

        return redacted_event(event, edit, self.why, self.at)


def _scan(store: object, eraser: _Eraser) -> list[Redaction]:
    out: list[Redaction] = []
    for info in store.sessions():  # type: ignore[attr-defined]
        for tl in store.timelines(info.id):  # type: ignore[attr-defined]
            events: list[StoredEvent] = store.read(info.id, tl.name)  # type: ignore[attr-defined]
            calls = eraser.linked_calls(events)
            base = tl.fork_seq or 0
            for ev in events:
                if ev.seq <= base:  # the parent's own event: redacted with the parent
                    continue
                new = eraser.event(ev.event, calls)
                if new is not None:
                    out.append(Redaction(info.id, tl.name, ev.seq, new))
    return out


def erase_memory(store: object, backend: MemoryBackend, entry: MemoryEntry) -> Erased:
    """Redact ``entry``'s text everywhere in ``store``'s record, then forget the entry
    (its text still in hand, so a crash in between leaves a forget that can be run
    again), then redact what was written meanwhile."""
    eraser = _Eraser(entry, entry.text, entry.tags)
    first = _scan(store, eraser) if entry.text.strip() else []
    redact(store, first, scrub=False)
    gone = backend.forget(entry.id)
    second = _scan(store, eraser) if entry.text.strip() else []
    redact(store, second, scrub=False)
    scrub_store(store)
    done = first + second
    return Erased(gone, len(done), len({r.session for r in done}))
