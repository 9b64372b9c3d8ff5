"""``ctxline tools search QUERY --catalog FILE``: what ``search_tools`` finds in a catalog.

The catalog is a JSON file of tool definitions (``benchmarks/data/mcp_catalog.json``,
an MCP ``tools/list`` answer, or a list of tools); the hits are ranked as the model's
``search_tools`` ranks them (BM25 over names, tags, groups, parameter names and
descriptions).

    ctxline tools search "create a jira issue" --catalog benchmarks/data/mcp_catalog.json
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from ctxline.cli.common import one_line, one_line_errors
from ctxline.cli.options import harden
from ctxline.discovery.catalog import load_catalog
from ctxline.discovery.source import MAX_SEARCH
from ctxline.errors import ValidationError

__all__ = ["tools_group"]


@click.group("tools")
def tools_group() -> None:
    """Tool catalogs: search them as the model's search_tools does."""


@tools_group.command("search")
@click.argument("query")
@click.option(
    "--catalog",
    "catalog_path",
    required=True,
    type=click.Path(path_type=Path),
    help="A JSON file of tool definitions.",
)
@click.option("--limit", default=5, show_default=True, type=int, help=f"Hits, 1 to {MAX_SEARCH}.")
@click.option("--json", "as_json", is_flag=True, help="Print the hits as JSON.")
def search_cmd(query: str, catalog_path: Path, limit: int, as_json: bool) -> None:
    """Search a tool catalog: the best matches, each with its one-line description."""
    with one_line_errors():
        if not 1 <= limit <= MAX_SEARCH:
            raise ValidationError(f"--limit must be 1 to {MAX_SEARCH}, got {limit}", field="limit")
        catalog = load_catalog(catalog_path)
        hits = catalog.search(query, limit)
    if as_json:
        rows = [
            {
                "name": h.name,
                "score": h.score,
                "group": h.entry.group,
                "summary": h.entry.summary(),
                "parameters": h.entry.spec.parameters,
            }
            for h in hits
        ]
        click.echo(json.dumps(rows, ensure_ascii=False))
        return
    if not hits:
        click.echo(f"No tools in {catalog_path} ({len(catalog)} tools) match {one_line(query)!r}.")
        return
    for h in hits:
        click.echo(
            f"{h.name}  [{one_line(h.entry.group)}]  {h.score:.3f}  {one_line(h.entry.summary())}"
        )


# hardened where defined, as the ctxline group would: imported directly, it refuses the same
harden(tools_group)
