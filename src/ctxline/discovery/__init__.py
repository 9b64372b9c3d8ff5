"""Tool discovery: large tool catalogs without paying for every schema on every request.

Core tools are always visible; the others sit in a :class:`Catalog` and the model finds
them with ``search_tools`` (BM25 over names, tags, groups, parameter names and
descriptions). Found tools are revealed from the next step, in ``native`` mode (their
schemas join the tools array: one cache break per reveal) or ``cache-stable`` mode (the
tools array never changes; schemas arrive in the search result and are called through
``call_tool``, checked against the revealed schema). See ``docs/discovery.md``.

    from ctxline.discovery import Discovery, load_catalog
    discovery = Discovery(load_catalog("benchmarks/data/mcp_catalog.json"))
    ctx = Context(store, "s", sources=[discovery])
"""

from ctxline.discovery.catalog import Catalog, CatalogEntry, CatalogHit, load_catalog
from ctxline.discovery.fold import CALL_TOOL, SEARCH_TOOLS, DiscoveryFold
from ctxline.discovery.source import DEFAULT_MODE, MODES, Discovery, Mode, Resolution
from ctxline.discovery.validate import problems

__all__ = [
    "CALL_TOOL",
    "DEFAULT_MODE",
    "MODES",
    "SEARCH_TOOLS",
    "Catalog",
    "CatalogEntry",
    "CatalogHit",
    "Discovery",
    "DiscoveryFold",
    "Mode",
    "Resolution",
    "load_catalog",
    "problems",
]
