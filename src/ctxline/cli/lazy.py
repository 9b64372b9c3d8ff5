"""Commands imported the first time they are looked up, not when ``ctxline`` starts.

Why: ``ctxline append`` of a 50 MB line should hold the line, not the agent runner.
Importing every command module up front (``run`` and ``chat`` bring the runner with
pydantic and asyncio, ``eval`` its probes, ``replay`` its progress bars) cost about
21 MB of RSS before a command read its first byte. :class:`LazyCommands` is the
group's ``commands`` mapping: a name maps to ``"module:attribute"`` until the command
is asked for (to run it, or for ``--help``), then to the command, hardened like any
other (:func:`~ctxline.cli.options.harden`). Iterating names imports nothing, so a
typo's "did you mean" and the sorted command list cost nothing either.

    commands = LazyCommands({"doctor": "ctxline.cli.doctor:doctor_cmd"})
    main = click.Group("ctxline", commands=commands)
    "doctor" in commands           # True, nothing imported yet
    commands["doctor"]             # imports ctxline.cli.doctor
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping, MutableMapping

import click

from ctxline.cli.options import harden

__all__ = ["LazyCommands"]


class LazyCommands(MutableMapping[str, click.Command]):
    """Command names to commands; a name given as ``"module:attribute"`` is imported
    (and hardened) when it is first looked up. Names keep the order they were added in."""

    def __init__(self, lazy: Mapping[str, str] | None = None) -> None:
        self._entries: dict[str, click.Command | str] = dict(lazy or {})

    def loaded(self, name: str) -> bool:
        """Whether ``name``'s module has been imported (for tests and benchmarks)."""
        return isinstance(self._entries.get(name), click.Command)

    def __getitem__(self, name: str) -> click.Command:
        entry = self._entries[name]
        if isinstance(entry, click.Command):
            return entry
        module, _, attribute = entry.partition(":")
        command = getattr(importlib.import_module(module), attribute)
        if not isinstance(command, click.Command):  # pragma: no cover - a wrong table entry
            raise TypeError(f"{entry} is not a click command")
        self._entries[name] = harden(command)
        return command

    def __setitem__(self, name: str, command: click.Command) -> None:
        self._entries[name] = command

    def __delitem__(self, name: str) -> None:
        del self._entries[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries
