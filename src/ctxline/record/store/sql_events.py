"""The event rules both SQL stores share: the visible segments, the checked read, the chain walk.

Why a module of its own: SQLite and PostgreSQL hold the same rows (``events``, ``chain``,
``timelines``) and check them by the same rules, so the walk over a timeline's ancestry,
the per-row checks of a read and the recomputed links of ``verify_chain`` are written
once; each backend's events module keeps only its SQL text and how its engine hands a
row back (SQLite's incremental blob I/O, PostgreSQL's sliced large bodies and paging).
The dialect is the placeholder ``mark`` (``"?"`` or ``"%s"``) and the callables passed in.

    segments, own = walk_segments(session, timeline, lambda name: row_of(name), True)
    events = read_checked(session, timeline, 0, None, True, segments, own, GENESIS, fetch, fix)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from ctxline.errors import IntegrityError, ValidationError
from ctxline.record.codec import parse_at
from ctxline.record.events import Event, StoredEvent
from ctxline.record.gc_pause import gc_paused
from ctxline.record.store.chain import GENESIS, ChainCheck, chain_link
from ctxline.record.store.external import resolved, whole_digest
from ctxline.record.store.redaction import check_form
from ctxline.record.store.rows import Segment, body_digest, parse_body

__all__ = [
    "MAX_PROBLEMS",
    "ChainWalk",
    "Row",
    "Timeline",
    "link_at",
    "read_checked",
    "stored_at",
    "walk_segments",
]

MAX_PROBLEMS = 20

Row = tuple[Any, ...]
"""One event row as read: ``(seq, id, at, body, link, digest, redacted, external)``
(``digest``, the chained one, ``redacted``, the digest of a redacted body, and
``external``, the blob handle of an external row's content, may be None)."""


@dataclass(frozen=True, slots=True)
class Timeline:
    """A ``timelines`` row: its parent and fork point, its head seq and head link."""

    parent: str | None
    fork_seq: int | None
    head: int
    link: str | None


def walk_segments(
    session: str,
    timeline: str,
    own: Timeline,
    row_of: Callable[[str], Timeline],
    name_loop: bool,
) -> list[Segment]:
    """The segments ``timeline`` (whose row is ``own``) sees, root ancestor first;
    ``name_loop`` names the parent in the error of an ancestry that loops."""
    segments = [Segment(timeline, own.fork_seq or 0, own.head)]
    row, seen = own, {timeline}
    upto_bound = own.head
    while row.parent is not None:
        if row.parent in seen:
            raise IntegrityError(
                f"timeline {session}/{timeline}: its ancestry loops"
                + (f" ({row.parent})" if name_loop else "")
            )
        seen.add(row.parent)
        upto = min(upto_bound, row.fork_seq or 0)  # never above a nearer fork point
        upto_bound, name = upto, row.parent
        row = row_of(name)
        segments.append(Segment(name, row.fork_seq or 0, upto))
    segments.reverse()
    return segments


def link_at(conn: Any, mark: str, session: str, segments: Sequence[Segment], seq: int) -> str:
    """The stored link of visible event ``seq`` (GENESIS for 0)."""
    if seq == 0:
        return GENESIS
    for seg in segments:
        if seg.base < seq <= seg.upto:
            row = conn.execute(
                f"SELECT link FROM chain WHERE session = {mark} AND timeline = {mark}"
                f" AND seq = {mark}",
                (session, seg.name, seq),
            ).fetchone()
            if row is None:
                raise IntegrityError(
                    f"{session}/{seg.name} seq {seq} has no hash link; run ctxline doctor"
                )
            return str(row[0])
    raise IntegrityError(
        f"{session}: seq {seq} is outside the visible timeline; run ctxline doctor"
    )


def stored_at(at: object, where: str) -> str:
    if not isinstance(at, str):
        raise IntegrityError(f"{where}: the stored time is not text; run ctxline doctor")
    return at


@gc_paused()  # tens of thousands of acyclic objects: no cycle search while they are made
def read_checked(
    session: str,
    timeline: str,
    after_seq: int,
    limit: int | None,
    chained: bool,
    segments: Sequence[Segment],
    own: Timeline,
    prev: str,
    fetch: Callable[[str, int, int, int | None], list[Row]],
    fix: Callable[[str, Row], Row],
    load: Callable[[str, str], str],
) -> list[StoredEvent]:
    """The visible events after ``after_seq``, every row checked: seqs gap-free, each
    link recomputed from ``prev`` and the row, the last link against the head's.
    ``fetch(timeline, lo, upto, want)`` reads one segment's rows (``want`` None: all);
    ``fix(timeline, row)`` turns a row as the engine gave it into a :data:`Row` one row
    at a time (so a large body is read only when its turn comes); ``load(ref, where)``
    reads an external row's content (``store.external``)."""
    out: list[StoredEvent] = []
    last = after_seq
    for seg in segments:
        lo = max(seg.base, after_seq)
        want = None if limit is None else limit - len(out)
        if lo >= seg.upto or want == 0:
            continue
        rows = fetch(seg.name, lo, seg.upto, want)
        rows.reverse()
        while rows:
            seq, eid, at, body, link, digest, redacted, external = fix(seg.name, rows.pop())
            where = f"{session}/{seg.name} seq {seq}"
            if seq != last + 1:
                raise IntegrityError(
                    f"{session}/{seg.name}: seq {last + 1} is missing (the next stored event is"
                    f" seq {seq}); run ctxline doctor"
                )
            at = stored_at(at, where)
            event: Event | None = None
            if external is not None:  # the content is a blob: check the whole event
                if redacted is not None or not chained:
                    raise IntegrityError(
                        f"{where}: an external row that is redacted or unchained; run"
                        " ctxline doctor"
                    )
                box = [body]
                del body
                ref = str(external)
                event = resolved(parse_body(box, where), partial(load, ref, where), where)
            if chained:
                if link is None:
                    raise IntegrityError(f"{where} has no hash link; run ctxline doctor")
                have = body_digest(body) if event is None else whole_digest(event)
                if redacted is not None:  # a tombstone: its own digest, the chained one linked
                    if have != redacted:
                        raise IntegrityError(
                            f"{where}: the redacted event does not match its tombstone digest"
                            " (its body was changed outside ctxline); run ctxline doctor"
                        )
                    have = str(digest)
                if chain_link(prev, seq, eid, at, have) != link:
                    raise IntegrityError(
                        f"{where}: the stored event does not match its hash link (its body,"
                        " seq, id or time was changed outside ctxline); run ctxline doctor"
                    )
                prev = link
            if event is None:
                box = [body]
                del body
                event = parse_body(box, where, checked=chained)
            if chained and redacted is not None:
                check_form(event, str(digest), where)
            try:
                when = parse_at(at)
            except ValidationError:
                raise IntegrityError(
                    f"{where}: the stored time {at[:40]!r} is not a time"
                ) from None
            out.append(StoredEvent(seq, eid, when, event))
            last = seq
        if limit is not None and len(out) >= limit:
            break
        if last < seg.upto:
            raise IntegrityError(
                f"{session}/{seg.name}: events {last + 1}-{seg.upto} are missing (the head is"
                f" {seg.upto}); run ctxline doctor"
            )
    if chained and last == own.head and own.link is not None and prev != own.link:
        raise IntegrityError(
            f"{session}/{timeline}: the head link does not match the last event (seq {last});"
            " events were removed or rewritten outside ctxline; run ctxline doctor"
        )
    return out


@dataclass(slots=True)
class ChainWalk:
    """The links of a timeline's events recomputed row by row from ``prev`` (the link
    before the first segment's events); problems are listed, never raised."""

    session: str
    prev: str
    last: int
    checked: int = 0
    problems: list[str] = field(default_factory=list)

    def row(
        self,
        name: str,
        seq: int,
        eid: str,
        at: object,
        digest: Any,
        link: Any,
        have: str,
        redacted: str | None = None,
        form: Callable[[], Event] | None = None,
    ) -> None:
        """One row: its seq after the last, its link from the previous and its digest; a
        redacted row (``redacted``: its body's digest; ``form``: its event, parsed) is
        checked against that digest and its mark, and linked by the chained digest."""
        where = f"{self.session}/{name} seq {seq}"
        self.checked += 1
        if seq != self.last + 1:
            self.problems.append(f"{self.session}/{name}: seq {self.last + 1}-{seq - 1} missing")
        if redacted is not None:
            if have != redacted:
                self.problems.append(
                    f"{where}: the redacted event does not match its tombstone digest (its body"
                    " was changed outside ctxline)"
                )
            elif form is not None:
                try:
                    check_form(form(), str(digest), where)
                except IntegrityError as exc:
                    self.problems.append(str(exc).removesuffix("; run ctxline doctor"))
            have = str(digest)
        if link is None:
            self.problems.append(f"{where} has no hash link")
        elif not isinstance(at, str) or chain_link(self.prev, seq, eid, at, have) != link:
            what = "its body" if digest is not None and digest != have else "its seq, id or time"
            self.problems.append(
                f"{where}: the stored event does not match its hash link ({what} was"
                " changed outside ctxline)"
            )
        self.prev = link if isinstance(link, str) else self.prev
        self.last = seq

    def whole(self, event: Callable[[], Event]) -> str:
        """The whole-event digest of an external row (``event`` puts its content back);
        a row that cannot be read is a problem, and its link will not match."""
        try:
            return whole_digest(event())
        except IntegrityError as exc:
            self.problems.append(str(exc).removesuffix("; run ctxline doctor"))
            return ""

    @property
    def full(self) -> bool:
        return len(self.problems) > MAX_PROBLEMS

    def end(self, seg: Segment) -> None:
        """A segment read: the events after the last row up to its head are missing."""
        if self.last < seg.upto and not self.full:
            self.problems.append(
                f"{self.session}/{seg.name}: events {self.last + 1}-{seg.upto} are missing"
            )
            self.last = seg.upto

    def result(self, timeline: str, own: Timeline) -> ChainCheck:
        if own.link is not None and self.prev != own.link:
            self.problems.append(
                f"{self.session}/{timeline}: the head link does not match the last event"
                f" (seq {self.last}): events were removed or rewritten outside ctxline"
            )
        return ChainCheck(
            self.session,
            timeline,
            own.head,
            own.link or self.prev,
            self.checked,
            tuple(self.problems),
        )
