"""Option types that refuse hostile numbers, and the pass that gives them to every command.

Why: ``--max-cost nan``, ``--pressure inf`` or ``--at 999…9`` (40 digits) are input, not
bugs, yet each used to reach code that cannot hold it (a Decimal of NaN, an integer
SQLite cannot store) and end as exit 1 "(a bug in ctxline)". Here a float option takes
only finite numbers and an integer option only what a 64-bit integer holds, so click
refuses the value with one line naming the option (exit 2). :func:`harden` gives those
types to every option of a command tree that still has click's plain ``float``/``int``
(or an open-ended range), a mistyped choice gets a "did you mean", and each command's
context is remembered so an error's hint can name the ``--db`` and ``--session`` typed.

    @click.option("--max-cost", type=finite_float(min=0, min_open=True))
    @click.option("--at", type=bounded_int(min=0))
"""

from __future__ import annotations

import difflib
import math
from typing import Any

import click

__all__ = [
    "MAX_INT",
    "MIN_INT",
    "BoundedInt",
    "FiniteFloat",
    "RememberingContext",
    "SuggestingChoice",
    "bounded_int",
    "finite_float",
    "harden",
    "invoked",
]

MAX_INT = 2**63 - 1
"""The largest integer an option takes: what SQLite and PostgreSQL's bigint hold."""
MIN_INT = -(2**63)
_CONTEXT_KEY = "ctxline.invoked"


class FiniteFloat(click.FloatRange):
    """A float in an optional range that is a finite number: ``nan``, ``inf`` and
    ``1e400`` are refused (click's FloatRange lets NaN through every bound)."""

    name = "number"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = click.FLOAT.convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(
                f"{value!r} is not a finite number: give a plain decimal such as 0.5",
                param,
                ctx,
            )
        return super().convert(number, param, ctx)


def finite_float(
    min: float | None = None,
    max: float | None = None,
    *,
    min_open: bool = False,
    max_open: bool = False,
) -> FiniteFloat:
    """A finite float option type, optionally bounded (see :class:`FiniteFloat`)."""
    return FiniteFloat(min, max, min_open=min_open, max_open=max_open)


class BoundedInt(click.IntRange):
    """click's IntRange held to a 64-bit integer, whose help and errors name only the
    bounds the option has of its own: ``--context-window`` printed
    ``-9223372036854775808<=x<=9223372036854775807`` in its help."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not self._describe_range():
            self.name = "integer"  # the metavar: INTEGER, not INTEGER RANGE

    def _describe_range(self) -> str:
        low = None if self.min == MIN_INT else self.min
        high = None if self.max == MAX_INT else self.max
        if low is None and high is None:
            return ""
        lt, gt = ("<" if self.min_open else "<="), ("<" if self.max_open else "<=")
        if low is None:
            return f"x{gt}{high}"
        if high is None:
            return f"x{'>' if self.min_open else '>='}{low}"
        return f"{low}{lt}x{gt}{high}"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = click.INT.convert(value, param, ctx)
        if (
            not self._describe_range()
            and isinstance(number, int)
            and not MIN_INT <= number <= MAX_INT
        ):
            self.fail(f"{number} is not a 64-bit integer.", param, ctx)
        return super().convert(number, param, ctx)


def bounded_int(min: int | None = MIN_INT, max: int | None = MAX_INT) -> click.IntRange:
    """An integer option type within ``min`` and ``max`` (a 64-bit integer by default)."""
    return BoundedInt(MIN_INT if min is None else min, MAX_INT if max is None else max)


class SuggestingChoice(click.Choice[str]):
    """click's Choice whose refusal adds the closest choice ("did you mean 'openai'?")."""

    def get_invalid_choice_message(self, value: Any, ctx: click.Context | None) -> str:
        message = super().get_invalid_choice_message(value, ctx)
        close = difflib.get_close_matches(str(value), [str(c) for c in self.choices], n=1)
        return f"{message} Did you mean {close[0]!r}?" if close else message


class RememberingContext(click.Context):
    """A context that leaves itself in the shared ``meta``: the error reporter reads the
    command and the values typed (``--db``, ``--session``) from there."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.meta[_CONTEXT_KEY] = self


def invoked() -> click.Context | None:
    """The context of the (deepest) command being run, if any."""
    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return None
    found = ctx.meta.get(_CONTEXT_KEY)
    return found if isinstance(found, click.Context) else None


def _hardened(kind: click.ParamType[Any]) -> click.ParamType[Any] | None:
    """The safe type for ``kind``, or None when it is already safe."""
    if isinstance(kind, FiniteFloat | SuggestingChoice | BoundedInt):
        return None
    if isinstance(kind, click.FloatRange):
        return FiniteFloat(kind.min, kind.max, min_open=kind.min_open, max_open=kind.max_open)
    if isinstance(kind, click.types.FloatParamType):
        return FiniteFloat()
    if isinstance(kind, click.IntRange):
        if kind.clamp or (kind.min is not None and kind.max is not None):
            return None
        low = MIN_INT if kind.min is None else kind.min
        high = MAX_INT if kind.max is None else kind.max
        return BoundedInt(low, high, min_open=kind.min_open, max_open=kind.max_open)
    if isinstance(kind, click.types.IntParamType):
        return bounded_int()
    if isinstance(kind, click.Choice) and all(isinstance(c, str) for c in kind.choices):
        return SuggestingChoice([str(c) for c in kind.choices], kind.case_sensitive)
    return None


def harden(command: click.Command) -> click.Command:
    """Give every numeric and choice option of ``command`` (and of its subcommands) the
    safe types above, and a context that remembers it; returns ``command``."""
    command.context_class = RememberingContext
    for param in command.params:
        safe = _hardened(param.type)
        if safe is not None:
            param.type = safe
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            harden(sub)
    return command
