"""Checked reads of JSON reports, metadata and state for the tests.

Reports, event metadata and environment state are ``JsonValue``: a test that reads
``report["actions"]`` as a list of objects, or ``report["tokens"]["total"]`` as a number,
says so here, and a value of the wrong shape fails the test with a ``TypeError`` naming
it instead of being read past::

    >>> objects([{"action": "trim"}])[0]["action"]
    'trim'
    >>> num(dig({"tokens": {"total": 12}}, "tokens", "total")) + 1
    13

Nothing here is lenient: a missing key or a wrong kind raises (``dig`` names the path).
"""

from __future__ import annotations

from ctxline.record.jsonvalue import JsonObject, JsonValue, as_array, as_object, as_str, dig

__all__ = ["dig", "num", "obj_at", "objects", "strs"]


def objects(value: JsonValue, what: str = "value") -> list[JsonObject]:
    """``value`` as a JSON array of objects, or ``TypeError`` naming the first that is not."""
    return [as_object(item, f"{what}[{i}]") for i, item in enumerate(as_array(value, what))]


def strs(value: JsonValue, what: str = "value") -> list[str]:
    """``value`` as a JSON array of strings, or ``TypeError``."""
    return [as_str(item, f"{what}[{i}]") for i, item in enumerate(as_array(value, what))]


def num(value: JsonValue, what: str = "value") -> int | float:
    """``value`` as a number (an integer or a float, not a boolean), or ``TypeError``."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value
    kind = "null" if value is None else type(value).__name__
    raise TypeError(f"{what}: expected a number, got {kind}")


def obj_at(value: JsonValue, *path: str | int) -> JsonObject:
    """The JSON object at ``path`` (see ``dig``), or ``KeyError``/``TypeError``."""
    return as_object(dig(value, *path), "".join(f"[{p!r}]" for p in path) or "value")
