"""Rebuilding logged requests byte for byte from the record and their headers.

A ``request`` header carries the step's options and inputs and the sha256 of the body
that was sent; the record up to ``upto_seq`` holds everything else (the guide and tools
in force, the reductions). A rebuild renders that again and refuses to return bytes
whose hash differs from the logged one: the record or the rendering changed since —
unless the record was redacted since (``forget``), which :func:`redactions_in` names:
then the rebuild shows tombstones where the erased text was.

    header, prep = rebuild_request(store.read("demo"), step=3)
    assert prep.sha256 == header.sha256
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from ctxline.errors import IntegrityError, ValidationError
from ctxline.record.events import RequestHeader, StoredEvent
from ctxline.record.redacted import redaction_of
from ctxline.sources.base import Source
from ctxline.sources.branch import BranchMark
from ctxline.tokens.counters import TokenCounter, get_counter
from ctxline.view.cache import ViewCache
from ctxline.view.options import PrepareOptions, StepInputs
from ctxline.view.prepare import Preparation, prepare

__all__ = ["rebuild_all", "rebuild_request", "redactions_in"]


def _counter_for(header: RequestHeader, given: TokenCounter | None) -> TokenCounter:
    """The counter a request was prepared with (offload previews depend on its counts)."""
    name = str(header.report.get("tokenizer") or header.options.get("tokenizer") or "")
    if given is not None and given.name == name:
        return given
    return get_counter(name)


def _rebuild(
    events: Sequence[StoredEvent],
    header: RequestHeader,
    branches: Sequence[BranchMark],
    cache: ViewCache | None,
    counter: TokenCounter | None,
    sources: Sequence[Source] | None,
) -> Preparation:
    prep = prepare(
        events[: header.upto_seq],  # a timeline is gap-free from seq 1
        PrepareOptions.from_json(header.options),
        StepInputs.from_json(header.inputs),
        branches=branches,
        counter=_counter_for(header, counter),
        cache=cache,
        sources=sources,
    )
    if prep.sha256 != header.sha256 and not redactions_in(events, header):
        raise IntegrityError(
            f"step {header.step} rebuilt to {prep.sha256}, but {header.sha256} was logged: the record"
            " or ctxline's rendering changed since it was prepared"
        )
    return prep


def redactions_in(events: Sequence[StoredEvent], header: RequestHeader) -> tuple[str, ...]:
    """Why the record a logged request was built from was redacted since (``forget``:
    ``"forgotten memory m-…"``), from the marks of its header and the events before it;
    empty when nothing was. A rebuild that differs from the logged hash for that reason
    returns the redacted bytes (with tombstones) instead of raising: say so to the user."""
    whys: list[str] = []
    for event in [header, *(ev.event for ev in events[: header.upto_seq])]:
        mark = redaction_of(event)
        why = mark.get("why") if mark is not None else None
        for one in why if isinstance(why, list) else ():
            if str(one) not in whys:
                whys.append(str(one))
    return tuple(whys)


def rebuild_request(
    events: Sequence[StoredEvent],
    step: int,
    branches: Sequence[BranchMark] = (),
    counter: TokenCounter | None = None,
    sources: Sequence[Source] | None = None,
) -> tuple[RequestHeader, Preparation]:
    """Rebuild logged step ``step`` of a timeline from its events; raises if the hash differs.

    The counter is the one named in the step's report; pass ``counter`` when it was a
    custom one (a name :func:`~ctxline.tokens.counters.get_counter` does not know), and
    ``sources`` when the timeline's view had sources of the app's own.
    """
    header = next(
        (ev.event for ev in events if isinstance(ev.event, RequestHeader) and ev.event.step == step),
        None,
    )
    if header is None:
        raise ValidationError(f"no request step {step} in this timeline", field="step")
    return header, _rebuild(events, header, branches, None, counter, sources)


def rebuild_all(
    events: Sequence[StoredEvent],
    branches: Sequence[BranchMark] = (),
    counter: TokenCounter | None = None,
    sources: Sequence[Source] | None = None,
) -> Iterator[tuple[RequestHeader, Preparation]]:
    """Rebuild every logged request of a timeline in order, in O(total) with one view cache."""
    cache = ViewCache()
    for ev in events:
        if isinstance(ev.event, RequestHeader):
            yield ev.event, _rebuild(events, ev.event, branches, cache, counter, sources)
