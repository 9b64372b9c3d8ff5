"""Token counting: exact tiktoken counters, a fast estimator, and counts memoized per event.

A budget is only as good as its counts, and recounting the whole history on every
model call is the O(n²) trap peers fall into. So an event's text (what a model reads
of it: message text, tool call names and canonical JSON arguments, tool output, …) is
counted once per event id and tokenizer, kept in memory and, through a
:class:`CountStore`, in the store. Exact counts use tiktoken's ``o200k_base`` /
``cl100k_base`` loaded offline (see :mod:`ctxline.tokens.tiktoken_files`); special-token
text in content is counted as ordinary text, never rejected. The ``bytes/4``
estimator (UTF-8 bytes / 4, rounded up) needs no files; chars/4 would undercount
Chinese about 2.5 times.

    >>> counter = get_counter("o200k")
    >>> counter.count("hello world"), get_counter("bytes/4").count("hello world")
    (2, 3)

    cache = TokenCache(counter, store)      # store: any CountStore, or None
    cache.counts(store.read("demo"))        # [12, 48, 7]; later calls reuse them
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Protocol, assert_never, runtime_checkable

from ctxline.errors import ValidationError
from ctxline.record.codec import canonical_json
from ctxline.record.events import (
    AssistantMessage,
    Compaction,
    Event,
    Guide,
    JsonValue,
    ModelFailure,
    ModelUsage,
    Notification,
    Reduction,
    RequestHeader,
    Rule,
    Slot,
    State,
    StatusSnapshot,
    StoredEvent,
    SystemMessage,
    Todo,
    ToolResult,
    Tools,
    UnknownEvent,
    UserMessage,
)
from ctxline.tokens.tiktoken_files import check_encoding, encoding

if TYPE_CHECKING:
    import tiktoken

__all__ = [
    "COUNTER_NAMES",
    "EVENT_TEXT_VERSION",
    "PERSISTED_MIN_CHARS",
    "BatchCounter",
    "BytesEstimator",
    "CountLookup",
    "CountStore",
    "TextCounts",
    "TiktokenCounter",
    "TokenCache",
    "TokenCounter",
    "count_event",
    "count_many",
    "event_text",
    "get_counter",
]

EVENT_TEXT_VERSION = 1
"""Bumped whenever :func:`event_text` changes, so persisted counts are not reused."""

PERSISTED_MIN_CHARS = 2_048
"""Texts this long or longer have their counts persisted (:class:`TextCounts`); shorter
ones are counted, which costs less than a lookup."""


@runtime_checkable
class TokenCounter(Protocol):
    """Counts the tokens of a text. ``name`` identifies the tokenizer (e.g. ``o200k_base``)."""

    @property
    def name(self) -> str: ...

    def count(self, text: str) -> int: ...


@runtime_checkable
class BatchCounter(Protocol):
    """A counter with a faster path for many texts at once."""

    def count_many(self, texts: Sequence[str]) -> list[int]: ...


class CountLookup(Protocol):
    """Reads persisted token counts (``Store`` implements it)."""

    def get_token_counts(self, event_ids: Sequence[str], tokenizer: str) -> dict[str, int]: ...


class CountStore(CountLookup, Protocol):
    """The part of a store that persists token counts (``Store`` implements it)."""

    def put_token_counts(self, tokenizer: str, counts: dict[str, int]) -> None: ...


@runtime_checkable
class _Writable(Protocol):
    def put_token_counts(self, tokenizer: str, counts: dict[str, int]) -> None: ...


def count_many(counter: TokenCounter, texts: Sequence[str]) -> list[int]:
    """The counts of ``texts``, through the counter's batch path when it has one."""
    if isinstance(counter, BatchCounter):
        return counter.count_many(texts)
    return [counter.count(t) for t in texts]


# --- counters -----------------------------------------------------------------------

_PIECE = 200_000
"""o200k's split regex overflows its stack on a whitespace run of ~1M characters
(tiktoken 0.14 panics); a text holding a long run is counted in slices this long."""
_LONG_RUNS = (" " * 100_000, "\t" * 100_000)
_PARALLEL_CHARS = 1 << 20
"""Below this many characters in a batch, threads cost more than they save."""


def _sliced_len(enc: tiktoken.Encoding, text: str) -> int:
    # Approximate only for such pathological input: a slice boundary may split a token.
    return sum(len(enc.encode_ordinary(text[i : i + _PIECE])) for i in range(0, len(text), _PIECE))


_HUGE = 8_000_000
"""Over this many characters a text's count is estimated from :data:`_SAMPLES` evenly
spaced windows of :data:`_WINDOW` characters (1.6M characters counted exactly), scaled
to its length: counting a 200 MB output whole took 35 % of a runner turn (issue 25), and
such a text is only ever shown as a preview (whose "~N tokens" this is) or weighed
against a budget it exceeds many times over. The estimate is a function of the text
alone, so the same on every run; it ran within 0.1 % of the exact count on log output.
(Windows of 200K characters, 6.4M in all, were still 1.7 s of a loaded machine's turn.)"""
_SAMPLES = 32
_WINDOW = 50_000


def _sampled_len(enc: tiktoken.Encoding, text: str) -> int:
    size = len(text)
    stride = size // _SAMPLES  # > _WINDOW: the windows never overlap
    counted = sum(
        len(enc.encode_ordinary(text[k * stride : k * stride + _WINDOW])) for k in range(_SAMPLES)
    )
    return max(1, round(counted * size / (_SAMPLES * _WINDOW)))


def _encoded_len(enc: tiktoken.Encoding, text: str) -> int:
    if len(text) > _HUGE:
        return _sampled_len(enc, text)
    if len(text) > _PIECE and any(run in text for run in _LONG_RUNS):
        return _sliced_len(enc, text)  # avoids the panic and its message on stderr
    try:
        return len(enc.encode_ordinary(text))
    except BaseException as exc:  # pyo3's PanicException derives from BaseException
        if type(exc).__name__ != "PanicException" or len(text) <= _PIECE:
            raise
    return _sliced_len(enc, text)


class TiktokenCounter:
    """Exact counts with a tiktoken encoding; special-token text counts as ordinary text.

    ``enc``: the encoding, or the name of one of :data:`~ctxline.tokens.tiktoken_files.SPECS`
    (checked now, built at the first count: :func:`get_counter` does this)."""

    def __init__(self, enc: tiktoken.Encoding | str) -> None:
        if isinstance(enc, str):
            check_encoding(enc)  # TokenizerUnavailable here, not at the first count
            self._encoding: tiktoken.Encoding | None = None
            self.name: str = enc
        else:
            self._encoding = enc
            self.name = enc.name

    def __repr__(self) -> str:
        return f"TiktokenCounter({self.name!r})"

    @property
    def encoding(self) -> tiktoken.Encoding:
        if self._encoding is None:
            self._encoding = encoding(self.name)
        return self._encoding

    def count(self, text: str) -> int:
        return _encoded_len(self.encoding, text)

    def count_many(self, texts: Sequence[str]) -> list[int]:
        enc = self.encoding
        workers = min(4, os.cpu_count() or 1, len(texts))
        if workers < 2 or sum(map(len, texts)) < _PARALLEL_CHARS:
            return [_encoded_len(enc, t) for t in texts]

        # tiktoken releases the GIL while encoding; one interleaved share per thread.
        def share(start: int) -> list[int]:
            return [_encoded_len(enc, t) for t in texts[start::workers]]

        counts = [0] * len(texts)
        with ThreadPoolExecutor(workers, thread_name_prefix="ctxline-tokens") as pool:
            for start, part in enumerate(pool.map(share, range(workers))):
                counts[start::workers] = part
        return counts


class BytesEstimator:
    """``ceil(UTF-8 bytes / 4)``: no files, GB/s. An estimate, not a bound: against o200k
    it ran 7-17 % low on the shared agent trajectories and ~9 % high on Chinese prose."""

    name = "bytes/4"

    def __repr__(self) -> str:
        return "BytesEstimator()"

    def count(self, text: str) -> int:
        size = len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
        return (size + 3) // 4

    def count_many(self, texts: Sequence[str]) -> list[int]:
        return [self.count(t) for t in texts]


_ALIASES = {
    "o200k": "o200k_base",
    "o200k_base": "o200k_base",
    "cl100k": "cl100k_base",
    "cl100k_base": "cl100k_base",
    "bytes": "bytes/4",
    "bytes/4": "bytes/4",
}
COUNTER_NAMES = tuple(_ALIASES)


def get_counter(name: str) -> TokenCounter:
    """A counter by name: ``o200k[_base]``, ``cl100k[_base]`` (exact) or ``bytes[/4]``.

    Raises :class:`~ctxline.errors.ValidationError` for another name and
    :class:`~ctxline.errors.TokenizerUnavailable` when an exact encoding's file
    cannot be found offline.
    """
    canonical = _ALIASES.get(name.strip().lower())
    if canonical is None:
        raise ValidationError(
            f"unknown tokenizer {name!r}; expected one of {', '.join(COUNTER_NAMES)}",
            field="tokenizer",
        )
    if canonical == "bytes/4":
        return BytesEstimator()
    return TiktokenCounter(canonical)


# --- event text ---------------------------------------------------------------------


def _json_text(value: JsonValue) -> str:
    return value if isinstance(value, str) else canonical_json(value).decode()


def _join(*parts: str) -> str:
    return "\n".join(p for p in parts if p)


def event_text(event: Event) -> str:
    """The text of ``event`` that a model reads, without a renderer's framing (tags, roles).

    Messages give their text; an assistant turn adds each tool call's name and
    canonical JSON arguments; a tool result gives its content; state gives its
    source and value; rules, notifications and todos their labels and text; an
    unknown kind gives the canonical JSON of its data. ``meta`` is never included.
    """
    match event:
        case SystemMessage() | UserMessage():
            return event.text
        case AssistantMessage():
            calls = (_join(c.name, _json_text(c.arguments)) for c in event.tool_calls)
            return _join(event.text, *calls)
        case ToolResult():
            return event.content
        case State():
            return event.source if event.cleared else _join(event.source, _json_text(event.value))
        case Rule():
            return _join(event.rule_id, event.text)
        case Notification():
            return _join(event.source, event.text)
        case Todo():
            if event.op == "write":
                return _join(*(f"[{i.status}] {i.content}" for i in event.items))
            return f"{event.item_id} {event.status}"
        case Compaction():
            return event.summary
        case Guide():
            return event.text
        case Tools():
            return _json_text(list(event.tools))
        case RequestHeader() | ModelUsage() | ModelFailure():
            return ""  # a log record: never shown to the model
        case Reduction():
            return event.summary
        case StatusSnapshot():
            return event.text
        case Slot():
            return _join(event.name, _json_text(event.value)) if event.value is not None else event.name
        case UnknownEvent():
            return _json_text(event.data)
        case _:
            assert_never(event)


def count_event(counter: TokenCounter, event: Event) -> int:
    """Tokens of :func:`event_text` of ``event`` (not memoized; see :class:`TokenCache`)."""
    return counter.count(event_text(event))


# --- memo ---------------------------------------------------------------------------


class TokenCache:
    """Per-event counts, computed once per event id and tokenizer.

    :meth:`counts` looks in memory, then (one call) in ``store``, counts the rest as
    one batch and writes those back in one call. Counts are persisted under
    :attr:`key`, the counter's name with :data:`EVENT_TEXT_VERSION`. Event ids are
    unique in a store, so forks share their parent's counts. Not thread-safe.
    """

    def __init__(self, counter: TokenCounter, store: CountStore | None = None) -> None:
        self.counter = counter
        self.store = store
        self.key = f"{counter.name}@{EVENT_TEXT_VERSION}"
        self._memo: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._memo)

    def counts(self, stored_events: Sequence[StoredEvent]) -> list[int]:
        """The count of each event, in order."""
        memo = self._memo
        missing = {s.id: s.event for s in stored_events if s.id not in memo}
        if missing and self.store is not None:
            found = self.store.get_token_counts(list(missing), self.key)
            for event_id in list(missing):
                if event_id in found:
                    memo[event_id] = found[event_id]
                    del missing[event_id]
        if missing:
            texts = [event_text(e) for e in missing.values()]
            fresh = dict(zip(missing, count_many(self.counter, texts), strict=True))
            memo.update(fresh)
            if self.store is not None:
                self.store.put_token_counts(self.key, fresh)
        return [memo[s.id] for s in stored_events]

    def count(self, stored: StoredEvent) -> int:
        return self.counts([stored])[0]


def _sha1(text: str) -> str:
    """The sha1 of ``text`` as UTF-8, a slice at a time (no whole copy of a huge text)."""
    h = hashlib.sha1()
    for start in range(0, len(text), 1 << 20):
        h.update(text[start : start + (1 << 20)].encode("utf-8", "surrogatepass"))
    return h.hexdigest()


class TextCounts:
    """Counts of rendered texts, persisted by content hash so a cold start does not recount.

    Only texts of at least :attr:`min_chars` characters go to the store (under the key
    ``text:<sha1>`` and the counter's name): for them counting costs more than a lookup;
    not those over ``_HUGE`` (estimated from samples, cheaper than hashing them whole).
    Shorter texts are just counted. New counts of long texts go to ``learned`` when it is
    given (the caller stores them later: a step never writes), else to ``store``.
    """

    def __init__(
        self,
        counter: TokenCounter,
        store: CountLookup | None,
        learned: dict[str, int] | None = None,
        *,
        min_chars: int = PERSISTED_MIN_CHARS,
    ) -> None:
        self.counter = counter
        self.store = store
        self.learned = learned
        self.min_chars = min_chars

    def counts(self, texts: Sequence[str]) -> list[int]:
        out = [0] * len(texts)
        need: dict[str, list[int]] = {}
        short: list[int] = []
        for i, text in enumerate(texts):
            if self.store is None or len(text) < self.min_chars or len(text) > _HUGE:
                short.append(i)  # a huge text: its sampled estimate is cheaper than its sha1
            else:
                key = "text:" + _sha1(text)
                need.setdefault(key, []).append(i)
        if short:
            for i, n in zip(
                short, count_many(self.counter, [texts[i] for i in short]), strict=True
            ):
                out[i] = n
        if need and self.store is not None:
            found = self.store.get_token_counts(list(need), self.counter.name)
            missing = [key for key in need if key not in found]
            if missing:
                fresh = count_many(self.counter, [texts[need[key][0]] for key in missing])
                new = dict(zip(missing, fresh, strict=True))
                if self.learned is not None:
                    self.learned.update(new)
                elif isinstance(self.store, _Writable):
                    self.store.put_token_counts(self.counter.name, new)
                found = {**found, **new}
            for key, places in need.items():
                for i in places:
                    out[i] = found[key]
        return out
