"""Model clients: OpenAI-compatible, Anthropic and an embedded local model, behind one protocol.

A model is named ``kind:name`` — ``openai:gpt-4.1-mini``, ``anthropic:claude-sonnet-4-5``,
``local:smollm2``, or ``script:FILE.jsonl`` (a :class:`~ctxline.models.scripted.ScriptedModel`
playing a file of replies, for tests). :func:`make_client` builds the client (each SDK is optional: a
missing one raises :class:`MissingExtra` naming the extra to install), and
``client.provider`` says which body ``prepare`` must render for it.

    client = make_client("local:smollm2")
    prep = ctx.prepare(options=PrepareOptions(provider=client.provider, model="smollm2"))
    reply = client.complete(prep.body, provider=client.provider)
    ctx.append(usage_event(usage_record(reply, prep, model=client.name)))
"""

from __future__ import annotations

from dataclasses import dataclass

from ctxline.errors import ValidationError
from ctxline.models.base import (
    USAGE_KIND,
    MissingExtra,
    ModelClient,
    ModelError,
    ModelReply,
    Provider,
    Usage,
    estimator_summary,
    flatten_messages,
    usage_event,
    usage_record,
)

__all__ = [
    "KINDS",
    "USAGE_KIND",
    "MissingExtra",
    "ModelClient",
    "ModelError",
    "ModelReply",
    "ModelSpec",
    "Provider",
    "Usage",
    "estimator_summary",
    "flatten_messages",
    "make_client",
    "parse_model",
    "usage_event",
    "usage_record",
]

KINDS = ("openai", "anthropic", "local", "script")


@dataclass(frozen=True, slots=True)
class ModelSpec:
    kind: str
    name: str

    @property
    def provider(self) -> Provider:
        return "anthropic" if self.kind == "anthropic" else "openai"

    def __str__(self) -> str:
        return f"{self.kind}:{self.name}"


def parse_model(text: str) -> ModelSpec:
    """``kind:name`` → :class:`ModelSpec`; a ValidationError names what is wrong."""
    kind, sep, name = text.partition(":")
    if not sep or kind not in KINDS or not name.strip():
        raise ValidationError(
            f"a model is named kind:name with kind one of {', '.join(KINDS)}"
            f" (e.g. local:smollm2), got {text!r}",
            field="model",
        )
    return ModelSpec(kind, name.strip())


def make_client(
    model: str | ModelSpec,
    *,
    base_url: str | None = None,
    seed: int = 0,
    temperature: float = 0.0,
) -> ModelClient:
    """The client for ``model``: temperature 0 and a fixed seed where the API takes them."""
    spec = parse_model(model) if isinstance(model, str) else model
    if spec.kind == "openai":
        from ctxline.models.openai_client import OpenAIClient

        return OpenAIClient(spec.name, base_url=base_url, temperature=temperature, seed=seed)
    if spec.kind == "anthropic":
        from ctxline.models.anthropic_client import AnthropicClient

        # the SDK takes no sampling parameters any more: the model's defaults apply
        return AnthropicClient(spec.name, base_url=base_url)
    if base_url is not None:
        raise ValidationError(f"a {spec.kind} model takes no --base-url", field="base_url")
    if spec.kind == "script":
        from ctxline.models.scripted import ScriptedModel

        return ScriptedModel.from_file(spec.name)
    from ctxline.models.local import LocalClient

    return LocalClient(spec.name, seed=seed, temperature=temperature)
