"""One model call of the loop: the span, the reply with usable call ids, its usage event.

The body handed to the client comes from a :class:`BodyDecoder`: the request's bytes are
a shared, growing list of frozen message parts (:class:`~ctxline.render.stream.BodyParts`),
so each frozen message is decoded once, when it first appears, and a step decodes only
its lead, its live messages and its foot — per-turn cost does not grow with history, where
``json.loads(prep.body_bytes)`` re-parses the whole request on every call.

reply, events = await call_model(client, prep, tracer, session, turn, body=bodies.body(prep))
agent.append(*events)          # the reply and its usage, in one append
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from ctxline.models.base import ModelClient, ModelError, ModelReply
from ctxline.record.events import AssistantMessage, Event, JsonValue, ModelFailure, ToolCall
from ctxline.record.jsonvalue import JsonArray, JsonObject, as_array
from ctxline.runner.tracing import AttrValue, Tracer, provider_name
from ctxline.runner.usage import usage_from_reply
from ctxline.view.options import PrepareOptions
from ctxline.view.prepare import Preparation

__all__ = [
    "BodyDecoder",
    "call_model",
    "client_options",
    "default_options",
    "failure_event",
    "fresh_ids",
    "request_model",
]


def request_model(model: ModelClient) -> str:
    """The model name the client sends (``openai:gpt-4.1-mini`` → ``gpt-4.1-mini``)."""
    return model.name.partition(":")[2] or model.name


def _reported(model: ModelClient, attr: str) -> int | None:
    """A size the client learnt from its server (llama.cpp reports its context size)."""
    value = getattr(model, attr, None)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def default_options(model: ModelClient) -> PrepareOptions:
    """The options of an agent that was given none: the client's provider and model; the
    window the client reports (``context_window``/``max_output`` attributes), else
    SmolLM2's 8k window for a local model, 128k for the others."""
    local = model.name.partition(":")[0] == "local"
    window = _reported(model, "context_window") or (8_192 if local else 128_000)
    output = _reported(model, "max_output") or (1_024 if local else 4_096)
    return PrepareOptions(
        provider=model.provider,
        model=request_model(model),
        context_window=window,
        max_output=min(output, window // 2),
    )


def client_options(model: ModelClient, options: PrepareOptions | None) -> PrepareOptions:
    """``options`` (None: :func:`default_options`) with the client's provider and the
    model name it really sends, so the logged request says what was sent."""
    if options is None:
        return default_options(model)
    real = request_model(model)
    if options.model == real and options.provider == model.provider:
        return options
    return replace(options, model=real, provider=model.provider)


def fresh_ids(calls: Sequence[ToolCall], turn: int) -> tuple[tuple[ToolCall, ...], list[str]]:
    """Empty or repeated call ids get a fresh one (a result must pair with exactly one call)."""
    seen: set[str] = set()
    out, renamed = [], []
    for i, call in enumerate(calls, start=1):
        ident = call.id
        if not ident or ident in seen:
            ident = f"call_{turn}_{i}"
            renamed.append(call.id)
        seen.add(ident)
        out.append(ToolCall(ident, call.name, call.arguments) if ident != call.id else call)
    return tuple(out), renamed


def _item(part: bytes) -> JsonValue:
    item: JsonValue = json.loads(part[1:] if part[:1] == b"," else part)
    return item


class BodyDecoder:
    """``prep.body`` without re-parsing the history: each frozen part is decoded once.

    The messages of the returned bodies are shared from step to step (a new list each
    time, the same message objects): a client must not change them in place — copy, as
    :class:`~ctxline.models.openai_client.OpenAIClient` does. Equal to
    ``json.loads(prep.body_bytes)`` for every body (tested on both providers, with edits
    of frozen history).
    """

    def __init__(self) -> None:
        self._parts: list[bytes] | None = None
        self._items: JsonArray = []
        """The decoded items of ``_parts[1:]``, one per part."""
        self._lead: tuple[bytes, JsonObject, JsonArray] | None = None

    def body(self, prep: Preparation) -> dict[str, Any]:
        parts, count = prep.parts.parts, prep.parts.count
        if count < 1:
            return prep.body
        self._sync(parts, count)
        lead = parts[0]
        if self._lead is None or self._lead[0] != lead:
            head: JsonObject = json.loads(lead + b"]}")
            self._lead = (lead, head, as_array(head.pop("messages"), "messages"))
        _, head, first = self._lead
        suffix = prep.parts.suffix
        foot: JsonObject = json.loads(b'{"messages":[' + suffix.removeprefix(b","))
        live = as_array(foot.pop("messages"), "messages")
        out: JsonObject = {**head, **foot, "messages": [*first, *self._items[: count - 1], *live]}
        return dict(sorted(out.items()))

    def _sync(self, parts: list[bytes], count: int) -> None:
        """Decode the parts not seen yet. A new list (an edit of frozen history, a new
        lead) keeps the decoded prefix whose parts are the very same bytes objects, from
        the first part on (``replace`` copies the list but keeps the unchanged parts);
        the first that differs and all after it are decoded again."""
        if parts is not self._parts:
            old, done = self._parts or [], 0
            limit = min(len(old), len(self._items) + 1, count)
            while done + 1 < limit and old[done + 1] is parts[done + 1]:
                done += 1
            self._parts, self._items = parts, self._items[:done]
        elif len(self._items) > count - 1:  # an older body of the same list
            return
        for i in range(len(self._items) + 1, count):
            self._items.append(_item(parts[i]))


async def call_model(
    client: ModelClient,
    prep: Preparation,
    tracer: Tracer,
    session: str,
    turn: int,
    *,
    body: Mapping[str, Any] | None = None,
) -> tuple[ModelReply, list[Event]]:
    """Send ``body`` (default ``prep.body``; in a worker thread: clients are sync); the
    reply and the events to append.

    Raises :class:`~ctxline.models.base.ModelError` (nothing to append then)."""
    model = client.name
    sent = request_model(client)
    attrs: dict[str, AttrValue] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": provider_name(model),
        "gen_ai.request.model": sent,
        "gen_ai.conversation.id": session,
    }
    with tracer.span(f"chat {sent}", attrs, client=True) as span:
        started = time.monotonic()
        try:
            payload = prep.body if body is None else body
            reply = await asyncio.to_thread(client.complete, payload, provider=client.provider)
        except ModelError as exc:
            span.fail(type(exc).__name__, str(exc))
            raise
        latency = time.monotonic() - started
        usage = reply.usage
        span.set("gen_ai.response.model", reply.model or sent)
        span.set("gen_ai.usage.input_tokens", usage["input"])
        span.set("gen_ai.usage.output_tokens", usage["output"])
        span.set("gen_ai.usage.cache_read.input_tokens", usage["cache_read"])
        span.set("gen_ai.usage.cache_creation.input_tokens", usage["cache_write"])
        if reply.finish_reason:
            span.set("gen_ai.response.finish_reasons", [reply.finish_reason])
    calls, renamed = fresh_ids(reply.tool_calls, turn)
    meta: dict[str, JsonValue] = {"runner": {"renamed_ids": list(renamed)}} if renamed else {}
    message = AssistantMessage(reply.text, calls, meta)
    event = usage_from_reply(
        reply,
        model=model,
        estimated=prep.report.tokens.total,
        step=prep.header.step,
        latency_s=latency,
    )
    return ModelReply(reply.text, calls, reply.usage, reply.model, reply.finish_reason), [
        message,
        event,
    ]


def failure_event(
    client: ModelClient, prep: Preparation, exc: Exception, latency_s: float
) -> ModelFailure:
    """The ``model.error`` event of a call that failed (the run's last event then)."""
    return ModelFailure(
        client.name,
        str(exc) or type(exc).__name__,
        type(exc).__name__,
        max(0, round(latency_s * 1000)),
        prep.header.step,
    )
