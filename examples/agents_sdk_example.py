"""The OpenAI Agents SDK with ctxline: a session on the record, and ctxline's view as the model input.

Runs offline: the SDK's own ScriptedModel replies. The tool's long output is offloaded to
a preview and a handle; the model reads it back with ctxline's read_result tool.

    python examples/agents_sdk_example.py
"""

from __future__ import annotations

import asyncio

from agents import Agent, RunConfig, Runner, function_tool
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call

from ctxline import MemoryStore, Preparation, PrepareOptions
from ctxline.integrations.agents_sdk import CtxlineSession

LOG = "\n".join(f"2026-11-0{d % 9 + 1} job {d} finished, exit {d % 3}" for d in range(400))


@function_tool
def read_log(name: str) -> str:
    """Read a build log."""
    return LOG


def show(prep: Preparation) -> None:
    tokens = prep.report["tokens"]
    actions = [a["action"] for a in prep.report["actions"]]
    print(
        f"step {prep.header.step}: {tokens['total']} tokens (history {tokens['history']}) {actions}"
    )


async def main() -> None:
    session = CtxlineSession(
        "agents-demo", MemoryStore(), options=PrepareOptions(offload_tokens=500, fresh_tokens=500), on_prepare=show
    )
    handle: dict[str, str] = {}

    def read_back(call: object) -> ModelStep:
        text = str(call.input[-1]["output"])  # type: ignore[attr-defined]
        handle["h"] = text.split('handle="')[1].split('"')[0]
        return ModelStep(
            output=[function_call("read_result", {"handle": handle["h"], "page": 1}, call_id="c2")]
        )

    model = ScriptedModel(
        [
            ModelStep(output=[function_call("read_log", {"name": "nightly"}, call_id="c1")]),
            ModelStep.respond(read_back),
            ModelStep(output=[assistant_message("Job 399 exited with 0.")]),
        ]
    )
    agent = Agent(
        name="ops",
        instructions="Answer from the logs.",
        model=model,
        tools=[read_log, *session.tools],
    )
    config = RunConfig(call_model_input_filter=session.input_filter, tracing_disabled=True)
    result = await Runner.run(
        agent, "How did the last nightly job end?", session=session, run_config=config
    )
    print("final:", result.final_output)
    preview = model.calls[1].input[-1]["output"]
    print("the model saw a preview:", str(preview).startswith("[output shown as a preview"))
    rebuilt = sum(session.ctx.rebuild(h.step) is not None for h in session.ctx.requests())
    print(
        f"rebuilt {rebuilt} requests byte for byte; {len(await session.get_items())} items in the session"
    )


if __name__ == "__main__":
    asyncio.run(main())
