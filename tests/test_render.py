"""Provider rendering: pairing repair, OpenAI and Anthropic bodies, canonical bytes.

Every rendered body is checked against the official SDK parameter types (and for
keys those types would silently drop), and against the pairing rules behind the
provider errors listed in REFERENCES.md.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

import pytest
from anthropic.types.message_create_params import MessageCreateParamsNonStreaming
from hypothesis import given, settings
from hypothesis import strategies as st
from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming
from pydantic import TypeAdapter

from ctxline.errors import ValidationError
from ctxline.record.codec import canonical_json
from ctxline.record.events import (
    AssistantMessage,
    Event,
    Notification,
    State,
    StoredEvent,
    SystemMessage,
    ToolCall,
    ToolResult,
    UnknownEvent,
    UserMessage,
)
from ctxline.record.jsonvalue import JsonValue
from ctxline.render import (
    INTERRUPTED,
    HistoryBuilder,
    NeutralMessage,
    NeutralRequest,
    PairingReport,
    ToolSpec,
    check_pairing,
    history_to_messages,
    render_bytes,
    system_text,
    to_anthropic,
    to_openai,
)
from ctxline.render.anthropic import CONTINUED, EMPTY_ERROR, tool_id

OPENAI_PARAMS: TypeAdapter[CompletionCreateParamsNonStreaming] = TypeAdapter(
    CompletionCreateParamsNonStreaming
)
ANTHROPIC_PARAMS: TypeAdapter[MessageCreateParamsNonStreaming] = TypeAdapter(
    MessageCreateParamsNonStreaming
)
ANTHROPIC_ID = re.compile(r"[a-zA-Z0-9_-]+")
CACHE = {"type": "ephemeral"}
READ = ToolSpec(
    "read_file",
    "Read a file.",
    {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
)


# --- helpers -------------------------------------------------------------------------


def materialize(value: Any) -> Any:
    """Pydantic validates ``Iterable`` fields lazily: iterating runs the item checks."""
    if isinstance(value, dict):
        return {k: materialize(v) for k, v in value.items()}
    if isinstance(value, list | tuple | Iterator):
        return [materialize(v) for v in value]
    return value


def assert_openai_valid(body: dict[str, Any]) -> None:
    validated = materialize(OPENAI_PARAMS.validate_python(body, strict=True))
    # a TypedDict drops keys it does not know: a difference means an unknown key
    assert validated == body
    assert json.loads(canonical_json(body)) == body


def assert_anthropic_valid(body: dict[str, Any]) -> None:
    validated = materialize(ANTHROPIC_PARAMS.validate_python(body, strict=True))
    assert validated == body
    assert json.loads(canonical_json(body)) == body


def openai_pairing_errors(body: dict[str, Any]) -> list[str]:
    """The rules behind OpenAI's "role 'tool' must be a response…" and "…did not have response messages"."""
    errors: list[str] = []
    pending: set[str] = set()
    answerable: set[str] = set()
    for i, message in enumerate(body["messages"]):
        if message["role"] == "tool":
            if message["tool_call_id"] not in answerable:
                errors.append(
                    f"{i}: tool message {message['tool_call_id']} answers no preceding tool_calls"
                )
            answerable.discard(message["tool_call_id"])
            pending.discard(message["tool_call_id"])
            continue
        if pending:
            errors.append(f"{i}: tool_call_ids without response messages: {sorted(pending)}")
        pending, answerable = set(), set()
        if message["role"] == "assistant":
            if "tool_calls" in message:
                assert message["tool_calls"], "an empty tool_calls list is invalid"
            else:
                assert isinstance(message["content"], str), "content null needs tool_calls"
            pending = {call["id"] for call in message.get("tool_calls", [])}
            answerable = set(pending)
    if pending:
        errors.append(f"end: tool_call_ids without response messages: {sorted(pending)}")
    return errors


def anthropic_pairing_errors(body: dict[str, Any]) -> list[str]:
    """The rules behind Anthropic's tool_use/tool_result 400s, role alternation and block checks."""
    errors: list[str] = []
    messages = body["messages"]
    if not messages or messages[0]["role"] != "user":
        errors.append("the first message must be user")
    seen_ids: set[str] = set()
    for i, message in enumerate(messages):
        if i and message["role"] == messages[i - 1]["role"]:
            errors.append(f"{i}: roles do not alternate")
        blocks = message["content"]
        if not blocks:
            errors.append(f"{i}: empty content")
        kinds = [b["type"] for b in blocks]
        if "tool_result" in kinds and kinds != sorted(kinds, key=lambda k: k != "tool_result"):
            errors.append(f"{i}: tool_result blocks must come first")
        for b in blocks:
            if b["type"] == "text" and not b["text"].strip():
                errors.append(f"{i}: empty text block")
            if b["type"] == "tool_use":
                if not ANTHROPIC_ID.fullmatch(b["id"]) or b["id"] in seen_ids:
                    errors.append(f"{i}: bad or repeated tool_use id {b['id']!r}")
                seen_ids.add(b["id"])
                assert isinstance(b["input"], dict)
            if (
                b["type"] == "tool_result"
                and b.get("is_error")
                and not b.get("content", "").strip()
            ):
                errors.append(f"{i}: content cannot be empty if is_error is true")
        results = [b["tool_use_id"] for b in blocks if b["type"] == "tool_result"]
        previous = messages[i - 1]["content"] if i else []
        uses = [b["id"] for b in previous if b["type"] == "tool_use"]
        for r in results:
            if r not in uses:
                errors.append(f"{i}: unexpected tool_use_id found in tool_result blocks: {r}")
        if len(results) != len(set(results)):
            errors.append(f"{i}: duplicate tool_result")
        following = messages[i + 1]["content"] if i + 1 < len(messages) else []
        answered = {b["tool_use_id"] for b in following if b["type"] == "tool_result"}
        missing = [b["id"] for b in blocks if b["type"] == "tool_use" and b["id"] not in answered]
        if missing:
            errors.append(
                f"{i}: tool_use ids were found without tool_result blocks immediately after: {missing}"
            )
    if messages and messages[-1]["role"] == "assistant":
        last = messages[-1]["content"][-1]
        if last["type"] == "text" and last["text"] != last["text"].rstrip():
            errors.append("final assistant content cannot end with trailing whitespace")
    return errors


def render_both(
    events: Sequence[Event], tools: tuple[ToolSpec, ...] = ()
) -> tuple[dict[str, Any], dict[str, Any], PairingReport]:
    messages, report = history_to_messages(events)
    request = NeutralRequest(system_text(events), tools, tuple(messages))
    oa = to_openai(request, model="gpt-4.1")
    an = to_anthropic(request, model="claude-sonnet-4-5", max_tokens=1024)
    assert_openai_valid(oa)
    assert_anthropic_valid(an)
    assert openai_pairing_errors(oa) == []
    assert anthropic_pairing_errors(an) == []
    return oa, an, report


def call(call_id: str, path: str = "a.txt") -> ToolCall:
    return ToolCall(call_id, "read_file", {"path": path})


# --- neutral history -----------------------------------------------------------------


def test_plain_chat() -> None:
    events: list[Event] = [
        SystemMessage("You are terse."),
        UserMessage("Help me cancel my plan"),
        AssistantMessage("Which plan?"),
        UserMessage("The yearly one."),
    ]
    oa, an, report = render_both(events)
    assert report == PairingReport()
    assert report.clean
    assert oa == {
        "model": "gpt-4.1",
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Help me cancel my plan"},
            {"role": "assistant", "content": "Which plan?"},
            {"role": "user", "content": "The yearly one."},
        ],
    }
    assert an == {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,
        "system": [{"type": "text", "text": "You are terse."}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Help me cancel my plan"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "Which plan?"}]},
            {"role": "user", "content": [{"type": "text", "text": "The yearly one."}]},
        ],
    }


def test_tool_call_with_result() -> None:
    events: list[Event] = [
        UserMessage("show a.txt"),
        AssistantMessage("Reading.", (call("c1"),)),
        ToolResult("c1", "hello", name="read_file"),
        AssistantMessage("It says hello."),
    ]
    oa, an, report = render_both(events, (READ,))
    assert report.clean
    assert oa["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "read_file",
                "description": "Read a file.",
                "parameters": READ.parameters,
            },
        }
    ]
    assert oa["messages"][1:3] == [
        {
            "role": "assistant",
            "content": "Reading.",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path":"a.txt"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "hello"},
    ]
    assert an["tools"] == [
        {"name": "read_file", "description": "Read a file.", "input_schema": READ.parameters}
    ]
    assert an["messages"][1:] == [
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Reading."},
                {"type": "tool_use", "id": "c1", "name": "read_file", "input": {"path": "a.txt"}},
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "hello"}],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "It says hello."}]},
    ]


def test_parallel_calls_share_one_user_message_results_first() -> None:
    events: list[Event] = [
        UserMessage("read three"),
        AssistantMessage("", (call("c1", "a"), call("c2", "b"), call("c3", "c"))),
        ToolResult("c3", "C"),  # recorded out of order
        ToolResult("c1", "A"),
        ToolResult("c2", "B", is_error=True),
        UserMessage("and be quick"),
    ]
    oa, an, report = render_both(events)
    assert report.clean
    assert [(m["role"], m.get("tool_call_id")) for m in oa["messages"]] == [
        ("user", None),
        ("assistant", None),
        ("tool", "c1"),
        ("tool", "c2"),
        ("tool", "c3"),
        ("user", None),
    ]
    assert an["messages"][2] == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "c1", "content": "A"},
            {"type": "tool_result", "tool_use_id": "c2", "content": "B", "is_error": True},
            {"type": "tool_result", "tool_use_id": "c3", "content": "C"},
            {"type": "text", "text": "and be quick"},
        ],
    }
    assert len(an["messages"]) == 3


def test_dangling_call_gets_an_error_result_and_is_reported() -> None:
    events: list[Event] = [
        UserMessage("go"),
        AssistantMessage("", (call("c1"), call("c2"), call("c3"))),
        ToolResult("c1", "one"),
        ToolResult("c3", "three"),
        UserMessage("hello?"),
    ]
    messages, report = history_to_messages(events)
    assert report.repaired == ("c2",)
    assert [(m.role, m.call_id) for m in messages] == [
        ("user", ""),
        ("assistant", ""),
        ("tool", "c1"),
        ("tool", "c2"),
        ("tool", "c3"),
        ("user", ""),
    ]
    assert messages[3] == NeutralMessage(
        "tool", INTERRUPTED, call_id="c2", name="read_file", is_error=True
    )
    oa, an, _ = render_both(events)
    assert oa["messages"][3] == {"role": "tool", "tool_call_id": "c2", "content": INTERRUPTED}
    assert an["messages"][2]["content"][1] == {
        "type": "tool_result",
        "tool_use_id": "c2",
        "content": INTERRUPTED,
        "is_error": True,
    }


def test_dangling_call_at_the_end() -> None:
    oa, an, report = render_both([UserMessage("go"), AssistantMessage("ok", (call("c9"),))])
    assert report.repaired == ("c9",)
    assert oa["messages"][-1]["role"] == "tool"
    assert an["messages"][-1]["role"] == "user"


def test_orphan_result_is_dropped_and_reported() -> None:
    events: list[Event] = [
        UserMessage("hi"),
        ToolResult("ghost", "from a trimmed call"),
        AssistantMessage("hello"),
    ]
    messages, report = history_to_messages(events)
    assert report.orphans == ("ghost",)
    assert [m.role for m in messages] == ["user", "assistant"]
    render_both(events)


def test_duplicate_result_is_dropped_and_reported() -> None:
    events: list[Event] = [
        UserMessage("hi"),
        AssistantMessage("", (call("c1"),)),
        ToolResult("c1", "first"),
        ToolResult("c1", "second"),
    ]
    messages, report = history_to_messages(events)
    assert report.duplicates == ("c1",)
    assert [m.text for m in messages if m.role == "tool"] == ["first"]
    render_both(events)


def test_user_message_between_call_and_result_goes_after_the_result() -> None:
    events: list[Event] = [
        UserMessage("start"),
        AssistantMessage("", (call("c1"),)),
        UserMessage("are you there?"),
        ToolResult("c1", "done"),
    ]
    messages, report = history_to_messages(events)
    assert report.clean
    assert [(m.role, m.text) for m in messages] == [
        ("user", "start"),
        ("assistant", ""),
        ("tool", "done"),
        ("user", "are you there?"),
    ]
    _, an, _ = render_both(events)
    assert an["messages"][2]["content"] == [
        {"type": "tool_result", "tool_use_id": "c1", "content": "done"},
        {"type": "text", "text": "are you there?"},
    ]


def test_result_recorded_after_a_later_assistant_moves_up_to_its_call() -> None:
    events: list[Event] = [
        UserMessage("start"),
        AssistantMessage("", (call("c1"),)),
        AssistantMessage("", (call("c2"),)),
        ToolResult("c1", "one"),
        ToolResult("c2", "two"),
    ]
    messages, report = history_to_messages(events)
    assert report.clean
    assert [(m.role, m.call_id or m.text) for m in messages] == [
        ("user", "start"),
        ("assistant", ""),
        ("tool", "c1"),
        ("assistant", ""),
        ("tool", "c2"),
    ]
    render_both(events)


def test_result_after_a_completed_later_reply_is_late_and_left_out() -> None:
    events: list[Event] = [
        UserMessage("start"),
        AssistantMessage("", (call("c1"),)),
        AssistantMessage("moving on"),
        ToolResult("c1", "too late"),
    ]
    messages, report = history_to_messages(events)
    assert report.late == ("c1",)
    assert report.repaired == ("c1",)
    assert [(m.role, m.text) for m in messages][1:] == [
        ("assistant", ""),
        ("tool", INTERRUPTED),
        ("assistant", "moving on"),
    ]
    render_both(events)


def test_builder_freezes_a_prefix_that_never_changes() -> None:
    builder = HistoryBuilder()
    builder.feed(UserMessage("start"))
    builder.feed(AssistantMessage("", (call("c1"), call("c2"))))
    assert len(builder.frozen) == 1
    builder.feed(ToolResult("c2", "two"))
    builder.feed(UserMessage("meanwhile"))
    assert len(builder.frozen) == 1
    builder.feed(ToolResult("c1", "one"))
    assert [(m.role, m.call_id or m.text) for m in builder.frozen] == [
        ("user", "start"),
        ("assistant", ""),
        ("tool", "c1"),
        ("tool", "c2"),
        ("user", "meanwhile"),
    ]
    assert builder.open_messages() == []


def test_reused_call_id_is_renamed_in_the_view() -> None:
    events: list[Event] = [
        UserMessage("go"),
        AssistantMessage("", (ToolCall("call_0", "ls"),)),
        ToolResult("call_0", "first"),
        AssistantMessage("", (ToolCall("call_0", "ls"), ToolCall("call_0", "ls"))),
        ToolResult("call_0", "second"),
        ToolResult("call_0", "third"),
    ]
    messages, report = history_to_messages(events)
    assert report.renamed == (("call_0", "call_0_2"), ("call_0", "call_0_3"))
    assert [(m.call_id, m.text) for m in messages if m.role == "tool"] == [
        ("call_0", "first"),
        ("call_0_2", "second"),
        ("call_0_3", "third"),
    ]
    render_both(events)


def test_other_kinds_are_skipped_and_stored_events_accepted() -> None:
    at = datetime(2026, 11, 2, tzinfo=UTC)
    events: list[Event | StoredEvent] = [
        StoredEvent(1, "e1", at, SystemMessage("sys one")),
        StoredEvent(2, "e2", at, UserMessage("hi")),
        State("env/date", "2026-11-02"),
        Notification("exec/job-7", "done"),
        UnknownEvent("future.kind", {"x": 1}),
        SystemMessage("sys two"),
    ]
    messages, _ = history_to_messages(events)
    assert messages == [NeutralMessage("user", "hi", seq=2)]
    assert system_text(events) == "sys one\n\nsys two"


# --- rendering details ---------------------------------------------------------------


def test_raw_string_arguments() -> None:
    raw = '{"path": "a.txt"'  # the model's text, not valid JSON
    events: list[Event] = [
        UserMessage("go"),
        AssistantMessage(
            "", (ToolCall("c1", "read_file", raw), ToolCall("c2", "read_file", [1, 2]))
        ),
        ToolResult("c1", "bad arguments", is_error=True),
        ToolResult("c2", "bad arguments", is_error=True),
    ]
    oa, an, _ = render_both(events)
    calls = oa["messages"][1]["tool_calls"]
    assert [c["function"]["arguments"] for c in calls] == [raw, "[1,2]"]
    uses = an["messages"][1]["content"]
    assert [u["input"] for u in uses] == [{"_raw": raw}, {"_raw": "[1,2]"}]


def test_arguments_are_canonical_json() -> None:
    args: dict[str, JsonValue] = {"b": 1, "a": {"z": "é", "y": [1, 2]}}
    oa, _, _ = render_both(
        [
            UserMessage("go"),
            AssistantMessage("", (ToolCall("c1", "f", args),)),
            ToolResult("c1", "ok"),
        ]
    )
    assert (
        oa["messages"][1]["tool_calls"][0]["function"]["arguments"]
        == '{"a":{"y":[1,2],"z":"é"},"b":1}'
    )


def test_empty_assistant_text_with_only_tool_calls() -> None:
    events: list[Event] = [
        UserMessage("go"),
        AssistantMessage("", (call("c1"),)),
        ToolResult("c1", "x"),
    ]
    oa, an, _ = render_both(events)
    assert oa["messages"][1]["content"] is None
    assert [b["type"] for b in an["messages"][1]["content"]] == ["tool_use"]


def test_whitespace_text_is_never_an_anthropic_block() -> None:
    events: list[Event] = [
        UserMessage("go"),
        AssistantMessage("  \n", (call("c1"),)),
        ToolResult("c1", ""),
        UserMessage(" "),
        AssistantMessage(""),
        UserMessage("next"),
        AssistantMessage("answer \n"),
    ]
    oa, an, _ = render_both(events)
    assert oa["messages"][2] == {"role": "tool", "tool_call_id": "c1", "content": ""}
    assert an["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "go"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "c1", "name": "read_file", "input": {"path": "a.txt"}}
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "c1"},
                {"type": "text", "text": "next"},
            ],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "answer"}]},
    ]


def test_empty_error_result_gets_text_for_anthropic() -> None:
    events: list[Event] = [
        UserMessage("go"),
        AssistantMessage("", (call("c1"),)),
        ToolResult("c1", " ", is_error=True),
    ]
    _, an, _ = render_both(events)
    assert an["messages"][2]["content"] == [
        {"type": "tool_result", "tool_use_id": "c1", "content": EMPTY_ERROR, "is_error": True}
    ]


def test_history_starting_with_the_assistant() -> None:
    _, an, _ = render_both([AssistantMessage("Where were we?"), UserMessage("at step 3")])
    assert an["messages"][0] == {"role": "user", "content": [{"type": "text", "text": CONTINUED}]}
    assert [m["role"] for m in an["messages"]] == ["user", "assistant", "user"]


def test_anthropic_ids_are_sanitized_consistently() -> None:
    events: list[Event] = [
        UserMessage("go"),
        AssistantMessage(
            "", (ToolCall("functions.read:0", "read_file"), ToolCall("", "read_file"))
        ),
        ToolResult("functions.read:0", "ok"),
        ToolResult("", "ok"),
    ]
    oa, an, report = render_both(events)
    assert report.renamed == (("", "call_1"),)  # an empty id gets a view id
    # both providers send the id in the pattern Anthropic requires, the same mapping
    assert [c["id"] for c in oa["messages"][1]["tool_calls"]] == [tool_id("functions.read:0"), "call_1"]
    assert [m["tool_call_id"] for m in oa["messages"][2:4]] == [tool_id("functions.read:0"), "call_1"]
    ids = [b["id"] for b in an["messages"][1]["content"]]
    assert ids == [tool_id("functions.read:0"), "call_1"]
    assert ids[0].startswith("functions_read_0_")
    assert [b["tool_use_id"] for b in an["messages"][2]["content"]] == ids
    assert tool_id("toolu_01-ok") == "toolu_01-ok"
    assert ANTHROPIC_ID.fullmatch(tool_id(""))
    assert ANTHROPIC_ID.fullmatch(tool_id("é.é"))


def test_unicode_nul_backspace_and_lone_surrogate() -> None:
    text = "naïve 日本語 🙂 nul:\x00 bs:\x08 tab:\t lone:\ud83d"
    events: list[Event] = [
        UserMessage(text),
        AssistantMessage(text, (ToolCall("c1", "f", {"k": text}),)),
        ToolResult("c1", text),
    ]
    oa, an, _ = render_both(events)
    cleaned = text.replace("\ud83d", "\ufffd")
    for body in (oa, an):
        wire = canonical_json(body)  # raises on a lone surrogate
        assert b"\\u0000" in wire
        assert b"\\b" in wire
        assert "日本語 🙂 nul:".encode() in wire
    assert oa["messages"][0]["content"] == cleaned
    assert an["messages"][0]["content"][0]["text"] == cleaned
    assert oa["messages"][2]["content"] == cleaned
    assert an["messages"][2]["content"][0]["content"] == cleaned
    assert json.loads(oa["messages"][1]["tool_calls"][0]["function"]["arguments"]) == {"k": cleaned}
    assert an["messages"][1]["content"][1]["input"] == {"k": cleaned}


def test_render_bytes_cleans_a_foreign_lone_surrogate() -> None:
    assert render_bytes({"b": "x\udc00", "a": 1}) == '{"a":1,"b":"x\ufffd"}'.encode()


def test_determinism() -> None:
    def build() -> NeutralRequest:
        events: list[Event] = [
            SystemMessage("sys"),
            UserMessage("go"),
            AssistantMessage("t", (ToolCall("c1", "f", {"b": 2, "a": 1}), call("c2"))),
            ToolResult("c2", "two"),
            UserMessage("more"),
        ]
        messages, _ = history_to_messages(events)
        return NeutralRequest(system_text(events), (READ,), tuple(messages))

    first, second = build(), build()
    assert render_bytes(to_openai(first, model="m")) == render_bytes(to_openai(second, model="m"))
    a1 = render_bytes(
        to_anthropic(first, model="m", max_tokens=9, cache_breakpoints=[-1], cache_prefix=True)
    )
    a2 = render_bytes(
        to_anthropic(second, model="m", max_tokens=9, cache_breakpoints=[-1], cache_prefix=True)
    )
    assert a1 == a2
    assert render_bytes(to_openai(first, model="m")) == render_bytes(to_openai(first, model="m"))


def test_openai_options() -> None:
    request = NeutralRequest("", (ToolSpec("noop"),), (NeutralMessage("user", "hi"),))
    body = to_openai(
        request, model="gpt-4.1", max_tokens=256, extra={"tool_choice": "auto", "temperature": 0}
    )
    assert_openai_valid(body)
    assert body["max_completion_tokens"] == 256
    assert body["tool_choice"] == "auto"
    assert body["tools"][0]["function"] == {
        "name": "noop",
        "parameters": {"type": "object", "properties": {}},
    }
    assert "system" not in [m["role"] for m in body["messages"]]
    with pytest.raises(ValidationError, match="messages"):
        to_openai(request, model="m", extra={"messages": []})
    with pytest.raises(ValidationError, match="max_tokens"):
        to_openai(request, model="m", max_tokens=0)
    with pytest.raises(ValidationError, match="at least one message"):
        to_openai(NeutralRequest(), model="m")


def test_anthropic_cache_breakpoints() -> None:
    request = NeutralRequest(
        "sys",
        (READ,),
        (
            NeutralMessage("user", "a"),
            NeutralMessage("assistant", "b"),
            NeutralMessage("user", "c"),
        ),
    )
    body = to_anthropic(
        request, model="m", max_tokens=10, cache_breakpoints=[0, -1], cache_prefix=True
    )
    assert_anthropic_valid(body)
    assert body["system"][-1]["cache_control"] == CACHE
    assert "cache_control" not in body["tools"][-1]
    assert [("cache_control" in m["content"][-1]) for m in body["messages"]] == [True, False, True]

    no_system = NeutralRequest("", (READ,), request.messages)
    tools_marked = to_anthropic(no_system, model="m", max_tokens=10, cache_prefix=True)
    assert_anthropic_valid(tools_marked)
    assert tools_marked["tools"][-1]["cache_control"] == CACHE

    with pytest.raises(ValidationError, match="at most 4"):
        to_anthropic(
            request, model="m", max_tokens=10, cache_breakpoints=[0, 1, 2, -1], cache_prefix=True
        )
    with pytest.raises(ValidationError, match="no message 3"):
        to_anthropic(request, model="m", max_tokens=10, cache_breakpoints=[3])
    with pytest.raises(ValidationError, match="twice"):
        to_anthropic(request, model="m", max_tokens=10, cache_breakpoints=[2, -1])
    with pytest.raises(ValidationError, match="cache_prefix"):
        to_anthropic(
            NeutralRequest("", (), request.messages), model="m", max_tokens=10, cache_prefix=True
        )


def test_anthropic_rejects_nothing_to_send_and_bad_max_tokens() -> None:
    with pytest.raises(ValidationError, match="non-empty message"):
        to_anthropic(
            NeutralRequest("sys", (), (NeutralMessage("user", "  "),)), model="m", max_tokens=1
        )
    with pytest.raises(ValidationError, match="max_tokens"):
        to_anthropic(
            NeutralRequest("", (), (NeutralMessage("user", "x"),)), model="m", max_tokens=-1
        )


def test_renderers_refuse_broken_pairing() -> None:
    orphan = NeutralRequest(
        "", (), (NeutralMessage("user", "x"), NeutralMessage("tool", "r", call_id="c1"))
    )
    dangling = NeutralRequest(
        "", (), (NeutralMessage("assistant", "", (call("c1"),)), NeutralMessage("user", "x"))
    )
    for request in (orphan, dangling):
        with pytest.raises(ValidationError):
            to_openai(request, model="m")
        with pytest.raises(ValidationError):
            to_anthropic(request, model="m", max_tokens=1)
    reused = (
        NeutralMessage("assistant", "", (call("c1"),)),
        NeutralMessage("tool", "r", call_id="c1"),
        NeutralMessage("assistant", "", (call("c1"),)),
        NeutralMessage("tool", "r", call_id="c1"),
    )
    with pytest.raises(ValidationError, match="used twice"):
        check_pairing(reused)
    with pytest.raises(ValidationError, match="call id"):
        NeutralMessage("tool", "r")


def test_the_checkers_catch_what_providers_reject() -> None:
    user = {"role": "user", "content": "x"}
    calls = {"role": "assistant", "content": None, "tool_calls": [{"id": "a"}, {"id": "b"}]}
    assert openai_pairing_errors({"messages": [user, {"role": "tool", "tool_call_id": "a"}]})
    assert openai_pairing_errors({"messages": [calls, {"role": "tool", "tool_call_id": "a"}, user]})
    assert openai_pairing_errors({"messages": [calls, {"role": "tool", "tool_call_id": "a"}]})

    def msg(role: str, *blocks: dict[str, Any]) -> dict[str, Any]:
        return {"role": role, "content": list(blocks)}

    text = {"type": "text", "text": "x"}
    use = {"type": "tool_use", "id": "a", "input": {}}
    result = {"type": "tool_result", "tool_use_id": "a", "content": "r"}
    assert anthropic_pairing_errors({"messages": [msg("user", result)]})
    assert anthropic_pairing_errors(
        {"messages": [msg("user", text), msg("assistant", use), msg("user", text)]}
    )
    assert anthropic_pairing_errors(
        {"messages": [msg("user", text), msg("assistant", use), msg("user", text, result)]}
    )
    assert anthropic_pairing_errors({"messages": [msg("user", text), msg("user", text)]})
    assert anthropic_pairing_errors({"messages": [msg("assistant", text)]})
    assert anthropic_pairing_errors({"messages": [msg("user", {"type": "text", "text": " "})]})
    assert not anthropic_pairing_errors(
        {"messages": [msg("user", text), msg("assistant", use), msg("user", result, text)]}
    )


# --- property: any history renders to bodies the providers accept --------------------

TEXTS = st.one_of(
    st.sampled_from(["", " ", "\n", "ok ", "nul\x00", "bs\x08", "lone\ud83d", "日本語"]),
    st.text(max_size=12),
)


@st.composite
def histories(draw: st.DrawFn) -> list[Event]:
    events: list[Event] = []
    issued: list[str] = []
    for _ in range(draw(st.integers(0, 14))):
        kind = draw(st.sampled_from(["user", "assistant", "result", "result", "other"]))
        if kind == "user":
            events.append(UserMessage(draw(TEXTS)))
        elif kind == "assistant":
            calls = []
            for _ in range(draw(st.integers(0, 3))):
                # ids sometimes repeat (servers that number calls per message) or need sanitizing
                call_id = draw(
                    st.sampled_from([f"c{len(issued)}", "call_0", "fn.x:1", *issued[-2:]])
                )
                issued.append(call_id)
                one: JsonValue = {"p": 1}
                empty: JsonValue = {}
                args = draw(st.one_of(st.just(one), st.just("{bad"), st.just(empty)))
                calls.append(ToolCall(call_id, draw(st.sampled_from(["f", "g"])), args))
            events.append(AssistantMessage(draw(TEXTS), tuple(calls)))
        elif kind == "result":
            call_id = draw(st.sampled_from([*issued, "orphan"]))
            events.append(ToolResult(call_id, draw(TEXTS), is_error=draw(st.booleans())))
        else:
            events.append(State("env/x", draw(st.integers())))
    return events


@settings(max_examples=300, deadline=None)
@given(histories(), st.booleans())
def test_any_history_renders_valid_bodies(events: list[Event], with_system: bool) -> None:
    messages, report = history_to_messages(events)
    check_pairing(messages)
    calls = [c.id for m in messages for c in m.tool_calls]
    assert len(calls) == len(set(calls)) == sum(m.role == "tool" for m in messages)
    assert set(report.repaired) <= set(calls)
    recorded = sum(isinstance(e, ToolResult) for e in events)
    dropped = len(report.orphans) + len(report.duplicates) + len(report.late)
    assert recorded == len(calls) - len(report.repaired) + dropped

    request = NeutralRequest("be brief" if with_system else "", (READ,), tuple(messages))
    if messages or with_system:
        oa = to_openai(request, model="m")
        assert_openai_valid(oa)
        assert openai_pairing_errors(oa) == []
        assert canonical_json(oa) == canonical_json(to_openai(request, model="m"))
    try:
        an = to_anthropic(
            request, model="m", max_tokens=64, cache_breakpoints=[-1], cache_prefix=True
        )
    except ValidationError:
        # only when every message is a whitespace-only text with no calls
        assert all(m.role != "tool" and not m.text.strip() for m in messages)
        return
    assert_anthropic_valid(an)
    assert anthropic_pairing_errors(an) == []
    assert canonical_json(an) == canonical_json(
        to_anthropic(request, model="m", max_tokens=64, cache_breakpoints=[-1], cache_prefix=True)
    )


@pytest.mark.parametrize("choice", ["auto", "none", "required", "read_file"])
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_tool_choice_is_set_per_provider_and_validates(choice: str, provider: str) -> None:
    from ctxline import Context, MemoryStore, PrepareOptions, UserMessage

    options = PrepareOptions(provider="anthropic" if provider == "anthropic" else "openai", model="m")
    ctx = Context(MemoryStore(), "tc", options=options)
    ctx.set_tools([READ])
    ctx.append(UserMessage("read a.txt"))
    prep = ctx.prepare(tool_choice=choice)
    body = prep.body
    if provider == "openai":
        assert_openai_valid(body)
        expected: object = (
            choice if choice != "read_file" else {"type": "function", "function": {"name": "read_file"}}
        )
    else:
        assert_anthropic_valid(body)
        expected = {"auto": {"type": "auto"}, "none": {"type": "none"}, "required": {"type": "any"}}.get(
            choice, {"type": "tool", "name": "read_file"}
        )
    assert body["tool_choice"] == expected
    assert prep.header.inputs["tool_choice"] == choice
    assert ctx.rebuild(prep.header.step) == prep.body_bytes
