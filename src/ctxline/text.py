"""Make untrusted text safe to store and send.

Lone surrogates (from bad JSON escapes or broken decoders) cannot be encoded as UTF-8:
SQLite refuses them and providers reject ``"\\ud83d"`` with "no low surrogate in
string". They become U+FFFD at ingestion, as do undecodable bytes. NUL is kept: the
canonical JSON form escapes it as ``\\u0000``. JSON has no NaN or infinity (Python's
``json`` reads them anyway): they become the strings ``"NaN"``, ``"Infinity"`` and
``"-Infinity"``, so the value survives and the canonical form stays valid JSON.

    >>> clean_text("ok \\ud83d")
    'ok \\ufffd'
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, overload

if TYPE_CHECKING:  # typing only: the record sits above this module
    from ctxline.record.jsonvalue import JsonObject, JsonValue

__all__ = ["clean_json", "clean_text", "decode_bytes"]


_PIECE = 1 << 20
"""Characters encoded at a time to look for a lone surrogate: a whole encoded copy of a
200 MB text was the peak of reading it back (issue 25)."""


def _encodable(value: str) -> bool:
    # A surrogate is one code point of a str, so a slice boundary never hides or makes one.
    try:
        for start in range(0, len(value), _PIECE):
            value[start : start + _PIECE].encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def clean_text(value: str) -> str:
    """``value`` with every lone surrogate replaced by U+FFFD (a fast no-op otherwise:
    ``isascii`` is O(1) on a str, and a longer text is checked a MiB at a time)."""
    if value.isascii() or _encodable(value):
        return value
    # surrogatepass round trip through UTF-16 joins valid pairs and replaces lone halves
    return value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def decode_bytes(data: bytes) -> str:
    """UTF-8 with replacement: no input can fail to decode."""
    return data.decode("utf-8", "replace")


@overload
def clean_json(value: Mapping[str, object]) -> JsonObject: ...
@overload
def clean_json(value: object) -> JsonValue: ...
def clean_json(value: object) -> JsonValue:
    """A JSON value with every string (keys included) passed through :func:`clean_text`."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, Mapping):
        return {clean_text(str(k)): clean_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [clean_json(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if value is None or isinstance(value, bool | int | float):
        return value
    raise TypeError(f"not a JSON value: {type(value).__name__}")
