"""The import-linter contracts in pyproject.toml cover every package of ctxline.

`lint-imports` (CI) checks the imports against the contracts; these tests check the
contracts against the source tree, so a new subpackage or top-level module without a layer
fails here too, with its name, and a contract can not silently name a module that is gone.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "src" / "ctxline"


def contracts() -> list[dict[str, Any]]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    found: list[dict[str, Any]] = data["tool"]["importlinter"]["contracts"]
    return found


def layers_contract() -> dict[str, Any]:
    (only,) = [c for c in contracts() if c["type"] == "layers"]
    return only


def layer_names(layer: str) -> list[str]:
    return [part.strip() for part in re.split(r"[|:]", layer)]


def children() -> set[str]:
    """The modules directly under ctxline: packages (with ``__init__.py``) and ``*.py``."""
    packages = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    modules = {p.stem for p in PACKAGE.glob("*.py") if p.name != "__init__.py"}
    return packages | modules


def test_every_subpackage_and_module_of_ctxline_has_exactly_one_layer() -> None:
    contract = layers_contract()
    assert contract["containers"] == ["ctxline"]
    assert contract["exhaustive"] is True  # lint-imports itself refuses an unlisted module
    named = [name for layer in contract["layers"] for name in layer_names(layer)]
    assert len(named) == len(set(named)), f"a module is in two layers: {sorted(named)}"
    assert set(named) == children(), (
        f"without a layer: {sorted(children() - set(named))}; "
        f"a layer for no module: {sorted(set(named) - children())}"
    )
    # the real tree, not an empty glob: the packages the docs describe are there
    assert {"record", "view", "sources", "runner", "cli", "web"} <= children()


def test_the_record_is_below_everything_that_reads_it_and_the_cli_is_on_top() -> None:
    order = {
        name: depth
        for depth, layer in enumerate(layers_contract()["layers"])
        for name in layer_names(layer)
    }
    assert order["cli"] == 0
    for above in ("view", "sources", "tools", "context", "runner", "web", "importers"):
        assert order[above] < order["record"], above
    assert order["context"] < order["view"] < order["sources"]
    assert order["runner"] < order["context"]


def test_the_exceptions_to_the_layers_are_few_and_each_says_why() -> None:
    contract = layers_contract()
    ignored = contract.get("ignore_imports", [])
    assert ignored == ["ctxline.record.store.** -> ctxline.tokens.counters"]
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    before = text[: text.index(ignored[0])]
    assert "event_text" in before[-600:]  # the comment above the exception names its reason


def test_the_forbidden_contracts_stay_and_name_real_modules() -> None:
    forbidden = [c for c in contracts() if c["type"] == "forbidden"]
    assert len(forbidden) == 3
    for contract in forbidden:
        for module in contract["source_modules"] + contract["forbidden_modules"]:
            path = PACKAGE.joinpath(*module.split(".")[1:])
            assert path.is_dir() or path.with_suffix(".py").is_file(), module


def test_docs_architecture_shows_the_layers_of_the_contract() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text[text.index("## Layers") : text.index("\n## ", text.index("## Layers"))]
    shown = section.split("```text\n", 1)[1].split("```", 1)[0].strip().splitlines()
    assert shown == layers_contract()["layers"]
    code_map = section.split("```\nsrc/ctxline/\n", 1)[1].split("```", 1)[0]
    for name in children():  # and the map of the code above it names every module
        assert re.search(rf"(^|\s){re.escape(name)}(/|\.py)", code_map, re.M), name
