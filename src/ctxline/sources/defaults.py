"""The sources every Context has, and the ones that render history in a rebuild.

    sources = default_sources(marks, status=StatusConfig(), status_mode="auto", dynamic=True)
"""

from __future__ import annotations

from collections.abc import Sequence

from ctxline.sources.base import Source
from ctxline.sources.branch import BranchMark, BranchSource
from ctxline.sources.current import CurrentSource
from ctxline.sources.dynamic import DynamicSource
from ctxline.sources.notifications import NotificationSource
from ctxline.sources.rules import RuleSource
from ctxline.sources.slots import SnapshotSource
from ctxline.sources.state import StateSource
from ctxline.sources.status import StatusConfig
from ctxline.sources.statusbar import StatusMode, StatusSource
from ctxline.sources.todo import TodoSource

__all__ = ["default_sources", "history_sources"]


def history_sources() -> tuple[Source, ...]:
    """The built-in sources that render events in history (state, rules, notifications,
    environment snapshots)."""
    return (StateSource(), RuleSource(), NotificationSource(), SnapshotSource())


def default_sources(
    marks: Sequence[BranchMark] = (),
    *,
    status: StatusConfig | None = None,
    status_mode: StatusMode = "auto",
    dynamic: bool = False,
    extra: Sequence[Source] = (),
) -> tuple[Source, ...]:
    """A Context's sources, in order: branch, history, todo, the app's, status, current
    values, dynamic."""
    sources: list[Source] = [BranchSource(marks), *history_sources(), TodoSource(), *extra]
    if status is not None and status_mode != "off":
        sources.append(StatusSource(status, status_mode))
    sources.append(CurrentSource(marks))
    if dynamic:
        sources.append(DynamicSource())
    names = [s.name for s in sources]
    duplicate = next((n for n in names if names.count(n) > 1), None)
    if duplicate is not None:
        from ctxline.errors import ValidationError

        raise ValidationError(f"two sources are named {duplicate!r}", field="sources")
    return tuple(sources)
