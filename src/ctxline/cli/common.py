"""What every CLI command shares: one-line errors, exit codes, --debug and --db.

Exit codes: 0 done; 2 bad input or an environment that refused (a read-only or full
disk, a locked database, a damaged record: one line on stderr naming what is wrong,
nothing written); 3 when protected content alone exceeds the input limit; 1 for an
error ctxline did not expect (a bug): one line too, and ``ctxline --debug …`` (or
``CTXLINE_DEBUG=1``) prints its traceback. No traceback reaches a user otherwise:
:class:`CtxlineGroup` catches whatever a command lets through.

    @click.group(cls=CtxlineGroup)
    def main() -> None: ...
"""

from __future__ import annotations

import errno
import os
import sys
import traceback
import unicodedata
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO, Any, NoReturn, TypeVar

import click
from rich.text import Text

from ctxline.cli.hints import explain_model_error, hint_for
from ctxline.cli.options import (
    MAX_INT,
    FiniteFloat,
    bounded_int,
    finite_float,
    harden,
    invoked,
)
from ctxline.errors import ContextOverflow, CtxlineError, ValidationError
from ctxline.importers.jsonread import MAX_LINE_BYTES, parse_json_bytes, read_line
from ctxline.record.jsonvalue import JsonValue
from ctxline.sources.status import StatusConfig
from ctxline.sources.timectx import TimeConfig
from ctxline.view.options import PrepareOptions

__all__ = [
    "BIDI_CONTROLS",
    "DB_HELP",
    "MAX_INT",
    "CtxlineGroup",
    "FiniteFloat",
    "bounded_int",
    "cell",
    "db_option",
    "debug_enabled",
    "explain_model_error",
    "fail",
    "finite_float",
    "iter_jsonl",
    "model_options",
    "one_line",
    "one_line_errors",
    "prepare_options",
    "printable",
    "status_config",
    "status_options",
]

F = TypeVar("F", bound=Callable[..., Any])

DB_HELP = (
    "Database: a SQLite path (default ./ctxline.db), sqlite:///PATH, postgresql://… or :memory:."
)


MAX_MESSAGE = 2000
_OS_REASONS = {
    errno.EROFS: "the file system is read-only",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.ENOSPC: "the disk is full",
    errno.EDQUOT: "the disk quota is exhausted",
    errno.ENOENT: "no such file or folder",
    errno.EISDIR: "is a folder",
}


BIDI_CONTROLS = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
"""Bidirectional overrides and marks: they can disguise a terminal line (shown escaped)."""
_BIDI = BIDI_CONTROLS


def _escaped(ch: str) -> str:
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """``text`` with every character that could break or disguise a terminal line shown
    escaped: control characters (``\\x1b``), line and paragraph separators (``\\u2028``,
    ``\\u2029``, NEL) and bidirectional overrides (``\\u202e``). Nothing else changes."""
    out = []
    for ch in text:
        category = unicodedata.category(ch)
        if category in ("Cc", "Zl", "Zp", "Cs") or ch in _BIDI:
            out.append(_escaped(ch))
        else:
            out.append(ch)
    return "".join(out)


def one_line(message: str) -> str:
    """``message`` as one printable line: breaks become spaces, other control characters
    (a terminal escape in a session name) and separators are shown escaped
    (:func:`printable`), and it is cut at 2,000."""
    text = printable(message.translate(_SPACES))
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 1] + "…"


_SPACES = str.maketrans("\r\n\t", "   ")


def cell(text: object, style: str = "") -> Text:
    """A table cell of text ctxline did not write (a session id, an event's text, a skill's
    description): one line, escaped as :func:`one_line` does, and never read as rich markup.
    Every CLI table builds its untrusted cells with this."""
    return Text(one_line(str(text)), style=style)


def fail(message: str, code: int = 2) -> NoReturn:
    click.echo(f"error: {one_line(message)}", err=True)
    sys.exit(code)


def debug_enabled() -> bool:
    ctx = click.get_current_context(silent=True)
    if ctx is not None and ctx.find_root().meta.get("ctxline.debug"):
        return True
    return os.environ.get("CTXLINE_DEBUG", "") not in ("", "0")


def _os_message(exc: OSError) -> str:
    reason = _OS_REASONS.get(exc.errno or 0, exc.strerror or str(exc))
    return f"{exc.filename}: {reason}" if exc.filename else str(reason)


def _engine_message(exc: BaseException) -> str | None:
    """A database driver's error that escaped the store, in words (None: not one)."""
    module = type(exc).__module__
    if module == "sqlite3":
        import sqlite3

        from ctxline.record.store.failures import sqlite_failure

        assert isinstance(exc, sqlite3.Error)
        return str(sqlite_failure(exc, "the database", "run the command"))
    if module.startswith("psycopg"):
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return f"PostgreSQL: {first} (nothing was written unless the command said so)"
    return None


def _with_hint(exc: BaseException, message: str) -> str:
    """``message`` with what to do about ``exc`` (see :func:`~ctxline.cli.hints.hint_for`)."""
    ctx = invoked()
    command = (ctx.command.name or "") if ctx is not None else ""
    params = dict(ctx.params) if ctx is not None else {}
    hint = hint_for(exc, command, params)
    return f"{message}: {hint}" if hint else message


def _inputs() -> str:
    """The files the invoked command was given (``--model script:x.jsonl``, ``PATH``), as
    typed: what an error about unreadable input names."""
    ctx = invoked()
    if ctx is None:
        return ""
    named = []
    for param in ctx.command.params:
        value = ctx.params.get(param.name or "")
        if not isinstance(value, str | os.PathLike) or not str(value):
            continue
        text = str(value)
        path = text.partition(":")[2] if text.startswith("script:") else text
        with suppress(OSError, ValueError):
            if Path(path).exists() and text not in ("ctxline.db", "."):
                flag = (
                    param.opts[0] if isinstance(param, click.Option) else param.human_readable_name
                )
                named.append(f"{flag} {text}" if flag.startswith("-") else text)
    if len(named) > 1:
        return f"one of {', '.join(named)}"
    return named[0] if named else ""


def _model_message(exc: CtxlineError) -> str:
    """A failed model call, with the URL it went to and the likely fix."""
    ctx = invoked()
    base = ctx.params.get("base_url") if ctx is not None else None
    request = getattr(exc.__cause__, "request", None)
    if not base and request is not None:  # the URL the SDK called, less its route
        base = str(getattr(request, "url", "")).split("/chat/completions")[0].split("/messages")[0]
    return explain_model_error(str(exc), base if isinstance(base, str) else None)


def report(exc: BaseException) -> NoReturn:
    """Print ``exc`` as one line and exit with its code (see the module doc)."""
    from ctxline.models.base import ModelError

    if debug_enabled():
        traceback.print_exception(exc, file=sys.stderr)
    if isinstance(exc, ContextOverflow):  # protected content alone does not fit
        fail(str(exc), code=3)
    if isinstance(exc, ModelError):
        fail(_model_message(exc))
    if isinstance(exc, CtxlineError):
        fail(_with_hint(exc, str(exc)))
    if isinstance(exc, KeyboardInterrupt):
        fail("interrupted", code=130)
    if isinstance(exc, OSError):
        fail(_with_hint(exc, _os_message(exc)))
    if isinstance(exc, MemoryError):
        fail("out of memory: the input is too large for this machine; nothing was written")
    if isinstance(exc, RecursionError):  # input nested deeper than Python can follow
        fail(
            f"{_inputs() or 'the input'} is nested too deeply to read (RecursionError);"
            " nothing was written: flatten it (ctxline reads JSON and YAML up to 200 levels"
            " deep)"
        )
    if isinstance(exc, SyntaxError):  # user code (a --tools module) that does not compile
        where = f"{exc.filename}, line {exc.lineno}" if exc.filename else "a Python file"
        fail(f"{where}: invalid Python syntax ({exc.msg}); fix that file")
    engine = _engine_message(exc)
    if engine is not None:
        fail(engine)
    hint = "" if debug_enabled() else "; run with --debug (or CTXLINE_DEBUG=1) for the traceback"
    fail(f"unexpected {type(exc).__name__}: {exc} (a bug in ctxline){hint}", code=1)


@contextmanager
def one_line_errors() -> Iterator[None]:
    """Turn ctxline's typed errors and file errors into one line on stderr, exit 2."""
    try:
        yield
    except (CtxlineError, OSError) as exc:
        if isinstance(exc, BrokenPipeError):
            raise
        report(exc)


def _set_debug(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value:
        ctx.meta["ctxline.debug"] = True


class CtxlineGroup(click.Group):
    """A command group that adds ``--debug`` and lets no traceback through."""

    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        """Add ``cmd`` with its numeric and choice options hardened (see :func:`harden`)."""
        super().add_command(harden(cmd), name)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.params.append(
            click.Option(
                ["--debug"],
                is_flag=True,
                expose_value=False,
                is_eager=True,
                callback=_set_debug,
                help="Print the traceback of an error (also CTXLINE_DEBUG=1).",
            )
        )

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        """Click's main, with its usage errors as one ``error:`` line too."""
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, **extra)
        try:
            super().main(args, prog_name, complete_var, False, **extra)
        except click.exceptions.Exit as exc:
            sys.exit(exc.exit_code)
        except click.ClickException as exc:
            ctx = getattr(exc, "ctx", None)
            hint = f" (see {ctx.command_path} --help)" if ctx is not None else ""
            fail(exc.format_message() + hint, code=exc.exit_code)
        except click.Abort:
            fail("aborted", code=1)
        sys.exit(0)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.ClickException, click.Abort, SystemExit):
            raise
        except BrokenPipeError:  # the reader went away (| head): stop quietly
            with suppress(OSError, ValueError):  # so the final flush at exit fails silently
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            sys.exit(141)
        except (Exception, KeyboardInterrupt) as exc:
            report(exc)


def iter_jsonl(stream: IO[bytes], source: str) -> Iterator[tuple[int, JsonValue]]:
    """``(line number, value)`` for each non-blank JSON line of a binary stream.

    A line over :data:`~ctxline.importers._common.MAX_LINE_BYTES`, invalid JSON, an
    integer too long or nesting too deep is a ValidationError naming ``source``, the
    line and (where it can) the field. Each line is decoded (UTF-8, invalid bytes as
    U+FFFD) and parsed by :func:`~ctxline.importers.jsonread.parse_json_bytes`, which
    holds no third copy of a 200 MB line.
    """
    number = 0
    while True:
        raw = read_line(stream, MAX_LINE_BYTES)
        if not raw:
            return
        number += 1
        if len(raw) > MAX_LINE_BYTES:
            raise ValidationError(
                f"the line is longer than {MAX_LINE_BYTES:,} bytes", line=number, source=source
            )
        if raw.isspace():
            continue
        box = [raw]
        del raw
        try:
            value: JsonValue = parse_json_bytes(box, line=number)
        except ValidationError as exc:
            raise exc.located(source=source) from None
        yield number, value


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
