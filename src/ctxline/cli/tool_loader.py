"""``--tools module:attr``: the user's functions as tools, or one line saying what is wrong.

Why: the module is the user's code, so anything can happen while it is imported — a
syntax error, an exception (a missing token), ``sys.exit()`` — and none of that is a bug
in ctxline: each becomes a ValidationError on the ``tools`` field (exit 2), naming the
module and what it raised. A parameter without a type annotation is refused too: the
model would be told nothing about it (its schema would be ``{}``), so the fix — annotate
it — is in the message.

    load_tools("mytools:TOOLS")          # a function, a FunctionTool, or a list of them
"""

from __future__ import annotations

import importlib
import inspect
import sys
from pathlib import Path
from types import ModuleType

from ctxline.errors import ValidationError
from ctxline.runner.registry import as_tools
from ctxline.runner.tools import FunctionTool

__all__ = ["check_typed", "import_tools_module", "load_tools"]


def _error(message: str) -> ValidationError:
    return ValidationError(message, field="tools")


def import_tools_module(name: str) -> ModuleType:
    """The module ``name`` (the working directory first on the path, as ``python -c``)."""
    if "" not in sys.path and str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    try:
        return importlib.import_module(name)
    except SyntaxError as exc:
        where = f"{Path(exc.filename).name}, line {exc.lineno}" if exc.filename else "its code"
        raise _error(
            f"cannot import {name!r}: a syntax error in {where}: {exc.msg}; fix the file"
        ) from None
    except ImportError as exc:
        raise _error(
            f"cannot import {name!r}: {exc}; run from the folder that holds {name}.py,"
            " or add its folder to PYTHONPATH"
        ) from None
    except SystemExit as exc:
        raise _error(
            f"importing {name!r} called sys.exit({exc.code!r}); a tools module must not exit"
            " when imported (put that code under `if __name__ == '__main__':`)"
        ) from None
    except RecursionError:
        raise _error(f"importing {name!r} recursed too deeply") from None
    except Exception as exc:
        raise _error(
            f"importing {name!r} raised {type(exc).__name__}: {exc} (an error in that module)"
        ) from None


def check_typed(tool: FunctionTool) -> FunctionTool:
    """``tool`` when every parameter the model fills has a type annotation."""
    try:
        signature = inspect.signature(tool.fn)
    except (TypeError, ValueError):
        return tool
    for param in signature.parameters.values():
        if param.name == tool.context_param or param.annotation is not param.empty:
            continue
        raise _error(
            f"tool {tool.name!r}: parameter {param.name!r} has no type annotation, so the model"
            f" is told nothing about it; annotate it (e.g. def {tool.name}({param.name}: str, …))"
        )
    return tool


def load_tools(spec: str) -> list[FunctionTool]:
    """``module:attr`` → the tools it names (a function or a list of functions)."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise _error(f"expected module:attr (e.g. mytools:TOOLS), got {spec!r}")
    value: object = import_tools_module(module_name)
    for part in attr.split("."):
        try:
            value = getattr(value, part)
        except AttributeError:
            raise _error(f"{module_name} has no attribute {attr!r}") from None
        except Exception as exc:
            raise _error(
                f"reading {module_name}.{attr} raised {type(exc).__name__}: {exc}"
            ) from None
    return [check_typed(tool) for tool in as_tools(value)]  # type: ignore[arg-type]
