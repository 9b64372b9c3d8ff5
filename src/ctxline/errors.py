"""The typed errors ctxline raises.

Every error names what is wrong — the file, line, field, id or zone — so the CLI can
print it as one line and exit 2. They all derive from :class:`CtxlineError`; catch that
to catch any of them. The tree (each importable from ``ctxline``, except the two of the
environment, importable from ``ctxline.environment``):

    CtxlineError
    ├── ValidationError (also a ValueError)   bad input: file, line, field
    │   └── UnknownSlot (also a KeyError)     environment: a slot that is not declared
    ├── Conflict                              an append whose expected head moved
    ├── DuplicateEventId                      an event id stored with other content
    ├── PairingError                          a tool call without its result, or the reverse
    ├── UnknownSession / UnknownTimeline      no such session or timeline
    ├── IntegrityError                        a stored row or chain that does not verify
    ├── BlobError                             a saved output that is missing or damaged
    ├── ContextOverflow                       required content alone exceeds the input limit
    ├── CompactionError                       a compaction that failed or saved too little
    ├── TokenizerUnavailable                  a tokenizer that cannot be loaded offline
    ├── StorageError                          the database refused (disk full, read-only, lock)
    ├── ModelError                            a model call failed (transport, provider, reply)
    ├── MissingExtra (also an ImportError)    an optional SDK is missing: names the extra
    ├── SummaryFailed                         the summarizer gave no usable summary
    └── Rejected                              environment: a policy or validator refused

    from ctxline import CtxlineError
    try:
        ctx.prepare()
    except CtxlineError as exc:
        print(exc)  # one line that names what is wrong
"""

from __future__ import annotations

__all__ = [
    "BlobError",
    "CompactionError",
    "Conflict",
    "ContextOverflow",
    "CtxlineError",
    "DuplicateEventId",
    "IntegrityError",
    "PairingError",
    "TokenizerUnavailable",
    "UnknownSession",
    "UnknownTimeline",
    "ValidationError",
]


class CtxlineError(Exception):
    """Base class of ctxline's errors."""


class ValidationError(CtxlineError, ValueError):
    """Input that is not a valid event; names the field and, for JSONL, the line."""

    def __init__(
        self,
        message: str,
        *,
        field: str | None = None,
        line: int | None = None,
        source: str | None = None,
    ) -> None:
        self.message = message
        self.field = field
        self.line = line
        self.source = source
        super().__init__(self._render())

    def _render(self) -> str:
        where = []
        if self.source:
            where.append(self.source)
        if self.line is not None:
            where.append(f"line {self.line}")
        if self.field:
            where.append(f"field {self.field!r}")
        return f"{', '.join(where)}: {self.message}" if where else self.message

    def located(self, *, source: str | None = None, line: int | None = None) -> ValidationError:
        """The same error with a file name and/or line filled in."""
        return ValidationError(
            self.message,
            field=self.field,
            line=self.line if line is None else line,
            source=self.source if source is None else source,
        )


class Conflict(CtxlineError):
    """An append whose expected seq is not the timeline's head; nothing was written."""

    def __init__(self, session: str, timeline: str, expected: int, actual: int) -> None:
        self.session = session
        self.timeline = timeline
        self.expected = expected
        self.actual = actual
        super().__init__(
            f"append conflict on {session}/{timeline}: expected seq {expected}, head is {actual}"
        )


class DuplicateEventId(CtxlineError):
    """A client event id that is already stored with different content."""

    def __init__(self, event_id: str, detail: str = "") -> None:
        self.event_id = event_id
        super().__init__(
            f"event id {event_id!r} is already stored{': ' + detail if detail else ''}"
        )


class PairingError(CtxlineError):
    """A tool result whose call id has no earlier call in the timeline."""

    def __init__(self, call_id: str, where: str = "") -> None:
        self.call_id = call_id
        super().__init__(
            f"tool result for call id {call_id!r} has no earlier tool call in the timeline"
            + (f" ({where})" if where else "")
        )


class UnknownSession(CtxlineError, KeyError):
    def __init__(self, session: str) -> None:
        self.session = session
        super().__init__(session)

    def __str__(self) -> str:
        return f"no session {self.session!r}"


class UnknownTimeline(CtxlineError, KeyError):
    def __init__(self, session: str, timeline: str) -> None:
        self.session = session
        self.timeline = timeline
        super().__init__(timeline)

    def __str__(self) -> str:
        return f"session {self.session!r} has no timeline {self.timeline!r}"


class IntegrityError(CtxlineError):
    """A damaged database or store, found at open or by ``ctxline doctor``."""


class BlobError(CtxlineError):
    """A blob that is missing or whose bytes do not match their hash."""


class ContextOverflow(CtxlineError):
    """Required content alone exceeds the input limit; names each section and its tokens."""

    def __init__(self, limit: int, sections: dict[str, int]) -> None:
        self.limit = limit
        self.sections = dict(sections)
        total = sum(sections.values())
        parts = ", ".join(f"{name} {n:,}" for name, n in sections.items())
        super().__init__(
            f"the request needs {total:,} tokens but the input limit is {limit:,} ({parts});"
            " nothing more can be removed without dropping protected content"
        )


class CompactionError(CtxlineError):
    """A compaction that failed, or would not shrink the request enough; nothing was written."""


class TokenizerUnavailable(CtxlineError):
    """An exact tokenizer whose encoding file cannot be found offline."""
