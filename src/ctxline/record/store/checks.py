"""The checks every backend makes before it writes, and the limits they share.

Why: the memory store, SQLite and PostgreSQL must refuse exactly the same input, with
the same :class:`~ctxline.errors.ValidationError`, before anything is written — so a
batch that one backend takes is never one another backend fails on half way (a
PostgreSQL index row over its 2,704-byte limit, an integer SQLite cannot bind, a JSON
value nested so deep the encoder recurses out).

The limits (every backend):

* session, timeline and tokenizer names: 1 to :data:`MAX_NAME_BYTES` bytes of UTF-8,
  no control characters;
* event ids and tool-call ids: at most :data:`MAX_ID_BYTES` bytes; an event id holds
  no NUL (a tool-call id may: PostgreSQL stores it escaped);
* one event's canonical JSON: at most :data:`MAX_EVENT_BYTES` bytes, nested at most
  :data:`MAX_DEPTH` containers deep;
* seq numbers, ``after_seq`` and ``limit``: whole numbers from 0 to 2**63 - 1.

    bodies = encode_batch(as_pending([UserMessage("hi")]))
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from ctxline.errors import DuplicateEventId, PairingError, ValidationError
from ctxline.record.codec import canonical_json, event_to_json
from ctxline.record.events import AssistantMessage, Event, Pending, StoredEvent, ToolResult
from ctxline.record.redacted import REDACTED_KEY, redaction_of
from ctxline.record.store.chain import Body, encode_body, field_path, scan

__all__ = [
    "MAIN",
    "MAX_DEPTH",
    "MAX_EVENT_BYTES",
    "MAX_ID_BYTES",
    "MAX_NAME_BYTES",
    "MAX_SEQ",
    "Existing",
    "as_pending",
    "call_ids",
    "check_id",
    "check_meta",
    "check_name",
    "check_new_ids",
    "check_pairing",
    "check_read",
    "check_seq",
    "encode_batch",
    "prepare_batch",
    "resolve_retry",
    "same_content",
]

MAIN = "main"
MAX_NAME_BYTES = 512
MAX_ID_BYTES = 1024
MAX_EVENT_BYTES = 512 * 1024 * 1024
MAX_DEPTH = 256
MAX_SEQ = 2**63 - 1


def as_pending(items: Iterable[Event | Pending]) -> list[Pending]:
    return [item if isinstance(item, Pending) else Pending(item) for item in items]


def _check_utf8(what: str, value: str) -> bytes:
    try:
        return value.encode()
    except UnicodeEncodeError as exc:
        bad = exc.object[exc.start : exc.end]
        raise ValidationError(
            f"{what} {value[:40]!r} holds a lone surrogate ({bad!r}) that UTF-8 cannot store;"
            " clean it first (ctxline.text.clean_text)",
            field=what,
        ) from None


def check_name(what: str, value: str) -> None:
    """A session, timeline or tokenizer name: non-blank, no control characters, bounded."""
    if isinstance(value, str) and (what, value) in _GOOD_NAMES:
        return
    _check_name(what, value)
    if len(_GOOD_NAMES) < 4096 and isinstance(value, str):
        _GOOD_NAMES.add((what, value))


_GOOD_NAMES: set[tuple[str, str]] = set()


def _check_name(what: str, value: str) -> None:
    if not isinstance(value, str):
        raise ValidationError(f"{what} name must be text, got {type(value).__name__}", field=what)
    if not value or not value.strip() or any(ord(ch) < 32 for ch in value):
        raise ValidationError(f"invalid {what} name {value[:80]!r}", field=what)
    size = len(_check_utf8(what, value))
    if size > MAX_NAME_BYTES:
        raise ValidationError(
            f"{what} name is {size:,} bytes; at most {MAX_NAME_BYTES} are stored", field=what
        )


def check_id(value: str, what: str = "id", *, nul: bool = False) -> None:
    """An event id (``nul=False``) or a tool-call id: UTF-8, at most MAX_ID_BYTES bytes."""
    if not isinstance(value, str):
        raise ValidationError(f"{what} must be text, got {type(value).__name__}", field=what)
    size = len(_check_utf8(what, value))
    if size > MAX_ID_BYTES:
        raise ValidationError(
            f"{what} {value[:40]!r}… is {size:,} bytes; at most {MAX_ID_BYTES} are stored",
            field=what,
        )
    if not nul and "\x00" in value:
        raise ValidationError(f"{what} {value[:40]!r} contains a NUL character", field=what)


def check_seq(name: str, value: object, *, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= MAX_SEQ:
        raise ValidationError(
            f"{name} must be a whole number from {minimum} to {MAX_SEQ}, got {value!r}"[:200],
            field=name,
        )
    return value


def check_read(after_seq: int, limit: int | None) -> None:
    check_seq("after_seq", after_seq)
    if limit is not None:
        check_seq("limit", limit)


def check_new_ids(batch: Sequence[Pending]) -> None:
    seen: set[str] = set()
    for p in batch:
        if p.id is not None:
            check_id(p.id)
            if p.id in seen:
                raise DuplicateEventId(p.id, "twice in one append")
            seen.add(p.id)


@dataclass(frozen=True, slots=True)
class Existing:
    """An event already stored under a client id: where, when, and its body's digest."""

    seq: int
    at: datetime
    digest: str
    session: str = ""
    timeline: str = ""


def same_content(stored: Existing, body: Body, pending: Pending) -> bool:
    return stored.digest == body.digest and (pending.at is None or pending.at == stored.at)


def resolve_retry(
    batch: Sequence[Pending],
    bodies: Sequence[Body],
    existing: dict[str, Existing],
    where: tuple[str, str],
) -> list[StoredEvent] | None:
    """The stored events if ``batch`` is a retry of an acknowledged append, else None.

    ``existing`` maps the batch's client ids that are already stored; ``where`` is the
    (session, timeline) appended to. Raises :class:`DuplicateEventId` when an id is reused
    for different content, in another session or timeline (client ids are unique in a
    store: a retry is the same append to the same place), or when a batch mixes stored
    and new ids (a retry never changes its batch).
    """
    if not existing:
        return None
    for eid, found in existing.items():
        if (found.session, found.timeline) != where:
            raise DuplicateEventId(
                eid, f"in {found.session}/{found.timeline}; client ids are unique in a store"
            )
    out = []
    for p, body in zip(batch, bodies, strict=True):
        if p.id is None or p.id not in existing:
            missing = p.id or "(no id)"
            raise DuplicateEventId(
                next(iter(existing)), f"batch mixes stored ids with a new event {missing}"
            )
        found = existing[p.id]
        if not same_content(found, body, p):
            raise DuplicateEventId(p.id, "stored with different content")
        out.append(StoredEvent(found.seq, p.id, found.at, p.event))
    return out


def check_pairing(batch: Sequence[Pending], is_known_call: Callable[[str], bool]) -> None:
    """Every tool result must answer a call earlier in the timeline or earlier in ``batch``."""
    new_calls: set[str] = set()
    for i, p in enumerate(batch):
        ev = p.event
        if isinstance(ev, AssistantMessage):
            new_calls.update(c.id for c in ev.tool_calls)
        elif (
            isinstance(ev, ToolResult)
            and ev.call_id not in new_calls
            and not is_known_call(ev.call_id)
        ):
            raise PairingError(ev.call_id, f"event {i + 1} of the batch")


def call_ids(event: Event) -> list[str]:
    return [c.id for c in event.tool_calls] if isinstance(event, AssistantMessage) else []


def _where(i: int, event: Event) -> str:
    return f"event {i} of the batch ({event.kind})"


def encode_batch(batch: Sequence[Pending]) -> list[Body]:
    """Each event's canonical JSON (size and digest), checked before anything is written.

    Every backend calls this, so they all refuse the same batches with a
    :class:`ValidationError`: text with a lone surrogate (UTF-8 cannot hold it), a value
    JSON cannot hold (NaN, a set, an object), one nested deeper than :data:`MAX_DEPTH`,
    an event over :data:`MAX_EVENT_BYTES`, a tool-call id over :data:`MAX_ID_BYTES`, an
    event carrying a redaction mark (only :mod:`~ctxline.record.store.redaction` writes one).
    """
    bodies = []
    for i, p in enumerate(batch, start=1):
        ev = p.event
        if not isinstance(ev.kind, str) or not ev.kind or "\x00" in ev.kind:
            raise ValidationError(
                f"event {i} of the batch has an invalid kind {ev.kind!r}"[:200], field="kind"
            )
        if redaction_of(ev) is not None:  # the mark explains a rebuild: only redact() writes it
            raise ValidationError(
                f"{_where(i, ev)} carries meta[{REDACTED_KEY!r}], the mark only a redaction"
                " (forget) writes in place; it cannot be appended",
                field=f"meta.{REDACTED_KEY}",
            )
        ids = [ev.call_id] if isinstance(ev, ToolResult) else call_ids(ev)
        for call_id in ids:
            try:
                check_id(call_id, "call_id", nul=True)
            except ValidationError as exc:
                raise ValidationError(f"{_where(i, ev)}: {exc.message}", field="call_id") from None
        try:
            obj = event_to_json(ev)
            deep, long = scan(obj, MAX_DEPTH)
        except (TypeError, ValueError, AttributeError) as exc:
            raise ValidationError(
                f"{_where(i, ev)} is not valid JSON: {exc}", field="event"
            ) from None
        if deep is not None:
            raise ValidationError(
                f"{_where(i, ev)} nests deeper than {MAX_DEPTH} levels",
                field=field_path(deep) or "event",
            )
        try:
            body = encode_body(ev, obj=obj, long=long)
        except UnicodeEncodeError as exc:
            bad = exc.object[exc.start : exc.end]
            raise ValidationError(
                f"{_where(i, ev)} holds a lone surrogate ({bad!r}) that UTF-8 cannot store;"
                " clean it first (ctxline.text.clean_text)",
                field="event",
            ) from None
        except (ValueError, TypeError, RecursionError) as exc:
            raise ValidationError(
                f"{_where(i, ev)} is not valid JSON: {exc}", field="event"
            ) from None
        if body.size > MAX_EVENT_BYTES:
            raise ValidationError(
                f"{_where(i, ev)} is {body.size:,} bytes of JSON; at most {MAX_EVENT_BYTES:,}"
                " are stored per event (save large outputs as blobs)",
                field="event",
            )
        bodies.append(body)
    return bodies


def check_meta(meta: object) -> str:
    """A session meta as its canonical JSON text; ValidationError when it is not JSON."""
    if meta is not None and not isinstance(meta, dict):
        raise ValidationError("the session meta must be an object", field="meta")
    try:
        return canonical_json(meta or {}).decode()
    except (ValueError, TypeError, UnicodeEncodeError, RecursionError) as exc:
        raise ValidationError(f"the session meta is not valid JSON: {exc}", field="meta") from None


def prepare_batch(
    session: str,
    timeline: str,
    events: Iterable[Event | Pending],
    expected_seq: object,
    create: bool,
    meta: object,
) -> tuple[list[Pending], list[Body]]:
    """The checks of one batch that need no lock: names, ids, expected seq, encoding."""
    check_name("session", session)
    check_name("timeline", timeline)
    if expected_seq is not None and (
        isinstance(expected_seq, bool) or not isinstance(expected_seq, int)
    ):
        raise ValidationError(
            f"expected_seq must be a whole number, got {expected_seq!r}"[:200], field="expected_seq"
        )
    if create:
        check_meta(meta)
    batch = as_pending(events)
    check_new_ids(batch)
    return batch, encode_batch(batch)
