"""One model call of the loop: the span, the reply with usable call ids, its usage event.

reply, events = await call_model(client, prep, tracer, session, turn)
agent.append(*events)          # the reply and its usage, in one append
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import replace

from ctxline.models.base import ModelClient, ModelError, ModelReply
from ctxline.record.events import AssistantMessage, Event, JsonValue, ModelFailure, ToolCall
from ctxline.runner.tracing import AttrValue, Tracer, provider_name
from ctxline.runner.usage import usage_from_reply
from ctxline.view.options import PrepareOptions
from ctxline.view.prepare import Preparation

__all__ = [
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


async def call_model(
    client: ModelClient, prep: Preparation, tracer: Tracer, session: str, turn: int
) -> tuple[ModelReply, list[Event]]:
    """Send ``prep`` (in a worker thread: clients are sync); the reply and the events to append.

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
            reply = await asyncio.to_thread(client.complete, prep.body, provider=client.provider)
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
    meta: dict[str, JsonValue] = {"runner": {"renamed_ids": renamed}} if renamed else {}
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
