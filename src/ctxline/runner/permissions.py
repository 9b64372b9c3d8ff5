"""Permissions: a hook that decides each call from its structure, never from rendered text.

Why: tags describe origin, they never grant permission (seed 000, DESIGN §5) — so the
decision to run a call is taken in code, on the structured call: the tool's name, the
parsed arguments, the tool's metadata and the event kinds the call would append. The
hook answers :func:`allow`, :func:`deny` (with a reason the model is told) or
:func:`ask`; ``ask`` goes to an approval callback (the CLI prompts on the terminal).
A denied call is never executed: it gets an error result naming the reason.

:func:`approval_policy` is the CLI's ``--approve ask|auto|deny``: tools marked
``requires_approval`` are asked about, allowed or denied; every other tool is allowed.

    def no_deletes(request: PermissionRequest) -> Decision:
        if request.name == "shell" and "rm " in str(request.arguments.get("command", "")):
            return deny("deleting files is not allowed in this workspace")
        return allow()

    Agent(client, tools, permission=no_deletes)
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ctxline.record.events import JsonValue, ToolCall
from ctxline.runner.tools import ToolMeta

__all__ = [
    "ApprovalCallback",
    "Decision",
    "PermissionHook",
    "PermissionRequest",
    "allow",
    "allow_all",
    "approval_policy",
    "ask",
    "deny",
    "resolve",
    "terminal_approval",
]

Action = Literal["allow", "deny", "ask"]


@dataclass(frozen=True, slots=True)
class Decision:
    """What a permission hook decided for one call (allow, deny or ask) and why."""

    action: Action
    reason: str = ""


def allow() -> Decision:
    return Decision("allow")


def deny(reason: str) -> Decision:
    return Decision("deny", reason)


def ask(reason: str = "") -> Decision:
    return Decision("ask", reason)


@dataclass(frozen=True, slots=True)
class PermissionRequest:
    """One call as the hook sees it: structure only (no rendered text)."""

    call: ToolCall
    meta: ToolMeta
    """The tool's metadata (the defaults for ctxline's own tools)."""
    kinds: tuple[str, ...]
    """The event kinds the call would append (``tool.result``; ``notification`` for a job)."""
    session: str
    turn: int
    calls_so_far: int
    """Calls of this tool that ran in this session before this one."""
    builtin: bool = False
    """One of ctxline's own tools (read_result, search_history, todo, spawn_agent)."""
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.call.name

    @property
    def arguments(self) -> dict[str, JsonValue]:
        return self.call.arguments if isinstance(self.call.arguments, dict) else {}


PermissionHook = Callable[[PermissionRequest], Decision]
ApprovalCallback = Callable[[PermissionRequest], bool | Decision]
"""Asked when the hook answers ``ask``: True/allow runs the call, False/deny refuses it."""


def allow_all(request: PermissionRequest) -> Decision:
    """Allow every call except those marked ``requires_approval`` (asked about)."""
    return ask("this tool requires approval") if request.meta.requires_approval else allow()


def approval_policy(mode: Literal["ask", "auto", "deny"]) -> PermissionHook:
    """``--approve``: what happens to the calls of tools marked ``requires_approval``."""

    def hook(request: PermissionRequest) -> Decision:
        if not request.meta.requires_approval or mode == "auto":
            return allow()
        if mode == "deny":
            return deny(f"{request.name} requires approval and approvals are off (--approve deny)")
        return ask(f"{request.name} requires approval")

    return hook


def resolve(
    hook: PermissionHook, request: PermissionRequest, approve: ApprovalCallback | None
) -> Decision:
    """The final allow or deny of ``request``: the hook's answer, an ``ask`` settled by
    ``approve`` (no callback: denied). A hook that raises denies the call."""
    try:
        decision = hook(request)
    except Exception as exc:  # a broken policy must fail closed
        return deny(f"the permission hook failed ({type(exc).__name__}: {exc})")
    if not isinstance(decision, Decision):
        return deny(f"the permission hook answered {decision!r}, not allow/deny/ask")
    if decision.action != "ask":
        return decision
    if approve is None:
        return deny(
            (decision.reason + ": " if decision.reason else "")
            + "it needs approval and nobody is there to approve it"
        )
    try:
        answer = approve(request)
    except Exception as exc:
        return deny(f"the approval failed ({type(exc).__name__}: {exc})")
    if isinstance(answer, Decision):
        if answer.action == "ask":
            return deny("the approval callback answered ask again")
        return answer
    return allow() if answer is True else deny("the user did not approve this call")


def _shown(value: JsonValue, width: int = 400) -> str:
    text = repr(value)
    return text if len(text) <= width else text[: width - 1] + "…"


def terminal_approval(
    read: Callable[[], str] | None = None, write: Callable[[str], Any] | None = None
) -> ApprovalCallback:
    """Ask on the terminal: ``Allow shell {'command': 'ls'}? [y/N]`` (no terminal: denied).

    Control characters of the model's arguments are shown escaped (``repr``), so a
    command cannot redraw the prompt.
    """

    def approve(request: PermissionRequest) -> Decision:
        if read is None and not sys.stdin.isatty():
            return deny("it needs approval and there is no terminal to ask")
        out = write or (lambda text: print(text, end="", file=sys.stderr, flush=True))
        out(f"Allow {request.name!r} {_shown(request.call.arguments)}? [y/N] ")
        try:
            answer = (read or sys.stdin.readline)().strip().lower()
        except (EOFError, OSError):
            answer = ""
        return allow() if answer in ("y", "yes") else deny("the user did not approve this call")

    return approve
