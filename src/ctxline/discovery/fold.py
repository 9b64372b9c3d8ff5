"""What a timeline has discovered, folded from its record (so a resumed run sees the same).

Fed each stored event once, in order (the view's cache and the runner feed it alike):

- a ``search_tools`` result reveals the tools its ``meta.discovery.revealed`` names (in
  rank order); the best hit of the latest search is *protected* — never dropped — until
  the model's next reply (seed 003: the top hit is kept to the next recorded response);
- a reply's calls mark the tools it used, ``call_tool(name=…)`` the inner tool;
- a ``tools`` event whose ``meta.dropped`` lists tools (rung 3 of the ladder) hides
  them again: they stay dropped until a search reveals them anew;
- a ``request`` header takes a snapshot — the tools array the model saw (the latest
  ``tools`` event) and the revealed set — which is what a call of the reply that
  follows is checked against: a tool revealed by a result the model had not seen yet
  was not visible to it.

    fold = DiscoveryFold()
    for stored in events: fold.feed(stored)
    fold.seen_revealed      # the tools revealed when the last request was prepared
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ctxline.record.events import AssistantMessage, RequestHeader, StoredEvent, ToolResult, Tools
from ctxline.record.jsonvalue import JsonObject, JsonValue
from ctxline.sources.guide import MessageKind

__all__ = ["CALL_TOOL", "SEARCH_TOOLS", "DiscoveryFold", "Revealed", "discovery_meta"]

SEARCH_TOOLS = "search_tools"
CALL_TOOL = "call_tool"


def discovery_meta(meta: Mapping[str, JsonValue]) -> JsonObject:
    value = meta.get("discovery")
    return value if isinstance(value, dict) else {}


@dataclass(frozen=True, slots=True)
class Revealed:
    name: str
    seq: int
    """The seq of the search result that revealed it."""
    rank: int
    """Its place in that search (0 is the best hit)."""


class DiscoveryFold:
    """The discovered tools of one timeline (see the module docstring)."""

    def __init__(self) -> None:
        self.revealed: dict[str, Revealed] = {}
        self.used: dict[str, int] = {}
        """Tool name -> the reply (1, 2, …) that last called it."""
        self.turns = 0
        self.protected: set[str] = set()
        self.array: frozenset[str] | None = None
        """The names in the latest ``tools`` event (None before the first)."""
        self.seen_array: frozenset[str] | None = None
        self.seen_revealed: frozenset[str] = frozenset()
        self.searches = 0

    def feed(self, stored: StoredEvent) -> Sequence[MessageKind]:
        event = stored.event
        if isinstance(event, AssistantMessage):
            self.turns += 1
            self.protected = set()
            for call in event.tool_calls:
                name = call.name
                if name == CALL_TOOL and isinstance(call.arguments, dict):
                    inner = call.arguments.get("name")
                    name = inner if isinstance(inner, str) else name
                self.used[name] = self.turns
        elif isinstance(event, ToolResult):
            if event.name != SEARCH_TOOLS or event.is_error:
                return ()
            names = discovery_meta(event.meta).get("revealed")
            if not isinstance(names, list):
                return ()
            self.searches += 1
            found = [n for n in names if isinstance(n, str)]
            for rank, name in enumerate(found):
                if name not in self.revealed:
                    self.revealed[name] = Revealed(name, stored.seq, rank)
            self.protected = set(found[:1])
        elif isinstance(event, Tools):
            self.array = frozenset(str(t.get("name", "")) for t in event.tools)
            dropped = event.meta.get("dropped")
            for gone in dropped if isinstance(dropped, list) else []:
                self.revealed.pop(str(gone), None)
                self.protected.discard(str(gone))
        elif isinstance(event, RequestHeader):
            self.seen_array = self.array
            self.seen_revealed = frozenset(self.revealed)
        return ()

    def recently_used(self, name: str, within: int) -> bool:
        last = self.used.get(name)
        return last is not None and self.turns - last < within

    def drop_order(self, within: int) -> list[str]:
        """The revealed tools the ladder may drop, least needed first: never used (or
        used longest ago), then revealed earliest, then ranked lowest; the protected
        top hit and the tools used in the last ``within`` replies are not listed."""
        candidates = [
            r
            for r in self.revealed.values()
            if r.name not in self.protected and not self.recently_used(r.name, within)
        ]
        candidates.sort(key=lambda r: (self.used.get(r.name, -1), r.seq, -r.rank))
        return [r.name for r in candidates]
