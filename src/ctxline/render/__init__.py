"""Provider rendering: record history → neutral request → provider body → bytes.

Pairing is repaired once, provider-neutrally (:mod:`ctxline.render.neutral`); each
provider module is a pure function from a :class:`NeutralRequest` to a plain dict,
and :func:`render_bytes` gives the canonical bytes sent on the wire, so identical
input is identical bytes and the cached prompt prefix stays stable.

    messages, report = history_to_messages(events)
    request = NeutralRequest(system_text(events), tools, tuple(messages))
    wire = render_bytes(to_anthropic(request, model="claude-sonnet-4-5", max_tokens=4096))
"""

from __future__ import annotations

from ctxline.record.codec import canonical_json
from ctxline.record.jsonvalue import JsonObject
from ctxline.render.anthropic import to_anthropic
from ctxline.render.neutral import (
    INTERRUPTED,
    HistoryBuilder,
    NeutralMessage,
    NeutralRequest,
    PairingReport,
    ToolSpec,
    check_pairing,
    history_to_messages,
    system_text,
)
from ctxline.render.openai import to_openai
from ctxline.text import clean_json

__all__ = [
    "INTERRUPTED",
    "HistoryBuilder",
    "NeutralMessage",
    "NeutralRequest",
    "PairingReport",
    "ToolSpec",
    "check_pairing",
    "history_to_messages",
    "render_bytes",
    "system_text",
    "to_anthropic",
    "to_openai",
]


def render_bytes(body: JsonObject) -> bytes:
    """The canonical JSON bytes of a request body (sorted keys, compact, UTF-8).

    A lone surrogate in a body built elsewhere becomes U+FFFD instead of failing
    (a provider would reject it: "no low surrogate in string").
    """
    try:
        return canonical_json(body)
    except UnicodeEncodeError:
        return canonical_json(clean_json(body))
