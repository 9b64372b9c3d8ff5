"""The runner fits each request to the server's window in the server's own count.

A model whose tokenizer reads ctxline's text as more tokens than ctxline's counter (Qwen2.5
counts 4.5–10.7 % more than o200k on the bundled sessions) gets requests that fit ctxline's count and overflow
the server, which refuses them (llama.cpp: "Requested tokens exceed context window"). The
runner scales the input limit by what the provider reported for the earlier requests.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal

import pytest

from ctxline import MemoryStore
from ctxline.models.base import ModelError, ModelReply, Usage
from ctxline.record.events import ModelUsage, ToolCall
from ctxline.runner import Agent, Limits
from ctxline.runner.guards import fitted_options
from ctxline.runner.ledger import Ledger
from ctxline.runner.tools import tool
from ctxline.tokens.counters import get_counter
from ctxline.view.options import PrepareOptions

WINDOW, OUTPUT = 6_144, 256
O200K = get_counter("o200k")


class WideTokenizerServer:
    """A server whose tokenizer counts ``factor`` times o200k's count of the messages, and
    that refuses a request past its window, as llama.cpp's server does."""

    name = "openai:wide"
    provider: Literal["openai"] = "openai"

    def __init__(self, factor: float, calls: int) -> None:
        self.factor, self.calls, self.inputs = factor, calls, list[int]()

    def complete(self, body: Mapping[str, Any], *, provider: str) -> ModelReply:
        text = json.dumps(body["messages"], ensure_ascii=False) + json.dumps(body.get("tools", []))
        used = round(self.factor * O200K.count(text))
        if used > WINDOW - OUTPUT:
            raise ModelError(f"Requested tokens ({used}) exceed context window of {WINDOW}")
        self.inputs.append(used)
        usage: Usage = {"input": used, "cache_read": 0, "cache_write": 0, "output": 10}
        turn = len(self.inputs)
        if turn > self.calls:
            return ModelReply("all pages read", usage=usage)
        return ModelReply("", (ToolCall(f"c{turn}", "fetch", {"page": turn}),), usage=usage)


@tool
def fetch(page: int) -> str:
    """The text of one page."""
    return " ".join(f"page {page} word {i} of the long report" for i in range(60))


def _run(factor: float) -> tuple[Any, WideTokenizerServer]:
    server = WideTokenizerServer(factor, calls=24)
    agent = Agent(
        server,
        [fetch],
        store=MemoryStore(),
        options=PrepareOptions(provider="openai", context_window=WINDOW, max_output=OUTPUT),
        limits=Limits(max_turns=40, repeat_limit=100),
        builtin_tools=(),
    )
    return agent.run("Read the pages."), server


@pytest.mark.parametrize("factor", [1.3, 1.6])
def test_a_wider_tokenizer_never_overflows_the_server(factor: float) -> None:
    result, server = _run(factor)
    assert result.error == ""
    assert result.stop_reason == "final", result.error
    assert max(server.inputs) <= WINDOW - OUTPUT
    assert max(server.inputs) > 0.6 * (WINDOW - OUTPUT)  # the history did press on the window


def test_fitted_options_scale_only_past_two_percent() -> None:
    options = PrepareOptions(provider="openai", context_window=10_000, max_output=1_000)
    ledger = Ledger()
    assert fitted_options(ledger, options) is None  # nothing reported yet
    ledger.totals.add_call(ModelUsage("m", input=1_010, estimated_input=1_000))
    assert fitted_options(ledger, options) is None
    ledger.totals.add_call(ModelUsage("m", input=1_490, estimated_input=1_000))  # 2,500 for 2,000
    fitted = fitted_options(ledger, options)
    assert fitted is not None
    assert fitted.input_limit == int(9_000 / 1.25) // 64 * 64
    assert fitted.max_output == 1_000
