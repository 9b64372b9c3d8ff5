"""Memories across sessions: the value types, the Protocol every store's ``memories`` keeps,
and the in-process backend.

Why: what an agent learned (the deploy command, the user's time zone) should outlive
the session, and a correction must *replace* the old fact, not sit beside it and lose
to it in the ranking (mem0 #4536). So a memory may have a ``key``; remembering under an
existing key (in the same scope and owner) supersedes the current entry: the old one
is kept as history, marked ``superseded_by``, and is never returned as current.
``forget`` marks an entry forgotten and erases its text (a tombstone keeps the id).

Scopes are ``user``, ``project`` and ``agent``, each with an owner (``("user", "mia")``).
Every backend indexes the same normalized words (:mod:`.textsearch`: the text, the key's
words, the tags) — FTS5 on SQLite, a ``tsvector`` on PostgreSQL, BM25 here — so they
agree on which memories match; only scores differ. One contract suite checks all three
(``tests/test_store_contract.py``).

    mem = store.memories
    first = mem.remember(NewMemory("deploy with make ship", "project", "shop", key="deploy"))
    fixed = mem.remember(NewMemory("deploy with make release", "project", "shop", key="deploy"))
    mem.get(first.id).superseded_by == fixed.id
"""

from __future__ import annotations

import itertools
import json
import math
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Literal, Protocol, TypeGuard, runtime_checkable

from ctxline.errors import ValidationError
from ctxline.record.events import JsonValue
from ctxline.record.store.textsearch import parse_query, words

__all__ = [
    "AUTHORS",
    "MAX_MEMORY_CHARS",
    "SCOPES",
    "Author",
    "InMemoryMemories",
    "MemoryBackend",
    "MemoryEntry",
    "MemoryHit",
    "NewMemory",
    "Owner",
    "Scope",
    "check_new",
    "is_scope",
    "memories_of",
    "memory_words",
    "newest_sql",
    "unknown",
]

Scope = Literal["user", "project", "agent"]
Author = Literal["model", "app", "user"]
SCOPES: tuple[Scope, ...] = ("user", "project", "agent")
AUTHORS: tuple[Author, ...] = ("model", "app", "user")
Owner = tuple[Scope, str]
MAX_MEMORY_CHARS = 20_000
MAX_KEY_CHARS = 200
MAX_TAGS = 20


def is_scope(value: object) -> TypeGuard[Scope]:
    return value in SCOPES


@dataclass(frozen=True, slots=True)
class NewMemory:
    """A memory to remember (what ``remember`` is given)."""

    text: str
    scope: Scope
    owner: str
    key: str = ""
    tags: tuple[str, ...] = ()
    author: Author = "app"
    """``model`` when the model wrote it (the ``remember`` tool): such a memory is the
    model's own note, never an instruction."""
    session: str = ""
    meta: dict[str, JsonValue] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class MemoryEntry:
    """A stored memory: current, superseded (kept as history) or forgotten (text erased)."""

    id: str
    scope: Scope
    owner: str
    text: str
    key: str
    tags: tuple[str, ...]
    author: Author
    session: str
    created_at: datetime
    superseded_by: str = ""
    forgotten: bool = False
    meta: dict[str, JsonValue] = field(default_factory=dict)

    @property
    def current(self) -> bool:
        return not self.superseded_by and not self.forgotten

    def to_json(self) -> dict[str, JsonValue]:
        from ctxline.record.codec import format_at

        return {
            "id": self.id,
            "scope": self.scope,
            "owner": self.owner,
            "key": self.key,
            "text": self.text,
            "tags": list(self.tags),
            "author": self.author,
            "session": self.session,
            "created_at": format_at(self.created_at),
            "current": self.current,
            "superseded_by": self.superseded_by or None,
            "forgotten": self.forgotten,
        }


@dataclass(frozen=True, slots=True)
class MemoryHit:
    entry: MemoryEntry
    score: float


def _line(value: str, what: str, limit: int) -> str:
    if not isinstance(value, str):
        raise ValidationError(f"the memory's {what} must be text", field=what)
    if len(value) > limit:
        raise ValidationError(
            f"the memory's {what} is longer than {limit:,} characters", field=what
        )
    if any(ord(c) < 32 for c in value):
        raise ValidationError(
            f"the memory's {what} must be one line without control characters", field=what
        )
    _no_surrogate(value, what)
    return value


def _no_surrogate(value: str, what: str) -> None:
    """A lone surrogate cannot be stored as UTF-8 by any backend: refuse it by name."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValidationError(
            f"the memory's {what} has a lone surrogate (U+{ord(value[exc.start]):04X}) at"
            f" character {exc.start}: it is not valid Unicode text",
            field=what,
        ) from None


def check_new(new: NewMemory) -> NewMemory:
    """``new`` checked (ValidationError naming the field): non-empty text without NUL,
    a known scope and author, a one-line owner, key and tags."""
    if not isinstance(new.text, str) or not new.text.strip():
        raise ValidationError("the memory's text is empty", field="text")
    if len(new.text) > MAX_MEMORY_CHARS:
        raise ValidationError(
            f"the memory's text is longer than {MAX_MEMORY_CHARS:,} characters", field="text"
        )
    if "\x00" in new.text:
        raise ValidationError("the memory's text contains a NUL character", field="text")
    _no_surrogate(new.text, "text")
    if not is_scope(new.scope):
        raise ValidationError(
            f"scope must be one of {list(SCOPES)}, got {new.scope!r}", field="scope"
        )
    if new.author not in AUTHORS:
        raise ValidationError(
            f"author must be one of {list(AUTHORS)}, got {new.author!r}", field="author"
        )
    if not _line(new.owner, "owner", MAX_KEY_CHARS).strip():
        raise ValidationError(f"the {new.scope} scope needs an owner name", field="owner")
    _line(new.key, "key", MAX_KEY_CHARS)
    if len(new.tags) > MAX_TAGS:
        raise ValidationError(f"a memory takes at most {MAX_TAGS} tags", field="tags")
    tags = tuple(_line(t, "tag", 64).strip() for t in new.tags)
    return replace(new, key=new.key.strip(), tags=tuple(t for t in tags if t))


def memory_words(text: str, key: str, tags: Sequence[str]) -> list[str]:
    """What a memory is found by: the words of its text, its key and its tags."""
    return [
        *words(text),
        *words(key.replace("_", " ").replace("-", " ")),
        *(w for t in tags for w in words(t)),
    ]


@runtime_checkable
class MemoryBackend(Protocol):
    """What ``store.memories`` does on every backend (see the module docstring)."""

    def remember(self, new: NewMemory) -> MemoryEntry:
        """Store ``new``; with a key, the current entry of (scope, owner, key) is superseded
        in the same transaction."""
        ...

    def get(self, memory_id: str) -> MemoryEntry:
        """The entry (ValidationError naming the id when there is none)."""
        ...

    def by_key(self, scope: Scope, owner: str, key: str) -> MemoryEntry | None:
        """The current entry of a key, or None."""
        ...

    def search(self, query: str, owners: Sequence[Owner], *, limit: int = 10) -> list[MemoryHit]:
        """Entries of ``owners`` (current and superseded, never forgotten) holding any word
        or "phrase" of ``query``, best first; ValidationError for a query without words."""
        ...

    def entries(
        self, owners: Sequence[Owner] | None, *, include_superseded: bool = False, limit: int = 100
    ) -> list[MemoryEntry]:
        """The entries of ``owners`` (None: of every owner), newest first (forgotten ones never)."""
        ...

    def forget(self, memory_id: str) -> MemoryEntry:
        """Mark the entry forgotten and erase its text; returns the tombstone."""
        ...


def newest_sql(
    owners: Sequence[Owner], current: str, mark: str, limit: int
) -> tuple[str, list[object]]:
    """The ``n`` of the newest ``limit`` entries of each owner (``current``: the condition of
    a partial index on (scope, owner, n)), each owner read from that index and cut at
    ``limit``, so the work is bounded by what is returned, however many entries there are."""
    one = (
        f"SELECT n FROM (SELECT n FROM memories WHERE scope = {mark} AND owner = {mark}"
        f" AND {current} ORDER BY n DESC LIMIT {mark}) AS newest"
    )
    unique = list(dict.fromkeys(owners))
    params: list[object] = [v for o in unique for v in (*o, limit)]
    return " UNION ALL ".join(one for _ in unique), params


def memories_of(store: object) -> MemoryBackend:
    """``store.memories``, or a ValidationError saying the store keeps none."""
    backend = getattr(store, "memories", None)
    if not isinstance(backend, MemoryBackend):
        raise ValidationError(f"{type(store).__name__} keeps no memories", field="memory")
    return backend


def unknown(memory_id: str) -> ValidationError:
    shown = json.dumps(str(memory_id)[:80], ensure_ascii=True)
    return ValidationError(f"no memory with id {shown}", field="id")


class InMemoryMemories:
    """The memories of a :class:`~ctxline.record.store.MemoryStore` (this process only).

    Indexed like the SQL backends, so a call costs what it returns: per owner, the ids of
    its current and of its not forgotten entries in insertion order (the overview reads
    the newest few), an inverted index from each word to the entries holding it, and the
    counts BM25 needs (entries, words); a key maps to its current entry. Search scores
    the entries holding a query word exactly as :func:`~.textsearch.bm25_scores` over
    all of the owners' entries would (the others score nothing).
    """

    def __init__(self, clock: Callable[[], datetime], new_id: Callable[[], str]) -> None:
        self._clock, self._new_id = clock, new_id
        self._entries: dict[str, MemoryEntry] = {}
        self._n: dict[str, int] = {}  # insertion order
        self._words: dict[str, tuple[list[str], Counter[str]]] = {}
        self._current: dict[Owner, dict[str, None]] = {}
        self._live: dict[Owner, dict[str, None]] = {}
        self._postings: dict[Owner, dict[str, set[str]]] = {}
        self._lengths: dict[Owner, int] = {}
        self._keys: dict[tuple[Scope, str, str], str] = {}
        self._lock = threading.RLock()

    def remember(self, new: NewMemory) -> MemoryEntry:
        new = check_new(new)
        with self._lock:
            entry = MemoryEntry(
                "m-" + self._new_id(),
                new.scope,
                new.owner,
                new.text,
                new.key,
                new.tags,
                new.author,
                new.session,
                self._clock(),
                meta=dict(new.meta),
            )
            owner: Owner = (new.scope, new.owner)
            old = self.by_key(new.scope, new.owner, new.key) if new.key else None
            if old is not None:
                self._entries[old.id] = replace(old, superseded_by=entry.id)
                self._current[owner].pop(old.id, None)
            self._entries[entry.id] = entry
            self._n[entry.id] = len(self._n)
            found = memory_words(new.text, new.key, new.tags)
            self._words[entry.id] = (found, Counter(found))
            self._current.setdefault(owner, {})[entry.id] = None
            self._live.setdefault(owner, {})[entry.id] = None
            postings = self._postings.setdefault(owner, {})
            for word in set(found):
                postings.setdefault(word, set()).add(entry.id)
            self._lengths[owner] = self._lengths.get(owner, 0) + len(found)
            if new.key:
                self._keys[(new.scope, new.owner, new.key)] = entry.id
            return entry

    def get(self, memory_id: str) -> MemoryEntry:
        entry = self._entries.get(memory_id)
        if entry is None:
            raise unknown(memory_id)
        return entry

    def by_key(self, scope: Scope, owner: str, key: str) -> MemoryEntry | None:
        with self._lock:
            if not key:  # no index for entries without a key: the first current one
                return next(
                    (
                        self._entries[i]
                        for i in self._current.get((scope, owner), {})
                        if not self._entries[i].key
                    ),
                    None,
                )
            found = self._keys.get((scope, owner, key))
            return self._entries[found] if found is not None else None

    def search(self, query: str, owners: Sequence[Owner], *, limit: int = 10) -> list[MemoryHit]:
        parsed = parse_query(query)
        wanted = set(owners)
        with self._lock:
            n_docs = sum(len(self._live.get(o, ())) for o in wanted)
            if not n_docs:
                return []
            avgdl = sum(self._lengths.get(o, 0) for o in wanted) / n_docs or 1.0
            candidates: set[str] = set()
            for o in wanted:
                postings = self._postings.get(o, {})
                for word in parsed.words:
                    candidates |= postings.get(word, set())
            counts = [
                (self._n[i], i, len(self._words[i][0]), parsed.counts(*self._words[i]))
                for i in candidates
            ]
        idf = []
        for t in range(len(parsed.terms)):  # as bm25_scores computes it, over all n_docs
            having = sum(1 for *_, c in counts if c[t])
            value = math.log((n_docs - having + 0.5) / (having + 0.5))
            idf.append(value if value > 0 else 1e-6)
        k1, b = 1.2, 0.75
        scored = []
        for n, ident, length, c in counts:
            if not any(c):
                continue
            score = 0.0
            for t, tf in enumerate(c):
                if tf:
                    score += idf[t] * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / avgdl))
            scored.append((n, ident, score))
        scored.sort(key=lambda s: (-s[2], -s[0]))
        return [MemoryHit(self._entries[i], round(score, 6)) for _, i, score in scored[:limit]]

    def entries(
        self, owners: Sequence[Owner] | None, *, include_superseded: bool = False, limit: int = 100
    ) -> list[MemoryEntry]:
        limit = max(0, int(limit))
        index = self._live if include_superseded else self._current
        with self._lock:
            newest: list[tuple[int, str]] = []
            for o in list(index) if owners is None else dict.fromkeys(owners):
                ids = index.get(o, {})
                newest += [(self._n[i], i) for i in itertools.islice(reversed(ids), limit)]
            newest.sort(reverse=True)
            return [self._entries[i] for _, i in newest[:limit]]

    def forget(self, memory_id: str) -> MemoryEntry:
        with self._lock:
            entry = self.get(memory_id)
            tomb = replace(entry, text="", tags=(), forgotten=True)
            self._entries[memory_id] = tomb
            owner: Owner = (entry.scope, entry.owner)
            if memory_id in self._live.get(owner, {}):
                found = self._words[memory_id][0]
                del self._live[owner][memory_id]
                self._current[owner].pop(memory_id, None)
                self._lengths[owner] -= len(found)
                for word in set(found):
                    self._postings[owner][word].discard(memory_id)
            if self._keys.get((entry.scope, entry.owner, entry.key)) == memory_id:
                del self._keys[(entry.scope, entry.owner, entry.key)]
            self._words[memory_id] = ([], Counter())
            return tomb
