"""``search_history``: the built-in tool that searches the session's own record.

Why: once a long session is trimmed or compacted, the detail the model needs (an
error message, a file path, what the user said at step 12) is no longer in the
view, but it is still in the record. This tool finds it there, on any backend
(SQLite FTS5 with BM25, PostgreSQL full text with ``ts_rank``, or the memory store),
among the events the current timeline sees, and tells the model where each hit is:
its seq, kind, a snippet and, for a long tool output saved whole, the ``sha256:``
handle that ``read_result`` reads back page by page. Snippets are record text, so
they are escaped like any tool output: a forged ``<ctx-…>`` tag in an old result
stays inert.

    text = search_history(store, "demo", "IntegrityError duplicate key")
    # 1 result for "IntegrityError duplicate key" (best first):
    # - seq 3 · tool.result · handle sha256:9f…
    #   FAILED test_up: IntegrityError: duplicate key …
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from ctxline.errors import CtxlineError
from ctxline.record.events import JsonValue
from ctxline.record.store import MAIN, Store
from ctxline.record.store.base import SearchHit
from ctxline.record.store.textsearch import MAX_LIMIT
from ctxline.render.neutral import ToolSpec
from ctxline.tags import escape

__all__ = [
    "DEFAULT_LIMIT",
    "SEARCH_HISTORY",
    "answer_search",
    "call_search_history",
    "render_hits",
    "search_history",
]

DEFAULT_LIMIT = 10

SEARCH_HISTORY = ToolSpec(
    name="search_history",
    description=(
        "Search everything that happened earlier in this session, including what is no longer"
        " shown in the conversation: user and assistant messages, tool calls and tool outputs,"
        ' state and rules. Give words or "quoted phrases"; events holding any of them are'
        " returned best first, each with its seq, kind and a snippet. A long tool output also"
        " has a handle: pass it to read_result to read the whole output."
    ),
    parameters={
        "type": "object",
        "properties": {
            "query": {
                "type": "string",
                "description": 'Words or "quoted phrases" to look for, e.g. "IntegrityError" migration.',
                "minLength": 1,
            },
            "limit": {
                "type": "integer",
                "description": f"How many results at most (default {DEFAULT_LIMIT}).",
                "minimum": 1,
                "maximum": MAX_LIMIT,
            },
        },
        "required": ["query"],
        "additionalProperties": False,
    },
)


def render_hits(query: str, hits: list[SearchHit]) -> str:
    """What the model reads: one entry per hit, best first; record text escaped."""
    shown = escape(" ".join(query.split()))
    if not hits:
        return f'No results for "{shown}" in this session\'s history.'
    noun = "result" if len(hits) == 1 else "results"
    lines = [f'{len(hits)} {noun} for "{shown}" (best first):']
    for hit in hits:
        head = f"- seq {hit.seq} · {hit.kind}"
        if hit.handle:
            head += f" · handle {hit.handle} (read_result reads it whole)"
        lines.append(head)
        lines.append(f"  {escape(hit.snippet)}")
    return "\n".join(lines)


def search_history(
    store: Store, session: str, query: str, timeline: str = MAIN, limit: int = DEFAULT_LIMIT
) -> str:
    """Search ``session``'s timeline and render the hits for the model.

    Raises :class:`~ctxline.errors.ValidationError` for a query without words or a bad
    limit; :func:`call_search_history` turns that into an error result instead.
    """
    return render_hits(query, store.search(session, query, timeline=timeline, limit=limit))


def call_search_history(
    store: Store, session: str, arguments: Mapping[str, JsonValue], *, timeline: str = MAIN
) -> tuple[str, bool]:
    """Run a model's ``search_history`` call on ``session``'s timeline (see :func:`answer_search`)."""
    return answer_search(
        arguments, lambda query, limit: store.search(session, query, timeline=timeline, limit=limit)
    )


def answer_search(
    arguments: Mapping[str, JsonValue], search: Callable[[str, int], Sequence[SearchHit]]
) -> tuple[str, bool]:
    """Run a model's ``search_history`` call: ``(text for the tool result, is_error)``.

    The arguments come from the model, so a missing query or a bad limit is an error
    result that says what is expected, never an exception.
    """
    query = arguments.get("query")
    limit = arguments.get("limit", DEFAULT_LIMIT)
    if isinstance(limit, str) and limit.strip().isdigit():
        limit = int(limit.strip())
    if isinstance(limit, float) and limit.is_integer():
        limit = int(limit)
    if not isinstance(query, str) or not query.strip():
        return '[search_history needs a query: words or "quoted phrases" to look for.]', True
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        return f"[search_history: limit must be a whole number from 1 to {MAX_LIMIT}.]", True
    try:
        return render_hits(query, list(search(query, limit))), False
    except CtxlineError as exc:
        return f"[search_history: {escape(str(exc))}]", True
