"""A cold step looks up persisted counts only for long texts; a call too short to be one
is skipped by a bound, never by a guess (issue 25): the bound is never under the text."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxline import Context
from ctxline.record.events import (
    AssistantMessage,
    JsonValue,
    StoredEvent,
    ToolCall,
    ToolResult,
    UserMessage,
)
from ctxline.record.store import open_store
from ctxline.view.cache import ViewCache
from ctxline.view.measure import calls_text_bound
from ctxline.view.step import count_keys

LIMIT = 2_048
AT = datetime(2026, 12, 7, tzinfo=UTC)

# strings that grow when escaped or encoded: tag openers and look-alikes, quotes,
# backslashes, control characters, lone surrogates, astral characters
_TRICKY = st.sampled_from(
    ["<ctx-rule>", "<", "\uff1cctx-", '"', "\\", "\x00", "\x1f", "\n", "\ud800"]
) | st.sampled_from(["\U0001f600", "\u00e9", "a"])
_TEXT = st.lists(_TRICKY | st.text(max_size=8), max_size=40).map("".join)
_JSON: st.SearchStrategy[JsonValue] = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**40), max_value=10**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | _TEXT,
    lambda inner: st.lists(inner, max_size=6) | st.dictionaries(_TEXT, inner, max_size=6),
    max_leaves=30,
)
_ARGS = st.dictionaries(_TEXT, _JSON, max_size=6) | _TEXT


def _stored(event: AssistantMessage, seq: int = 1) -> StoredEvent:
    return StoredEvent(seq, f"e{seq}", AT, event)


@settings(deadline=None, max_examples=300)
@given(
    text=_TEXT,
    names=st.lists(_TEXT, min_size=1, max_size=3),
    args=st.lists(_ARGS, min_size=3, max_size=3),
)
def test_the_bound_is_never_under_the_rendered_text(
    text: str, names: list[str], args: list[JsonValue]
) -> None:
    calls = tuple(ToolCall(f"c{i}", name, args[i]) for i, name in enumerate(names))
    event = AssistantMessage(text, tool_calls=calls)
    rendered = ViewCache()._text_of(_stored(event))
    for limit in (16, 256, LIMIT, 10**9):
        bound = calls_text_bound(text, calls, limit)
        assert bound <= limit
        if bound < limit:
            assert len(rendered) <= bound


WORST: list[tuple[str, JsonValue]] = [
    ("", {"a": "\x00" * 40}),  # 6 characters for one, in JSON
    ("<" * 30, {"<ctx-x>": "<" * 20}),  # 4 for one, escaped (keys too)
    ("", {"n": [-(10**60), 10**60, -1.2345678901234567e-300, True, False, None]}),
    ("", {"deep": [[[[{"": [{}]}]]], [], {}]}),
    ("\ud800" * 10, {"s": "\ud83d\ude00" * 5}),
    ("", "<" * 50),  # arguments as a string
]


def test_the_bound_holds_on_the_worst_cases_of_each_kind() -> None:
    for text, args in WORST:
        call = ToolCall("c", "name<", args)
        rendered = ViewCache()._text_of(_stored(AssistantMessage(text, tool_calls=(call,))))
        bound = calls_text_bound(text, (call,), 10**9)
        assert len(rendered) <= bound < 10**9, (text, args)


def test_long_calls_reach_the_limit_and_short_ones_are_skipped() -> None:
    short = (ToolCall("c1", "bash", {"cmd": "ls -la", "timeout": 30, "flags": [True, None, 1.5]}),)
    assert calls_text_bound("looking", short, LIMIT) < LIMIT
    long = (ToolCall("c2", "write", {"path": "a.py", "text": "x = 1\n" * 400}),)
    assert calls_text_bound("", long, LIMIT) == LIMIT
    assert calls_text_bound("", (ToolCall("c3", "w", "y" * 600),), LIMIT) == LIMIT


def test_a_cold_step_looks_up_what_it_did_before_the_bound() -> None:
    """The keys a cold step reads are those of every long text, the long calls included."""
    store = open_store(":memory:")
    ctx = Context(store, "s")
    ctx.append(UserMessage("go"))
    for i in range(30):
        body = f"line {i}\n" * (400 if i % 3 == 0 else 5)
        call = ToolCall(f"c{i}", "write", {"path": f"f{i}.py", "text": body})
        result = ToolResult(f"c{i}", body, name="write")
        ctx.append(AssistantMessage(f"step {i}", tool_calls=(call,)), result)
    ctx.prepare()
    cold = Context(store, "s", create=False)
    setup = cold._setup(None)
    keys = count_keys(cold.events, setup.view, ViewCache())
    naive = ViewCache()
    texts = {naive._text_of(ev) for ev in cold.events}
    long = {t for t in texts if len(t) >= LIMIT}
    assert len(keys) == len(long) >= 20  # results and calls of ten long steps
    again = Context(store, "s", create=False).prepare(log=False)
    assert cold.prepare(log=False).body_bytes == again.body_bytes
