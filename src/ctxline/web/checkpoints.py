"""Fold checkpoints: a late step of a long run rebuilt from the nearest saved fold, not seq 1.

Why: a step page rebuilds its request (and the one before) from the record, and a cold
rebuild feeds the view cache every event from seq 1 — at 20,000 steps, 60,000 events
and seconds a page, for a page that shows one step. The inspector keeps, for the
timeline it has read, copies of the view cache caught up to the first request at or
after every :data:`EVERY` events of the checked prefix (a checkpoint, made once, in
memory, while the first late page is rebuilt); a step is rebuilt from a fork of the
nearest checkpoint before it, so it feeds at most :data:`EVERY` events.

Never trusted over the record: a checkpoint is a fold of the very events the page reads
(the cache checks the id of the last one it was fed against them, and starts over when
it differs), every rebuilt body is still compared with the logged sha256, and when a
checkpoint cannot be made the rebuild is the cold one. A checkpoint is never fed once
saved (only forked), so pages served at once share them safely.

The last :data:`KEEP` steps rebuilt are kept too (at most :data:`KEEP_BYTES` of bodies),
each under its header and the id of the last event it folds: a step page visited again,
or the diff of a step just shown, costs what it shows (its template), not a fork of a
checkpoint fed up to it again (at 60,000 events the fork alone grows with the run).

    folds = Checkpoints()
    previous, current = folds.rebuild(events, [found.previous, found.stored], marks)
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence

from ctxline.errors import CtxlineError
from ctxline.record.events import RequestHeader, StoredEvent
from ctxline.sources.branch import BranchMark
from ctxline.sources.defaults import history_sources
from ctxline.tokens.counters import TokenCounter
from ctxline.view.cache import ViewCache, ViewSetup
from ctxline.view.options import PrepareOptions
from ctxline.web.data import Rebuilt, _counter, _rebuild, rebuild_one

__all__ = ["EVERY", "KEEP", "KEEP_BYTES", "Checkpoints"]

EVERY = 2_000
"""Events between two checkpoints: what a step page feeds at most (tens of milliseconds),
against one copy of the fold kept per checkpoint (a few MB at 60,000 events)."""

KEEP = 32
"""Rebuilt steps kept (a step page rebuilds two: this one and the one before)."""

KEEP_BYTES = 32 << 20
"""At most this many bytes of kept bodies (their parts hold about as much again)."""

_Key = tuple[int, str, int, str, int, str, tuple[BranchMark, ...]]
"""(header seq and id, its upto_seq and sha256, events folded, the last one's id, branch
marks): what a rebuild reads."""


def _header(stored: StoredEvent) -> RequestHeader:
    assert isinstance(stored.event, RequestHeader)
    return stored.event


def _key(stored: StoredEvent, events: Sequence[StoredEvent], marks: Sequence[BranchMark]) -> _Key:
    """What a rebuild of ``stored`` reads: the header, the events up to its ``upto_seq`` (named
    by the last one's id, as a checkpoint is: the record is hash-linked), the fork points."""
    header = _header(stored)
    folded = min(header.upto_seq, len(events))
    last = events[folded - 1].id if folded > 0 else ""
    return stored.seq, stored.id, header.upto_seq, header.sha256, folded, last, tuple(marks)


class Checkpoints:
    """The checkpoints of one timeline (see the module doc); ``every``: events between two
    (0: none, every request rebuilt cold, as before checkpoints)."""

    def __init__(self, every: int = EVERY) -> None:
        if every < 0:
            raise ValueError("every must be 0 (no checkpoints) or more")
        self.every = every
        self.saved: list[tuple[int, ViewCache]] = []
        """(record seq the cache was caught up to, the cache), oldest first; never fed."""
        self.broken = False
        """A checkpoint could not be made: every rebuild is cold from then on."""
        self._counters: dict[str, TokenCounter] = {}
        self._lock = threading.Lock()
        self._built: OrderedDict[_Key, Rebuilt] = OrderedDict()
        """The steps rebuilt last, least recently asked first (see the module doc)."""
        self._built_bytes = 0

    def rebuild(
        self,
        events: Sequence[StoredEvent],
        stored: Sequence[StoredEvent],
        marks: Sequence[BranchMark] = (),
    ) -> list[Rebuilt]:
        """The ``request`` events ``stored`` rebuilt with their parts, as
        :func:`~ctxline.web.data.rebuild_one` rebuilds each cold; ``events``: the timeline
        from seq 1 to at least the last one's ``upto_seq``. In ``stored``'s order."""
        if not self.every:
            return [rebuild_one(ev, events, marks) for ev in stored]
        keys = [_key(ev, events, marks) for ev in stored]
        out: dict[int, Rebuilt] = {}
        with self._lock:
            for i, key in enumerate(keys):
                kept = self._built.get(key)
                if kept is not None:
                    self._built.move_to_end(key)
                    out[i] = kept
        todo = [i for i in range(len(stored)) if i not in out]
        order = sorted(todo, key=lambda i: _header(stored[i]).upto_seq)
        work: ViewCache | None = None
        at = 0
        for i in order:
            upto = _header(stored[i]).upto_seq
            base = self._base(events, upto, marks)
            if base is None:  # no checkpoint could be made: the cold rebuild of before
                out[i] = rebuild_one(stored[i], events, marks)
                continue
            base_seq, checkpoint = base
            if work is None or base_seq > at:  # the checkpoint is nearer than the last step
                work = checkpoint.fork() if checkpoint is not None else ViewCache()
            rebuilt = out[i] = _rebuild(stored[i], events, marks, work, self._counters, wanted=True)
            at = upto
            if rebuilt.error is not None and rebuilt.error.startswith("cannot rebuild"):
                work = None  # start the next one from a checkpoint, not a half-fed cache
        self._keep({keys[i]: out[i] for i in order})
        return [out[i] for i in range(len(stored))]

    def _keep(self, built: dict[_Key, Rebuilt]) -> None:
        """Keep the steps just rebuilt, dropping the least recently asked past the bounds."""
        with self._lock:
            for key, rebuilt in built.items():
                old = self._built.pop(key, None)
                if old is not None:
                    self._built_bytes -= len(old.body)
                self._built[key] = rebuilt
                self._built_bytes += len(rebuilt.body)
            while self._built and (len(self._built) > KEEP or self._built_bytes > KEEP_BYTES):
                _, dropped = self._built.popitem(last=False)
                self._built_bytes -= len(dropped.body)

    def _base(
        self, events: Sequence[StoredEvent], upto: int, marks: Sequence[BranchMark]
    ) -> tuple[int, ViewCache | None] | None:
        """The latest checkpoint at or before ``upto`` (``(0, None)``: start cold), made first
        when the last one is :attr:`every` events or more before ``upto``."""
        with self._lock:
            if self.broken:
                return None
            if upto - (self.saved[-1][0] if self.saved else 0) >= self.every:
                try:
                    self._extend(events, upto, marks)
                except (CtxlineError, ValueError, TypeError, AttributeError):
                    self.broken, self.saved = True, []
                    return None
            for seq, cache in reversed(self.saved):
                if seq <= min(upto, len(events)) and events[seq - 1].id == cache.record.last_id:
                    return seq, cache
            return 0, None

    def _extend(
        self, events: Sequence[StoredEvent], upto: int, marks: Sequence[BranchMark]
    ) -> None:
        """Checkpoints at the first request at or after every :attr:`every` events, up to
        ``upto``: each the last one forked and caught up as that request's rebuild would."""
        last = self.saved[-1][0] if self.saved else 0
        due: list[RequestHeader] = []
        for ev in events[last:upto]:
            header = ev.event
            if (
                isinstance(header, RequestHeader)
                and last < header.upto_seq <= min(upto, len(events))  # a forged one may not
                and header.upto_seq - (due[-1].upto_seq if due else last) >= self.every
            ):
                due.append(header)
        if not due:
            return
        walker = self.saved[-1][1].fork() if self.saved else ViewCache()
        for n, header in enumerate(due):
            setup = ViewSetup(
                history_sources(),
                PrepareOptions.from_json(header.options),
                _counter(header, self._counters),
                tuple(marks),
            )
            walker.catch_up(events[: header.upto_seq], setup)
            self.saved.append((header.upto_seq, walker))
            if n + 1 < len(due):
                walker = walker.fork()
