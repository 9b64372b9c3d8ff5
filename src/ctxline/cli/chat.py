"""CLI command ``chat``: a chat with a model through ctxline (every line is a task).

    printf 'hello\\n/exit\\n' | ctxline chat --model local:smollm2

Every error is one line on stderr and exit code 2.
"""

from __future__ import annotations

import sys
import time

import click
from rich.console import Console
from rich.markup import escape

from ctxline.cli.common import fail, one_line_errors
from ctxline.cli.hints import explain_model_error, is_endpoint_error
from ctxline.cli.options import harden
from ctxline.context import BUILTIN_TOOLS
from ctxline.models import make_client
from ctxline.record.events import ModelUsage
from ctxline.record.store import open_store
from ctxline.runner import Agent, Limits, StepResult
from ctxline.view.options import PrepareOptions

__all__ = ["chat_cmd"]


@click.command("chat")
@click.option("--model", default="local:smollm2", show_default=True)
@click.option("--base-url", default=None)
@click.option(
    "--db",
    default=":memory:",
    show_default=True,
    help="Where the record goes (a SQLite path keeps it).",
)
@click.option("--session", default="chat", show_default=True)
@click.option(
    "--system", "persona", default="You are a helpful assistant. Answer briefly.", show_default=True
)
@click.option("--max-output", type=click.IntRange(1, 1_000_000), default=256, show_default=True)
def chat_cmd(
    model: str, base_url: str | None, db: str, session: str, persona: str, max_output: int
) -> None:
    """Chat with a model through ctxline: every line is a task on the agent loop.

    Reads lines from stdin until end of input or /exit. Calls to ctxline's built-in tools
    (read_result, search_history, todo) are run and answered; other tool calls get an
    error. Each line gets at most MAX_TOOL_ROUNDS model calls.
    """
    with one_line_errors():
        client = make_client(model, base_url=base_url)
        name = client.name.partition(":")[2]
        options = PrepareOptions(
            provider=client.provider, model=name, context_window=8_192, max_output=max_output
        )
        store = open_store(db)
        # a local model has no tool calling: offer it no tools (it would never see them)
        builtin = () if client.name.startswith("local:") else BUILTIN_TOOLS
        agent = Agent(
            client,
            store=store,
            session=session,
            system=persona,
            options=options,
            limits=Limits(max_turns=MAX_TOOL_ROUNDS),
            builtin_tools=builtin,
            name="chat",
        )
        console = Console()
        console.print(
            f"[bold]ctxline chat[/bold] with {escape(client.name)} — /exit or end of input to stop"
        )
        interactive = sys.stdin.isatty()
        while True:
            if interactive:
                console.print("[bold cyan]you>[/bold cyan] ", end="")
            line = sys.stdin.readline()
            if not line or line.strip() == "/exit":
                break
            text = line.strip()
            if not text:
                continue
            if not interactive:
                console.print(f"[bold cyan]you>[/bold cyan] {escape(text)}")
            agent.start(text)
            while True:
                started = time.perf_counter()
                step = agent.step()
                _show(step, agent, name, console, time.perf_counter() - started)
                if step.done:
                    break
            if agent.result().stop_reason == "model_error":
                error = agent.result().error
                if is_endpoint_error(error):  # every later line would fail the same way
                    fail(explain_model_error(error, base_url))
                console.print(f"[red]{escape(explain_model_error(error, base_url))}[/red]")
        agent.close()
        store.close()


MAX_TOOL_ROUNDS = 4
"""Model calls per user line: built-in tool calls (read_result, search_history) are run and
answered, up to this many rounds."""


def _show(step: StepResult, agent: Agent, name: str, console: Console, seconds: float) -> None:
    """One step on the terminal: the reply, its usage beside ctxline's estimate, the calls."""
    reply = step.reply
    if reply is None:
        return
    if reply.text.strip():
        console.print(f"[bold green]{escape(name)}>[/bold green] {escape(reply.text.strip())}")
    usage = reply.usage
    event = next(
        (e.event for e in reversed(agent.ctx.events) if isinstance(e.event, ModelUsage)), None
    )
    estimate = event.estimated_input if event is not None else None
    console.print(
        f"[dim]step {event.request_step if event else '?'}: input {usage['input']} tokens (ctxline "
        f"estimated {estimate}), cache read {usage['cache_read']}, output "
        f"{usage['output']}, {seconds:.1f} s[/dim]"
    )
    for result in step.results:
        console.print(f"[dim]tool {escape(result.name)} → {len(result.content)} characters[/dim]")


# hardened where defined, as the ctxline group would: imported directly, it refuses the same
harden(chat_cmd)
