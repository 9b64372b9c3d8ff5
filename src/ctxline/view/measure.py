"""How a view is measured: the text each message costs, and its framing.

A message costs the tokens of its text (content, plus each tool call's name and
arguments) and :data:`FRAMING_TOKENS` for its role and separators — the recipe the
peer harness uses, so ctxline's figures and the peers' are comparable.

    >>> message_text(NeutralMessage("user", "hi"))
    'hi'
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import overload

from ctxline.record.events import JsonValue, ToolCall
from ctxline.render.neutral import NeutralMessage
from ctxline.render.openai import arguments_text

__all__ = ["FRAMING_TOKENS", "LazyView", "ViewMessage", "calls_text_bound", "message_text"]

FRAMING_TOKENS = 4
"""Tokens counted per message for its role and separators (the peers' recipe)."""


def message_text(message: NeutralMessage) -> str:
    """The text a message costs: content, plus each call's name and arguments."""
    if not message.tool_calls:
        return message.text
    parts = [message.text] if message.text else []
    for call in message.tool_calls:
        parts.append(call.name)
        parts.append(arguments_text(call.arguments))
    return "\n".join(parts)


def calls_text_bound(text: str, calls: Sequence[ToolCall], limit: int) -> int:
    """An upper bound on the length of the text an assistant message with ``calls`` costs
    once escaped (:func:`message_text` of its rendered form), or ``limit`` as soon as it
    may reach it — without escaping or encoding anything: a cold step on a 20,000-step
    session only looks up the counts of texts of 2,048 characters or more, and building
    each short call's text to find it short was a seventh of opening the session (issue 25).

    Escaping writes at most 4 characters for one (``<`` as ``&lt;``); compact JSON at most
    6 (``\\u00XX``), keys included; replacing lone surrogates never lengthens a text."""
    total = 4 * len(text)
    for call in calls:
        total += 2 + len(call.name)
        total += 4 * len(call.arguments) if isinstance(call.arguments, str) else 0
        stack: list[JsonValue] = [] if isinstance(call.arguments, str) else [call.arguments]
        while stack and total < limit:
            value = stack.pop()
            if isinstance(value, str):
                total += 6 * len(value) + 2
            elif isinstance(value, bool) or value is None:
                total += 5
            elif isinstance(value, int):
                total += value.bit_length() // 3 + 3
            elif isinstance(value, float):
                total += 32
            elif isinstance(value, dict):
                total += 2 + 2 * len(value)
                for key, item in value.items():
                    total += 6 * len(key) + 2
                    stack.append(item)
            elif isinstance(value, list):
                total += 2 + len(value)
                stack.extend(value)
            else:  # not JSON: no bound
                return limit
        if total >= limit:
            return limit
    return min(total, limit)


@dataclass(frozen=True, slots=True)
class ViewMessage:
    """One message of the current view, with its tokens (framing included)."""

    message: NeutralMessage
    tokens: int


class LazyView(Sequence[ViewMessage]):
    """The view's messages with their tokens, made only for the indexes read.

    The ladder reads the end of the view (the kept groups) and a few indexes; building
    the whole list would make every reducing step O(history).
    """

    def __init__(
        self,
        frozen: Sequence[NeutralMessage],
        frozen_tokens: Sequence[int],
        live: Sequence[NeutralMessage],
        live_tokens: Sequence[int],
    ) -> None:
        self.frozen, self.frozen_tokens = frozen, frozen_tokens
        self.live, self.live_tokens = live, live_tokens
        self.frozen_count = min(len(frozen), len(frozen_tokens))

    def __len__(self) -> int:
        return self.frozen_count + len(self.live)

    @overload
    def __getitem__(self, index: int) -> ViewMessage: ...
    @overload
    def __getitem__(self, index: slice) -> list[ViewMessage]: ...
    def __getitem__(self, index: int | slice) -> ViewMessage | list[ViewMessage]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if index < self.frozen_count:
            return ViewMessage(self.frozen[index], self.frozen_tokens[index])
        j = index - self.frozen_count
        if not 0 <= j < len(self.live):
            raise IndexError(index)
        return ViewMessage(self.live[j], self.live_tokens[j])
