"""``read_result``: the built-in tool that reads an offloaded tool output back, page by page.

A long tool result is saved whole as a content-addressed blob and the view shows a
preview with its handle (DESIGN §8). The model then asks for the saved text with
``read_result(handle, page)``. This never re-runs the tool: it returns the bytes that
were saved, verified against their hash, so a missing or damaged blob gives an
explicit "material unavailable" instead of wrong text.

Pages split the decoded UTF-8 text on character boundaries, deterministically: a page
holds at most ``page_chars`` characters and ends just after a line break when one
falls within its last 10 %. Joined, the pages are the original text exactly, and
its UTF-8 encoding is the blob, byte for byte.

    page = read_result(store.blobs, "sha256:…", page=2)
    if page.available and not page.message:
        print(render_page(page))  # "[page 2 of 109, handle sha256:…]\\n…"
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ctxline.errors import BlobError
from ctxline.record.blobs import BlobStore, parse_ref
from ctxline.record.events import JsonValue
from ctxline.render.neutral import ToolSpec
from ctxline.tags import escape

__all__ = [
    "PAGE_CHARS",
    "READ_RESULT",
    "ResultPage",
    "call_read_result",
    "page_bounds",
    "read_result",
    "render_page",
]

PAGE_CHARS = 8_000
"""Characters per page by default (about 2,000 tokens of English or code)."""

UNAVAILABLE = "material unavailable"

READ_RESULT = ToolSpec(
    name="read_result",
    description=(
        "Read a saved tool output that the conversation shows only as a preview. Give the"
        " handle from the preview (sha256:…) and a page number starting at 1. It returns the"
        " saved text exactly as the tool produced it; it does not run the tool again."
    ),
    parameters={
        "type": "object",
        "properties": {
            "handle": {
                "type": "string",
                "description": "The handle shown in the preview, sha256:<64 hex digits>.",
                "pattern": "^sha256:[0-9a-f]{64}$",
            },
            "page": {
                "type": "integer",
                "minimum": 1,
                "default": 1,
                "description": "Which page to read, from 1.",
            },
        },
        "required": ["handle"],
        "additionalProperties": False,
    },
)
"""The tool schema to offer the model alongside offloaded previews."""


@dataclass(frozen=True, slots=True)
class ResultPage:
    """One page of a saved result, or why it cannot be shown.

    ``available`` is False when the blob is missing, damaged or the handle malformed
    (``text`` is then empty and ``message`` says why). A page number out of range keeps
    ``available`` True, with empty ``text`` and a ``message`` naming the page count.
    """

    handle: str
    page: int
    pages: int
    text: str
    available: bool
    message: str = ""

    @property
    def ok(self) -> bool:
        """True when ``text`` is the requested page."""
        return self.available and not self.message


def page_bounds(text: str, page_chars: int = PAGE_CHARS) -> list[tuple[int, int]]:
    """The ``(start, end)`` character ranges of the pages of ``text`` (one empty page for "").

    Every page but the last ends just after the last line break in its final 10 %
    (at least one character) when there is one, and at ``page_chars`` otherwise.
    """
    if page_chars < 1:
        raise ValueError(f"page_chars must be at least 1, got {page_chars}")
    window = max(1, page_chars // 10)
    bounds: list[tuple[int, int]] = []
    start, size = 0, len(text)
    while True:
        end = start + page_chars
        if end >= size:
            bounds.append((start, size))
            return bounds
        cut = text.rfind("\n", end - window, end)
        if cut >= 0:
            end = cut + 1
        bounds.append((start, end))
        start = end


def _unavailable(handle: str, page: int, why: str) -> ResultPage:
    return ResultPage(handle, page, 0, "", False, f"{UNAVAILABLE}: {why}")


def read_result(
    blobs: BlobStore, handle: str, page: int = 1, *, page_chars: int = PAGE_CHARS
) -> ResultPage:
    """Page ``page`` (from 1) of the saved text behind ``handle``; never re-runs anything.

    A malformed handle, a missing blob, a blob whose bytes no longer match their hash,
    or bytes that are not UTF-8 text give ``available=False`` and a "material
    unavailable: …" message — never other bytes.
    """
    handle = handle.strip()
    try:
        parse_ref(handle)
        data = blobs.get(handle)
    except BlobError as exc:
        return _unavailable(handle, page, str(exc))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return _unavailable(
            handle, page, f"blob {handle} is not UTF-8 text ({exc.reason} at byte {exc.start})"
        )
    bounds = page_bounds(text, page_chars)
    pages = len(bounds)
    if not 1 <= page <= pages:
        return ResultPage(
            handle,
            page,
            pages,
            "",
            True,
            f"page {page} does not exist: result {handle} has {pages} page"
            f"{'s' if pages != 1 else ''} (1–{pages})",
        )
    start, end = bounds[page - 1]
    return ResultPage(handle, page, pages, text[start:end], True)


def render_page(page: ResultPage) -> str:
    """What the model reads: a header, then the page text escaped like any tool output."""
    if not page.available:
        return f"[{page.message}. The saved output cannot be shown; do not guess its content.]"
    if page.message:
        return f"[{page.message}. Ask for a page from 1 to {page.pages}.]"
    header = f"[page {page.page} of {page.pages}, handle {page.handle}]"
    body = escape(page.text)
    if page.page < page.pages:
        nxt = f'[continues on page {page.page + 1}: read_result(handle="{page.handle}", page={page.page + 1})]'
        return f"{header}\n{body}\n{nxt}"
    return f"{header}\n{body}"


def call_read_result(
    blobs: BlobStore, arguments: Mapping[str, JsonValue], *, page_chars: int = PAGE_CHARS
) -> tuple[str, bool]:
    """Run a model's ``read_result`` call: ``(text for the tool result, is_error)``.

    Arguments come from the model, so they are checked here: a missing handle or a
    page that is not a whole number ≥ 1 is an error result, not an exception.
    """
    handle = arguments.get("handle")
    raw_page = arguments.get("page", 1)
    if not isinstance(handle, str) or not handle.strip():
        return "[read_result needs a handle: the sha256:… string shown in the preview.]", True
    if isinstance(raw_page, str) and raw_page.strip().isdigit():
        raw_page = int(raw_page.strip())
    if isinstance(raw_page, float) and raw_page.is_integer():
        raw_page = int(raw_page)
    if isinstance(raw_page, bool) or not isinstance(raw_page, int) or raw_page < 1:
        return f"[read_result: page must be a whole number from 1, got {raw_page!r}.]", True
    page = read_result(blobs, handle, raw_page, page_chars=page_chars)
    return render_page(page), not page.ok
