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
import re
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["docstring", "is_context", "strip_titles", "type_name"]

_SECTION = re.compile(
    r"^\s*(Args|Arguments|Parameters|Params|Returns?|Raises|Yields?|Examples?|Notes?)\s*:?\s*$"
)
_GOOGLE_PARAM = re.compile(r"^\s*\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_SPHINX_PARAM = re.compile(r"^\s*:param\s+(?:[^:]*\s)?(\w+)\s*:\s*(.*)$")
_NUMPY_PARAM = re.compile(r"^\s*(\w+)\s*(?::\s*.*)?$")


def docstring(fn: Callable[..., Any]) -> tuple[str, dict[str, str]]:
    """(description, {parameter: description}) from a Google, Sphinx or numpy docstring."""
    lines = (inspect.getdoc(fn) or "").splitlines()
    description: list[str] = []
    params: dict[str, str] = {}
    current: str | None = None
    section = ""  # "" (the description), "google", "numpy", "sphinx" or "other"
    for i, line in enumerate(lines):
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        sphinx = _SPHINX_PARAM.match(line)
        if sphinx:
            current, section = sphinx.group(1), "sphinx"
            params[current] = sphinx.group(2).strip()
            continue
        if stripped.startswith(":"):  # :returns:, :raises: …
            section, current = "other", None
            continue
        heading = _SECTION.match(line)
        underlined = i + 1 < len(lines) and set(lines[i + 1].strip()) == {"-"}
        if heading and (stripped.endswith(":") or underlined):
            current = None
            if heading.group(1).startswith(("Arg", "Param")):
                section = "numpy" if underlined else "google"
            else:
                section = "other"
            continue
        if stripped and set(stripped) == {"-"}:
            continue
        if section == "":
            description.append(line)
        elif section == "google":
            google = _GOOGLE_PARAM.match(line)
            if google and indent <= 4 and not line[: line.index(":")].endswith(" "):
                current = google.group(1)
                params[current] = google.group(2).strip()
            elif current and stripped:
                params[current] = f"{params[current]} {stripped}".strip()
        elif section == "numpy":
            numpy = _NUMPY_PARAM.match(line)
            if numpy and indent == 0 and stripped:
                current = numpy.group(1)
                params[current] = ""
            elif current and stripped:
                params[current] = f"{params[current]} {stripped}".strip()
        elif section == "sphinx" and current and stripped:
            params[current] = f"{params[current]} {stripped}".strip()
    text = "\n".join(description).strip()
    return text, {k: v for k, v in params.items() if v}


def strip_titles(schema: dict[str, Any]) -> dict[str, Any]:
    """pydantic's schema without the ``title`` noise (names already say it)."""
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "title" and isinstance(value, str):
            continue
        if key == "properties" and isinstance(value, dict):
            out[key] = {name: strip_titles(v) for name, v in value.items()}
        elif isinstance(value, dict):
            out[key] = strip_titles(value)
        elif isinstance(value, list):
            out[key] = [strip_titles(v) if isinstance(v, dict) else v for v in value]
        else:
            out[key] = value
    return out


def type_name(prop: Mapping[str, Any]) -> str:
    if "enum" in prop:
        return "one of " + "/".join(json.dumps(v) for v in prop["enum"])
    if "type" in prop:
        return str(prop["type"])
    if "anyOf" in prop:
        return " or ".join(type_name(p) for p in prop["anyOf"])
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
