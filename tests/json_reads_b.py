"""Checked reads into JSON for the tests: a path, narrowed to what the assertion needs.

A test that reads ``report["prefix"]["first_difference"]["section"]`` out of a
``JsonValue`` (or out of a ``Mapping[str, JsonValue]`` such as a typed
:class:`~ctxline.view.report.Report`) says the path once and gets a value the type checker
knows; a missing key or a value of another kind fails the test, naming the path::

    >>> report = {"tokens": {"total": 12}, "actions": [{"action": "trim"}]}
    >>> at_int(report, "tokens", "total")
    12
    >>> at_str(report, "actions", 0, "action")
    'trim'
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeAlias

from ctxline.record.jsonvalue import (
    JsonArray,
    JsonObject,
    JsonValue,
    as_array,
    as_int,
    as_object,
    as_str,
    dig,
)

__all__ = ["at", "at_array", "at_int", "at_number", "at_object", "at_str"]

Json: TypeAlias = "JsonValue | Mapping[str, JsonValue]"
"""A JSON value, or a mapping with JSON values (a report, a header's ``inputs``)."""


def _where(path: tuple[str | int, ...]) -> str:
    return "".join(f"[{p!r}]" for p in path) or "value"


def at(value: Json, *path: str | int) -> JsonValue:
    """The value at ``path`` (keys and indexes); ``KeyError``/``TypeError`` naming the path."""
    if isinstance(value, Mapping):
        if not path:
            return dict(value)
        head = path[0]
        if not isinstance(head, str):
            raise TypeError(f"value: an object is indexed by key, not by {head!r}")
        if head not in value:
            raise KeyError(f"value: no key {head!r}")
        return dig(value[head], *path[1:])
    return dig(value, *path)


def at_object(value: Json, *path: str | int) -> JsonObject:
    """The JSON object at ``path``."""
    return as_object(at(value, *path), _where(path))


def at_array(value: Json, *path: str | int) -> JsonArray:
    """The JSON array at ``path``."""
    return as_array(at(value, *path), _where(path))


def at_str(value: Json, *path: str | int) -> str:
    """The string at ``path``."""
    return as_str(at(value, *path), _where(path))


def at_int(value: Json, *path: str | int) -> int:
    """The integer (not a boolean) at ``path``."""
    return as_int(at(value, *path), _where(path))


def at_number(value: Json, *path: str | int) -> int | float:
    """The number (an integer or a float, not a boolean) at ``path``."""
    found = at(value, *path)
    if isinstance(found, int | float) and not isinstance(found, bool):
        return found
    raise TypeError(f"{_where(path)}: expected a number, got {type(found).__name__}")
