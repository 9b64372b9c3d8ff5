"""The checked JSON readers: narrow what is there, name what is not."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxline.record.jsonvalue import (
    JsonValue,
    as_array,
    as_int,
    as_number,
    as_object,
    as_str,
    dig,
    get_array,
    get_int,
    get_object,
    get_str,
)

json_values: st.SearchStrategy[JsonValue] = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=10,
)


def test_dig_reads_nested_values_and_names_the_missing_step() -> None:
    body: JsonValue = {"messages": [{"role": "user", "content": "hi"}]}
    assert dig(body, "messages", 0, "content") == "hi"
    assert dig(body, "messages", -1, "role") == "user"
    with pytest.raises(KeyError, match=r"\['messages'\]\[0\]: no key 'name'"):
        dig(body, "messages", 0, "name")
    with pytest.raises(KeyError, match="no index 3"):
        dig(body, "messages", 3)
    with pytest.raises(TypeError, match=r"\['messages'\]: expected a JSON object, got list"):
        dig(body, "messages", "x")


def test_narrowing_refuses_the_wrong_kind() -> None:
    assert as_int(3) == 3
    with pytest.raises(TypeError, match="expected an integer, got bool"):
        as_int(True)
    with pytest.raises(TypeError, match="n: expected a string, got null"):
        as_str(None, "n")
    with pytest.raises(TypeError, match="expected a JSON array, got dict"):
        as_array({})
    with pytest.raises(TypeError, match="expected a JSON object, got str"):
        as_object("{}")


def test_numbers_are_ints_or_floats_never_booleans() -> None:
    assert as_number(2) == 2
    assert as_number(0.25) == 0.25
    with pytest.raises(TypeError, match="share: expected a number, got bool"):
        as_number(False, "share")
    with pytest.raises(TypeError, match="expected a number, got str"):
        as_number("1.5")


def test_lenient_getters_fall_back_on_absence_and_wrong_kinds() -> None:
    meta: dict[str, JsonValue] = {"s": "x", "n": 2, "b": True, "o": {"k": 1}, "a": [1]}
    assert get_str(meta, "s") == "x"
    assert get_str(meta, "n", "d") == "d"
    assert get_int(meta, "n") == 2
    assert get_int(meta, "b", 7) == 7
    assert get_object(meta, "o") == {"k": 1}
    assert get_object(meta, "a") == {}
    assert get_array(meta, "a") == [1]
    assert get_array(meta, "missing") == []


@given(json_values)
def test_every_json_document_narrows_to_what_it_is(value: JsonValue) -> None:
    again: JsonValue = json.loads(json.dumps(value))
    if isinstance(again, dict):
        assert as_object(again) == again
    elif isinstance(again, list):
        assert as_array(again) == again
    elif isinstance(again, str):
        assert as_str(again) == again
    else:
        with pytest.raises(TypeError):
            as_object(again)
