"""The three loops under test, on the same server, model, tools, turn cap and temperature.

- ``ctxline``: ctxline's :class:`~ctxline.runner.Agent` with the task's tools and no
  others (``builtin_tools=()``: the same tools as the other loops), its guide and status
  bar, through ``make_client("openai:…", base_url=…)``; ``ctxline_defaults`` is the same
  with ctxline's four built-in tools offered too (its default: ~700 more tokens a request),
  ``ctxline_nostatus`` without the status bar (``status_mode="off"``);
  ``start_backup`` is a background tool (``ToolMeta(background=True)``): its output
  arrives as a notification.
- ``plain``: the loop everyone writes first, the ``openai`` SDK over one raw message list;
  a background output is appended as a user message when it arrives.
- ``sdk``: the OpenAI Agents SDK's ``Runner`` with ``OpenAIChatCompletionsModel``; a
  background output is added as a user message through ``call_model_input_filter``
  (kept in place on later calls).

Each returns :class:`Outcome`; the server's request log gives tokens and times.

    outcome = LOOPS["plain"](base_url, box, prompt, SYSTEM, max_turns=6, max_output=256)
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ctxline.sources.statusbar import StatusMode

__all__ = ["LOOPS", "SYSTEM", "Box", "Loop", "Outcome", "timed"]

SYSTEM = (
    "You are a helpful assistant working in a folder of text files. Use the tools to do "
    "the task, then answer briefly."
)
API_KEY = "sk-local-bench"


@dataclass(frozen=True, slots=True)
class Outcome:
    final: str
    turns: int
    stop_reason: str
    error: str = ""


class Box(Protocol):
    """What a loop needs of a task's tools (``tasks.Toolbox``, ``bfcl.BfclBox``)."""

    threads: list[threading.Thread]
    pending: list[str]

    def functions(self, *, background: bool = False) -> list[Callable[..., Any]]: ...
    def drain(self) -> list[str]: ...
    def next_turn(self) -> None: ...


Prompt = str | Sequence[str]
"""One task, or the user turns of one conversation (BFCL multi-turn), each with the cap."""
Loop = Callable[[str, Box, Prompt, str, int, int], Outcome]


def _turns(prompt: Prompt) -> list[str]:
    return [prompt] if isinstance(prompt, str) else list(prompt)


def _run_ctxline(
    base_url: str,
    box: Box,
    prompt: Prompt,
    system: str,
    max_turns: int,
    max_output: int,
    *,
    builtins: bool,
    model: str,
    status: StatusMode | None = None,
    guide: bool = True,
) -> Outcome:
    from ctxline.models import make_client
    from ctxline.runner import Agent, Limits, tool
    from ctxline.runner.model_call import default_options

    client = make_client(f"openai:{model}", base_url=base_url)
    options = replace(default_options(client), max_output=max_output)
    tools = [
        tool(background=True)(f) if f.__name__ == "start_backup" else f
        for f in box.functions(background=False)
    ]
    with (
        _guide_off() if not guide else contextlib.nullcontext(),
        Agent(
            client,
            tools,
            system=system,
            options=options,
            limits=Limits(max_turns=max_turns),
            builtin_tools=None if builtins else (),
            status_mode=status,
        ) as agent,
    ):
        turns = 0
        for index, text in enumerate(_turns(prompt)):
            if index:
                box.next_turn()
            result = agent.run(text)  # the turn cap counts per user message
            turns += result.turns
    return Outcome(result.final, turns, result.stop_reason, result.error)


@contextlib.contextmanager
def _guide_off() -> Iterator[None]:
    """A measurement variant only: every guide composes to nothing while one loop runs
    (the loops run one at a time, in one thread)."""
    from ctxline.sources.guide import GuideRegistry

    compose = GuideRegistry.compose
    GuideRegistry.compose = lambda self: ""  # type: ignore[method-assign]
    try:
        yield
    finally:
        GuideRegistry.compose = compose  # type: ignore[method-assign]


def run_plain(
    base_url: str, box: Box, prompt: Prompt, system: str, max_turns: int, max_output: int
) -> Outcome:
    import openai

    from ctxline.runner import function_tool

    functions = {f.__name__: f for f in box.functions(background=True)}
    tools = [
        {
            "type": "function",
            "function": {
                "name": name,
                "description": spec.description,
                "parameters": spec.parameters,
            },
        }
        for name, spec in ((n, function_tool(f).spec) for n, f in functions.items())
    ]
    client = openai.OpenAI(base_url=base_url, api_key=API_KEY, timeout=1800)
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}]
    outcome, total = Outcome("", 0, "final"), 0
    for index, text in enumerate(_turns(prompt)):
        if index:
            box.next_turn()
        messages.append({"role": "user", "content": text})
        outcome = _plain_turn(client, box, functions, tools, messages, max_turns, max_output)
        total += outcome.turns
    return replace(outcome, turns=total)


def _plain_turn(
    client: Any,
    box: Box,
    functions: dict[str, Callable[..., Any]],
    tools: list[dict[str, Any]],
    messages: list[dict[str, Any]],
    max_turns: int,
    max_output: int,
) -> Outcome:
    for turn in range(1, max_turns + 1):
        messages.extend({"role": "user", "content": n} for n in box.drain())
        response = client.chat.completions.create(
            model="plain",
            messages=messages,
            tools=tools,
            max_tokens=max_output,
            temperature=0,
        )
        message = response.choices[0].message
        calls = message.tool_calls or []
        entry: dict[str, Any] = {"role": "assistant", "content": message.content or ""}
        if calls:
            entry["tool_calls"] = [c.model_dump() for c in calls]
        messages.append(entry)
        if not calls:
            if any(t.is_alive() for t in box.threads) or box.pending:
                for t in box.threads:
                    t.join()
                continue  # the job's output is the next user message
            return Outcome(message.content or "", turn, "final")
        for call in calls:
            function = getattr(call, "function", None)
            name = function.name if function is not None else ""
            try:
                arguments = json.loads(function.arguments or "{}") if function else {}
                output = str(functions[name](**arguments))
            except Exception as exc:  # what the model sees, as a plain loop reports it
                output = f"error: {type(exc).__name__}: {exc}"
            messages.append({"role": "tool", "tool_call_id": call.id, "content": output})
    return Outcome("", max_turns, "max_turns")


def run_sdk(
    base_url: str, box: Box, prompt: Prompt, system: str, max_turns: int, max_output: int
) -> Outcome:
    from agents import Agent, ModelSettings, OpenAIChatCompletionsModel, RunConfig, Runner
    from agents import function_tool as sdk_tool
    from agents.exceptions import MaxTurnsExceeded
    from agents.run import CallModelData, ModelInputData
    from openai import AsyncOpenAI

    delivered: list[tuple[int, Any]] = []

    def with_notifications(data: CallModelData[Any]) -> ModelInputData:
        items = list(data.model_data.input)
        for position, item in delivered:
            items.insert(position, item)
        for text in box.drain():
            item = {"role": "user", "content": text}
            delivered.append((len(items), item))
            items.append(item)  # type: ignore[arg-type]
        return ModelInputData(input=items, instructions=data.model_data.instructions)

    model = OpenAIChatCompletionsModel(
        model="sdk", openai_client=AsyncOpenAI(base_url=base_url, api_key=API_KEY, timeout=1800)
    )
    agent: Agent[Any] = Agent(
        name="bench",
        instructions=system,
        model=model,
        tools=[sdk_tool(f) for f in box.functions(background=True)],
        model_settings=ModelSettings(temperature=0, max_tokens=max_output),
    )
    config = RunConfig(call_model_input_filter=with_notifications, tracing_disabled=True)
    history: list[Any] = []
    outcome = Outcome("", 0, "final")
    for index, text in enumerate(_turns(prompt)):
        if index:
            box.next_turn()
        history.append({"role": "user", "content": text})
        try:
            result = Runner.run_sync(agent, history, max_turns=max_turns, run_config=config)
        except MaxTurnsExceeded as exc:
            outcome = Outcome("", outcome.turns + max_turns, "max_turns")
            data = exc.run_data
            if data is not None:  # what the capped run said and did, for the next turn
                past = [data.input] if isinstance(data.input, str) else list(data.input)
                history = [*past, *(item.to_input_item() for item in data.new_items)]
            continue
        except Exception as exc:
            return Outcome("", outcome.turns, "error", f"{type(exc).__name__}: {exc}")
        history = result.to_input_list()
        outcome = Outcome(
            str(result.final_output or ""), outcome.turns + len(result.raw_responses), "final"
        )
    return outcome


run_ctxline: Loop = partial(_run_ctxline, builtins=False, model="ctxline")
run_ctxline_nostatus: Loop = partial(
    _run_ctxline, builtins=False, model="ctxline_nostatus", status="off"
)
run_ctxline_noguide: Loop = partial(
    _run_ctxline, builtins=False, model="ctxline_noguide", guide=False
)
run_ctxline_defaults: Loop = partial(_run_ctxline, builtins=True, model="ctxline_defaults")

LOOPS: dict[str, Loop] = {
    "ctxline": run_ctxline,
    "ctxline_defaults": run_ctxline_defaults,
    "ctxline_nostatus": run_ctxline_nostatus,
    "ctxline_noguide": run_ctxline_noguide,
    "plain": run_plain,
    "sdk": run_sdk,
}


def timed(loop: Loop, *args: Any) -> tuple[Outcome, float]:
    started = time.perf_counter()
    try:
        outcome = loop(*args)
    except Exception as exc:  # a loop that crashes fails the task; the run goes on
        outcome = Outcome("", 0, "error", f"{type(exc).__name__}: {exc}")
    return outcome, time.perf_counter() - started
