"""A tool call in a worker process of its own, killed at its timeout.

Why: a sync tool runs in a daemon thread, abandoned at its timeout — but a thread cannot
be stopped, and C code that holds the interpreter lock (a catastrophic regex, a parser
stuck in a loop) or an ``async`` tool that blocks its event loop stops the whole agent, so
the timeout never fires. A tool marked ``isolate=True`` runs in a fresh process (the
``spawn`` start method: no state copied from a threaded parent); its timeout kills it.

    @tool(isolate=True, timeout=5)
    def grep(pattern: str, text: str) -> list[str]:
        return [line for line in text.splitlines() if re.search(pattern, line)]

The function must be importable by name from its module (a module-level function, the
way ``pickle`` finds it), and its arguments and return value must pickle; it gets no
:class:`~ctxline.runner.tools.CallContext` (the store stays in this process). Each call
pays a process start (about 0.1–0.5 s, the function's imports included).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import inspect
import multiprocessing
import threading
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from ctxline.errors import ValidationError

__all__ = ["STARTUP_LIMIT", "ToolProcessDied", "check_isolable", "in_worker_process"]

STARTUP_LIMIT = 120.0
"""Seconds a worker may take to start and import the tool's module (not the call's time)."""
STARTED = ("started",)


class ToolProcessDied(RuntimeError):
    """The tool's worker process ended without an answer (killed, crashed, or its
    result could not be sent back)."""


def check_isolable(fn: Callable[..., Any], tool_name: str) -> tuple[str, str]:
    """The (module, qualified name) a worker imports ``fn`` by, or a ValidationError
    saying why it cannot."""
    module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", "")
    if not module or module == "__main__" or "<" in qualname:
        raise ValidationError(
            f"tool {tool_name!r} is isolated, so it must be a module-level function of an"
            f" importable module (got {module}.{qualname})",
            field="tools",
        )
    return module, qualname


def _resolve(module: str, qualname: str) -> Callable[..., Any]:
    target: Any = importlib.import_module(module)
    for part in qualname.split("."):
        target = getattr(target, part)
    fn: Callable[..., Any] = getattr(target, "fn", target)  # @tool bound the name to a FunctionTool
    return fn


def _child(conn: Connection, module: str, qualname: str, kwargs: dict[str, Any]) -> None:
    try:
        fn = _resolve(module, qualname)
        conn.send(STARTED)  # the imports are done: the call's own time starts here
        value = fn(**kwargs)
        if inspect.isawaitable(value):
            value = asyncio.run(_awaited(value))
        answer: tuple[bool, Any] = (True, value)
    except BaseException as exc:
        answer = (False, exc)
    try:
        conn.send(answer)
    except Exception as exc:  # the value or the exception does not pickle: say what it was
        with contextlib.suppress(Exception):
            kind = "value" if answer[0] else "exception"
            conn.send((False, ToolProcessDied(f"the tool's {kind} cannot be sent back: {exc}")))
    finally:
        conn.close()


async def _awaited(value: Any) -> Any:
    return await value


async def in_worker_process(
    module: str, qualname: str, kwargs: dict[str, Any], timeout: float | None = None
) -> Any:
    """``module.qualname(**kwargs)`` in a fresh process; its exception is raised here.

    ``timeout`` counts from the function's start (the process start and the module's
    imports are bounded by :data:`STARTUP_LIMIT` instead): past it, ``TimeoutError``.
    The process is killed when the call times out or is cancelled."""
    spawn = multiprocessing.get_context("spawn")
    parent, child = spawn.Pipe(duplex=False)
    process = spawn.Process(
        target=_child, args=(child, module, qualname, kwargs), name=f"ctxline-tool-{qualname}"
    )
    process.daemon = True
    process.start()
    child.close()
    loop = asyncio.get_running_loop()
    started: asyncio.Future[None] = loop.create_future()
    future: asyncio.Future[tuple[bool, Any]] = loop.create_future()

    def begin() -> None:
        if not started.done():
            started.set_result(None)

    def settle(answer: tuple[bool, Any]) -> None:
        begin()  # a death before the start message ends the wait for the start too
        if not future.done():
            future.set_result(answer)

    def wait() -> None:
        try:
            first = parent.recv()
            if first == STARTED:
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(begin)
                first = parent.recv()
            answer: tuple[bool, Any] = first
        except (EOFError, OSError):
            process.join(5)
            answer = (False, ToolProcessDied(f"the tool's process died (exit code {process.exitcode})"))
        except Exception as exc:  # it answered with something that does not unpickle here
            answer = (False, ToolProcessDied(f"the tool's answer cannot be read: {exc}"))
        with contextlib.suppress(RuntimeError):  # the loop closed: the call was abandoned
            loop.call_soon_threadsafe(settle, answer)

    threading.Thread(target=wait, name=f"ctxline-wait-{qualname}", daemon=True).start()
    try:
        try:
            await asyncio.wait_for(asyncio.shield(started), STARTUP_LIMIT)
        except TimeoutError:
            raise ToolProcessDied(f"the tool's process did not start within {STARTUP_LIMIT:g} s") from None
        ok, value = await asyncio.wait_for(future, timeout)
    finally:
        if process.is_alive():
            process.kill()  # a timeout (or a cancelled run): the process stops here
        process.join(5)
        parent.close()
    if ok:
        return value
    raise value
