"""Time context (seed 004): the current local time, and how long the session was quiet.

Why: a model has no clock. Static text goes stale at once and a tool call per step
costs a round trip, and the model also cannot tell a reply sent at once from one sent
hours later. So each request carries two lines computed by code:

- ``now``: an ISO-like local timestamp with its numeric UTC offset and IANA zone, so a
  DST change shows as a changed offset (``+02:00`` → ``+01:00``), never silently;
- ``elapsed``: whole seconds since the last model-visible message (user, assistant,
  tool result, notification, state) *before the current turn began*. A turn begins at
  the user message that started it: a user message that follows another visible kind or
  a logged request (user messages sent back to back, with no request between them, are
  one prompt). That new prompt is excluded, or the first request of every turn would
  say "0s". The first turn says ``unavailable (no earlier message in this session)``; a
  clock moved backwards clamps to 0.

The baseline is the record's append time (``at``), so a rebuild or a fork gives the same
value. A reading is reused within ``refresh_s`` seconds inside one turn; the first
request of a turn always refreshes, and ``refresh_s=0`` refreshes every step. Nothing
runs on a timer: a reading is taken only when a request is prepared.

:func:`time_block` is pure: the caller keeps the returned :class:`TimeReading` (log it
with the request's inputs, see :meth:`TimeReading.to_json`) and passes it back as
``previous`` next step.

    >>> cfg = TimeConfig(zone="Europe/Berlin")
    >>> r = time_block([], datetime(2026, 11, 2, 23, 0, 22, tzinfo=UTC), cfg, None)
    >>> print(r.text)
    now: 2026-11-03T00:00:22+01:00 (Europe/Berlin)
    elapsed since the last message before this turn: unavailable (no earlier message in this session)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ctxline.errors import ValidationError
from ctxline.record.codec import format_at, parse_at
from ctxline.record.events import (
    AssistantMessage,
    JsonValue,
    Notification,
    RequestHeader,
    State,
    StoredEvent,
    ToolResult,
    UserMessage,
)
from ctxline.sources.guide import MessageKind
from ctxline.tags import element, escape

__all__ = [
    "FIRST_TURN",
    "TIME_KIND",
    "TimeConfig",
    "TimeReading",
    "TurnFold",
    "format_elapsed",
    "format_now",
    "reading_text",
    "render_time",
    "side_channel_stamp",
    "time_block",
    "zone_info",
]

FIRST_TURN = "unavailable (no earlier message in this session)"
NOW_LABEL = "now"
ELAPSED_LABEL = "elapsed since the last message before this turn"

Placement = Literal["tail", "system"]

TIME_KIND = MessageKind(
    "ctx-time",
    "the current time in the configured zone (numeric UTC offset and IANA zone), and the "
    "whole seconds since the last message before this turn began",
    "The runtime computes it from its clock and the record; it is current for this request "
    "and replaces any earlier reading.",
    owner="time",
)

_VISIBLE = (UserMessage, AssistantMessage, ToolResult, Notification, State)
"""Event types whose append time can be the elapsed baseline (model-visible messages)."""


@lru_cache(maxsize=64)
def zone_info(zone: str) -> ZoneInfo:
    """The ``ZoneInfo`` of an IANA zone name; a clear :class:`ValidationError` otherwise."""
    if not isinstance(zone, str) or not zone.strip():
        raise ValidationError(f"not an IANA time zone: {zone!r}", field="tz")
    try:
        return ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise ValidationError(
            f"unknown IANA time zone {zone!r} (e.g. 'UTC', 'Europe/Berlin')", field="tz"
        ) from None


@dataclass(frozen=True, slots=True)
class TimeConfig:
    """Where and how often time is shown. The zone is checked here, at configuration."""

    zone: str = "UTC"
    refresh_s: int = 60
    placement: Placement = "tail"

    def __post_init__(self) -> None:
        zone_info(self.zone)
        if (
            isinstance(self.refresh_s, bool)
            or not isinstance(self.refresh_s, int)
            or self.refresh_s < 0
        ):
            raise ValidationError(
                f"the refresh interval must be a whole number of seconds >= 0, got {self.refresh_s!r}",
                field="refresh_s",
            )
        if self.placement not in ("tail", "system"):
            raise ValidationError(
                f"placement must be 'tail' or 'system', got {self.placement!r}", field="placement"
            )


def _aware(now: datetime, what: str = "now") -> datetime:
    if now.tzinfo is None or now.utcoffset() is None:
        raise ValidationError(f"{what} has no time zone", field=what)
    return now


def format_now(now: datetime, zone: str) -> str:
    """``2026-11-03T00:00:22+01:00 (Europe/Berlin)``: whole seconds, numeric offset, zone."""
    local = _aware(now).astimezone(zone_info(zone))
    return f"{local.isoformat(timespec='seconds')} ({zone})"


def side_channel_stamp(at: datetime, zone: str = "UTC") -> str:
    """The ``[YYYY-MM-DD HH:MM:SS]`` prefix of seed 001, in ``zone``, from an append time."""
    local = _aware(at, "at").astimezone(zone_info(zone))
    return local.strftime("[%Y-%m-%d %H:%M:%S]")


def format_elapsed(seconds: int) -> str:
    """Compact whole units, zero parts left out: ``0s``, ``45s``, ``3h 12m 5s``, ``2d 1h``."""
    seconds = max(0, int(seconds))
    if seconds == 0:
        return "0s"
    parts = []
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1)):
        amount, seconds = divmod(seconds, size)
        if amount:
            parts.append(f"{amount}{unit}")
    return " ".join(parts)


class TurnFold:
    """Running turn state over a record: the current turn's start and its baseline time.

    Fed once per event (O(1) each), so a long record costs nothing per step.
    """

    __slots__ = ("baseline_at", "last_visible_at", "last_was_user", "turn_seq")

    def __init__(self) -> None:
        self.turn_seq = 0
        """seq of the user message that began the current turn (0: no user message yet)."""
        self.baseline_at: datetime | None = None
        """append time of the last visible message before the current turn began."""
        self.last_visible_at: datetime | None = None
        self.last_was_user = False

    def feed(self, stored: StoredEvent) -> None:
        event = stored.event
        if isinstance(event, RequestHeader):
            self.last_was_user = False  # a request was made: the next user message is a new turn
            return
        if not isinstance(event, _VISIBLE):
            return
        is_user = isinstance(event, UserMessage)
        if is_user and not self.last_was_user:
            self.turn_seq = stored.seq
            self.baseline_at = self.last_visible_at
        self.last_visible_at = stored.at
        self.last_was_user = is_user

    def feed_all(self, events: Iterable[StoredEvent]) -> TurnFold:
        for stored in events:
            self.feed(stored)
        return self


@dataclass(frozen=True, slots=True)
class TimeReading:
    """One rendered time value: what the model saw, when it was sampled, for which turn."""

    text: str
    """The two lines (``now: …`` and ``elapsed …: …``), already final; a reading read back
    from a logged request gets them derived again from its fields (:meth:`from_json`)."""
    sampled_at: datetime
    turn_seq: int
    zone: str
    elapsed_s: int | None
    """Whole seconds shown, or None on the first turn."""

    def to_json(self) -> dict[str, JsonValue]:
        return {
            "text": self.text,
            "sampled_at": format_at(self.sampled_at),
            "turn_seq": self.turn_seq,
            "zone": self.zone,
            "elapsed_s": self.elapsed_s,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, JsonValue]) -> TimeReading:
        text, zone, turn = data.get("text"), data.get("zone"), data.get("turn_seq")
        elapsed = data.get("elapsed_s")
        if not isinstance(text, str) or not isinstance(zone, str):
            raise ValidationError("a time reading needs text and zone", field="time")
        if not isinstance(turn, int) or isinstance(turn, bool):
            raise ValidationError("expected an integer", field="time.turn_seq")
        if elapsed is not None and (
            not isinstance(elapsed, int) or isinstance(elapsed, bool) or elapsed < 0
        ):
            raise ValidationError("expected an integer >= 0 or null", field="time.elapsed_s")
        sampled = parse_at(data.get("sampled_at"), where="time.sampled_at")
        zone_info(zone)
        # the text is derived again, never taken from the log: only code writes time lines
        return cls(reading_text(sampled, zone, elapsed), sampled, turn, zone, elapsed)


def reading_text(now: datetime, zone: str, elapsed: int | None) -> str:
    """The two lines of a reading taken at ``now`` (``elapsed`` None: the first turn)."""
    elapsed_text = FIRST_TURN if elapsed is None else format_elapsed(elapsed)
    return f"{NOW_LABEL}: {format_now(now, zone)}\n{ELAPSED_LABEL}: {elapsed_text}"


def _sample(turn: TurnFold, now: datetime, zone: str) -> TimeReading:
    elapsed: int | None = None
    if turn.baseline_at is not None:
        elapsed = max(0, int((now - turn.baseline_at) // timedelta(seconds=1)))
    return TimeReading(reading_text(now, zone, elapsed), now.astimezone(UTC), turn.turn_seq, zone, elapsed)


def reading_from_fold(
    turn: TurnFold, now: datetime, config: TimeConfig, previous: TimeReading | None
) -> TimeReading:
    """The reading for this request from a running :class:`TurnFold` (see :func:`time_block`)."""
    _aware(now)
    if previous is not None and config.refresh_s > 0 and previous.turn_seq == turn.turn_seq:
        age = now - previous.sampled_at
        if previous.zone == config.zone and timedelta(0) <= age < timedelta(
            seconds=config.refresh_s
        ):
            return previous
    return _sample(turn, now, config.zone)


def time_block(
    events: Iterable[StoredEvent],
    now: datetime,
    config: TimeConfig,
    previous: TimeReading | None,
) -> TimeReading:
    """The time reading for the request prepared at ``now`` over ``events`` (pure).

    ``previous`` is the reading of the previous request on this timeline (or None). It is
    returned unchanged when it belongs to the same turn, has the same zone and is younger
    than ``config.refresh_s``; otherwise a fresh reading is taken at ``now``. A clock that
    moved back before ``previous.sampled_at`` also refreshes.
    """
    return reading_from_fold(TurnFold().feed_all(events), now, config, previous)


def render_time(reading: TimeReading) -> str:
    """The standalone ``<ctx-time>`` block (used when there is no status bar, or in system)."""
    return element("ctx-time", escape(reading.text), zone=reading.zone)
