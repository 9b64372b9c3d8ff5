"""Step pages rebuilt from fold checkpoints are the pages a cold rebuild gives, byte for byte.

A real recorded session (mini-swe-agent, from ``../shared/data`` or its subset in
``tests/data``) is replayed through ``Context`` with windows small enough that almost
every step compacts and some trim, on both providers. Its step, diff and breaks pages
are served with checkpoints every K events (K from 1, every request a checkpoint, to
more than the run) and compared with the same pages served cold (``every=0``, each
request folded from seq 1 as before checkpoints), for every step and in any visiting
order (the checkpoints are made by the first late page, whichever it is).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from conftest import shared_data
from ctxline import PrepareOptions, RequestHeader, load
from ctxline.record.events import Reduction, StoredEvent
from ctxline.record.store import SQLiteStore
from ctxline.replay import replay_session
from ctxline.view.cache import ViewCache
from ctxline.web import pages
from ctxline.web.app import create_app
from ctxline.web.checkpoints import KEEP, Checkpoints
from ctxline.web.data import _rebuild, rebuild_one
from ctxline.web.record import InspectorRecord, open_record

FILE = "mini-swe-agent/django__django-11138.traj.json"
RUNS = {
    "openai": PrepareOptions(model="gpt-4.1", context_window=6_000, max_output=1_000),
    "anthropic": PrepareOptions(
        provider="anthropic", model="claude-sonnet-4-5", context_window=12_000, max_output=1_000
    ),
}


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, int]]:
    """The record, and each replayed session's number of logged steps."""
    path = tmp_path_factory.mktemp("checkpoints") / "record.db"
    store = SQLiteStore(path)
    steps: dict[str, int] = {}
    for name, options in RUNS.items():
        (session,) = load(shared_data() / FILE)
        sid = f"{session.id}@{name}"
        for _ in replay_session(store, session, options=options, session_id=sid, keep_ids=False):
            pass
        events = store.read(sid)
        steps[sid] = sum(isinstance(e.event, RequestHeader) for e in events)
        actions = {e.event.action for e in events if isinstance(e.event, Reduction)}
        assert "compact" in actions, actions  # checkpoints fall between reductions
    store.close()
    return path, steps


class ColdPages(dict[tuple[str, int], dict[str, Any]]):
    """(session, step) → the step page's context; a short repr (hypothesis prints arguments)."""

    def __repr__(self) -> str:
        return f"<{len(self)} cold step pages>"


@pytest.fixture(scope="module")
def recorded_path(recorded: tuple[Path, dict[str, int]]) -> Path:
    return recorded[0]


@pytest.fixture(scope="module")
def cold(recorded: tuple[Path, dict[str, int]]) -> ColdPages:
    """Every step page's context, each request rebuilt cold (no checkpoints)."""
    path, steps = recorded
    record = open_record(str(path), every=0)
    out = ColdPages()
    for sid, n in steps.items():
        timelines = record.timelines(sid)
        for step in range(1, n + 1):
            out[sid, step] = pages.request(record, sid, "main", step, timelines)
    record.close()
    return out


@contextmanager
def _client(path: Path, every: int) -> Iterator[TestClient]:
    record = open_record(str(path), every=every)
    with TestClient(create_app(record, host="testserver")) as client:
        yield client
    record.close()


def _html(client: TestClient, path: str, sid: str, **params: int) -> bytes:
    query = "".join(f"&{k}={v}" for k, v in params.items())
    response = client.get(f"/{path}?s={quote(sid, safe='')}{query}")
    assert response.status_code == 200, (path, sid, params, response.text[:300])
    return response.content


@pytest.mark.parametrize("every", [1, 40, 150])
def test_every_page_is_the_cold_page_byte_for_byte(
    recorded: tuple[Path, dict[str, int]], every: int
) -> None:
    path, steps = recorded
    cold_pages: list[bytes] = []
    warm_pages: list[bytes] = []
    for every_now, out in ((0, cold_pages), (every, warm_pages)):
        with _client(path, every_now) as client:
            for sid, n in steps.items():
                for step in (n, 1, n // 2, n - 1, 2, n // 2 + 1):  # late first: checkpoints
                    out.append(_html(client, "request", sid, step=step))
                    out.append(_html(client, "diff", sid, step=step))
                for page in (1, 2):
                    out.append(_html(client, "breaks", sid, page=page))
    assert len(warm_pages) == len(cold_pages)
    for i, (warm, cold_page) in enumerate(zip(warm_pages, cold_pages, strict=True)):
        assert warm == cold_page, f"page {i} differs"


@settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    every=st.integers(1, 500),
    which=st.integers(0, 1),
    picks=st.lists(st.integers(0, 10**6), min_size=1, max_size=8),
)
def test_any_every_and_any_order_gives_the_cold_pages(
    recorded: tuple[Path, dict[str, int]],
    cold: ColdPages,
    every: int,
    which: int,
    picks: list[int],
) -> None:
    path, steps = recorded
    sid = sorted(steps)[which]
    order = list(dict.fromkeys(1 + p % steps[sid] for p in picks))
    record = open_record(str(path), every=every)
    timelines = record.timelines(sid)
    try:
        for step in order:
            assert pages.request(record, sid, "main", step, timelines) == cold[sid, step], step
        folds = record.checkpoints(sid, "main")
        assert not folds.broken
        # a checkpoint once a request logged before the latest shown covers `every` events
        late = max(cold[sid, s]["rebuilt"].header.upto_seq for s in order)
        due = any(
            isinstance(e.event, RequestHeader) and e.event.upto_seq >= every
            for e in record.prefix(sid, "main", late)
        )
        assert bool(folds.saved) == due, (late, every)
        assert all(seq <= late for seq, _ in folds.saved)
    finally:
        record.close()


def test_checkpoints_sit_at_requests_and_are_never_fed_again(
    recorded: tuple[Path, dict[str, int]],
) -> None:
    path, steps = recorded
    sid = next(iter(steps))
    record: InspectorRecord = open_record(str(path), every=25)
    timelines = record.timelines(sid)
    pages.request(record, sid, "main", steps[sid], timelines)
    folds = record.checkpoints(sid, "main")
    events = record.prefix(sid, "main", 10**6)
    uptos = {e.event.upto_seq for e in events if isinstance(e.event, RequestHeader)}
    saved = [(seq, cache.record.seq, cache.record.last_id) for seq, cache in folds.saved]
    assert len(saved) >= 2
    for seq, fed, last in saved:
        assert seq in uptos
        assert fed == seq
        assert last == events[seq - 1].id
    assert all(b[0] - a[0] >= 25 for a, b in itertools.pairwise(saved))
    for step in range(steps[sid], 0, -7):  # every page forks them: none moves
        pages.request(record, sid, "main", step, timelines)
    assert [(s, c.record.seq, c.record.last_id) for s, c in folds.saved] == saved
    record.close()


def test_a_fork_is_independent_of_the_cache_it_came_from(
    recorded: tuple[Path, dict[str, int]],
) -> None:
    path, steps = recorded
    sid = next(iter(steps))
    record = open_record(str(path), every=0)
    events = record.prefix(sid, "main", 10**6)
    headers = [e for e in events if isinstance(e.event, RequestHeader)]
    folds = Checkpoints(every=len(events) // 3)
    first = folds.rebuild(events, [headers[-1]])[0]
    assert first.matches
    assert folds.saved
    seq, checkpoint = folds.saved[0]
    before = (checkpoint.record.seq, len(checkpoint.builder.frozen), checkpoint.record.steps)
    fork = checkpoint.fork()
    assert isinstance(fork, ViewCache)
    assert fork is not checkpoint
    again = folds.rebuild(events, [headers[-1], headers[len(headers) // 2]])
    assert again[0] == first
    assert all(r.matches for r in again)
    assert (
        checkpoint.record.seq,
        len(checkpoint.builder.frozen),
        checkpoint.record.steps,
    ) == before
    assert fork.record.seq == seq
    record.close()


def test_every_must_not_be_negative() -> None:
    with pytest.raises(ValueError, match="every"):
        Checkpoints(every=-1)


@pytest.mark.parametrize("provider", sorted(RUNS))
def test_a_rendered_cache_and_its_fork_each_rebuild_their_own_steps(
    recorded: tuple[Path, dict[str, int]], provider: str
) -> None:
    """A fork shares no state that either side changes (the renderers' running hashes
    included): the original and the fork, fed on to different steps, both rebuild to the
    logged sha256."""
    path, steps = recorded
    sid = next(s for s in steps if s.endswith(provider))
    record = open_record(str(path), every=0)
    events = record.prefix(sid, "main", 10**6)
    headers = [e for e in events if isinstance(e.event, RequestHeader)]
    cache = ViewCache()
    for stored in headers[:40]:
        assert _rebuild(stored, events, (), cache, {}, wanted=False).matches
    fork = cache.fork()
    for stored in headers[40:80]:
        assert _rebuild(stored, events, (), fork, {}, wanted=False).matches
    for stored in headers[40:60]:  # the original goes on from where it was
        assert _rebuild(stored, events, (), cache, {}, wanted=False).matches
    record.close()


def test_a_page_of_one_kind_reads_the_same_from_the_kept_prefix(recorded_path: Path) -> None:
    """How a step page finds its header and its neighbours: from the prefix it keeps for
    the part it holds, the rows after it from the store; as the store alone answers."""
    sid = "mini-swe-agent/django__django-11138@openai"
    fresh = open_record(str(recorded_path))
    checked = 0
    for kept in (0, 1, 50, 200, 389, 390, 500):
        warm = open_record(str(recorded_path))
        warm.prefix(sid, "main", kept)
        for kind in ("request", "tool_result", "reduction"):
            for after in (0, 37, 200, 395):
                for offset in (0, 1, 20, 60, 130):
                    for limit in (None, 0, 1, 3):
                        got = warm.read(
                            sid, "main", after_seq=after, kind=kind, offset=offset, limit=limit
                        )
                        want = fresh.read(
                            sid, "main", after_seq=after, kind=kind, offset=offset, limit=limit
                        )
                        assert [(e.seq, e.id) for e in got] == [(e.seq, e.id) for e in want], (
                            kept,
                            kind,
                            after,
                            offset,
                            limit,
                        )
                        checked += bool(want)
        warm.close()
    fresh.close()
    assert checked > 400  # most of the grid reads something (the rest: past the end)


def test_a_header_claiming_more_than_the_record_rebuilds_as_cold(recorded_path: Path) -> None:
    """A hand-edited header whose ``upto_seq`` is past the record: no checkpoint is made
    at it, and its page says what the cold rebuild says (the hash differs)."""
    sid = "mini-swe-agent/django__django-11138@openai"
    record = open_record(str(recorded_path), every=0)
    events = record.prefix(sid, "main", 10**6)
    last = next(e for e in reversed(events) if isinstance(e.event, RequestHeader))
    assert isinstance(last.event, RequestHeader)
    forged = replace(last, event=replace(last.event, upto_seq=len(events) + 50))
    edited = [forged if e is last else e for e in events]  # the record as edited by hand
    target = replace(last, event=replace(last.event, upto_seq=len(events) + 60))
    folds = Checkpoints(every=1)
    (got,) = folds.rebuild(edited, [target])
    assert got == rebuild_one(target, edited)
    assert got.error is not None
    assert all(seq <= len(events) for seq, _ in folds.saved)
    assert not folds.broken
    record.close()


def test_the_kept_prefix_stays_whole_when_another_page_kept_another_timeline_meanwhile(
    recorded: tuple[Path, dict[str, int]],
) -> None:
    """Pages are served from a thread pool: while one page reads on from the prefix it
    found, another may keep another session's. The index by kind must still cover the
    whole of what is kept (before, it held only the part read last, and a step page
    answered 404 for a step the record holds)."""
    path, steps = recorded
    one, other = sorted(steps)
    record = open_record(str(path))
    fresh = open_record(str(path))
    record.prefix(one, "main", 100)
    read = record.read
    interleaved: list[list[StoredEvent]] = []

    def read_while_another_page_runs(session: str, timeline: str = "main", **kw: Any) -> Any:
        if session == one and kw.get("after_seq") == 100 and not interleaved:
            interleaved.append(record.prefix(other, "main", 30))  # the other page, meanwhile
        return read(session, timeline, **kw)

    record.read = read_while_another_page_runs  # type: ignore[method-assign]
    record.prefix(one, "main", 300)
    assert interleaved
    record.read = read  # type: ignore[method-assign]
    got = record.read(one, "main", kind="request", offset=0, limit=None)
    want = fresh.read(one, "main", kind="request", offset=0, limit=None)
    assert [e.seq for e in got] == [e.seq for e in want]
    record.close()
    fresh.close()


def test_a_step_rebuilt_again_is_the_one_kept_and_the_kept_are_bounded(
    recorded: tuple[Path, dict[str, int]],
) -> None:
    """A step page visited again takes the step rebuilt the first time (no checkpoint is
    forked for it); another header, even at the same seq, is rebuilt; at most ``KEEP``
    steps are kept, the least recently asked dropped first."""
    path, steps = recorded
    sid = next(iter(steps))
    record = open_record(str(path), every=0)
    events = record.prefix(sid, "main", 10**6)
    headers = [e for e in events if isinstance(e.event, RequestHeader)]
    record.close()
    folds = Checkpoints(every=40)
    first = folds.rebuild(events, [headers[-2], headers[-1]])
    forks: list[int] = []
    fork = ViewCache.fork

    def counted(self: ViewCache) -> ViewCache:
        forks.append(1)
        return fork(self)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ViewCache, "fork", counted)
        again = folds.rebuild(events, [headers[-2], headers[-1]])
        assert not forks
        assert [a is b for a, b in zip(again, first, strict=True)] == [True, True]
        assert again == [rebuild_one(h, events) for h in headers[-2:]]
        last = headers[-1]
        assert isinstance(last.event, RequestHeader)
        other = replace(last, event=replace(last.event, sha256="0" * 64))
        (got,) = folds.rebuild(events, [other])
        assert got is not first[1]
        assert got.error is not None  # its logged hash is not what the record rebuilds to
        assert forks
    for h in headers[: KEEP + 5]:
        folds.rebuild(events, [h])
    kept = folds._built
    assert len(kept) == KEEP
    assert [key[0] for key in kept] == [h.seq for h in headers[5 : KEEP + 5]]
    assert folds._built_bytes == sum(len(r.body) for r in kept.values())
