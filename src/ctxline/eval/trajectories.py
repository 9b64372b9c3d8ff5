"""Real trajectories for the eval: a pool from ``../shared/data``, cut to short excerpts.

Every probe instance starts from the opening of a real recorded session (tau-bench,
SWE-agent, mini-SWE-agent, Claude Code, loaded by :mod:`ctxline.importers`), so its
prompt carries realistic noise. SmolLM2-135M has an 8k context, so an excerpt is cut
short: system messages are dropped (the eval has its own persona), user and assistant
text is clipped to :data:`TEXT_CHARS` characters, tool output to :data:`RESULT_CHARS`,
tool arguments' strings to :data:`ARG_CHARS`, and events are taken from the start
until ``budget`` tokens (``bytes/4``) are used, never splitting a call from its
results. Probe events are injected only between such groups.

    pool = load_pool(Path("../shared/data"))
    excerpt = make_excerpt(pool[3], budget=600)
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from ctxline.errors import CtxlineError
from ctxline.importers import load
from ctxline.record.events import (
    AssistantMessage,
    Event,
    JsonValue,
    ToolCall,
    ToolResult,
    UserMessage,
)
from ctxline.tokens.counters import get_counter

__all__ = [
    "ARG_CHARS",
    "RESULT_CHARS",
    "TEXT_CHARS",
    "Excerpt",
    "Trajectory",
    "default_data_dir",
    "load_pool",
    "make_excerpt",
]

TEXT_CHARS = 500
RESULT_CHARS = 300
ARG_CHARS = 160
FOLDERS = ("tau-bench", "swe-agent", "mini-swe-agent", "claude-code")
_KEPT = (UserMessage, AssistantMessage, ToolResult)


@dataclass(frozen=True, slots=True)
class Trajectory:
    id: str
    events: tuple[Event, ...]
    """User, assistant and tool-result events of the session, in order (nothing else)."""


@dataclass(frozen=True, slots=True)
class Excerpt:
    source: str
    events: tuple[Event, ...]
    boundaries: tuple[int, ...]
    """Indices where an event may be inserted: after the task, never inside a call group."""

    def tool_names(self) -> set[str]:
        return {
            call.name
            for e in self.events
            if isinstance(e, AssistantMessage)
            for call in e.tool_calls
        }


def default_data_dir() -> Path:
    """``$CTXLINE_SHARED_DATA``, else ``../shared/data`` beside the working directory or the
    repo, else the repo's own ``tests/data`` (a plain clone's subset of the same sessions)."""
    env = os.environ.get("CTXLINE_SHARED_DATA")
    if env:
        return Path(env)
    repo = Path(__file__).resolve().parents[3]
    for base in (Path.cwd(), repo):
        candidate = base.parent / "shared" / "data"
        if candidate.is_dir():
            return candidate
    for candidate in (Path.cwd() / "tests" / "data", repo / "tests" / "data"):
        if candidate.is_dir():
            return candidate
    return Path.cwd().parent / "shared" / "data"


def _files(root: Path) -> Iterable[Path]:
    for folder in FOLDERS:
        base = root / folder
        if not base.is_dir():
            continue
        for path in sorted(base.iterdir()):
            if path.is_file() and path.suffix in (".json", ".jsonl", ".traj"):
                yield path


def load_pool(root: Path, *, min_events: int = 4) -> list[Trajectory]:
    """Every session under ``root`` that opens with a user message, sorted by id."""
    pool: dict[str, Trajectory] = {}
    for path in _files(root):
        try:
            sessions = load(path)
        except CtxlineError:
            continue  # not a trajectory (e.g. a report file)
        for session in sessions:
            events = tuple(p.event for p in session.events if isinstance(p.event, _KEPT))
            if len(events) >= min_events and isinstance(events[0], UserMessage):
                pool[session.id] = Trajectory(session.id, events)
    if not pool:
        raise CtxlineError(f"no trajectories found under {root} (folders {', '.join(FOLDERS)})")
    return [pool[k] for k in sorted(pool)]


def _clip(text: str, width: int) -> str:
    text = text.strip()
    return text if len(text) <= width else text[:width].rstrip() + " … [clipped]"


def _clip_json(value: JsonValue) -> JsonValue:
    if isinstance(value, str):
        return _clip(value, ARG_CHARS)
    if isinstance(value, dict):
        return {k: _clip_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clip_json(v) for v in value[:8]]
    return value


def _clipped(event: Event) -> Event:
    if isinstance(event, UserMessage):
        return UserMessage(_clip(event.text, TEXT_CHARS))
    if isinstance(event, AssistantMessage):
        calls = tuple(ToolCall(c.id, c.name, _clip_json(c.arguments)) for c in event.tool_calls)
        return AssistantMessage(_clip(event.text, TEXT_CHARS), calls)
    if isinstance(event, ToolResult):
        return replace(event, content=_clip(event.content, RESULT_CHARS), meta={})
    return event


def _groups(events: tuple[Event, ...]) -> list[list[Event]]:
    """Events grouped so an assistant message with calls keeps its results."""
    groups: list[list[Event]] = []
    for event in events:
        if isinstance(event, ToolResult) and groups:
            groups[-1].append(event)
        else:
            groups.append([event])
    return groups


def make_excerpt(trajectory: Trajectory, budget: int) -> Excerpt:
    """The opening of ``trajectory`` within ``budget`` tokens (at least the task and one group)."""
    counter = get_counter("bytes/4")
    events: list[Event] = []
    boundaries: list[int] = []
    used = 0
    for group in _groups(tuple(_clipped(e) for e in trajectory.events)):
        cost = sum(counter.count(_text(e)) + 4 for e in group)
        if events and used + cost > budget and len(events) > 1:
            break
        events.extend(group)
        used += cost
        boundaries.append(len(events))
    return Excerpt(trajectory.id, tuple(events), tuple(boundaries))


def _text(event: Event) -> str:
    if isinstance(event, UserMessage):
        return event.text
    if isinstance(event, AssistantMessage):
        return event.text + "".join(f"{c.name}{c.arguments}" for c in event.tool_calls)
    if isinstance(event, ToolResult):
        return event.content
    return ""
