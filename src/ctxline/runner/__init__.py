"""The agent runner: ctxline runs the loop around the context.

Tools are typed Python functions (:func:`tool`), limits are enforced where the tool
runs (:class:`Limits`), permissions are a hook on the structured call
(:mod:`~ctxline.runner.permissions`), background jobs arrive as notifications,
sub-agents run in their own sessions (:class:`SubAgents`), and every model call
records its usage. Everything is in the record, so a killed run resumes.

    from ctxline.runner import Agent, tool
    from ctxline.models import make_client

    @tool
    def add(a: int, b: int) -> int:
        "Add two numbers."
        return a + b

    result = Agent(make_client("local:smollm2"), [add]).run("What is 2 + 3?")
    print(result.final, result.stop_reason, result.usage)

See ``docs/runner.md``.
"""

from ctxline.runner.agents import SubAgents
from ctxline.runner.guards import Limits
from ctxline.runner.loop import Agent
from ctxline.runner.permissions import (
    Decision,
    PermissionRequest,
    allow,
    allow_all,
    approval_policy,
    ask,
    deny,
    terminal_approval,
)
from ctxline.runner.registry import ToolRegistry
from ctxline.runner.result import STOP_REASONS, RunResult, StepResult
from ctxline.runner.tools import CallContext, FunctionTool, ToolMeta, function_tool, tool
from ctxline.runner.tracing import NO_TRACER, Tracer, otel_tracer

__all__ = [
    "NO_TRACER",
    "STOP_REASONS",
    "Agent",
    "CallContext",
    "Decision",
    "FunctionTool",
    "Limits",
    "PermissionRequest",
    "RunResult",
    "StepResult",
    "SubAgents",
    "ToolMeta",
    "ToolRegistry",
    "Tracer",
    "allow",
    "allow_all",
    "approval_policy",
    "ask",
    "deny",
    "function_tool",
    "otel_tracer",
    "terminal_approval",
    "tool",
]
