"""A compaction summarizer that asks a model (any :class:`~ctxline.models.ModelClient`).

:class:`LLMSummarizer` is a :data:`~ctxline.view.compaction.Summarizer`: called with the
compacted span's events, a token budget and a counter, it returns the summary text.
The model reads a line-per-step transcript of the span made from the record
(:func:`~ctxline.view.compaction.extractive_summary`, escaped, bounded by
``input_tokens``) — never the trimmed view — and its answer is clipped to the budget.
The text is escaped when the summary is rendered, like any tool output.

A failing call (transport, provider error, an empty or too-short answer) raises
:class:`SummaryFailed`, a :class:`~ctxline.errors.CtxlineError`: the caller appends
nothing, so the last valid summary stays in the view. :func:`compact` runs one
compaction on a :class:`~ctxline.context.Context` that way.

    summarizer = LLMSummarizer(make_client("local:smollm2"))
    compact(ctx, summarizer)          # appends a Reduction, or raises SummaryFailed
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from ctxline.context import Context
from ctxline.errors import CtxlineError
from ctxline.models.base import ModelClient, ModelError
from ctxline.record.events import Reduction, StoredEvent
from ctxline.render.anthropic import to_anthropic
from ctxline.render.neutral import NeutralMessage, NeutralRequest
from ctxline.render.openai import to_openai
from ctxline.tags import escape
from ctxline.tokens.counters import TokenCounter
from ctxline.view.compaction import extractive_summary

__all__ = ["SUMMARY_INSTRUCTIONS", "LLMSummarizer", "SummaryFailed", "compact"]

SUMMARY_INSTRUCTIONS = (
    "You write the summary that replaces the early part of an AI agent's working history. "
    "From the transcript below, state in plain sentences: the user's task, what was done, "
    "what was found, and what is still open. Keep file names, ids and numbers exactly. "
    "Do not add anything that is not in the transcript."
)


class SummaryFailed(CtxlineError):
    """The model gave no usable summary; nothing was appended, the last summary stays."""


def _clip_to(text: str, max_tokens: int, counter: TokenCounter) -> str:
    if counter.count(text) <= max_tokens:
        return text
    lo, hi = 0, len(text)
    while lo < hi:  # the longest prefix within the budget
        mid = (lo + hi + 1) // 2
        if counter.count(text[:mid] + " …") <= max_tokens:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo].rstrip() + " …"


class LLMSummarizer:
    """``(events, max_tokens, counter) -> str`` through a model; raises :class:`SummaryFailed`."""

    def __init__(
        self,
        client: ModelClient,
        *,
        input_tokens: int = 3_000,
        min_chars: int = 20,
        instructions: str = SUMMARY_INSTRUCTIONS,
    ) -> None:
        self.client = client
        self.input_tokens = input_tokens
        self.min_chars = min_chars
        self.instructions = instructions
        self.__name__ = f"llm:{client.name}"  # recorded in the reduction's meta

    def request(
        self, events: Sequence[StoredEvent], max_tokens: int, counter: TokenCounter
    ) -> dict[str, Any]:
        """The body sent to the model for ``events``."""
        transcript = escape(extractive_summary(events, self.input_tokens, counter))
        request = NeutralRequest(
            self.instructions, (), (NeutralMessage("user", "Transcript:\n" + transcript),)
        )
        model = self.client.name.partition(":")[2] or self.client.name
        if self.client.provider == "anthropic":
            return to_anthropic(request, model=model, max_tokens=max_tokens)
        return to_openai(request, model=model, max_tokens=max_tokens)

    def __call__(
        self, events: Sequence[StoredEvent], max_tokens: int, counter: TokenCounter
    ) -> str:
        if not events:
            raise SummaryFailed("nothing to summarize")
        head = f"Summary of record seq 1–{events[-1].seq} (written by {self.client.name} from the record):"
        budget = max(16, max_tokens - counter.count(head) - 4)
        try:
            reply = self.client.complete(
                self.request(events, budget, counter), provider=self.client.provider
            )
        except ModelError as exc:
            raise SummaryFailed(f"the summary model failed: {exc}") from exc
        text = reply.text.strip()
        if len(text) < self.min_chars:
            raise SummaryFailed(
                f"the summary model answered {len(text)} characters (need {self.min_chars})"
            )
        return head + "\n" + _clip_to(text, budget, counter)


def compact(
    ctx: Context,
    summarizer: LLMSummarizer,
    *,
    now: datetime | None = None,
    target: int | None = None,
) -> Reduction | None:
    """Compact ``ctx``'s current view with ``summarizer`` and append the ``Reduction``.

    ``target`` is the token total the view should come under (default: the options'
    target share of the input limit). Returns None when there is no span to cut. On
    :class:`SummaryFailed` nothing is appended: the last valid summary stays in place.
    """
    return ctx.compact(summarizer, now=now, target=target)
