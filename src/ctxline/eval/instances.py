"""Probe instances: the record a probe injects facts into, its question and its exact answer.

    Instance("rules", 0, "tau-bench/…", steps, "Which language now?", "French", "name", now)
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from ctxline.record.events import Event

__all__ = ["AnswerKind", "Fork", "Instance", "Step"]

AnswerKind = Literal["date", "number", "yesno", "name"]


@dataclass(frozen=True, slots=True)
class Step:
    event: Event
    at: datetime


@dataclass(frozen=True, slots=True)
class Fork:
    name: str
    parent: str
    after: int
    """The fork is made when ``steps[:after]`` are recorded; later steps are on the branch."""


@dataclass(frozen=True, slots=True)
class Instance:
    family: str
    index: int
    source: str
    steps: tuple[Step, ...]
    """The record in order; the last step is the question (a user message)."""
    question: str
    answer: str
    kind: AnswerKind
    now: datetime
    candidates: tuple[str, ...] = ()
    forks: tuple[Fork, ...] = ()
    compact_after: int = 0
    """``steps[:compact_after]`` are compacted (0: no compaction)."""
    tail: tuple[str, ...] = ()
    """Runtime blocks ctxline's view shows after the question: ``status``, ``time``."""
    stamps: bool = False
    """The plain views prefix message text with its time (the facts ctxline's time block uses)."""

    @property
    def id(self) -> str:
        return f"{self.family}-{self.index:03d}"
