"""The public API is what ``ctxline.__all__`` says, and every name in it is there."""

from __future__ import annotations

import importlib

import ctxline


def test_every_public_name_exists_and_none_is_private() -> None:
    names = ctxline.__all__
    assert len(names) == len(set(names))
    for name in names:
        assert hasattr(ctxline, name), name
        assert not name.startswith("_") or name == "__version__"


def test_the_main_entry_points_are_public() -> None:
    for name in ("Context", "prepare", "PrepareOptions", "open_store", "load", "import_sessions"):
        assert name in ctxline.__all__


def test_module_all_lists_are_importable() -> None:
    modules = [
        "ctxline.record.events",
        "ctxline.record.store",
        "ctxline.context",
        "ctxline.view.prepare",
        "ctxline.render",
        "ctxline.tokens.counters",
        "ctxline.tags",
        "ctxline.sources.guide",
        "ctxline.sources.blocks",
        "ctxline.view.ladder",
        "ctxline.view.compaction",
        "ctxline.replay",
        "ctxline.tools.read_result",
        "ctxline.tools.search_history",
        "ctxline.sources.status",
        "ctxline.sources.timectx",
        "ctxline.sources.todo",
        "ctxline.sources.tail",
        "ctxline.models",
        "ctxline.eval",
    ]
    for module_name in modules:
        module = importlib.import_module(module_name)
        exported = getattr(module, "__all__", None)
        assert exported, module_name
        for name in exported:
            assert hasattr(module, name), f"{module_name}.{name}"
