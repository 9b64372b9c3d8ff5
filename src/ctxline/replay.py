"""Walk a recorded trajectory the way its agent lived it, preparing every model call.

At each point where the recorded agent called its model (just before each assistant
message), the events so far are appended and :meth:`Context.prepare` builds the
request ctxline would have sent; then the recorded reply and results are appended.
The request time is the append time of the newest event, so a replay is repeatable.

    for step in replay_session(store, session, options=PrepareOptions(model="gpt-4.1")):
        print(step.report["tokens"]["total"])
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

from ctxline.context import Context
from ctxline.events import AssistantMessage, Pending, UserMessage
from ctxline.importers import ImportedSession
from ctxline.prepare import Preparation, PrepareOptions
from ctxline.store import Store
from ctxline.tokens import TokenCounter

__all__ = ["REPLAY_EPOCH", "replay_session"]

REPLAY_EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
"""The request time used when a trajectory has no timestamps."""


def replay_session(
    store: Store,
    session: ImportedSession,
    *,
    options: PrepareOptions,
    counter: TokenCounter | None = None,
) -> Iterator[Preparation]:
    """Import ``session`` into ``store`` step by step, yielding each prepared request."""
    ctx = Context(store, session.id, options=options, counter=counter)
    batch: list[Pending] = []
    seen_user = False
    for pending in session.events:
        if isinstance(pending.event, AssistantMessage) and seen_user:
            if batch:
                ctx.append(*batch)
                batch = []
            now = ctx.events[-1].at if ctx.events else REPLAY_EPOCH
            yield ctx.prepare(now=now)
        seen_user = seen_user or isinstance(pending.event, UserMessage)
        batch.append(pending)
    if batch:
        ctx.append(*batch)
