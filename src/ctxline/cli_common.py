"""What every CLI command shares: one-line errors with exit code 2 (3 for a context
overflow), and the --db option."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import click

from ctxline.errors import ContextOverflow, CtxlineError

__all__ = ["DB_HELP", "db_option", "fail", "one_line_errors"]

F = TypeVar("F", bound=Callable[..., Any])

DB_HELP = (
    "Database: a SQLite path (default ./ctxline.db), sqlite:///PATH, postgresql://… or :memory:."
)


def fail(message: str, code: int = 2) -> None:
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


@contextmanager
def one_line_errors() -> Iterator[None]:
    """Turn ctxline's typed errors and file errors into one line on stderr, exit 2."""
    try:
        yield
    except ContextOverflow as exc:  # protected content alone does not fit: a distinct code
        fail(str(exc), code=3)
    except CtxlineError as exc:
        fail(str(exc).replace("\n", " "))
    except OSError as exc:
        fail(f"{exc.filename or ''}: {exc.strerror or exc}".lstrip(": "))


def db_option(fn: F) -> F:
    return click.option("--db", default="ctxline.db", show_default=True, help=DB_HELP)(fn)
