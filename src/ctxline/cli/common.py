"""What every CLI command shares: one-line errors with exit code 2 (3 for a context
overflow), and the --db option."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import click

from ctxline.errors import ContextOverflow, CtxlineError
from ctxline.sources.status import StatusConfig
from ctxline.sources.timectx import TimeConfig
from ctxline.view.options import PrepareOptions

__all__ = [
    "DB_HELP",
    "db_option",
    "fail",
    "model_options",
    "one_line_errors",
    "prepare_options",
    "status_config",
    "status_options",
]

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


def model_options(fn: F) -> F:
    """--provider, --model, --context-window, --max-output and --tokenizer."""
    options = [
        click.option(
            "--provider",
            type=click.Choice(["openai", "anthropic"]),
            default="openai",
            show_default=True,
        ),
        click.option(
            "--model", default=None, help="Model name put in the body (default per provider)."
        ),
        click.option("--context-window", type=int, default=128_000, show_default=True),
        click.option("--max-output", type=int, default=4_096, show_default=True),
        click.option(
            "--tokenizer", default="o200k", show_default=True, help="o200k, cl100k or bytes."
        ),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def status_options(default: str, help_text: str) -> Callable[[F], F]:
    """--status replace|append|auto|off and --tz ZONE."""

    def decorate(fn: F) -> F:
        fn = click.option(
            "--tz", default=None, help="IANA time zone of the time context (e.g. Europe/Berlin)."
        )(fn)
        return click.option(
            "--status",
            "status_mode",
            type=click.Choice(["replace", "append", "auto", "off"]),
            default=default,
            show_default=True,
            help=help_text,
        )(fn)

    return decorate


def prepare_options(
    provider: str,
    model: str | None,
    context_window: int,
    max_output: int,
    tokenizer: str,
    **more: Any,
) -> PrepareOptions:
    """The options of a CLI command; ``more`` are the other PrepareOptions fields (None: default)."""
    return PrepareOptions(
        provider="anthropic" if provider == "anthropic" else "openai",
        model=model or ("claude-sonnet-4-5" if provider == "anthropic" else "gpt-4.1"),
        context_window=context_window,
        max_output=max_output,
        tokenizer=tokenizer,
        **{k: v for k, v in more.items() if v is not None},
    )


def status_config(status_mode: str, tz: str | None) -> StatusConfig | None:
    """The status bar of a CLI command: off, or with a time context when --tz is given."""
    if status_mode == "off":
        return None
    return StatusConfig(time=TimeConfig(zone=tz) if tz else None)
