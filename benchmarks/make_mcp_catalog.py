"""Write benchmarks/data/mcp_catalog.json: the tool definitions of real MCP servers.

Why: tool discovery must be measured on a real large catalog, not on invented tools.
This script starts each MCP server below — installed from PyPI into a throwaway virtual
environment, never copied from the web — over stdio with the official ``mcp`` SDK
client, calls ``tools/list`` (paging through ``nextCursor``), and writes what the
servers answered, with each package's name, version and license file (copied from
the installed distribution). Listing tools needs no network: servers that want an
account get dummy configuration (``JIRA_URL=https://example.invalid`` …).

    python3 -m venv /tmp/mcpcat
    /tmp/mcpcat/bin/pip install mcp mcp-server-git mcp-server-fetch mcp-server-time
    python3 -m venv /tmp/mcpatl && /tmp/mcpatl/bin/pip install mcp-atlassian==0.23.1
    /tmp/mcpcat/bin/python benchmarks/make_mcp_catalog.py --out benchmarks/data \\
        --python atlassian=/tmp/mcpatl/bin/python

mcp-atlassian gets an environment of its own: its pins and the reference servers' do
not resolve together (pip then picks an old mcp-atlassian that cannot start).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

__all__ = ["SERVERS", "Server", "list_server", "main"]


@dataclass(frozen=True)
class Server:
    name: str
    package: str
    module: list[str]
    """The command after the interpreter (``-m module`` or a console script's module)."""
    env: dict[str, str] = field(default_factory=dict)


ATLASSIAN_ENV = {
    "JIRA_URL": "https://example.invalid",
    "JIRA_USERNAME": "nobody@example.invalid",
    "JIRA_API_TOKEN": "dummy",
    "CONFLUENCE_URL": "https://example.invalid/wiki",
    "CONFLUENCE_USERNAME": "nobody@example.invalid",
    "CONFLUENCE_API_TOKEN": "dummy",
    "TOOLSETS": "all",
}

SERVERS = (
    Server("git", "mcp-server-git", ["-m", "mcp_server_git", "--repository", "{repo}"]),
    Server("fetch", "mcp-server-fetch", ["-m", "mcp_server_fetch"]),
    Server("time", "mcp-server-time", ["-m", "mcp_server_time", "--local-timezone", "UTC"]),
    Server(
        "atlassian",
        "mcp-atlassian",
        ["-c", 'import mcp_atlassian, sys; sys.argv[0] = "mcp-atlassian"; mcp_atlassian.main()'],
        ATLASSIAN_ENV,
    ),
)


async def list_server(command: str, args: list[str], env: dict[str, str]) -> list[dict[str, Any]]:
    """Every tool a stdio MCP server lists (``tools/list``, all pages), as JSON."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=command, args=args, env=env or None)
    tools: list[dict[str, Any]] = []
    with open(Path(tempfile.gettempdir()) / "mcp-catalog-stderr.log", "a") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            cursor: str | None = None
            while True:
                from mcp.types import PaginatedRequestParams

                page = await session.list_tools(
                    params=PaginatedRequestParams(cursor=cursor) if cursor else None
                )
                tools += [
                    t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in page.tools
                ]
                cursor = page.next_cursor
                if not cursor:
                    return tools


SAME_LICENSE = {"mcp-server-time": "mcp-server-git"}
"""Reference servers whose wheel ships no license file, and a sibling package that does."""

_DIST_INFO = """
import json, sys
from importlib import metadata
dist = metadata.distribution(sys.argv[1])
meta = dist.metadata
name = meta.get("License-Expression") or meta.get("License") or ""
for c in meta.get_all("Classifier") or []:
    if c.startswith("License ::") and not name:
        name = c.rsplit("::", 1)[-1].strip()
files = [f for f in dist.files or [] if f.name.upper().startswith(("LICENSE", "COPYING"))]
path = str(dist.locate_file(files[0])) if files else ""
print(json.dumps({"version": dist.version, "license": name, "file": path}))
"""


def dist_info(python: str, package: str) -> dict[str, str]:
    """Version, declared license and license file of ``package`` as ``python`` has it installed."""
    done = subprocess.run(
        [python, "-c", _DIST_INFO, package], check=True, capture_output=True, text=True
    )
    info: dict[str, str] = json.loads(done.stdout)
    return info


def _license_text(python: str, package: str) -> str:
    return Path(dist_info(python, package)["file"]).read_text(encoding="utf-8")


def _license(python: str, package: str, out: Path) -> tuple[str, str]:
    """(license name from the metadata, path of the copied license file, relative to out)."""
    info = dist_info(python, package)
    name = info["license"]
    target = out / "licenses" / f"{package}.txt"
    target.parent.mkdir(parents=True, exist_ok=True)
    if info["file"]:
        shutil.copyfile(info["file"], target)
        first = target.read_text(encoding="utf-8").strip().splitlines()[0].strip()
        if (not name or len(name) > 40) and first.endswith("License"):
            name = first.removesuffix(" License")  # "MIT License" -> MIT
    elif package in SAME_LICENSE and name:
        # the wheel declares its license but ships no text: its project's text applies
        source = SAME_LICENSE[package]
        text = _license_text(python, source)
        target.write_text(
            f"{package} declares 'License: {name}' in its metadata and ships no license file;\n"
            f"it is published from the same repository as {source}, whose license text"
            " (from its installed distribution) follows.\n\n" + text
        )
    else:
        raise SystemExit(f"{package}: no license file and no known license: not redistributable")
    return name.splitlines()[0][:80] if name else "see license file", str(target.relative_to(out))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "data")
    parser.add_argument(
        "--python",
        action="append",
        default=[],
        metavar="SERVER=PATH",
        help="run SERVER with another interpreter (a venv of its own, for conflicting pins)",
    )
    args = parser.parse_args(argv)
    pythons = dict(item.split("=", 1) for item in args.python)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="mcp-catalog-"))
    repo = work / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    servers = []
    for server in SERVERS:
        argv_ = [a.format(repo=repo) for a in server.module]
        python = pythons.get(server.name, sys.executable)
        tools = asyncio.run(list_server(python, argv_, server.env))
        license_name, license_file = _license(python, server.package, out)
        version = dist_info(python, server.package)["version"]
        servers.append(
            {
                "name": server.name,
                "package": server.package,
                "version": version,
                "license": license_name,
                "license_file": license_file,
                "tools": tools,
            }
        )
        print(f"{server.name}: {len(tools)} tools ({server.package} {version})")
    catalog = {
        "about": "tools/list of real MCP servers, written by benchmarks/make_mcp_catalog.py",
        "mcp": metadata.version("mcp"),
        "servers": servers,
    }
    (out / "mcp_catalog.json").write_text(json.dumps(catalog, indent=1, ensure_ascii=False) + "\n")
    print(f"{sum(len(s['tools']) for s in servers)} tools in {out / 'mcp_catalog.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
