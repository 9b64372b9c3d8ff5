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

from ctxline.render.neutral import NeutralMessage
from ctxline.render.openai import arguments_text

__all__ = ["FRAMING_TOKENS", "LazyView", "ViewMessage", "message_text"]

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
