"""The JSON value type, and checked ways to read into one.

Events, requests and reports carry JSON: what ``json.loads`` returns and ``json.dumps``
accepts. ``JsonValue`` says so to the type checker, recursively, so reading a nested
field is a checked step instead of an ``Any`` that hides a wrong key::

    >>> body: JsonValue = {"messages": [{"role": "user", "content": "hi"}]}
    >>> dig(body, "messages", 0, "content")
    'hi'
    >>> get_str(as_object(body), "model", "unknown")
    'unknown'

The ``as_*`` functions narrow or raise ``TypeError`` naming what was found; the ``get_*``
functions read a field leniently (a missing or mistyped field gives the default), for
metadata written by others, where absence is normal.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeAlias

__all__ = [
    "JsonArray",
    "JsonObject",
    "JsonValue",
    "as_array",
    "as_int",
    "as_number",
    "as_object",
    "as_str",
    "dig",
    "get_array",
    "get_int",
    "get_object",
    "get_str",
]

JsonValue: TypeAlias = "bool | int | float | str | list[JsonValue] | dict[str, JsonValue] | None"
"""A value that ``json.dumps`` accepts: dict, list, str, int, float, bool or None."""
JsonObject: TypeAlias = "dict[str, JsonValue]"
JsonArray: TypeAlias = "list[JsonValue]"


def _kind(value: object) -> str:
    return "null" if value is None else type(value).__name__


def as_object(value: JsonValue, what: str = "value") -> JsonObject:
    """``value`` as a JSON object, or ``TypeError`` naming ``what`` and what it was."""
    if isinstance(value, dict):
        return value
    raise TypeError(f"{what}: expected a JSON object, got {_kind(value)}")


def as_array(value: JsonValue, what: str = "value") -> JsonArray:
    """``value`` as a JSON array, or ``TypeError``."""
    if isinstance(value, list):
        return value
    raise TypeError(f"{what}: expected a JSON array, got {_kind(value)}")


def as_str(value: JsonValue, what: str = "value") -> str:
    """``value`` as a string, or ``TypeError``."""
    if isinstance(value, str):
        return value
    raise TypeError(f"{what}: expected a string, got {_kind(value)}")


def as_int(value: JsonValue, what: str = "value") -> int:
    """``value`` as an integer (not a boolean), or ``TypeError``."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise TypeError(f"{what}: expected an integer, got {_kind(value)}")


def as_number(value: JsonValue, what: str = "value") -> float:
    """``value`` as a number (an integer or a float, not a boolean), or ``TypeError``."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value
    raise TypeError(f"{what}: expected a number, got {_kind(value)}")


def dig(value: JsonValue, *path: str | int) -> JsonValue:
    """The value at ``path`` (object keys and array indexes), or ``KeyError``/``TypeError``
    naming the path so far."""
    here = value
    for depth, step in enumerate(path):
        where = "".join(f"[{p!r}]" for p in path[:depth]) or "value"
        if isinstance(step, str):
            obj = as_object(here, where)
            if step not in obj:
                raise KeyError(f"{where}: no key {step!r}")
            here = obj[step]
        else:
            arr = as_array(here, where)
            if not -len(arr) <= step < len(arr):
                raise KeyError(f"{where}: no index {step} (length {len(arr)})")
            here = arr[step]
    return here


def get_object(obj: Mapping[str, JsonValue], key: str) -> JsonObject:
    """``obj[key]`` if it is a JSON object, else an empty one (a new dict)."""
    value = obj.get(key)
    return value if isinstance(value, dict) else {}


def get_array(obj: Mapping[str, JsonValue], key: str) -> JsonArray:
    """``obj[key]`` if it is a JSON array, else an empty one (a new list)."""
    value = obj.get(key)
    return value if isinstance(value, list) else []


def get_str(obj: Mapping[str, JsonValue], key: str, default: str = "") -> str:
    """``obj[key]`` if it is a string, else ``default``."""
    value = obj.get(key)
    return value if isinstance(value, str) else default


def get_int(obj: Mapping[str, JsonValue], key: str, default: int = 0) -> int:
    """``obj[key]`` if it is an integer (not a boolean), else ``default``."""
    value = obj.get(key)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return default
