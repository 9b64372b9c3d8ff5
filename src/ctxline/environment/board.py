"""A blackboard shared by agents: slots on a timeline of their own, with optimistic concurrency.

Seed 002 (5.2): a planner and an executor share one environment instead of messaging each
other — the planner writes the goal and the constraints, the executor reads them and
writes back its progress. Here the shared slots live on a timeline of their own (session
``board/<name>`` of any store: SQLite or PostgreSQL for agents in several processes).
Each agent's view shows the current board, and logs the version of every shared slot it
showed. A write is based on that view:

- if no slot it changes was changed since the version the agent saw, it is appended with
  the board's head as the expected seq (another writer in between: read again, check
  again, append again) — so no write ever overwrites a value its writer had not seen;
- if one was changed, the write is refused with feedback saying who changed what, and
  nothing is written; unless every such slot is declared ``commutative`` — then the
  transaction is run again on the latest values (a rebase) and appended.

Every ``slot`` event on the board carries ``by`` (the writer's role and session) and
``base`` (the version of the slot its writer had seen), so the board's record proves
the chain of versions: no lost write.

    board = Blackboard(open_store("team.db"), "trip-42")
    planner = Environment(shared=("goal", "constraints"), board=board, role="planner")
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from ctxline.environment.slots import SlotFold, SlotValue
from ctxline.errors import ValidationError
from ctxline.record.events import JsonValue, Slot, StoredEvent
from ctxline.record.store.base import MAIN, Store
from ctxline.record.timeline import TimelineWriter

__all__ = ["BOARD_NAME", "Blackboard"]

BOARD_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


class Blackboard:
    """A shared timeline of slot values (see the module docstring). One per process and agent."""

    def __init__(self, store: Store, name: str, *, session: str | None = None) -> None:
        if not BOARD_NAME.match(name):
            raise ValidationError(
                f"board name {name!r} must be 1-64 letters, digits, '_', '.' or '-'", field="board"
            )
        self.store = store
        self.name = name
        self.session = session or f"board/{name}"
        store.create_session(self.session, exist_ok=True)
        self.writer = TimelineWriter(store, self.session, MAIN)
        self._fold = SlotFold()
        self._last_id = ""

    @property
    def head(self) -> int:
        """The seq of the last event read (call :meth:`refresh` first for the latest)."""
        return self._fold.head

    def refresh(self) -> Mapping[str, SlotValue]:
        """Read what was appended since the last look (by any agent); the slot values."""
        new = self.store.read(self.session, MAIN, after_seq=self._fold.head)
        for stored in new:
            self._fold.feed(stored)
            self._last_id = stored.id
        return self._fold.values

    def get(self, name: str) -> SlotValue:
        return self._fold.get(name)

    def stale(self, names: Iterable[str], seen: Mapping[str, int]) -> list[str]:
        """The slots among ``names`` changed since the versions in ``seen`` — a compare-and-set:
        a slot not in ``seen`` was never shown to the writer, so it counts as seen at version
        0 (never written), and a write over any value the writer had not read is stale."""
        return [n for n in dict.fromkeys(names) if self.get(n).version != seen.get(n, 0)]

    def append(self, events: Sequence[Slot], *, author: str) -> list[StoredEvent]:
        """Append ``events`` at the head last read (raises :class:`~ctxline.errors.Conflict`
        when another writer moved it); each carries its author and the version it replaces."""
        stamped = []
        for event in events:
            meta: dict[str, JsonValue] = {**event.meta, "author": author}
            meta["base"] = self.get(event.name).version
            stamped.append(Slot(event.name, event.op, event.value, meta))
        stored = self.writer.append(stamped, expected_seq=self._fold.head)
        for item in stored:
            self._fold.feed(item)
            self._last_id = item.id
        return stored

    def history(self, name: str) -> list[StoredEvent]:
        """Every change of slot ``name`` on the board, oldest first (for audits and tests)."""
        events = self.store.read(self.session, MAIN)
        return [e for e in events if isinstance(e.event, Slot) and e.event.name == name]
