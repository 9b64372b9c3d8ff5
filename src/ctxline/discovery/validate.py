"""Checking a call's arguments against the JSON schema that was revealed to the model.

Why: in cache-stable mode every discovered tool is called through one dispatcher,
``call_tool(name, arguments)``, whose own schema says nothing about the inner tool. So
the dispatcher checks the arguments against the schema the model was shown, before
anything runs, and a mismatch is an error result that names each wrong field and
shows the schema — never a call with half-right arguments.

The checking is ``jsonschema``'s (a base dependency): the draft the schema names in
``$schema``, else Draft 2020-12, with local ``$ref`` to ``$defs``/``definitions``, plus
OpenAPI's ``nullable: true`` (``null`` accepted), which tool schemas still use.
``format`` is not asserted (jsonschema's default). This module only words each error
for the model: the path of the field (``xs[1]``, ``a.b``, ``(arguments)`` for the whole
object), what was expected and what came, parents before their fields, at most
:data:`MAX_PROBLEMS`. A schema that is itself broken (an unknown type name, a bad
pattern, a ``$ref`` that resolves nowhere) is the tool's fault, not the model's: what
it cannot check is let through, as before.

    >>> problems({"n": "3"}, {"type": "object", "properties": {"n": {"type": "integer"}}})
    ['n: expected integer, got string']
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from contextlib import suppress
from functools import cache
from itertools import islice
from typing import TYPE_CHECKING, Any

from ctxline.record.events import JsonValue

if TYPE_CHECKING:  # jsonschema is imported on the first check, not with ctxline (~0.1 s)
    from jsonschema.exceptions import ValidationError
    from jsonschema.protocols import Validator

__all__ = ["MAX_PROBLEMS", "problems"]

MAX_PROBLEMS = 10
_COLLECT = 200  # errors read before sorting (parents first) and keeping MAX_PROBLEMS

_BOUNDS = {"minimum": ">=", "maximum": "<=", "exclusiveMinimum": ">", "exclusiveMaximum": "<"}
_SIZES = {
    "minItems": ("needs at least", "items"),
    "maxItems": ("allows at most", "items"),
    "minLength": ("needs at least", "characters"),
    "maxLength": ("allows at most", "characters"),
}


def _type_name(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    names = {int: "integer", float: "number", str: "string", list: "array", dict: "object"}
    return names.get(type(value), type(value).__name__)


def _unless_null(keyword: str, cls: type[Validator]) -> Any:
    """``keyword``'s own check, skipped for ``null`` where the schema says ``nullable``."""
    check = cls.VALIDATORS[keyword]

    def nullable(
        validator: Validator, value: Any, instance: Any, schema: Mapping[str, Any]
    ) -> Iterator[ValidationError]:
        if instance is None and schema.get("nullable") is True:
            return
        yield from check(validator, value, instance, schema)

    return nullable


@cache
def _validator_class(base: type[Validator]) -> type[Validator]:
    import jsonschema

    keywords = ("type", "enum", "const")
    extended: type[Validator] = jsonschema.validators.extend(  # type: ignore[no-untyped-call]
        base, {k: _unless_null(k, base) for k in keywords if k in base.VALIDATORS}
    )
    return extended


def _path(error: ValidationError) -> str:
    where = ""
    for part in error.absolute_path:
        where += f"[{part}]" if isinstance(part, int) else (f".{part}" if where else str(part))
    return where


def _extras(error: ValidationError) -> list[str]:
    """The names ``additionalProperties: false`` refused (jsonschema words them in one line)."""
    schema, instance = error.schema, error.instance
    if not isinstance(schema, Mapping) or not isinstance(instance, dict):
        return []
    props = schema.get("properties") or {}
    patterns = list(schema.get("patternProperties") or {})
    return [
        name
        for name in instance
        if name not in props and not any(re.search(p, name) for p in patterns)
    ]


def _describe(error: ValidationError) -> Iterator[tuple[str, str]]:
    """(path, message) for one jsonschema error, worded for the model."""
    where, kind = _path(error), error.validator
    want: Any = error.validator_value
    got: Any = error.instance
    join = (lambda name: f"{where}.{name}") if where else str
    if kind == "type":
        kinds = [want] if isinstance(want, str) else list(want)
        yield where, f"expected {' or '.join(map(str, kinds))}, got {_type_name(got)}"
    elif kind == "required" and isinstance(got, dict):
        for name in (n for n in want if n not in got):
            yield join(str(name)), "required, missing"
    elif kind == "additionalProperties" and want is False:
        schema: Any = error.schema
        known = ", ".join(map(str, schema.get("properties") or {})) or "none"
        for name in _extras(error):
            yield join(name), f"not a parameter of this tool (they are: {known})"
    elif kind == "enum":
        allowed = ", ".join(repr(v) for v in list(want)[:12])
        yield where, f"expected one of {allowed}, got {got!r}"[:300]
    elif kind == "const":
        yield where, f"expected {want!r}, got {got!r}"[:300]
    elif kind in _SIZES:
        verb, unit = _SIZES[str(kind)]
        yield where, f"{verb} {want} {unit}, got {len(got)}"
    elif kind in _BOUNDS:
        yield where, f"must be {_BOUNDS[str(kind)]} {want}, got {got}"
    elif kind in ("anyOf", "oneOf") and (error.context or kind == "anyOf"):
        yield where, f"matches none of the {len(want)} allowed shapes ({kind})"
    elif kind == "oneOf":
        yield where, f"matches more than one of the {len(want)} allowed shapes (oneOf)"
    else:  # pattern, uniqueItems, not, false schemas …: jsonschema's own words
        yield where, error.message[:300]


def _errors(arguments: JsonValue, schema: dict[str, JsonValue]) -> list[ValidationError]:
    import jsonschema
    import referencing.exceptions

    base = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    validator = _validator_class(base)(schema)
    errors: list[ValidationError] = []
    broken = (
        jsonschema.exceptions.UnknownType,
        re.error,
        referencing.exceptions.Unresolvable,
        jsonschema.SchemaError,
    )
    # a broken schema past some point: keep what was found before it
    with suppress(*broken, RecursionError):
        errors.extend(islice(validator.iter_errors(arguments), _COLLECT))
    return errors


def problems(arguments: JsonValue, schema: JsonValue) -> list[str]:
    """What is wrong with ``arguments`` for ``schema`` (at most :data:`MAX_PROBLEMS`, parents
    before their fields); empty when they fit."""
    if not isinstance(schema, dict):
        return []  # true / a non-schema: anything goes
    errors = _errors(arguments, schema)
    errors.sort(key=lambda e: len(e.absolute_path))
    # a value of the wrong type: that is the news, not its enum or bounds
    mistyped = {_path(e) for e in errors if e.validator == "type"}
    out: list[str] = []
    for error in errors:
        if _path(error) in mistyped and error.validator != "type":
            continue
        for where, message in _describe(error):
            line = f"{where or '(arguments)'}: {message}"
            if line not in out:
                out.append(line)
    return out[:MAX_PROBLEMS]
