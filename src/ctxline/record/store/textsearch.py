"""Full-text search over a timeline's record, with one tokenizer for every backend.

Why: ``search_history`` must find the same events whichever store holds the record.
So ctxline tokenizes in Python (NFKD, combining marks dropped, case folded, runs of
letters and digits) and hands every backend the same normalized words: SQLite FTS5
(``ascii`` tokenizer over those words, BM25), PostgreSQL (``to_tsvector('simple', …)``
with a GIN index, ``ts_rank``) and the memory store (BM25 here). Backends agree on
*which* events match; only the scores (and so the order of near ties) differ.

A query is words and "quoted phrases"; an event matches when it holds any of them
(OR), and events holding more of them, or rarer ones, rank higher. The query sent to
a backend is rebuilt from the normalized words, so query syntax typed by a user or a
model (``NEAR(``, ``*``, ``-``, unbalanced quotes) never reaches it and never fails.

What is indexed is :func:`ctxline.tokens.counters.event_text` (the text a model reads),
except ctxline's own records (guide, tools, request log, reductions, status
snapshots), capped at :data:`INDEX_MAX_CHARS` normalized characters of words per event:
the words of the first few hundred KB of a huge output are searchable, the rest is
not (its blob is still read back whole by ``read_result``).

    >>> words("Café: test_parse() FAILED")
    ['cafe', 'test', 'parse', 'failed']
    >>> parse_query('"unit test" failed').fts5()
    '"unit test" OR "failed"'
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ctxline.errors import ValidationError
from ctxline.record.events import Event, StoredEvent, ToolResult
from ctxline.record.store.base import SearchHit
from ctxline.record.store.chain import digest_text

__all__ = [
    "HANDLE_MIN_CHARS",
    "INDEX_MAX_CHARS",
    "MAX_LIMIT",
    "SKIPPED_KINDS",
    "Query",
    "bm25_scores",
    "capped_words",
    "check_limit",
    "handle_of",
    "index_text",
    "index_words",
    "normalize",
    "parse_query",
    "snippet",
    "to_hits",
    "words",
]

INDEX_MAX_CHARS = 200_000
"""Normalized characters indexed per event (a PostgreSQL tsvector must stay under 1 MB)."""
SCAN_CHARS = 65_536
"""Characters normalized and split at a time by :func:`capped_words`."""
MAX_WORD = 100
"""Longer runs (base64, hex dumps) are not words anyone searches for; they are skipped."""
MAX_TERMS = 32
MAX_LIMIT = 100
HANDLE_MIN_CHARS = 1_024
"""A tool result longer than this is saved as a blob when appended (see Context): a hit
on it carries its ``sha256:`` handle, so the model can read it back in full."""
SKIPPED_KINDS = frozenset({"guide", "tools", "request", "reduction", "status"})
"""ctxline's own records: not history, so not searched."""

_WORD = re.compile(r"[^\W_]+")


def normalize(text: str) -> str:
    """Compatibility-decomposed, combining marks dropped, case folded."""
    if text.isascii():
        return text.lower()
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch)).casefold()


def words(text: str) -> list[str]:
    """The searchable words of ``text``: runs of letters and digits, normalized."""
    return [w for w in _WORD.findall(normalize(text)) if len(w) <= MAX_WORD]


def index_text(event: Event) -> str:
    """The text of ``event`` that search covers ('' for kinds that are not searched)."""
    if event.kind in SKIPPED_KINDS:
        return ""
    from ctxline.tokens.counters import event_text  # tokens imports tiktoken helpers: keep it lazy

    try:
        return event_text(event)
    except TypeError:  # a kind event_text does not know (yet): not searchable
        return ""


def index_words(event: Event) -> list[str]:
    """The words indexed for ``event``: those of :func:`index_text`, capped in size.

    The text is normalized and split a slice at a time, stopping at the cap, so a
    200 MB tool output costs its first few hundred KB here, never a list of all its
    words (the result is the same as splitting the whole text and cutting the list).
    """
    return capped_words(index_text(event))


def capped_words(text: str, limit: int = INDEX_MAX_CHARS, piece: int = SCAN_CHARS) -> list[str]:
    """``words(text)`` cut where the words (each with one separator) pass ``limit`` characters."""
    if len(text) <= piece:  # the common case: one pass
        found = words(text)
        total = 0
        for i, w in enumerate(found):
            total += len(w) + 1
            if total > limit:
                return found[:i]
        return found
    found = []
    total = 0
    carry = ""  # a word that may go on in the next slice
    for start in range(0, len(text), piece):
        # normalize is per character (NFKD, then marks dropped, then case folded), so
        # normalizing slices and joining them equals normalizing the whole
        chunk = carry + normalize(text[start : start + piece])
        matches = list(_WORD.finditer(chunk))
        carry = ""
        if matches and matches[-1].end() == len(chunk) and start + piece < len(text):
            last = matches.pop().group()
            carry = last[: MAX_WORD + 1]  # longer than MAX_WORD stays too long to index
        for m in matches:
            w = m.group()
            if len(w) > MAX_WORD:
                continue
            total += len(w) + 1
            if total > limit:
                return found
            found.append(w)
    return found


def handle_of(event: Event) -> str:
    """The blob handle of a tool result long enough to have been saved whole, else ''."""
    if isinstance(event, ToolResult) and len(event.content) > HANDLE_MIN_CHARS:
        return digest_text(event.content)  # blob_ref of its UTF-8, hashed in slices
    return ""


def check_limit(limit: int) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise ValidationError(
            f"limit must be a whole number from 1 to {MAX_LIMIT}, got {limit!r}", field="limit"
        )
    return limit


@dataclass(frozen=True, slots=True)
class Query:
    """A parsed query: terms of one word, or phrases of several, any of which may match."""

    terms: tuple[tuple[str, ...], ...]

    def fts5(self) -> str:
        """An FTS5 MATCH expression: every term double-quoted (words hold no quotes)."""
        return " OR ".join('"' + " ".join(t) + '"' for t in self.terms)

    def websearch(self) -> str:
        """Input for PostgreSQL's ``websearch_to_tsquery``: quoted terms joined by ``or``."""
        return " or ".join('"' + " ".join(t) + '"' for t in self.terms)

    @property
    def words(self) -> frozenset[str]:
        return frozenset(w for t in self.terms for w in t)

    def counts(self, tokens: Sequence[str], single: Counter[str] | None = None) -> list[int]:
        """How often each term occurs in ``tokens`` (a phrase: as consecutive words);
        ``single`` is ``Counter(tokens)`` when the caller keeps it."""
        if not tokens:
            return [0] * len(self.terms)
        if single is None:
            single = Counter(tokens)
        out = []
        for term in self.terms:
            if len(term) == 1:
                out.append(single.get(term[0], 0))
                continue
            if any(w not in single for w in term):
                out.append(0)
                continue
            n, k = 0, len(term)
            for i in range(len(tokens) - k + 1):
                if tokens[i] == term[0] and tuple(tokens[i : i + k]) == term:
                    n += 1
            out.append(n)
        return out


def parse_query(query: str) -> Query:
    """Words and "quoted phrases" of ``query``; ValidationError when it has no word."""
    if not isinstance(query, str):
        raise ValidationError("the query must be text", field="query")
    terms: list[tuple[str, ...]] = []
    parts = query.split('"')
    for i, part in enumerate(parts):
        found = words(part)
        closed = i < len(parts) - 1  # an unclosed quote's words are plain words
        if i % 2 == 1 and closed and len(found) > 1:  # inside quotes: a phrase
            terms.append(tuple(found))
        else:
            terms.extend((w,) for w in found)
    unique = list(dict.fromkeys(terms))[:MAX_TERMS]
    if not unique:
        raise ValidationError(
            "the search query has no words to look for (letters or digits)", field="query"
        )
    return Query(tuple(unique))


def bm25_scores(
    docs: Sequence[tuple[int, Sequence[str], Counter[str] | None]],
    query: Query,
    *,
    k1: float = 1.2,
    b: float = 0.75,
) -> list[tuple[int, float]]:
    """(key, score) of the docs (key, words, Counter of the words or None) that match,
    BM25 as FTS5 computes it (idf floor 1e-6)."""
    if not docs:
        return []
    counts = [(key, len(tokens), query.counts(tokens, single)) for key, tokens, single in docs]
    n_docs = len(docs)
    avgdl = sum(length for _, length, _ in counts) / n_docs or 1.0
    idf = []
    for t in range(len(query.terms)):
        having = sum(1 for _, _, c in counts if c[t])
        value = math.log((n_docs - having + 0.5) / (having + 0.5))
        idf.append(value if value > 0 else 1e-6)
    out = []
    for key, length, c in counts:
        if not any(c):
            continue
        score = 0.0
        for t, tf in enumerate(c):
            if tf:
                score += idf[t] * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / avgdl))
        out.append((key, score))
    return out


def snippet(text: str, query: Query, width: int = 240) -> str:
    """About ``width`` characters of ``text`` around its first match, whitespace collapsed."""
    wanted = query.words
    start = None
    for m in _WORD.finditer(text):
        if any(w in wanted for w in words(m.group())):
            start = m.start()
            break
    if start is None:
        start = 0
    lo = max(0, start - width // 3)
    hi = min(len(text), lo + width)
    lo = max(0, min(lo, hi - width))
    if lo > 0:  # begin on a word boundary, never past the match
        space = text.find(" ", lo, start)
        lo = space + 1 if space != -1 else lo
    if hi < len(text):  # and end on one
        space = text.rfind(" ", max(lo, hi - 20), hi)
        hi = space if space > start else hi
    piece = " ".join(text[lo:hi].split())
    return ("…" if lo > 0 else "") + piece + ("…" if hi < len(text) else "")


def to_hits(rows: Iterable[tuple[StoredEvent, float]], query: Query, limit: int) -> list[SearchHit]:
    """The best ``limit`` rows (score, then the most recent first) as hits."""
    ordered = sorted(rows, key=lambda r: (-r[1], -r[0].seq))[:limit]
    return [
        SearchHit(
            ev.seq,
            ev.kind,
            snippet(index_text(ev.event), query),
            handle_of(ev.event),
            round(score, 6),
        )
        for ev, score in ordered
    ]
