"""Checking a call's arguments against the JSON schema that was revealed to the model.

Why: in cache-stable mode every discovered tool is called through one dispatcher,
``call_tool(name, arguments)``, whose own schema says nothing about the inner tool. So
the dispatcher checks the arguments against the schema the model was shown, before
anything runs, and a mismatch is an error result that names each wrong field and
shows the schema — never a call with half-right arguments.

The keywords tool schemas use are checked (``type`` and type lists, ``required``,
``properties``, ``additionalProperties``, ``enum``, ``const``, ``items``, ``min/maxItems``,
``min/maxLength``, ``minimum``/``maximum`` and the exclusive forms, ``anyOf``/``oneOf``/
``allOf``, local ``$ref`` to ``$defs``/``definitions``, ``nullable``); others (``format``,
``pattern``) are left to the tool.

    >>> problems({"n": "3"}, {"type": "object", "properties": {"n": {"type": "integer"}}})
    ['n: expected integer, got string']
"""

from __future__ import annotations

from collections.abc import Mapping

from ctxline.record.events import JsonValue

__all__ = ["MAX_PROBLEMS", "problems"]

MAX_PROBLEMS = 10
_MAX_DEPTH = 40

_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "boolean": (bool,),
    "null": (type(None),),
}


_BOUNDS = (
    ("minimum", ">="),
    ("maximum", "<="),
    ("exclusiveMinimum", ">"),
    ("exclusiveMaximum", "<"),
)


def _type_name(value: JsonValue) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _is(value: JsonValue, kind: str) -> bool:
    if kind == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer()
        )
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    types = _TYPES.get(kind)
    return types is None or isinstance(value, types)


class _Checker:
    def __init__(self, root: Mapping[str, JsonValue]) -> None:
        self.root = root
        self.out: list[str] = []

    def ref(self, ref: str) -> Mapping[str, JsonValue] | None:
        if not ref.startswith("#/"):
            return None
        node: JsonValue = self.root
        for part in ref[2:].split("/"):
            if not isinstance(node, dict):
                return None
            node = node.get(part.replace("~1", "/").replace("~0", "~"))
        return node if isinstance(node, dict) else None

    def fail(self, where: str, message: str) -> None:
        if len(self.out) < MAX_PROBLEMS:
            self.out.append(f"{where or '(arguments)'}: {message}")

    def check(self, value: JsonValue, schema: JsonValue, where: str, depth: int = 0) -> None:
        if not isinstance(schema, dict) or depth > _MAX_DEPTH:
            return  # true / {} / unknown: anything goes
        ref = schema.get("$ref")
        if isinstance(ref, str):
            target = self.ref(ref)
            if target is not None:
                self.check(value, target, where, depth + 1)
        if value is None and schema.get("nullable") is True:
            return
        kinds = schema.get("type")
        if isinstance(kinds, str):
            kinds = [kinds]
        if isinstance(kinds, list) and kinds and not any(_is(value, str(k)) for k in kinds):
            self.fail(where, f"expected {' or '.join(map(str, kinds))}, got {_type_name(value)}")
            return
        if "enum" in schema and isinstance(schema["enum"], list) and value not in schema["enum"]:
            allowed = ", ".join(repr(v) for v in schema["enum"][:12])
            self.fail(where, f"expected one of {allowed}, got {value!r}"[:300])
        if "const" in schema and value != schema["const"]:
            self.fail(where, f"expected {schema['const']!r}, got {value!r}"[:300])
        self.combinators(value, schema, where, depth)
        if isinstance(value, dict):
            self.object(value, schema, where, depth)
        elif isinstance(value, list):
            self.array(value, schema, where, depth)
        elif isinstance(value, str):
            self.bounds(len(value), schema, where, "minLength", "maxLength", "characters")
        elif _is(value, "number"):
            self.number(value, schema, where)

    def combinators(
        self, value: JsonValue, schema: Mapping[str, JsonValue], where: str, depth: int
    ) -> None:
        for key in ("anyOf", "oneOf"):
            options = schema.get(key)
            if (
                isinstance(options, list)
                and options
                and not any(not problems(value, o, self.root, depth + 1) for o in options)
            ):
                self.fail(where, f"matches none of the {len(options)} allowed shapes ({key})")
        every = schema.get("allOf")
        if isinstance(every, list):
            for option in every:
                self.check(value, option, where, depth + 1)

    def object(
        self, value: dict[str, JsonValue], schema: Mapping[str, JsonValue], where: str, depth: int
    ) -> None:
        props = schema.get("properties")
        props = props if isinstance(props, dict) else {}
        required = schema.get("required")
        for name in required if isinstance(required, list) else []:
            if name not in value:
                self.fail(_join(where, str(name)), "required, missing")
        extra = schema.get("additionalProperties", True)
        for name, item in value.items():
            if name in props:
                self.check(item, props[name], _join(where, name), depth + 1)
            elif extra is False:
                known = ", ".join(map(str, props)) or "none"
                self.fail(_join(where, name), f"not a parameter of this tool (they are: {known})")
            elif isinstance(extra, dict):
                self.check(item, extra, _join(where, name), depth + 1)

    def array(
        self, value: list[JsonValue], schema: Mapping[str, JsonValue], where: str, depth: int
    ) -> None:
        self.bounds(len(value), schema, where, "minItems", "maxItems", "items")
        items = schema.get("items")
        if isinstance(items, dict):
            for i, item in enumerate(value):
                self.check(item, items, f"{where}[{i}]", depth + 1)

    def bounds(
        self, n: int, schema: Mapping[str, JsonValue], where: str, lo: str, hi: str, unit: str
    ) -> None:
        low, high = schema.get(lo), schema.get(hi)
        if isinstance(low, int) and n < low:
            self.fail(where, f"needs at least {low} {unit}, got {n}")
        if isinstance(high, int) and n > high:
            self.fail(where, f"allows at most {high} {unit}, got {n}")

    def number(self, value: JsonValue, schema: Mapping[str, JsonValue], where: str) -> None:
        assert isinstance(value, int | float)
        for key, sign in _BOUNDS:
            bound = schema.get(key)
            if not isinstance(bound, int | float) or isinstance(bound, bool):
                continue
            ok = {
                ">=": value >= bound,
                "<=": value <= bound,
                ">": value > bound,
                "<": value < bound,
            }
            if not ok[sign]:
                self.fail(where, f"must be {sign} {bound}, got {value}")


def _join(where: str, name: str) -> str:
    return f"{where}.{name}" if where else name


def problems(
    arguments: JsonValue,
    schema: JsonValue,
    root: Mapping[str, JsonValue] | None = None,
    depth: int = 0,
) -> list[str]:
    """What is wrong with ``arguments`` for ``schema`` (at most :data:`MAX_PROBLEMS`); empty
    when they fit. ``root`` resolves ``$ref`` (default: ``schema`` itself)."""
    base = root if root is not None else (schema if isinstance(schema, dict) else {})
    checker = _Checker(base)
    checker.check(arguments, schema, "", depth)
    return checker.out
