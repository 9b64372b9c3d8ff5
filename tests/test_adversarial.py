"""The forgery corpus (issue 12): every hostile payload in every channel, on both providers.

See ``tests/adversarial_corpus.py`` for the payloads, the channels and what is checked:
no tag opens or closes except ctxline's own (after normalizing look-alikes and invisible
characters), no line inside ctxline's status, re-affirmation, digest, branch or time
blocks is forged, every call id is in the provider's pattern, and the body validates
against the SDK's request types.
"""

from __future__ import annotations

from typing import Any

import pytest

from adversarial_corpus import CHANNELS, PLACEHOLDER, build, check_case, payloads_for
from test_render import assert_anthropic_valid, assert_openai_valid

CASES = [
    (channel, index, payload)
    for channel in CHANNELS
    for index, payload in enumerate(payloads_for(channel))
]


def test_the_corpus_is_large_enough() -> None:
    assert len(CASES) * 2 >= 300
    assert len(CHANNELS) >= 30


_BENIGN: dict[tuple[str, str], dict[str, Any]] = {}


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
@pytest.mark.parametrize(("channel", "index", "payload"), CASES, ids=[f"{c}-{i}" for c, i, _ in CASES])
def test_forgery_is_inert(channel: str, index: int, payload: str, provider: str) -> None:
    key = (channel, provider)
    if key not in _BENIGN:
        _BENIGN[key] = build(channel, PLACEHOLDER, provider)
    hostile = build(channel, payload, provider)
    if provider == "openai":
        assert_openai_valid(hostile)
    else:
        assert_anthropic_valid(hostile)
    check_case(hostile, _BENIGN[key], provider, channel)
