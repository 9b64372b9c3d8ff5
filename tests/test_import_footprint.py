"""A process that opens a Context and prepares loads only what that needs.

Why (issue 25): at 50 MB, ``Context.prepare`` peaked at 3.09x the payload, the
interpreter and ctxline's modules being 29 MB of it. ``import ctxline`` now loads
discovery, the importers, memory, skills and the LLM summarizer when one of their names
is first used (YAML and difflib come with them), and the status bar, the tool errors and
the cost model import ``platform``, ``subprocess`` and ``fractions`` where they use them.
These tests run a fresh interpreter and look at ``sys.modules``, then use every lazy name.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import ctxline

SRC = str(Path(__file__).resolve().parents[1] / "src")
NOT_FOR_PREPARE = (
    "ctxline.discovery",
    "ctxline.importers",
    "ctxline.memory",
    "ctxline.skills",
    "ctxline.models.summarizer",
    "yaml",
    "difflib",
    "platform",
    "subprocess",
    "fractions",
    "decimal",
)

_PROBE = """
import json, sys
from datetime import UTC, datetime
from ctxline import Context, MemoryStore, PrepareOptions, UserMessage
ctx = Context(MemoryStore(), "s", options=PrepareOptions(context_window=32_000))
ctx.append(UserMessage("hello"))
prep = ctx.prepare(now=datetime(2026, 12, 8, tzinfo=UTC))
assert prep.body["messages"]
print(json.dumps(sorted(m for m in {names!r} if m in sys.modules)))
"""


def _loaded(names: tuple[str, ...]) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE.format(names=names)],
        capture_output=True,
        env={**os.environ, "PYTHONPATH": SRC},
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    loaded: list[str] = json.loads(done.stdout.decode().splitlines()[-1])
    return loaded


def test_a_context_that_prepares_loads_none_of_the_other_features() -> None:
    assert _loaded(NOT_FOR_PREPARE) == []


def test_the_probe_sees_a_module_a_context_does_load() -> None:
    """The same probe reports what is loaded (so the empty list above means something)."""
    assert _loaded(("ctxline.view.cache", "sqlite3", "tiktoken")) == [
        "ctxline.view.cache",
        "sqlite3",
        "tiktoken",
    ]


def test_every_lazy_name_is_the_object_its_module_defines() -> None:
    import importlib

    lazy: dict[str, str] = vars(ctxline)["_LAZY"]
    assert lazy, "names are loaded lazily"
    for name, module in lazy.items():
        assert name in ctxline.__all__, name
        assert getattr(ctxline, name) is getattr(importlib.import_module(module), name)
        assert name in dir(ctxline)


def test_an_unknown_name_is_an_attribute_error_naming_it() -> None:
    with pytest.raises(AttributeError, match="NoSuchThing"):
        getattr(ctxline, "NoSuchThing")  # noqa: B009
