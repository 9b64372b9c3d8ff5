"""What the view could still give up, kept up to date as history freezes.

The cost model (docs/budget.md) weighs edits of the view — fold a duplicate, trim an
older output to a stub, offload a large one to a preview, elide the long texts of an
older call's arguments — by where they fall and what they save. Walking the whole view
for them on every step would make a step cost O(history), so :class:`EditIndex` is fed
each message once, when it freezes (it never changes again, except by an edit), and
keeps: the record seq → view index map (for patching the rendered view in place), the
view indexes of assistant and user messages (the group boundaries, the user messages a
compaction keeps), and the pools of messages an edit may still apply to. A step then
looks only at the pools, whose entries leave once edited.

    index = EditIndex()
    index.add(i, message, tokens, event, edits)
    found = index.candidates(view, keep_from=..., fresh_from=...)
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Literal

from ctxline.record.blobs import text_ref
from ctxline.record.codec import canonical_json
from ctxline.record.events import AssistantMessage, Event, JsonValue, ToolResult, UserMessage
from ctxline.render.neutral import NeutralMessage
from ctxline.view.edits import (
    ARGUMENT_MIN_CHARS,
    READER,
    ViewEdits,
    fold_reference,
    preview,
    trimmed,
)
from ctxline.view.measure import FRAMING_TOKENS

__all__ = ["WINDOW", "Candidate", "EditIndex", "EditKind", "has_long_text", "kept_whole"]

EditKind = Literal["fold", "trim", "offload", "args", "text"]

WINDOW = 512
"""Edits are looked for among the newest this many messages before the fresh turn, so a
step's work does not grow with history: a cut further back re-processes more than any
saving there could pay for (its R is the whole view after it), and a compaction hides
what is older anyway."""


@dataclass(frozen=True, slots=True)
class Candidate:
    """One edit the view could take: at view ``index`` (record ``seq``), saving ``saved``."""

    index: int
    seq: int
    kind: EditKind
    saved: int
    later: int = 0
    """fold: the seq of the later identical result the reference points at."""


def kept_whole(event: ToolResult) -> bool:
    """Whether no edit may touch this result: it failed (the model needs the whole error),
    or it is marked ``meta["trimmable"] = False`` (``@tool(trimmable=False)``; an app's
    own result). The ladder then goes to its other rungs; a compaction may still hide it."""
    return event.is_error or event.meta.get("trimmable") is False


def has_long_text(value: JsonValue, min_chars: int = ARGUMENT_MIN_CHARS) -> bool:
    """Whether any string in ``value`` is at least ``min_chars`` long."""
    if isinstance(value, str):
        return len(value) >= min_chars
    if isinstance(value, dict):
        return any(has_long_text(v, min_chars) for v in value.values())
    if isinstance(value, list):
        return any(has_long_text(v, min_chars) for v in value)
    return False


Count = Callable[[str], int]


@dataclass
class EditIndex:
    """The frozen history's boundaries and edit pools (see the module docstring)."""

    seq_index: dict[int, int] = field(default_factory=dict)
    assistants: list[int] = field(default_factory=list)
    users: list[int] = field(default_factory=list)
    """View indexes of the user messages that show a ``user.message`` event."""
    results: list[int] = field(default_factory=list)
    """View indexes of results no edit has touched yet (or shown as a preview)."""
    calls: list[int] = field(default_factory=list)
    """View indexes of assistant messages with long argument texts, not yet elided."""
    call_keys: dict[str, tuple[str, bytes]] = field(default_factory=dict)
    latest: dict[tuple[str, bytes, str], int] = field(default_factory=dict)
    """(tool, arguments, content) → seq of its latest result."""
    earlier: dict[int, int] = field(default_factory=dict)
    """seq of a result → seq of a later identical one."""
    dups: list[int] = field(default_factory=list)
    """View indexes of the results in :attr:`earlier`, in order."""
    errors: set[int] = field(default_factory=set)
    """View indexes of assistant messages with at least one failed result."""
    memo: dict[tuple[int, str], int] = field(default_factory=dict)
    """(seq, kind) → tokens of the edited message (counted once)."""
    reader: str | None = READER
    """The read-back tool the stand-ins point at (None: none offered); part of the memo's key."""
    version: int = 0
    """Bumped whenever a message is added or edited (what :attr:`found` is keyed on)."""
    found: tuple[tuple[object, ...], list[Candidate]] | None = None
    """The last :meth:`candidates` answer and what it was asked (it is asked every step)."""
    zones: dict[int, tuple[int, int, Candidate | None]] = field(default_factory=dict)
    """view index → (zone, edits version, its candidate): a result is looked at again only
    when it crosses into another zone or the edits change."""

    def add(
        self, index: int, message: NeutralMessage, event: Event | None, edits: ViewEdits
    ) -> None:
        """Take the message that froze at view ``index`` (``event``: the one it shows)."""
        self.version += 1
        seq = message.seq
        if seq:
            self.seq_index[seq] = index
        if message.role == "assistant":
            self.assistants.append(index)
            for call in message.tool_calls:
                self.call_keys[call.id] = (call.name, canonical_json(call.arguments))
            if (
                isinstance(event, AssistantMessage)
                and seq not in edits.trimmed
                and any(has_long_text(c.arguments) for c in event.tool_calls)
            ):
                self.calls.append(index)
        elif message.role == "user":
            if isinstance(event, UserMessage):
                self.users.append(index)
        elif seq and isinstance(event, ToolResult):
            if message.is_error and self.assistants:
                self.errors.add(self.assistants[-1])
            if kept_whole(event):
                return  # no fold, trim or offload ever touches it (nor is it folded into)
            key = self.call_keys.get(message.call_id)
            if key is not None and seq not in edits.folded and seq not in edits.trimmed:
                full = (*key, event.content)
                previous = self.latest.get(full)
                if previous is not None:
                    if previous not in self.earlier and previous in self.seq_index:
                        bisect.insort(self.dups, self.seq_index[previous])
                    self.earlier[previous] = seq  # an older copy reaches the newest through it
                self.latest[full] = seq
            if seq not in edits.folded and (seq not in edits.trimmed or seq not in edits.short):
                self.results.append(index)

    def edited(self, seqs: Sequence[int], edits: ViewEdits) -> None:
        """These seqs were edited: those now in their final form leave the pools (a
        result shown as a preview may still become a stub)."""
        self.version += 1
        final = {s for s in seqs if s in edits.folded or s in edits.short}
        gone = {self.seq_index[s] for s in final if s in self.seq_index}
        self.results = [i for i in self.results if i not in gone]
        self.calls = [i for i in self.calls if i not in gone]

    def keep_from(self, groups: int, open_assistants: int, frozen: int) -> int:
        """The view index from which the last ``groups`` assistant groups run."""
        if groups <= open_assistants:
            return frozen
        need = groups - open_assistants
        return self.assistants[-need] if need <= len(self.assistants) else 0

    def candidates(
        self,
        view: Sequence[NeutralMessage],
        tokens: Sequence[int],
        events: Sequence[object],
        edits: ViewEdits,
        count: Count,
        *,
        keep_from: int,
        fresh_from: int,
        offload: int,
        min_saving: int,
        previews: set[int],
    ) -> list[Candidate]:
        """Every edit that may apply now, in view order (see :data:`EditKind`).

        ``fold``: an earlier copy of an identical result (anywhere before the fresh turn);
        ``trim``: a successful result before ``keep_from``, to its short stub (a preview
        already shown becomes a stub too); ``offload``: a whole result over ``offload``
        tokens between ``keep_from`` and ``fresh_from``, to a preview (a failed result
        or one marked not trimmable is never a candidate: :func:`kept_whole`); ``args``: the long argument texts of a call before ``keep_from`` whose
        results all succeeded. ``previews``: seqs shown as previews from the start.
        """
        key = (self.version, edits.version, len(view), keep_from, fresh_from, offload, min_saving)
        if self.found is not None and self.found[0] == key:
            return list(self.found[1])
        out = self._candidates(
            view, tokens, events, edits, count, keep_from, fresh_from, offload, min_saving, previews
        )
        self.found = (key, out)
        return list(out)

    def _candidates(
        self,
        view: Sequence[NeutralMessage],
        tokens: Sequence[int],
        events: Sequence[object],
        edits: ViewEdits,
        count: Count,
        keep_from: int,
        fresh_from: int,
        offload: int,
        min_saving: int,
        previews: set[int],
    ) -> list[Candidate]:
        out: list[Candidate] = []
        end = min(fresh_from, len(view))
        memo, trimmed_, folded = self.memo, edits.trimmed, edits.folded
        start = max(0, end - WINDOW)
        dups = self.dups
        for index in dups[bisect.bisect_left(dups, start) : bisect.bisect_left(dups, end)]:
            seq = view[index].seq
            later = self.earlier.get(seq)
            while later is not None and later in self.earlier:  # to the newest copy
                later = self.earlier[later]
            if later is None or seq in folded or seq in trimmed_ or later in trimmed_ or later in folded:
                continue
            event = getattr(events[seq - 1], "event", None)
            if not isinstance(event, ToolResult):
                continue
            ref = memo.get(self.memo_key(seq, f"fold:{later}"))
            if ref is None:
                ref = self._tokens(seq, f"fold:{later}", partial(fold_reference, event.name or "the tool", later), count)
            if tokens[index] - ref > min_saving:
                out.append(Candidate(index, seq, "fold", tokens[index] - ref, later))
        folds = {c.seq for c in out}
        hopeless: set[int] = set()
        zones = self.zones
        pool = self.results
        lo, hi = bisect.bisect_left(pool, start), bisect.bisect_left(pool, end)
        for index in pool[lo:hi]:
            zone = 1 if index < keep_from else 2
            known = zones.get(index)
            if known is not None and known[0] == zone and known[1] == edits.version:
                if known[2] is not None and known[2].seq not in folds:
                    out.append(known[2])
                continue
            found, drop = self._result(index, zone, view, tokens, events, edits, count, offload, min_saving, previews)
            zones[index] = (zone, edits.version, found)
            if drop:
                hopeless.add(index)
            elif found is not None and found.seq not in folds:
                out.append(found)
        if hopeless:
            pool[lo:hi] = [i for i in pool[lo:hi] if i not in hopeless]
            for index in hopeless:
                zones.pop(index, None)
        calls = self.calls
        for index in calls[bisect.bisect_left(calls, start) : bisect.bisect_left(calls, min(keep_from, len(view)))]:
            message = view[index]
            if message.seq in edits.trimmed or index in self.errors:
                continue
            now = tokens[index]
            short = self._tokens(
                message.seq, "args", partial(_elided_text, events[message.seq - 1], message, self.reader), count
            )
            if now - short > min_saving:
                out.append(Candidate(index, message.seq, "args", now - short))
        if fresh_from >= len(view) and self.assistants:
            out.extend(self._newest_text(view, tokens, events, edits, count, min_saving))
        out.sort(key=lambda c: c.index)
        return out

    def _result(
        self,
        index: int,
        zone: int,
        view: Sequence[NeutralMessage],
        tokens: Sequence[int],
        events: Sequence[object],
        edits: ViewEdits,
        count: Count,
        offload: int,
        min_saving: int,
        previews: set[int],
    ) -> tuple[Candidate | None, bool]:
        """The trim (zone 1: older than the recent groups) or offload (zone 2: recent, not
        fresh) of the result at ``index``; True when it can never be one (drop it)."""
        message = view[index]
        seq = message.seq
        if seq in edits.folded or (seq in edits.trimmed and seq in edits.short):
            return None, False
        now = tokens[index]
        content = _content(events, seq)
        if content is None:
            return None, True
        if zone == 1:
            stub = self._tokens(seq, "trim", partial(_stub, content, count, self.reader), count)
            if now - stub > min_saving:
                return Candidate(index, seq, "trim", now - stub), False
            return None, True  # its stub saves too little, now and later
        big = offload and now - FRAMING_TOKENS > offload
        if big and seq not in edits.trimmed and seq not in previews:
            short = self._tokens(seq, "offload", partial(_preview, content, count, self.reader), count)
            if now - short > min_saving:
                return Candidate(index, seq, "offload", now - short), False
        return None, False

    def _newest_text(
        self,
        view: Sequence[NeutralMessage],
        tokens: Sequence[int],
        events: Sequence[object],
        edits: ViewEdits,
        count: Count,
        min_saving: int,
    ) -> list[Candidate]:
        """The last resort's edit of the newest assistant message: its text as a preview."""
        index = self.assistants[-1]
        message = view[index]
        event = getattr(events[message.seq - 1], "event", None) if message.seq else None
        if not isinstance(event, AssistantMessage) or message.seq in edits.texts:
            return []
        out: list[Candidate] = []
        if message.seq not in edits.trimmed and any(has_long_text(c.arguments) for c in event.tool_calls):
            elided = self._tokens(
                message.seq, "args", partial(_elided_text, events[message.seq - 1], message, self.reader), count
            )
            if tokens[index] - elided > min_saving:
                out.append(Candidate(index, message.seq, "args", tokens[index] - elided))
        short = self._tokens(message.seq, "text", partial(_text_preview, event.text, count, self.reader), count)
        saved = count(message.text) - (short - FRAMING_TOKENS)
        if saved > min_saving:
            out.append(Candidate(index, message.seq, "text", saved))
        return out

    def memo_key(self, seq: int, kind: str) -> tuple[int, str]:
        """The memo's key of ``seq``'s edited form ``kind`` (the forms differ by reader)."""
        return (seq, kind if self.reader == READER else f"{kind}:{self.reader or ''}")

    def _tokens(self, seq: int, kind: str, text: Callable[[], str], count: Count) -> int:
        key = self.memo_key(seq, kind)
        found = self.memo.get(key)
        if found is None:
            found = self.memo[key] = count(text()) + FRAMING_TOKENS
        return found


def _content(events: Sequence[object], seq: int) -> str | None:
    event = getattr(events[seq - 1], "event", None)
    return event.content if isinstance(event, ToolResult) else None


def _stub(content: str, count: Count, reader: str | None) -> str:
    return trimmed(content, text_ref(content), tokens=count(content), reader=reader)


def _text_preview(text: str, count: Count, reader: str | None) -> str:
    return preview(text, text_ref(text), tokens=count(text), noun="message", reader=reader)


def _preview(content: str, count: Count, reader: str | None) -> str:
    return preview(content, text_ref(content), tokens=count(content), reader=reader)


def _elided_text(stored: object, message: NeutralMessage, reader: str | None) -> str:
    from ctxline.view.edits import elide_arguments
    from ctxline.view.measure import message_text

    event = getattr(stored, "event", None)
    if not isinstance(event, AssistantMessage):
        return message.text
    calls = []
    for call, shown in zip(event.tool_calls, message.tool_calls, strict=False):
        args, _ = elide_arguments(call.arguments, reader=reader)
        calls.append(type(shown)(shown.id, shown.name, args))
    return message_text(NeutralMessage("assistant", message.text, tuple(calls)))
