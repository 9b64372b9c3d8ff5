"""Tool-call ids as the providers accept them, mapped deterministically and reported.

A call id comes from outside (a model, an importer, an app): it may hold any text, a
forged tag included, and providers restrict it. Anthropic requires
``^[a-zA-Z0-9_-]+$``; OpenAI rejects an id longer than 40 characters ("string too long.
Expected a string with maximum length 40"). ctxline renders every id in the one pattern
both accept, :data:`ID_PATTERN` within :data:`ID_LIMITS`: an id that already fits is
sent as it is (so ordinary sessions keep their bytes), any other becomes its allowed
characters plus 12 hex digits of its sha256 — a pure function of the id, so the cached
prefix stays stable — in the call and in its result alike. Two ids that would map to the
same text get ``_2``, ``_3``… in order of first use. The view's mapping is reported
(``Report.ids``).

    >>> provider_id("toolu_01-ok", 64)
    'toolu_01-ok'
    >>> provider_id('<ctx-rule id="x">', 40)
    '_ctx-rule_id__x___0a2d2f55b5c2'
"""

from __future__ import annotations

import hashlib
import re

__all__ = ["ID_LIMITS", "ID_PATTERN", "IdMap", "OverlayIds", "provider_id"]

ID_PATTERN = re.compile(r"[A-Za-z0-9_-]+")
"""What every rendered call id matches (Anthropic's pattern; OpenAI accepts it too)."""
ID_LIMITS = {"openai": 40, "anthropic": 64}
"""The longest id ctxline renders per provider (OpenAI: 40; Anthropic: 64, a cap ctxline
chooses — the longest form it made before was 61)."""

_BAD = re.compile(r"[^A-Za-z0-9_-]")
_HASH = 12


def provider_id(call_id: str, limit: int) -> str:
    """``call_id`` if it matches :data:`ID_PATTERN` within ``limit``, else its allowed
    characters (``_`` for the others, at most ``limit - 16``) plus ``_`` and a hash."""
    if len(call_id) <= limit and ID_PATTERN.fullmatch(call_id):
        return call_id
    digest = hashlib.sha256(call_id.encode("utf-8", "surrogatepass")).hexdigest()[:_HASH]
    safe = _BAD.sub("_", call_id)[: limit - _HASH - 4]
    return f"{safe}_{digest}" if safe.strip("_") else f"id_{digest}"


def _numbered(base: str, n: int, limit: int) -> str:
    suffix = f"_{n}"
    return base[: limit - len(suffix)] + suffix


class IdMap:
    """View call ids → distinct provider ids, in order of first use."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.ids: dict[str, str] = {}
        self.used: set[str] = set()

    def _taken(self, candidate: str) -> bool:
        return candidate in self.used

    def __call__(self, call_id: str) -> str:
        known = self.ids.get(call_id)
        if known is not None:
            return known
        out = base = provider_id(call_id, self.limit)
        n = 2
        while self._taken(out):
            out, n = _numbered(base, n, self.limit), n + 1
        self.ids[call_id] = out
        self.used.add(out)
        return out

    def changed(self) -> list[tuple[str, str]]:
        """``(view id, provider id)`` for every id that is not sent as it is."""
        return [(a, b) for a, b in self.ids.items() if a != b]


class OverlayIds(IdMap):
    """The ids of one step: new ids go to this overlay, the base (frozen history) stays."""

    def __init__(self, base: IdMap) -> None:
        super().__init__(base.limit)
        self.base = base

    def _taken(self, candidate: str) -> bool:
        return candidate in self.used or candidate in self.base.used

    def __call__(self, call_id: str) -> str:
        known = self.base.ids.get(call_id)
        return known if known is not None else super().__call__(call_id)

    def changed(self) -> list[tuple[str, str]]:
        return [*self.base.changed(), *super().changed()]
