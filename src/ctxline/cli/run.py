"""``ctxline run``: an agent on ctxline's loop, from the command line.

ctxline run "Which file defines main?" --model openai:gpt-4.1-mini
ctxline run "Summarize README.md" --model openai:qwen2.5 --base-url http://127.0.0.1:8000/v1
ctxline run "Add the numbers" --model script:replies.jsonl --tools mytools:TOOLS --json
ctxline run --session run-01hx… --db agent.db       # resume an unfinished run

The default tools read the root folder (``--root``, default .) and nothing else:
read_file, list_dir and search_files; ``--allow-shell`` adds a shell tool whose every
command is approved on the terminal unless ``--approve auto``. ``--tools module:attr``
adds the functions ``attr`` names (one function or a list). ``--json`` prints one object:
session, final, turns, tool_calls, usage, cost_usd, stop_reason, … . The exit code is 0
when the run ended with a final answer, 1 when it stopped for another reason, 2 for bad
input.
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from typing import Literal

import click
from rich.console import Console
from rich.markup import escape

from ctxline.cli.common import db_option, fail, one_line_errors
from ctxline.errors import ValidationError
from ctxline.models import make_client
from ctxline.pricing import format_usd
from ctxline.record.store import open_store
from ctxline.runner import Agent, Limits, StepResult, SubAgents, approval_policy, terminal_approval
from ctxline.runner.registry import as_tools
from ctxline.runner.tools import FunctionTool
from ctxline.runner.workspace import shell_tool, workspace_tools

__all__ = ["load_tools", "run_cmd"]

SYSTEM = (
    "You are an agent working in a folder of files. Use the tools to find facts before "
    "you answer; answer briefly when you are done."
)


def load_tools(spec: str) -> list[FunctionTool]:
    """``module:attr`` → the tools it names (a function or a list of functions)."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValidationError(f"expected module:attr, got {spec!r}", field="tools")
    if "" not in sys.path and str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValidationError(f"cannot import {module_name!r}: {exc}", field="tools") from None
    value = module
    for part in attr.split("."):
        if not hasattr(value, part):
            raise ValidationError(f"{module_name} has no attribute {attr!r}", field="tools")
        value = getattr(value, part)
    return as_tools(value)


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


@click.command("run")
@click.argument("task", required=False)
@click.option(
    "--model",
    required=True,
    help="kind:name: openai:…, anthropic:…, local:smollm2, script:FILE.jsonl.",
)
@click.option(
    "--base-url",
    default=None,
    help="An OpenAI-compatible endpoint (vLLM, Ollama, llama.cpp server).",
)
@click.option(
    "--tools",
    "tool_specs",
    multiple=True,
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
    help="Token budget (input + output) for the task.",
)
@click.option(
    "--max-cost", type=float, default=None, help="USD budget for the task (priced models only)."
)
@db_option
@click.option("--session", default=None, help="Session id; an unfinished run's id resumes it.")
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
    help="Offer a shell tool (each command approved unless --approve auto).",
)
@click.option("--no-default-tools", is_flag=True, help="Offer no file tools (only --tools).")
@click.option(
    "--agents",
    "subagents",
    is_flag=True,
    help="Offer spawn_agent: sub-agents in their own sessions.",
)
@click.option(
    "--system", default=SYSTEM, show_default=False, help="The system prompt of a new session."
)
@click.option("--context-window", type=click.IntRange(min=1), default=None)
@click.option("--max-output", type=click.IntRange(min=1), default=None)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object with the result.")
def run_cmd(
    task: str | None,
    model: str,
    base_url: str | None,
    tool_specs: tuple[str, ...],
    approve: str,
    max_turns: int,
    max_tokens: int | None,
    max_cost: float | None,
    db: str,
    session: str | None,
    root: Path,
    allow_shell: bool,
    no_default_tools: bool,
    subagents: bool,
    system: str,
    context_window: int | None,
    max_output: int | None,
    as_json: bool,
) -> None:
    """Run TASK with an agent on ctxline's loop (or resume --session's unfinished run)."""
    from dataclasses import replace

    from ctxline.runner.model_call import default_options

    with one_line_errors():
        client = make_client(model, base_url=base_url)
        tools: list[FunctionTool] = [] if no_default_tools else workspace_tools(root)
        if allow_shell:
            tools.append(shell_tool(root))
        for spec in tool_specs:
            tools.extend(load_tools(spec))
        options = default_options(client)
        if context_window is not None:
            options = replace(options, context_window=context_window)
        if max_output is not None:
            options = replace(options, max_output=max_output)
        mode: Literal["ask", "auto", "deny"] = (
            "ask" if approve == "ask" else "auto" if approve == "auto" else "deny"
        )
        store = open_store(db)
        known = session is not None and any(s.id == session for s in store.sessions())
        if task is None and not known:
            fail("give a TASK, or the --session of an unfinished run to resume it")
        agent = Agent(
            client,
            tools,
            store=store,
            session=session,
            system=system,
            options=options,
            limits=Limits(max_turns=max_turns, max_tokens=max_tokens, max_cost=max_cost),
            permission=approval_policy(mode),
            approve=terminal_approval() if mode == "ask" else None,
            subagents=SubAgents() if subagents else None,
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
            agent.start(task)
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
                err.print(f"[red]{escape(result.error)}[/red]")
        sys.exit(0 if result.stop_reason == "final" else 1)
