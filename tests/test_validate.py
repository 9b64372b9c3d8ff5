"""discovery/validate.py: jsonschema's checking, worded for the model (path, expected, got)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from ctxline.discovery.validate import MAX_PROBLEMS, problems
from ctxline.record.events import JsonValue

CATALOG = Path(__file__).resolve().parents[1] / "benchmarks" / "data" / "mcp_catalog.json"

OBJ: dict[str, JsonValue] = {
    "type": "object",
    "properties": {
        "a": {
            "type": "object",
            "properties": {"b": {"type": "array", "items": {"type": "string", "minLength": 2}}},
        },
        "mode": {"enum": ["fast", "slow"]},
        "n": {"type": ["integer", "null"], "exclusiveMaximum": 10},
        "key": {"type": "string", "pattern": "^[A-Z]+-\\d+$"},
    },
    "required": ["mode"],
    "additionalProperties": False,
}


def test_each_problem_names_the_field_path_what_was_expected_and_what_came() -> None:
    found = problems({"a": {"b": ["ok", "x", 3]}, "n": 10, "key": "a-1", "zz": 1}, OBJ)
    assert "mode: required, missing" in found
    assert "a.b[1]: needs at least 2 characters, got 1" in found
    assert "a.b[2]: expected string, got integer" in found
    assert "n: must be < 10, got 10" in found
    assert any(p.startswith("key: 'a-1' does not match") for p in found), found
    assert "zz: not a parameter of this tool (they are: a, mode, n, key)" in found
    assert problems({"mode": "warp"}, OBJ) == ["mode: expected one of 'fast', 'slow', got 'warp'"]
    assert problems([], OBJ) == ["(arguments): expected object, got array"]
    assert problems({"mode": "fast", "n": None, "a": {"b": []}}, OBJ) == []


def test_parents_come_before_their_fields_and_the_list_is_capped() -> None:
    schema: dict[str, JsonValue] = {
        "type": "object",
        "properties": {"xs": {"type": "array", "items": {"type": "integer"}, "maxItems": 2}},
    }
    found = problems({"xs": ["a"] * 30}, schema)
    assert found[0] == "xs: allows at most 2 items, got 30"
    assert len(found) == MAX_PROBLEMS
    assert found[1:3] == [
        "xs[0]: expected integer, got string",
        "xs[1]: expected integer, got string",
    ]


def test_json_numbers_follow_json_schema_not_python() -> None:
    integer: dict[str, JsonValue] = {"type": "integer"}
    assert problems(3.0, integer) == []  # 3.0 is an integer in JSON Schema
    assert problems(True, integer) == ["(arguments): expected integer, got boolean"]
    assert problems(True, {"type": "number"}) == ["(arguments): expected number, got boolean"]


def test_nullable_refs_to_definitions_and_the_draft_the_schema_names() -> None:
    nullable: dict[str, JsonValue] = {"type": "string", "nullable": True, "enum": ["a"]}
    assert problems(None, nullable) == []
    assert problems(1, nullable) == ["(arguments): expected string, got integer"]
    draft7: dict[str, JsonValue] = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "properties": {"p": {"$ref": "#/definitions/point"}},
        "definitions": {"point": {"type": "object", "required": ["x"]}},
    }
    assert problems({"p": {}}, draft7) == ["p.x: required, missing"]


def test_one_of_is_exactly_one_and_any_of_at_least_one() -> None:
    one: dict[str, JsonValue] = {"oneOf": [{"type": "integer"}, {"minimum": 0}]}
    assert problems(-1, one) == []
    assert problems(1, one) == [
        "(arguments): matches more than one of the 2 allowed shapes (oneOf)"
    ]
    assert problems("s", {"anyOf": [{"type": "integer"}, {"type": "null"}]}) == [
        "(arguments): matches none of the 2 allowed shapes (anyOf)"
    ]


def test_a_broken_schema_is_the_tools_fault_and_lets_the_call_through() -> None:
    assert problems({"x": 1}, {"properties": {"x": {"type": "int"}}}) == []
    assert problems({"x": 1}, {"properties": {"x": {"$ref": "#/$defs/missing"}}}) == []
    assert problems({"x": 1}, True) == []


def test_every_schema_of_the_real_catalog_refuses_an_argument_of_the_wrong_type() -> None:
    data = json.loads(CATALOG.read_text(encoding="utf-8"))
    checked = 0
    for server in data["servers"]:
        for tool in server["tools"]:
            schema = tool["inputSchema"]
            for name, prop in schema.get("properties", {}).items():
                if prop.get("type") == "string":
                    found = problems({name: 12}, schema)
                    assert f"{name}: expected string, got integer" in found, (tool["name"], found)
                    checked += 1
    assert checked > 100


def test_importing_ctxline_does_not_load_jsonschema_until_a_call_is_checked() -> None:
    code = (
        "import sys, ctxline; from ctxline.discovery import problems; "
        "before = 'jsonschema' in sys.modules; problems(1, {'type': 'string'}); "
        "print(before, 'jsonschema' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=os.environ
    )
    assert out.stdout.split() == ["False", "True"]
