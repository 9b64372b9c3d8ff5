"""Cyclic garbage collection paused while a bulk read builds many objects.

Why: a checked read of a 20,000-step session builds some 60,000 events with their dicts
and tuples, none of them in a reference cycle, and CPython's cycle collector still walked
the young ones every 700 allocations and the whole heap each time it grew by a quarter:
27 % of the read (31 → 22.5 µs an event, issue 25). Reference counting frees everything
as before; only the search for cycles waits until the read ends. Nested and concurrent
reads share one pause: the collector runs again when the last of them ends, and only if
it was enabled when the first began (an app that disables it meanwhile gets it back on).

    with gc_paused():
        events = [parse(row) for row in rows]
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["gc_paused"]


class _Pause:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.depth = 0
        self.was_enabled = False


_PAUSE = _Pause()


@contextmanager
def gc_paused() -> Iterator[None]:
    """No cycle collection inside the block (see the module)."""
    pause = _PAUSE
    with pause.lock:
        if pause.depth == 0:
            pause.was_enabled = gc.isenabled()
            gc.disable()
        pause.depth += 1
    try:
        yield
    finally:
        with pause.lock:
            pause.depth -= 1
            if pause.depth == 0 and pause.was_enabled:
                gc.enable()
