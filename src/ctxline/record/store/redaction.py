"""Redaction: an event's text replaced by a tombstone while its hash chain still verifies.

Why: ``forget`` must erase a memory's text from the record (issue 24), but the record is
append-only and hash-chained, and nobody may rewrite it through a raw write (issue 21).
The chain links each event's *digest* rather than its body (``record/store/chain.py``),
so a redacted row keeps the digest its link was made from and carries a second one, of
its redacted body:

* the body: the event with the erased strings replaced (the caller chooses the text of
  the tombstone) and ``meta["ctxline.redacted"] = {"digest": <the chained digest>,
  "why": [...], "at": ...}`` — the *tombstone form*;
* the row (``chain.redacted`` on SQLite and PostgreSQL): the digest of that body;
* the blobs of the strings it no longer holds (a long result saved whole) are deleted,
  and a long redacted result is saved as its own blob, so its handle reads back.

A read or ``verify_chain`` of a redacted row checks its body against ``chain.redacted``,
its link against the chained digest, and its form (the mark names that digest), so a
change to any byte of a redacted row — body, mark, seq, id, time or either digest — is
still caught. Only :func:`redact` writes redactions (it calls the store's private
``_redact_rows``); ``Memory.forget`` is its one caller in ctxline.

    new = redacted_event(event, lambda path, s: s.replace(secret, "[gone]"), "forgotten m-1", at)
    redact(store, [Redaction("s", "main", 7, new)])
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ctxline.errors import IntegrityError, ValidationError
from ctxline.record.blobs import text_ref
from ctxline.record.codec import event_to_json
from ctxline.record.events import Event, JsonValue
from ctxline.record.parse import event_from_json
from ctxline.record.redacted import REDACTED_KEY, redaction_of
from ctxline.record.store.chain import encode_body
from ctxline.record.store.writes import save_blobs

__all__ = [
    "REDACTED_KEY",
    "Edit",
    "FieldPath",
    "Redaction",
    "check_form",
    "redact",
    "redacted_event",
    "redaction_of",
    "removed_refs",
    "scrub_store",
]

@dataclass(frozen=True, slots=True)
class Redaction:
    """Replace the body of the event at ``seq`` of ``timeline``'s own events with ``event``
    (made by :func:`redacted_event` from the stored one)."""

    session: str
    timeline: str
    seq: int
    event: Event


FieldPath = tuple[str | int, ...]
"""Where a string sits in an event's JSON object (``("tool_calls", 0, "arguments", "text")``)."""
Edit = Callable[[FieldPath, str], str]


def _replaced(obj: JsonValue, edit: Edit, path: FieldPath) -> JsonValue:
    if isinstance(obj, str):
        return edit(path, obj)
    if isinstance(obj, list):
        return [_replaced(v, edit, (*path, i)) for i, v in enumerate(obj)]
    if isinstance(obj, dict):
        out: dict[str, JsonValue] = {}
        for key, value in obj.items():
            if not path and key == "kind":
                out[key] = value
            elif path == ("meta",) and key == REDACTED_KEY:
                out[key] = value  # an earlier redaction's mark is kept as it is
            else:
                out[key] = _replaced(value, edit, (*path, key))
        return out
    return obj


def redacted_event(event: Event, edit: Edit, why: str, at: str) -> Event | None:
    """``event`` with every string value passed through ``edit(path, text)`` and the mark
    added (a second redaction keeps the first digest and adds its ``why``); None when
    ``edit`` changed nothing."""
    obj = event_to_json(event)
    new = _replaced(obj, edit, ())
    if new == obj:
        return None
    assert isinstance(new, dict)
    before = redaction_of(event)
    meta = new.get("meta")
    meta = dict(meta) if isinstance(meta, dict) else {}
    whys: list[JsonValue] = []
    digest: str
    if before is not None:
        digest = str(before.get("digest"))
        old = before.get("why")
        whys = list(old) if isinstance(old, list) else []
    else:
        digest = encode_body(event).digest
    if why not in whys:
        whys.append(why)
    meta[REDACTED_KEY] = {"at": at, "digest": digest, "why": whys}
    new["meta"] = meta
    return event_from_json(new)


def check_form(event: Event, digest: str, where: str) -> None:
    """A redacted row's body must carry a mark naming the digest its link was made from."""
    mark = redaction_of(event)
    if mark is None or mark.get("digest") != digest:
        raise IntegrityError(
            f"{where}: the redacted event is not in its tombstone form (its mark does not name"
            " the digest its hash link was made from); run ctxline doctor"
        )


def _strings(obj: JsonValue, out: set[str]) -> set[str]:
    stack = [obj]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            out.add(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return out


def removed_refs(old: Event, new: Event) -> list[str]:
    """The blob refs of the strings ``old`` held and ``new`` does not: a long result, or a
    long argument the view offloaded, was saved as a blob of its own (content-addressed),
    and that copy goes with the redacted text."""
    gone = _strings(event_to_json(old), set()) - _strings(event_to_json(new), set())
    return sorted(text_ref(t) for t in gone)


def redact(store: object, redactions: Sequence[Redaction], *, scrub: bool = True) -> int:
    """Write ``redactions`` in one transaction; returns how many rows changed. A row that
    is not there, of another kind, or whose new mark names another digest is refused
    (nothing is written). ``scrub``: then leave no copy of the old bytes in the store's
    files where the backend can (SQLite: merged indexes, a truncated ``-wal``)."""
    if not redactions:
        return 0
    write = getattr(store, "_redact_rows", None)
    if write is None:
        raise ValidationError(f"{type(store).__name__} cannot redact events", field="store")
    save_blobs(store.blobs, [r.event for r in redactions])  # type: ignore[attr-defined]
    done = write(list(redactions))
    assert isinstance(done, int)
    if scrub:
        scrub_store(store)
    return done


def scrub_store(store: object) -> None:
    """The backend's clean-up after erasing (a no-op where it has none)."""
    scrub = getattr(store, "_scrub", None)
    if scrub is not None:
        scrub()
