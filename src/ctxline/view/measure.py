"""How a view is measured: the text each message costs, and its framing.

A message costs the tokens of its text (content, plus each tool call's name and
arguments) and :data:`FRAMING_TOKENS` for its role and separators — the recipe the
peer harness uses, so ctxline's figures and the peers' are comparable.

    >>> message_text(NeutralMessage("user", "hi"))
    'hi'
"""

from __future__ import annotations

from dataclasses import dataclass

from ctxline.render.neutral import NeutralMessage
from ctxline.render.openai import arguments_text

__all__ = ["FRAMING_TOKENS", "ViewMessage", "message_text"]

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
