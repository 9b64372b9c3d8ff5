"""Schema helpers of the function tools: docstrings, pydantic's schema, type names.

>>> def f(city: str) -> str:
...     '''Weather.
...
...     Args:
...         city: The city.
...     '''
>>> docstring(f)
('Weather.', {'city': 'The city.'})
"""

from __future__ import annotations

import inspect
import json
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any

import docstring_parser

from ctxline.record.jsonvalue import JsonObject, JsonValue, as_array, as_object

__all__ = ["docstring", "is_context", "strip_titles", "type_name"]


def docstring(fn: Callable[..., Any]) -> tuple[str, dict[str, str]]:
    """(description, {parameter: description}) from a Google, Sphinx or numpy docstring.

    The parsing is ``docstring_parser``'s (a base dependency: pure Python, no dependencies,
    ~200 KB; the Anthropic SDK ships it for the same job), which picks the style that finds
    the most sections. A docstring none of the styles can read (``:returns`` without its
    colon, ``Args:`` lines without theirs) is all description and no parameter: nothing in
    it is lost, the model reads it as written.
    """
    text = inspect.getdoc(fn) or ""
    try:
        parsed = docstring_parser.parse(text)
    except docstring_parser.ParseError:
        return text.strip(), {}
    params = {
        p.arg_name.lstrip("*"): " ".join((p.description or "").split()) for p in parsed.params
    }
    return (parsed.description or "").strip(), {k: v for k, v in params.items() if v}


def strip_titles(schema: JsonObject) -> JsonObject:
    """pydantic's schema without the ``title`` noise (names already say it)."""
    out: JsonObject = {}
    for key, value in schema.items():
        if key == "title" and isinstance(value, str):
            continue
        if key == "properties" and isinstance(value, dict):
            out[key] = {name: strip_titles(as_object(v, name)) for name, v in value.items()}
        elif isinstance(value, dict):
            out[key] = strip_titles(value)
        elif isinstance(value, list):
            out[key] = [strip_titles(v) if isinstance(v, dict) else v for v in value]
        else:
            out[key] = value
    return out


def type_name(prop: Mapping[str, JsonValue]) -> str:
    if "enum" in prop:
        return "one of " + "/".join(json.dumps(v) for v in as_array(prop["enum"]))
    if "type" in prop:
        return str(prop["type"])
    if "anyOf" in prop:
        return " or ".join(type_name(as_object(p)) for p in as_array(prop["anyOf"]))
    if "$ref" in prop:
        return "object"
    return "any"


def is_context(annotation: Any, context: type) -> bool:
    """``context``, ``context | None`` or ``Annotated[context, …]``."""
    if annotation is context:
        return True
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return is_context(args[0], context)
    return bool(args) and origin in (typing.Union, types.UnionType) and context in args
