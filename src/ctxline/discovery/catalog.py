"""The catalog of discoverable tools, and BM25 search over it.

Why: an agent with 100+ tools pays for every schema on every request (claude-code
#11364: 67k tokens of schemas). Here those tools sit in a :class:`Catalog`; the model
finds them with ``search_tools`` — BM25 over each tool's name (``get_issue`` and
``getIssue`` both give ``get issue``), its tags and group, its parameter names and its
description, the same normalization as the record's search (:mod:`ctxline.record.store.
textsearch`) — and only what it found is revealed.

A catalog is built from tool specs, typed functions (anything with ``spec`` and ``meta``,
like the runner's :class:`~ctxline.runner.FunctionTool`), or a JSON file of MCP tool
definitions (:func:`load_catalog`). Everything in it is untrusted text: names must be
provider-safe (``[A-Za-z0-9_-]{1,64}``), so a name can never carry a tag or a newline;
descriptions and schemas are escaped (:func:`ctxline.tags.escape`) once, here.

    catalog = Catalog.of([ToolSpec("git_status", "Show the working tree status")])
    [hit.name for hit in catalog.search("working tree")]     # ['git_status']
"""

from __future__ import annotations

import difflib
import heapq
import json
import math
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ctxline.errors import ValidationError
from ctxline.record.events import JsonValue
from ctxline.record.jsonvalue import as_str
from ctxline.record.store.textsearch import Query, parse_query, words
from ctxline.render.neutral import ToolSpec, escape_json
from ctxline.tags import escape

__all__ = ["TOOL_NAME", "Catalog", "CatalogEntry", "CatalogHit", "load_catalog", "one_line"]

TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
"""What every provider accepts as a function name (and what cannot forge a line or tag)."""
NAME_WEIGHT = 3
"""Name words count this many times (a query word in the name matters most)."""
FIELD_WEIGHT = 2
"""Tags, group and parameter names."""
NAME_BONUS = 2.0
"""Added times the share of a tool's name words the query holds: a query that names a
tool (``create jira issue``) puts it before longer names that merely contain it."""
K1, B = 1.2, 0.75
"""BM25's parameters (those of :func:`~ctxline.record.store.textsearch.bm25_scores`)."""
MAX_CATALOG_BYTES = 50_000_000
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


def one_line(text: str, width: int = 160) -> str:
    """``text`` on one line (no newline can imitate a line of a list), clipped, escaped."""
    flat = " ".join(escape(text).split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def name_words(name: str) -> list[str]:
    """The words of a tool or parameter name: snake, kebab and camel case split."""
    return words(_CAMEL.sub(" ", name))


@dataclass(frozen=True, slots=True)
class CatalogEntry:
    """One discoverable tool: the schema the model sees once it is revealed."""

    spec: ToolSpec
    tags: tuple[str, ...] = ()
    group: str = ""
    server: str = ""
    """Where the definition came from (an MCP server's name), for people."""

    @property
    def name(self) -> str:
        return self.spec.name

    def summary(self) -> str:
        """The first sentence of the description, on one line (what a search lists)."""
        text = " ".join(self.spec.description.split())
        end = re.search(r"(?<=[.!?])\s", text)
        return one_line(text[: end.start()] if end else text)

    def schema_json(self) -> str:
        """The schema as one line of JSON (``name``, ``description``, ``parameters``)."""
        data = {
            "name": self.spec.name,
            "description": self.spec.description,
            "parameters": self.spec.parameters,
        }
        return json.dumps(data, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True, slots=True)
class CatalogHit:
    name: str
    score: float
    entry: CatalogEntry


def _clean_entry(
    name: object,
    description: object,
    parameters: object,
    tags: Sequence[str] = (),
    group: str = "",
    server: str = "",
    where: str = "tool",
) -> CatalogEntry:
    if not isinstance(name, str) or not TOOL_NAME.match(name):
        raise ValidationError(
            f"{where}: tool name {str(name)[:80]!r} must be 1-64 letters, digits, '_' or '-'",
            field="name",
        )
    if description is None:
        description = ""
    if not isinstance(description, str):
        raise ValidationError(f"{where}: the description must be text", field="description")
    if parameters is None:
        parameters = {"type": "object", "properties": {}}
    if not isinstance(parameters, dict):
        raise ValidationError(
            f"{where}: the input schema must be a JSON object", field="parameters"
        )
    clean_params = escape_json(parameters, escape)
    spec = ToolSpec(name, escape(description), clean_params)
    return CatalogEntry(spec, tuple(escape(t) for t in tags), escape(group), escape(server))


def _index(entry: CatalogEntry) -> list[str]:
    doc = name_words(entry.name) * NAME_WEIGHT
    for label in (*entry.tags, entry.group):
        doc += name_words(label) * FIELD_WEIGHT
    props = entry.spec.parameters.get("properties")
    if isinstance(props, dict):
        for pname in props:
            doc += name_words(str(pname)) * FIELD_WEIGHT
    return doc + words(entry.spec.description)


class _Index:
    """Postings of the catalog's words: which tools hold each word, how often, so a
    search visits only the tools its words occur in. The scores are those of
    :func:`ctxline.record.store.textsearch.bm25_scores` over every tool, to the bit:
    the same terms, in the same order, with the same float operations."""

    def __init__(self, entries: list[CatalogEntry]) -> None:
        self.entries = entries
        self.names = [e.name for e in entries]
        self.docs = [_index(e) for e in entries]
        self.lengths = [len(doc) for doc in self.docs]
        self.total = sum(self.lengths)
        self.postings: dict[str, dict[int, int]] = {}
        for i, doc in enumerate(self.docs):
            for word, tf in Counter(doc).items():
                self.postings.setdefault(word, {})[i] = tf
        self.name_parts = [frozenset(name_words(name)) for name in self.names]
        self.by_tag: dict[str, set[int]] = {}
        self.by_group: dict[str, set[int]] = {}
        for i, e in enumerate(entries):
            for tag in e.tags:
                self.by_tag.setdefault(tag, set()).add(i)
            self.by_group.setdefault(e.group, set()).add(i)
        self.norms = self._norms(self.total / len(entries) if entries else 0.0)
        self.shares: dict[str, list[tuple[int, float]]] = {}
        """A word's shares over the whole catalog, kept once a query asked for it."""

    @staticmethod
    def _norm(length: int, avgdl: float) -> float:
        return K1 * (1 - B + B * length / avgdl)

    def _norms(self, avgdl: float) -> list[float]:
        avgdl = avgdl or 1.0
        return [self._norm(n, avgdl) for n in self.lengths]

    def narrowed(self, tags: Sequence[str], group: str | None) -> set[int]:
        """The tools with any of ``tags`` (all when none) and in ``group`` (any when None)."""
        keep = set(range(len(self.names)))
        if tags:
            keep = set().union(*(self.by_tag.get(t, set()) for t in set(tags)))
        if group is not None:
            keep &= self.by_group.get(group, set())
        return keep

    def _counts(self, term: tuple[str, ...], keep: set[int] | None) -> dict[int, int]:
        """Tool → occurrences of ``term`` (a phrase: as consecutive words), among ``keep``."""
        if len(term) == 1:
            found = self.postings.get(term[0], {})
            return found if keep is None else {i: tf for i, tf in found.items() if i in keep}
        lists = [self.postings.get(w, {}) for w in term]
        shortest = min(lists, key=len)
        out = {}
        k = len(term)
        for i in shortest:
            if (keep is not None and i not in keep) or not all(i in p for p in lists):
                continue
            tokens = self.docs[i]
            n = 0
            for j in range(len(tokens) - k + 1):
                if tokens[j] == term[0] and tuple(tokens[j : j + k]) == term:
                    n += 1
            if n:
                out[i] = n
        return out

    def _shares(
        self, term: tuple[str, ...], keep: set[int] | None, n_docs: int, norms: list[float]
    ) -> list[tuple[int, float]]:
        """Each tool's share of the score for ``term`` (idf × saturated term frequency)."""
        counts = self._counts(term, keep)
        having = len(counts)
        value = math.log((n_docs - having + 0.5) / (having + 0.5))
        idf = value if value > 0 else 1e-6
        return [(i, idf * tf * (K1 + 1) / (tf + norms[i])) for i, tf in counts.items()]

    def scores(self, query: Query, keep: set[int] | None) -> dict[int, float]:
        """BM25 plus the name bonus of every tool (among ``keep``) a term occurs in."""
        n_docs = len(self.names) if keep is None else len(keep)
        if not n_docs:
            return {}
        if keep is None:
            norms = self.norms
        else:
            avgdl = sum(self.lengths[i] for i in keep) / n_docs or 1.0
            norms = [0.0] * len(self.names)
            for i in keep:
                norms[i] = self._norm(self.lengths[i], avgdl)
        out: dict[int, float] = {}
        for term in query.terms:
            shares = self.shares.get(term[0]) if keep is None and len(term) == 1 else None
            if shares is None:
                shares = self._shares(term, keep, n_docs, norms)
                if keep is None and len(term) == 1 and shares:  # the same for every query
                    self.shares[term[0]] = shares
            for i, share in shares:
                out[i] = out.get(i, 0.0) + share
        wanted = query.words
        for i, score in out.items():
            parts = self.name_parts[i]
            coverage = len(parts & wanted) / len(parts) if parts else 0.0
            out[i] = score + NAME_BONUS * coverage
        return out


class Catalog:
    """Discoverable tools, unique by name, searchable (see the module docstring)."""

    def __init__(self, entries: Iterable[CatalogEntry]) -> None:
        self._entries: dict[str, CatalogEntry] = {}
        for entry in entries:
            other = self._entries.get(entry.name)
            if other is not None:
                raise ValidationError(
                    f"two catalog tools are named {entry.name!r}"
                    f" (from {other.server or 'the app'} and {entry.server or 'the app'})",
                    field="name",
                )
            self._entries[entry.name] = entry
        self._index = _Index(list(self._entries.values()))

    @classmethod
    def of(cls, tools: Iterable[Any]) -> Catalog:
        """A catalog of :class:`CatalogEntry`, :class:`ToolSpec`, or objects with a ``spec``
        (and optionally a ``meta`` with ``tags`` and ``group``: the runner's tools)."""
        entries = []
        for tool in tools:
            if isinstance(tool, CatalogEntry):
                entries.append(tool)
                continue
            spec = tool if isinstance(tool, ToolSpec) else getattr(tool, "spec", None)
            if not isinstance(spec, ToolSpec):
                raise ValidationError(
                    f"a catalog takes tool specs or tools, got {type(tool).__name__}", field="tools"
                )
            meta = getattr(tool, "meta", None)
            tags = tuple(getattr(meta, "tags", ()) or ())
            group = str(getattr(meta, "group", "") or "")
            entries.append(_clean_entry(spec.name, spec.description, spec.parameters, tags, group))
        return cls(entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[CatalogEntry]:
        return iter(self._entries.values())

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._entries)

    def get(self, name: str) -> CatalogEntry | None:
        return self._entries.get(name)

    def search(
        self, query: str, limit: int = 5, *, tags: Sequence[str] = (), group: str | None = None
    ) -> list[CatalogHit]:
        """The tools matching any word of ``query``, best first (BM25; ties by name).

        ValidationError for a query without words. ``tags``/``group`` narrow the search
        to tools with any of the tags / in the group. The cost is that of the tools the
        query's words occur in (an inverted index), not of the catalog.
        """
        parsed = parse_query(query)
        index = self._index
        keep = None
        if tags or group is not None:
            keep = index.narrowed(tags, group)
        scored = index.scores(parsed, keep)
        best = heapq.nsmallest(limit, scored.items(), key=lambda s: (-s[1], index.names[s[0]]))
        entries = index.entries
        return [CatalogHit(index.names[i], round(score, 6), entries[i]) for i, score in best]

    def nearest(self, name: str, k: int = 3) -> list[str]:
        """The catalog names closest to ``name`` (spelling first, then shared words)."""
        wanted = str(name)[:200]
        lowered = {n.lower(): n for n in self._entries}
        close = difflib.get_close_matches(wanted.lower(), list(lowered), n=k, cutoff=0.6)
        out = [lowered[c] for c in close]
        query = " ".join(name_words(wanted))
        if query and len(out) < k:
            for hit in self.search(query, k):
                if hit.name not in out:
                    out.append(hit.name)
        return out[:k]


def _entries_of(data: JsonValue | Mapping[str, JsonValue], where: str) -> Iterator[CatalogEntry]:
    """The entries of a catalog document (see :func:`load_catalog`)."""
    if isinstance(data, dict) and "servers" in data:
        servers = data["servers"]
        if not isinstance(servers, list):
            raise ValidationError(f"{where}: 'servers' must be a list", field="servers")
        for i, server in enumerate(servers):
            at = f"{where}: servers[{i}]"
            if not isinstance(server, dict):
                raise ValidationError(f"{at} must be an object", field="servers")
            name = server.get("name")
            if not isinstance(name, str) or not name:
                raise ValidationError(f"{at}.name must be a non-empty string", field="name")
            tools = server.get("tools")
            if not isinstance(tools, list):
                raise ValidationError(f"{at}.tools must be a list", field="tools")
            yield from _tools_of(tools, f"{at}.tools", name)
        return
    if isinstance(data, dict) and "tools" in data:
        data = data["tools"]
    if not isinstance(data, list):
        raise ValidationError(
            f"{where}: expected a list of tools, {{'tools': [...]}} or {{'servers': [...]}}",
            field="tools",
        )
    yield from _tools_of(data, where, "")


def _tools_of(tools: list[JsonValue], where: str, server: str) -> Iterator[CatalogEntry]:
    for j, tool in enumerate(tools):
        at = f"{where}[{j}]"
        if not isinstance(tool, dict):
            raise ValidationError(f"{at} must be an object", field="tools")
        params = tool.get("inputSchema", tool.get("parameters"))
        tags = tool.get("tags") or ([server] if server else [])
        if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
            raise ValidationError(f"{at}.tags must be a list of strings", field="tags")
        tag_names = [as_str(t) for t in tags]
        group = tool.get("group", server) or ""
        if not isinstance(group, str):
            raise ValidationError(f"{at}.group must be a string", field="group")
        yield _clean_entry(
            tool.get("name"), tool.get("description"), params, tag_names, group, server, at
        )


def load_catalog(source: str | Path | Mapping[str, JsonValue] | list[JsonValue]) -> Catalog:
    """A catalog from a JSON file (or its parsed content) of tool definitions.

    Three shapes: ``{"servers": [{"name", "tools": [...]}, ...]}`` (what
    ``benchmarks/make_mcp_catalog.py`` writes; each tool's group and tag is its
    server), an MCP ``tools/list`` result ``{"tools": [...]}``, or a plain list. A tool
    is ``{"name", "description", "inputSchema"}`` (MCP) or ``"parameters"`` (OpenAI).
    Errors name the file and the entry.
    """
    if isinstance(source, str | Path):
        path = Path(source)
        where = str(path)
        try:
            if path.stat().st_size > MAX_CATALOG_BYTES:
                raise ValidationError(
                    f"{where}: larger than {MAX_CATALOG_BYTES:,} bytes", field="catalog"
                )
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ValidationError(f"no such catalog file: {where}", field="catalog") from None
        except IsADirectoryError:
            raise ValidationError(
                f"{where} is a folder, not a catalog file", field="catalog"
            ) from None
        except UnicodeDecodeError as exc:
            raise ValidationError(
                f"{where}: not UTF-8 text ({exc.reason})", field="catalog"
            ) from None
        try:
            data: JsonValue | Mapping[str, JsonValue] = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValidationError(
                f"{where}: invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}",
                field="catalog",
            ) from None
        except RecursionError:
            raise ValidationError(f"{where}: JSON nested too deep", field="catalog") from None
    else:
        where, data = "catalog", source
    return Catalog(_entries_of(data, where))
