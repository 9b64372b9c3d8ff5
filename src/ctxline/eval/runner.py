"""Build every prompt, ask the model, score, and summarize per family and view.

:func:`build_prompts` is pure given the data folder and the config: the same seed gives
the same bodies byte for byte (``prompts_sha256`` in the summary proves it).
:func:`run_eval` sends them through any :class:`~ctxline.models.ModelClient` at
temperature 0 and returns an :class:`EvalResult`; ``summary()`` is the JSON that
``ctxline eval --json`` prints: accuracy with 95 % Wilson intervals per family and
view, mean input tokens per view (provider-reported and ctxline's estimate) and the
estimator's error against the provider's count.

    result = run_eval(make_client("local:smollm2"), EvalConfig(n=50))
    print(json.dumps(result.summary(), indent=2))
"""

from __future__ import annotations

import hashlib
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ctxline.errors import TokenizerUnavailable, ValidationError
from ctxline.eval.probes import FAMILIES, Instance, build_instance
from ctxline.eval.scoring import extract, mean, wilson
from ctxline.eval.trajectories import (
    Excerpt,
    Trajectory,
    default_data_dir,
    load_pool,
    make_excerpt,
)
from ctxline.eval.views import VIEWS, render_views
from ctxline.models.base import ModelClient, ModelError, Provider, estimator_summary, usage_record
from ctxline.record.codec import canonical_json
from ctxline.record.events import JsonValue
from ctxline.record.jsonvalue import JsonObject, as_int, dig
from ctxline.tokens.counters import TokenCounter, get_counter
from ctxline.view.options import PrepareOptions

__all__ = ["EvalConfig", "EvalResult", "Prompt", "Record", "build_prompts", "run_eval"]

TRUNCATION_NOTE = (
    "Each instance starts from the opening of a real trajectory from ../shared/data, cut to "
    "about {tokens} tokens (bytes/4) so every prompt fits SmolLM2-135M's 8k context: system "
    "messages dropped, user/assistant text clipped to {text} characters, tool output to "
    "{result}, tool-argument strings to {arg}; calls are never split from their results."
)


@dataclass(frozen=True, slots=True)
class EvalConfig:
    families: tuple[str, ...] = tuple(FAMILIES)
    n: int = 50
    seed: int = 0
    excerpt_tokens: int = 400
    max_output: int = 16
    context_window: int = 8_192
    data_dir: Path | None = None
    views: tuple[str, ...] = VIEWS
    """The views to send (all three by default; one, to re-measure a rendering change)."""

    def __post_init__(self) -> None:
        unknown = [f for f in self.families if f not in FAMILIES]
        if unknown:
            raise ValidationError(
                f"unknown families {', '.join(unknown)} (known: {', '.join(FAMILIES)})",
                field="families",
            )
        strange = [v for v in self.views if v not in VIEWS]
        if strange or not self.views:
            raise ValidationError(
                f"unknown views {', '.join(strange) or '(none given)'} (known: {', '.join(VIEWS)})",
                field="views",
            )
        if self.n < 1:
            raise ValidationError("need at least one instance per family", field="n")


@dataclass(frozen=True, slots=True)
class Prompt:
    instance: Instance
    view: str
    body: dict[str, Any]
    estimated_tokens: int


@dataclass(frozen=True, slots=True)
class Record:
    prompt: Prompt
    reply: str
    extracted: str | None
    correct: bool
    usage: dict[str, JsonValue]
    error: str = ""


def _counter(name: str) -> TokenCounter:
    try:
        return get_counter(name)
    except TokenizerUnavailable:
        return get_counter("bytes/4")


def build_prompts(
    config: EvalConfig, provider: Provider = "openai", model: str = "model"
) -> list[Prompt]:
    """Every instance of every family, rendered in the configured views (grouped by view)."""
    pool = load_pool(config.data_dir or default_data_dir())
    by_format: dict[str, list[Trajectory]] = {}
    for trajectory in pool:
        by_format.setdefault(trajectory.id.split("/")[0], []).append(trajectory)
    formats = sorted(by_format)
    excerpts: dict[str, Excerpt] = {}

    def excerpt_of(rng: random.Random) -> Excerpt:
        # a format first, then a session: tau-bench's 100 sessions would crowd out the rest
        trajectory = rng.choice(by_format[rng.choice(formats)])
        found = excerpts.get(trajectory.id)
        if found is None:
            found = excerpts[trajectory.id] = make_excerpt(trajectory, config.excerpt_tokens)
        return found

    options = PrepareOptions(
        provider=provider,
        model=model,
        context_window=config.context_window,
        max_output=config.max_output,
    )
    counter = _counter(options.tokenizer)
    prompts: list[Prompt] = []
    for family in config.families:
        for index in range(config.n):
            inst = build_instance(family, index, config.seed, excerpt_of)
            for rendered in render_views(inst, provider, options, counter):
                if rendered.view not in config.views:
                    continue
                prompts.append(
                    Prompt(inst, rendered.view, rendered.body, rendered.estimated_tokens)
                )
    order = {view: i for i, view in enumerate(VIEWS)}
    # one view at a time, one trajectory after another: a local model reuses the shared
    # system prompt and the trajectory's opening from its KV cache
    prompts.sort(
        key=lambda p: (
            order[p.view],
            p.instance.source,
            config.families.index(p.instance.family),
            p.instance.index,
        )
    )
    return prompts


def prompts_sha256(prompts: Sequence[Prompt]) -> str:
    digest = hashlib.sha256()
    for p in prompts:
        digest.update(canonical_json([p.instance.id, p.view, p.body]))
    return digest.hexdigest()


@dataclass
class EvalResult:
    model: str
    config: EvalConfig
    records: list[Record]
    prompts_sha256: str
    seconds: float
    notes: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, JsonValue]:
        families = list(self.config.families)
        accuracy: dict[str, JsonValue] = {}
        tokens: dict[str, JsonValue] = {}
        for family in [*families, "all"]:
            acc: dict[str, JsonValue] = {}
            tok: dict[str, JsonValue] = {}
            for view in self.config.views:
                rows = [
                    r
                    for r in self.records
                    if r.prompt.view == view and family in ("all", r.prompt.instance.family)
                ]
                k = sum(r.correct for r in rows)
                lo, hi = wilson(k, len(rows))
                acc[view] = {
                    "correct": k,
                    "n": len(rows),
                    "accuracy": round(k / len(rows), 4) if rows else None,
                    "ci95": [lo, hi],
                }
                inputs = [as_int(dig(r.usage, "usage", "input")) for r in rows if not r.error]
                tok[view] = {
                    "input_mean": mean(float(n) for n in inputs),
                    "input_max": max(inputs, default=None),
                    "estimated_mean": mean(float(r.prompt.estimated_tokens) for r in rows),
                }
            accuracy[family] = acc
            tokens[family] = tok
        return {
            "model": self.model,
            "families": list(families),
            "n_per_family": self.config.n,
            "seed": self.config.seed,
            "temperature": 0,
            "excerpt_tokens": self.config.excerpt_tokens,
            "views": list(self.config.views),
            "prompts": len(self.records),
            "prompts_sha256": self.prompts_sha256,
            "errors": sum(1 for r in self.records if r.error),
            "accuracy": accuracy,
            "tokens": tokens,
            "estimator": {
                view: estimator_summary(
                    r.usage for r in self.records if r.prompt.view == view and not r.error
                )
                for view in self.config.views
            },
            "seconds": round(self.seconds, 1),
            "notes": list(self.notes),
        }


def run_eval(
    client: ModelClient,
    config: EvalConfig,
    *,
    progress: Callable[[int, int], None] | None = None,
    on_record: Callable[[Record], None] | None = None,
) -> EvalResult:
    """Build the prompts for ``client``'s provider, ask them all, and score the replies.

    ``on_record`` sees each scored record as soon as its reply is in (a long run on a
    slow model keeps what it measured even if it is stopped).
    """
    from ctxline.eval.trajectories import ARG_CHARS, RESULT_CHARS, TEXT_CHARS

    start = time.perf_counter()
    model = client.name.partition(":")[2] or client.name
    prompts = build_prompts(config, client.provider, model)
    records: list[Record] = []
    for done, prompt in enumerate(prompts, start=1):
        inst = prompt.instance
        try:
            reply = client.complete(prompt.body, provider=client.provider)
        except ModelError as exc:
            empty: JsonObject = {"input": 0, "cache_read": 0, "cache_write": 0, "output": 0}
            usage: dict[str, JsonValue] = {"usage": empty, "estimator_error": None}
            records.append(Record(prompt, "", None, False, usage, str(exc)))
        else:
            got = extract(reply.text, inst.kind, inst.candidates)
            ok = got is not None and got.lower() == inst.answer.lower()
            usage = usage_record(reply, prompt.estimated_tokens, model=client.name)
            records.append(Record(prompt, reply.text, got, ok, usage))
        if on_record is not None:
            on_record(records[-1])
        if progress is not None:
            progress(done, len(prompts))
    note = TRUNCATION_NOTE.format(
        tokens=config.excerpt_tokens, text=TEXT_CHARS, result=RESULT_CHARS, arg=ARG_CHARS
    )
    return EvalResult(
        client.name, config, records, prompts_sha256(prompts), time.perf_counter() - start, [note]
    )
