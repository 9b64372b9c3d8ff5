"""``ctxline run``: an agent on ctxline's loop, from the command line.

ctxline run "Which file defines main?" --model openai:gpt-4.1-mini
ctxline run "Summarize README.md" --model openai:qwen2.5 --base-url http://127.0.0.1:8000/v1
ctxline run "Add the numbers" --model script:replies.jsonl --tools mytools:TOOLS --json
ctxline run --session run-01hx… --db agent.db       # resume: the options are in the record
ctxline run "What time is it in Tokyo?" --model script:r.jsonl --tz Asia/Tokyo --status tail

The default tools read the root folder (``--root``, default .) and nothing else:
read_file, list_dir and search_files; ``--allow-shell`` adds a shell tool whose every
command is approved on the terminal unless ``--approve auto``. ``--tools module:attr``
adds the functions ``attr`` names (one function or a list). ``--json`` prints one object:
session, final, turns, tool_calls, usage, cost_usd, stop_reason, … . The exit code is 0
when the run ended with a final answer, 1 when it stopped for another reason, 2 for bad
input. A new task's options (model, base URL, tools, limits, status, zone, window) are
logged in its user message (``meta.run``), so ``--session ID`` alone resumes the run
with them; a flag given again overrides its value (``--approve auto`` is never taken
from the record: a resumed run asks unless told again).
"""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path
from typing import Any, Literal

import click
from click.core import ParameterSource
from rich.console import Console
from rich.markup import escape

from ctxline.cli.common import db_option, fail, one_line, one_line_errors
from ctxline.cli.hints import close_matches, explain_model_error, is_endpoint_error
from ctxline.cli.options import harden
from ctxline.cli.tool_loader import load_tools
from ctxline.errors import ValidationError
from ctxline.models import make_client
from ctxline.models.openai_client import WindowWarning
from ctxline.pricing import format_usd
from ctxline.record.jsonvalue import JsonObject
from ctxline.record.store import open_store
from ctxline.runner import Agent, Limits, StepResult, SubAgents, approval_policy, terminal_approval
from ctxline.runner.tools import FunctionTool
from ctxline.runner.workspace import shell_tool, workspace_tools
from ctxline.sources.statusbar import parse_status_mode
from ctxline.sources.timectx import zone_info
from ctxline.tools.builtin import BUILTIN_TOOLS

__all__ = ["RECORDED", "recorded_options", "run_cmd"]

SYSTEM = (
    "You are an agent working in a folder of files. Use the tools to find facts before "
    "you answer; answer briefly when you are done."
)


def _line(step: StepResult, agent: Agent) -> str:
    usage = agent.ledger.totals.usage()
    cost = agent.ledger.totals.cost_usd()
    calls = ", ".join(
        escape(r.name or "?") + ("[red]✗[/red]" if r.is_error else "") for r in step.results
    )
    text = (
        f"[bold]step {step.turn}[/bold]  in {usage['input']:,} (cached {usage['cache_read']:,})"
        f"  out {usage['output']:,}  {format_usd(cost)}  tool calls {agent.ledger.tool_calls}"
    )
    if calls:
        text += f"  [dim]→ {calls}[/dim]"
    if step.notifications:
        text += f"  [cyan]{len(step.notifications)} job(s) ended[/cyan]"
    return text


RECORDED = (
    "model",
    "base_url",
    "tool_specs",
    "approve",
    "max_turns",
    "max_tokens",
    "max_cost",
    "root",
    "allow_shell",
    "no_default_tools",
    "subagents",
    "context_window",
    "max_output",
    "status",
    "tz",
    "no_builtin_tools",
    "no_builtin",
    "tool_choice",
)
"""The options of ``ctxline run`` logged with a new task and read back on resume."""

STATUS_CHOICES = {"off": "off", "tail": "replace", "append": "append", "auto": "auto"}
BUILTIN_NAMES = tuple(t.name for t in BUILTIN_TOOLS)


def recorded_options(store: Any, session: str) -> JsonObject:
    """The options the session's latest task was started with (``meta.run`` of its user
    message; empty when there is none)."""
    from ctxline.record.events import UserMessage

    for stored in reversed(store.read(session)):
        event = stored.event
        if isinstance(event, UserMessage):
            run = event.meta.get("run")
            if isinstance(run, dict):
                return {k: v for k, v in run.items() if k in RECORDED}
    return {}


@click.command("run")
@click.argument("task", required=False)
@click.option(
    "--model",
    default=None,
    show_default="the recorded one when resuming; required otherwise",
    help="kind:name: openai:…, anthropic:…, local:FILE.gguf, script:FILE.jsonl.",
)
@click.option(
    "--base-url",
    default=None,
    show_default="none",
    help="An OpenAI-compatible endpoint (vLLM, Ollama, llama.cpp server).",
)
@click.option(
    "--tools",
    "tool_specs",
    multiple=True,
    show_default="none",
    help="module:attr naming a function or a list of functions (repeatable).",
)
@click.option(
    "--approve",
    type=click.Choice(["ask", "auto", "deny"]),
    default="ask",
    show_default=True,
    help="Calls of tools that need approval (the shell): ask on the terminal, allow, or refuse.",
)
@click.option(
    "--max-turns",
    type=click.IntRange(min=1),
    default=20,
    show_default=True,
    help="Model calls for the task.",
)
@click.option(
    "--max-tokens",
    type=click.IntRange(min=1),
    default=None,
    show_default="none",
    help="Token budget (input + output) for the task.",
)
@click.option(
    "--max-cost",
    type=float,
    default=None,
    show_default="none",
    help="USD budget for the task, priced models only.",
)
@db_option
@click.option(
    "--session",
    default=None,
    show_default="a new run-…",
    help="Session id; an unfinished run's id alone resumes it with its recorded options.",
)
@click.option(
    "--root",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    default=Path("."),
    show_default=True,
    help="The folder the file tools may read.",
)
@click.option(
    "--allow-shell",
    is_flag=True,
    show_default="off",
    help="Offer a shell tool (each command approved unless --approve auto).",
)
@click.option(
    "--no-default-tools",
    is_flag=True,
    show_default="off",
    help="Offer no file tools (only --tools).",
)
@click.option(
    "--no-builtin-tools",
    is_flag=True,
    show_default="off",
    help="Offer none of ctxline's own tools (read_result, search_history, todo_write, todo_update).",
)
@click.option(
    "--no-builtin",
    type=click.Choice(BUILTIN_NAMES),
    multiple=True,
    show_default="none",
    help="Leave out one of ctxline's own tools (repeatable).",
)
@click.option(
    "--agents",
    "subagents",
    is_flag=True,
    show_default="off",
    help="Offer spawn_agent: sub-agents in their own sessions.",
)
@click.option(
    "--system",
    default=SYSTEM,
    show_default="a short agent prompt",
    help="The system prompt of a new session.",
)
@click.option(
    "--status",
    type=click.Choice(tuple(STATUS_CHOICES)),
    default="auto",
    show_default=True,
    help="The status bar: off; tail (replaced each step); append (kept in history); auto"
    " (the cache cost model picks). A status with nothing to say is never sent.",
)
@click.option(
    "--tool-choice",
    default="auto",
    show_default=True,
    help="auto (the model picks), required (a tool call every step), none (no calls), or a"
    " tool's name (that tool every step; its schema stays in the request).",
)
@click.option(
    "--tz",
    default=None,
    show_default="none: no time context",
    help="An IANA zone (Europe/Berlin): the current time and the time since the last"
    " message, in the status bar.",
)
@click.option(
    "--context-window",
    type=click.IntRange(min=1),
    default=None,
    show_default="the server's, else 8,192 for local:, 128,000",
    help="The model's context window in tokens.",
)
@click.option(
    "--max-output",
    type=click.IntRange(min=1),
    default=None,
    show_default="the server's, else 1,024 for local:, 4,096",
    help="Tokens reserved for the reply.",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    show_default="off",
    help="Print one JSON object with the result.",
)
def run_cmd(
    task: str | None, db: str, session: str | None, system: str, as_json: bool, **given: Any
) -> None:
    """Run TASK with an agent on ctxline's loop (or resume --session's unfinished run)."""
    from dataclasses import replace

    from ctxline.runner.model_call import default_options

    with one_line_errors():
        store = open_store(db)
        known = session is not None and any(s.id == session for s in store.sessions())
        if task is None and not known:
            fail("give a TASK, or the --session of an unfinished run to resume it")
        opts = _options(store, session if known else None, given)
        if opts["model"] is None:
            fail("give --model (the session has no recorded run to take it from)")
        if opts["tz"] is not None:
            zone_info(opts["tz"])
        root = Path(opts["root"])
        tools: list[FunctionTool] = [] if opts["no_default_tools"] else workspace_tools(root)
        if opts["allow_shell"]:
            tools.append(shell_tool(root))
        for spec in opts["tool_specs"]:  # the user's own input is checked before any client
            tools.extend(load_tools(spec))
        dropped = set(opts["no_builtin"])
        builtins = (
            () if opts["no_builtin_tools"] else tuple(n for n in BUILTIN_NAMES if n not in dropped)
        )
        choice = _tool_choice(opts["tool_choice"], [*(t.name for t in tools), *builtins])
        client = make_client(opts["model"], base_url=opts["base_url"])
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always", WindowWarning)
            options = default_options(client)  # asks a local server for its window
        for w in said:
            if not issubclass(w.category, WindowWarning):
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
            elif opts["context_window"] is None:  # with the flag the window is known
                click.echo(f"warning: {one_line(str(w.message))}", err=True)
        if opts["context_window"] is not None:
            options = replace(options, context_window=opts["context_window"])
        if opts["max_output"] is not None:
            options = replace(options, max_output=opts["max_output"])
        approve = opts["approve"]
        mode: Literal["ask", "auto", "deny"] = (
            "ask" if approve == "ask" else "auto" if approve == "auto" else "deny"
        )
        status = parse_status_mode(STATUS_CHOICES[opts["status"]])
        agent = Agent(
            client,
            tools,
            store=store,
            session=session,
            system=system,
            options=options,
            limits=Limits(
                max_turns=opts["max_turns"],
                max_tokens=opts["max_tokens"],
                max_cost=opts["max_cost"],
            ),
            permission=approval_policy(mode),
            approve=terminal_approval() if mode == "ask" else None,
            subagents=SubAgents() if opts["subagents"] else None,
            status_mode=status,
            time_zone=opts["tz"],
            builtin_tools=builtins,
            tool_choice=choice,
        )
        err = Console(stderr=True, highlight=False)
        resuming = agent.unfinished
        if resuming:
            if task is not None:
                err.print(
                    "[yellow]the session has an unfinished run: resuming it (TASK is not used)[/yellow]"
                )
            agent.start(None)
        elif task is None:
            fail(f"session {agent.session!r} has no unfinished run: give a TASK to continue it")
        else:
            agent.start(task, meta={"run": _to_record(opts, root)})
        err.print(
            f"[dim]{'resuming' if resuming else 'session'} {escape(agent.session)} with {escape(client.name)} (db {escape(db)})[/dim]"
        )
        while True:
            if err.is_terminal:  # a live line while the step runs (model call, tools)
                with err.status(f"step {agent.ledger.turns + 1}: working…"):
                    step = agent.step()
            else:
                step = agent.step()
            if step.reply is not None or step.results:
                err.print(_line(step, agent))
            if step.done:
                break
        agent.close()
        result = agent.result()
        store.close()
        if as_json:
            click.echo(json.dumps(result.to_json(), ensure_ascii=False, indent=2))
        else:
            out = Console(highlight=False)
            if result.final:
                out.print(escape(result.final))
            usage = result.usage
            err.print(
                f"[dim]{result.stop_reason}: {result.turns} turns, {result.tool_calls} tool calls, "
                f"input {usage['input']:,} (cache read {usage['cache_read']:,}, write "
                f"{usage['cache_write']:,}), output {usage['output']:,}, {format_usd(result.cost_usd)}[/dim]"
            )
            if result.error:
                if is_endpoint_error(result.error):  # a wrong or dead URL: say which and how to fix it
                    fail(explain_model_error(result.error, opts["base_url"]))
                err.print(f"[red]{escape(explain_model_error(result.error, opts['base_url']))}[/red]")
        sys.exit(0 if result.stop_reason == "final" else 1)


def _options(store: Any, session: str | None, given: dict[str, Any]) -> dict[str, Any]:
    """The flags given on the command line over the options recorded for ``session``."""
    ctx = click.get_current_context()
    recorded = recorded_options(store, session) if session is not None else {}
    params = {p.name: p for p in ctx.command.params}
    out = dict(given)
    for name, value in recorded.items():
        if ctx.get_parameter_source(name) not in (ParameterSource.DEFAULT, None):
            continue  # a flag given again wins
        if name == "approve" and value == "auto":
            continue  # never approve silently on the record's word
        try:  # the record is data: the flag's own type checks it
            out[name] = params[name].type_cast_value(ctx, value)
        except click.BadParameter as exc:
            raise ValidationError(
                f"the recorded option {name!r} of session {session!r} is invalid: {exc.message}",
                field=name,
            ) from None
    return out


def _tool_choice(given: str, offered: list[str]) -> str | None:
    """``--tool-choice`` as the Agent takes it (None for auto), or a clear error naming
    the tools the run offers when it names none of them."""
    choice = given.strip()
    if choice == "auto":
        return None
    if choice in ("required", "none") or choice in offered:
        return choice
    names = sorted(set(offered))
    close = close_matches(names, choice, 1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise ValidationError(
        f"--tool-choice {choice!r} is not a tool of this run{hint}; expected auto,"
        f" required, none or one of: {', '.join(names) or 'no tools'}",
        field="tool_choice",
    )


def _to_record(opts: dict[str, Any], root: Path) -> dict[str, Any]:
    out = {name: opts[name] for name in RECORDED}
    out["root"] = str(root.resolve())
    out["tool_specs"] = list(opts["tool_specs"])
    out["no_builtin"] = list(opts["no_builtin"])
    return out


# hardened where defined, as the ctxline group would: imported directly, it refuses the same
harden(run_cmd)
