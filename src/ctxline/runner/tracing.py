"""Tracing: OpenTelemetry spans for the agent, each model call and each tool call.

Span names and attributes follow the OpenTelemetry GenAI semantic conventions:
``invoke_agent {name}``, ``chat {model}`` (``gen_ai.operation.name``,
``gen_ai.provider.name``, ``gen_ai.request.model``, ``gen_ai.response.model``,
``gen_ai.usage.input_tokens`` / ``output_tokens`` / ``cache_read.input_tokens`` /
``cache_creation.input_tokens``, ``gen_ai.response.finish_reasons``,
``gen_ai.conversation.id``) and ``execute_tool {name}`` (``gen_ai.tool.name``,
``gen_ai.tool.call.id``, ``gen_ai.tool.type``; ``error.type`` when it failed). Content
(prompts, arguments, outputs) is not recorded on spans — it is in the record.

The runner talks to a tiny :class:`Tracer` protocol; :data:`NO_TRACER` does nothing,
:func:`otel_tracer` uses the ``opentelemetry`` API (the ``otel`` extra). A sub-agent's
spans nest under the ``execute_tool spawn_agent`` span that started it.

    from opentelemetry.sdk.trace import TracerProvider
    Agent(client, tools, tracer=otel_tracer(TracerProvider()))
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any, Protocol

from ctxline.models.base import MissingExtra

__all__ = [
    "NO_TRACER",
    "AttrValue",
    "NoTracer",
    "OTelTracer",
    "Span",
    "Tracer",
    "otel_tracer",
    "provider_name",
]

AttrValue = str | int | float | bool | list[str]


class Span(Protocol):
    def set(self, key: str, value: AttrValue) -> None: ...

    def fail(self, error_type: str, message: str = "") -> None: ...


class Tracer(Protocol):
    def span(
        self, name: str, attributes: Mapping[str, AttrValue], *, client: bool = False
    ) -> contextlib.AbstractContextManager[Span]: ...


class _NoSpan:
    def set(self, key: str, value: AttrValue) -> None:
        pass

    def fail(self, error_type: str, message: str = "") -> None:
        pass


class NoTracer:
    @contextlib.contextmanager
    def span(
        self, name: str, attributes: Mapping[str, AttrValue], *, client: bool = False
    ) -> Iterator[Span]:
        yield _NoSpan()


NO_TRACER = NoTracer()


class _OTelSpan:
    def __init__(self, span: Any) -> None:
        self._span = span

    def set(self, key: str, value: AttrValue) -> None:
        self._span.set_attribute(key, value)

    def fail(self, error_type: str, message: str = "") -> None:
        from opentelemetry.trace import Status, StatusCode

        self._span.set_attribute("error.type", error_type)
        self._span.set_status(Status(StatusCode.ERROR, message[:500] or error_type))


class OTelTracer:
    """Spans through an OpenTelemetry tracer provider (the global one when None)."""

    def __init__(self, provider: Any = None) -> None:
        try:
            from opentelemetry import trace
        except ImportError as exc:
            raise MissingExtra("otel", "opentelemetry-api") from exc
        from ctxline import __version__

        self._trace = trace
        self._tracer = trace.get_tracer("ctxline", __version__, tracer_provider=provider)

    @contextlib.contextmanager
    def span(
        self, name: str, attributes: Mapping[str, AttrValue], *, client: bool = False
    ) -> Iterator[Span]:
        kind = self._trace.SpanKind.CLIENT if client else self._trace.SpanKind.INTERNAL
        with self._tracer.start_as_current_span(
            name, kind=kind, attributes=dict(attributes), record_exception=False
        ) as span:
            yield _OTelSpan(span)


def otel_tracer(provider: Any = None) -> OTelTracer:
    """A :class:`Tracer` over OpenTelemetry (``pip install 'ctxline[otel]'``)."""
    return OTelTracer(provider)


def provider_name(model: str) -> str:
    """``gen_ai.provider.name`` of a ``kind:name`` model (``openai``, ``anthropic``, …)."""
    kind = model.partition(":")[0]
    return {"local": "llama_cpp", "script": "ctxline.script"}.get(kind, kind)
