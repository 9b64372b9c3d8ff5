"""The public API is what ``ctxline.__all__`` says, and every name in it is there, documented."""

from __future__ import annotations

import dataclasses
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


def _documented(value: object) -> bool:
    """Its own docstring: not empty, and not the signature ``@dataclass`` writes for it."""
    doc = (inspect.getdoc(value) or "").strip()
    if not doc:
        return False
    if dataclasses.is_dataclass(value) and isinstance(value, type):
        return not doc.startswith(f"{value.__name__}(")
    return True


def test_every_public_name_exists_and_none_is_private() -> None:
    names = ctxline.__all__
    assert len(names) == len(set(names))
    for name in names:
        assert hasattr(ctxline, name), name
        assert not name.startswith("_") or name == "__version__"


def test_all_is_exactly_the_public_names_the_package_defines() -> None:
    """Both ways (as httpx tests it): nothing public is left out of ``__all__``."""
    defined = {
        name
        for name, value in vars(ctxline).items()
        if not name.startswith("_")
        and not inspect.ismodule(value)
        and str(getattr(value, "__module__", "")).startswith("ctxline")
    }
    assert defined, "the package defines public names"
    assert sorted(defined - set(ctxline.__all__)) == []


def test_every_public_class_and_function_is_documented() -> None:
    exported = [getattr(ctxline, name) for name in ctxline.__all__]
    checked = [v for v in exported if inspect.isclass(v) or inspect.isfunction(v)]
    assert len(checked) > 20
    assert [v.__name__ for v in checked if not _documented(v)] == []


def test_the_dataclass_signature_does_not_count_as_documentation() -> None:
    @dataclasses.dataclass
    class Bare:
        x: int

    @dataclasses.dataclass
    class Told:
        """Has a docstring."""

        x: int

    assert not _documented(Bare)
    assert _documented(Told)


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
        if exported is None:  # only a package may go without one (it re-exports nothing)
            assert hasattr(module, "__path__"), f"{module_name} has no __all__"
            continue
        for name in exported:
            assert hasattr(module, name), f"{module_name}.{name}"


def test_optional_modules_are_real() -> None:
    for name in _OPTIONAL:
        assert name in _modules()


def test_every_error_class_is_exported_and_in_the_documented_tree() -> None:
    from ctxline.errors import CtxlineError

    for name in _modules():  # every module loaded, so the set does not depend on test order
        if name not in _OPTIONAL:
            importlib.import_module(name)
    import ctxline.environment  # its two errors are documented in the tree too

    def subclasses(cls: type) -> list[type]:
        found: list[type] = []
        subs: list[type] = cls.__subclasses__()
        for sub in subs:
            found += [sub, *subclasses(sub)]
        return found

    errors = {
        c
        for c in subclasses(CtxlineError)
        if c.__module__.startswith("ctxline") and not c.__name__.startswith("_")
    }
    assert {"ContextOverflow", "StorageError", "ModelError"} <= {c.__name__ for c in errors}
    tree = ctxline.errors.__doc__ or ""
    assert [c.__name__ for c in errors if c.__name__ not in tree] == []
    outside = {c for c in errors if c.__module__.startswith("ctxline.environment")}
    assert {c.__name__ for c in outside} <= set(ctxline.environment.__all__)
    assert sorted(c.__name__ for c in errors - outside if c.__name__ not in ctxline.__all__) == []
    assert "Source" in ctxline.__all__


def test_each_public_class_name_names_one_thing() -> None:
    """Issue 21: two ``Environment``s, ``Usage``s, ``Block``s and ``Source``s were public at
    once; a name in two modules' ``__all__`` must be the same class (a re-export)."""
    classes: dict[str, set[str]] = {}
    for module_name in _modules():
        module = importlib.import_module(module_name)
        for name in getattr(module, "__all__", ()):
            value = getattr(module, name)
            if inspect.isclass(value) and value.__module__.startswith("ctxline"):
                classes.setdefault(name, set()).add(f"{value.__module__}.{value.__qualname__}")
    assert len(classes) > 100
    assert {n: sorted(c) for n, c in classes.items() if len(c) > 1} == {}
