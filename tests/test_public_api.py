"""The public API is what ``ctxline.__all__`` says, and every name in it is there, documented."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import ctxline

# modules that need an optional SDK at import time (their extra is part of [dev])
_OPTIONAL = {
    "ctxline.record.store.postgres",
    "ctxline.record.store.pg_migrations",
    "ctxline.record.store.pg_memory",
}


def _modules() -> list[str]:
    return sorted(
        info.name
        for info in pkgutil.walk_packages(ctxline.__path__, "ctxline.")
        if not info.name.endswith("__main__")
    )


def test_every_public_name_exists_and_none_is_private() -> None:
    names = ctxline.__all__
    assert len(names) == len(set(names))
    for name in names:
        assert hasattr(ctxline, name), name
        assert not name.startswith("_") or name == "__version__"


def test_every_public_name_is_importable_from_the_package_and_documented() -> None:
    undocumented = []
    for name in ctxline.__all__:
        value = getattr(ctxline, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            if not (inspect.getdoc(value) or "").strip():
                undocumented.append(name)
            if value.__module__.startswith("ctxline"):
                assert name in ctxline.__all__
    assert undocumented == []


def test_the_main_entry_points_are_public() -> None:
    for name in ("Context", "prepare", "PrepareOptions", "open_store", "load", "import_sessions"):
        assert name in ctxline.__all__


def test_every_module_has_an_all_list_of_real_names_and_a_docstring() -> None:
    modules = _modules()
    assert len(modules) > 60  # the walk found the package (a broken walk would pass vacuously)
    for module_name in modules:
        module = importlib.import_module(module_name)
        assert (module.__doc__ or "").strip(), f"{module_name} has no docstring"
        exported = getattr(module, "__all__", None)
        if module_name.endswith(".__init__") or exported is None:
            assert module_name.count(".") >= 1, module_name
            assert hasattr(module, "__path__") or exported is not None, module_name
            continue
        for name in exported:
            assert hasattr(module, name), f"{module_name}.{name}"


def test_optional_modules_are_real() -> None:
    for name in _OPTIONAL:
        assert name in _modules()
