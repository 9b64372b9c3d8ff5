"""``ctxline memory``: the memories kept across sessions, from the command line.

``remember TEXT [--key K] [--scope S] [--tag T]``, ``search QUERY``, ``show ID``, ``forget
ID``, ``list``; the scope owners are ``--user``, ``--project`` and ``--agent`` (default
``default``, as for an agent's ``Memory``); ``list`` shows every owner unless one is
named, and says how many entries a filter hid. What the CLI writes is marked
``user``-written.

    ctxline memory remember "Deploys run with make release" --key deploy --project shop
    ctxline memory search deploy --project shop --json
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

import click

from ctxline.cli.common import db_option, one_line, one_line_errors
from ctxline.cli.options import harden
from ctxline.memory.source import Memory, describe
from ctxline.record.store import open_store
from ctxline.record.store.memories import SCOPES, MemoryEntry

__all__ = ["memory_group"]

F = TypeVar("F", bound=Callable[..., Any])


def owners(fn: F) -> F:
    for name in ("agent", "project", "user"):
        fn = click.option(
            f"--{name}",
            default="default",
            show_default=True,
            help=f"The {name} whose memories these are.",
        )(fn)
    return db_option(fn)


def _memory(db: str, user: str, project: str, agent: str, *, read_only: bool) -> Memory:
    return Memory(
        open_store(db, read_only=read_only, create=not read_only),
        user=user,
        project=project,
        agent=agent,
    )


def _print(entries: list[MemoryEntry], as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps([e.to_json() for e in entries], ensure_ascii=False))
        return
    for e in entries:
        click.echo(one_line(describe(e, 300)))


@click.group("memory")
def memory_group() -> None:
    """Memories across sessions: remember, search, show, forget, list."""


@memory_group.command("remember")
@click.argument("text")
@click.option("--key", default="", help="A stable name: a later memory with it replaces this one.")
@click.option("--scope", default="project", show_default=True, help=f"One of {', '.join(SCOPES)}.")
@click.option("--tag", "tags", multiple=True, help="A tag (repeatable).")
@owners
@click.option("--json", "as_json", is_flag=True, help="Print the new memory as JSON.")
def remember_cmd(
    text: str,
    key: str,
    scope: str,
    tags: tuple[str, ...],
    db: str,
    user: str,
    project: str,
    agent: str,
    as_json: bool,
) -> None:
    """Remember TEXT (in --scope, for its owner)."""
    with one_line_errors():
        memory = _memory(db, user, project, agent, read_only=False)
        entry = memory.remember(text, key, tags, scope, author="user")  # type: ignore[arg-type]
    _print([entry], as_json)


@memory_group.command("search")
@click.argument("query")
@click.option("--limit", default=10, show_default=True, type=click.IntRange(1, 100))
@owners
@click.option("--json", "as_json", is_flag=True, help="Print the hits as JSON.")
def search_cmd(
    query: str, limit: int, db: str, user: str, project: str, agent: str, as_json: bool
) -> None:
    """Search the memories: current ones first, replaced ones marked."""
    with one_line_errors():
        hits = _memory(db, user, project, agent, read_only=True).search(query, limit)
    if as_json:
        click.echo(
            json.dumps([{**h.entry.to_json(), "score": h.score} for h in hits], ensure_ascii=False)
        )
        return
    if not hits:
        click.echo(f"No memories match {query!r}.")
    _print([h.entry for h in hits], False)


@memory_group.command("show")
@click.argument("memory_id")
@owners
@click.option("--json", "as_json", is_flag=True, help="Print the memory as JSON.")
def show_cmd(memory_id: str, db: str, user: str, project: str, agent: str, as_json: bool) -> None:
    """One memory, whole."""
    with one_line_errors():
        entry = _memory(db, user, project, agent, read_only=True).read(memory_id)
    if as_json:
        click.echo(json.dumps(entry.to_json(), ensure_ascii=False))
        return
    click.echo(one_line(describe(entry, 80).split(": ", 1)[0]))
    text = entry.text if not entry.forgotten else "(forgotten: its text is erased)"
    click.echo("\n".join(one_line(line) for line in text.split("\n")))


@memory_group.command("forget")
@click.argument("memory_id")
@owners
@click.option("--json", "as_json", is_flag=True, help="Print the tombstone as JSON.")
def forget_cmd(memory_id: str, db: str, user: str, project: str, agent: str, as_json: bool) -> None:
    """Forget a memory: its text is erased (from the record too), its id kept as a tombstone."""
    with one_line_errors():
        erased = _memory(db, user, project, agent, read_only=False).erase(memory_id)
    entry = erased.entry
    if as_json:
        out = {**entry.to_json(), "erased_events": erased.events, "erased_sessions": erased.sessions}
        click.echo(json.dumps(out, ensure_ascii=False))
        return
    click.echo(
        f"forgot {entry.id}; its text was erased from {erased.events} event(s) in"
        f" {erased.sessions} session(s)"
    )


_EVERY = 1_000_000
"""How many entries a filtered list reads to count what its filter hid."""


@memory_group.command("list")
@click.option("--all", "include_superseded", is_flag=True, help="Also the replaced ones.")
@click.option("--limit", default=100, show_default=True, type=click.IntRange(1, 10_000))
@click.option("--user", default=None, help="Only the memories of this user (default: every owner).")
@click.option(
    "--project", default=None, help="Only the memories of this project (default: every owner)."
)
@click.option(
    "--agent", default=None, help="Only the memories of this agent (default: every owner)."
)
@db_option
@click.option("--json", "as_json", is_flag=True, help="Print the memories as JSON.")
def list_cmd(
    include_superseded: bool,
    limit: int,
    db: str,
    user: str | None,
    project: str | None,
    agent: str | None,
    as_json: bool,
) -> None:
    """The memories of every owner, newest first (--user/--project/--agent: only theirs).

    With a filter, a note on stderr says how many entries of other owners it hid.
    """
    chosen = {"user": user, "project": project, "agent": agent}
    filters = {scope: owner for scope, owner in chosen.items() if owner is not None}
    with one_line_errors():
        memory = _memory(
            db, user or "default", project or "default", agent or "default", read_only=True
        )
        wide = limit if not filters else _EVERY
        every = memory.backend.entries(None, include_superseded=include_superseded, limit=wide)
    if not filters:
        _print(every, as_json)
        return
    # an owner filter names the owner of its scope; the other scopes are not filtered out
    kept = [e for e in every if filters.get(e.scope, e.owner) == e.owner]
    _print(kept[:limit], as_json)
    hidden = len(every) - len(kept)
    if hidden:
        named = " ".join(f"--{scope} {owner}" for scope, owner in filters.items())
        click.echo(
            f"({hidden} more memor{'y' if hidden == 1 else 'ies'} of other owners hidden by"
            f" {named}; leave the filter out to list every owner)",
            err=True,
        )


# hardened where defined, as the ctxline group would: imported directly, it refuses the same
harden(memory_group)
