"""Tools from typed Python functions: the signature and docstring become the schema.

Why: every agent author writes the same glue — a JSON schema by hand, argument checks,
a try/except that turns a failure into something the model can act on, and a
``json.dumps`` of the return value. Here a plain function (sync or async) is the tool:

- the schema comes from the signature through pydantic (types, defaults, ``Literal``,
  nested models, ``Annotated[..., Field(...)]``), parameter descriptions from the
  docstring (Google ``Args:``, Sphinx ``:param x:`` or numpy ``Parameters``);
- arguments are validated before the function runs; a validation failure or an
  exception becomes seed 001's four-layer detailed error (what failed, the arguments,
  the error, a hint), never a crash of the loop;
- the return value is rendered as text (``str``) or JSON (anything pydantic can dump);
- metadata is read by code, never by the model: ``tags``, ``group``, ``max_calls``,
  ``timeout``, ``trimmable``, ``requires_approval``, ``background``, ``isolate`` (each
  call in a worker process, killed at its timeout).

A parameter annotated :class:`CallContext` is filled by the runner (the call, the
session, the blobs) and left out of the schema.

    >>> @tool(max_calls=3, tags=("weather",))
    ... def forecast(city: str, days: int = 1) -> str:
    ...     '''The weather forecast of a city.
    ...
    ...     Args:
    ...         city: The city's name.
    ...         days: How many days ahead.
    ...     '''
    ...     return f"{city}: sunny for {days} day(s)"
    >>> forecast.spec.parameters["properties"]["city"]
    {'description': "The city's name.", 'type': 'string'}
    >>> forecast.meta.max_calls
    3
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import inspect
import json
import re
import threading
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, overload

import pydantic
from pydantic_core import PydanticSerializationError, to_jsonable_python

from ctxline.errors import ValidationError
from ctxline.record.blobs import BlobStore
from ctxline.record.events import JsonValue, ToolCall
from ctxline.record.jsonvalue import as_object, get_array, get_object
from ctxline.render.neutral import ToolSpec
from ctxline.runner.isolate import check_isolable, in_worker_process
from ctxline.runner.schema import docstring, is_context, strip_titles, type_name
from ctxline.tools.base import ToolOutcome
from ctxline.tools.errors import detailed_tool_error

__all__ = [
    "TOOL_NAME",
    "ArgumentsInvalid",
    "CallContext",
    "FunctionTool",
    "ToolMeta",
    "function_tool",
    "in_daemon_thread",
    "render_value",
    "tool",
]

TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
"""What every provider accepts as a function name."""


@dataclass(frozen=True, slots=True)
class ToolMeta:
    """What code knows about a tool (the model sees only its name, description and schema)."""

    tags: tuple[str, ...] = ()
    group: str = ""
    max_calls: int | None = None
    """Calls that may run in one session; the one past it is refused and never runs."""
    timeout: float | None = None
    """Seconds a call may take (None: the runner's default)."""
    trimmable: bool = True
    """Whether the ladder may trim this tool's old outputs to a preview (recorded in the
    result's ``meta`` as ``"trimmable": false`` when it may not)."""
    requires_approval: bool = False
    """Every call goes to the permission hook's ``ask`` unless the policy allows it."""
    background: bool = False
    """A call starts a job and returns its handle at once; the output arrives later as a
    ``notification``."""
    isolate: bool = False
    """Each call runs in a worker process of its own, killed at its timeout (for C code
    that holds the interpreter lock, or an async tool that may block its loop;
    :mod:`ctxline.runner.isolate`)."""

    def __post_init__(self) -> None:
        if self.max_calls is not None and (
            isinstance(self.max_calls, bool)
            or not isinstance(self.max_calls, int)
            or self.max_calls < 1
        ):
            raise ValidationError(
                f"expected an integer >= 1, got {self.max_calls!r}", field="max_calls"
            )
        if self.timeout is not None and not self.timeout > 0:
            raise ValidationError(f"expected seconds > 0, got {self.timeout!r}", field="timeout")

    @property
    def kinds(self) -> tuple[str, ...]:
        """The event kinds a call appends (what a permission hook may weigh)."""
        return ("tool.result", "notification") if self.background else ("tool.result",)

    def to_json(self) -> dict[str, JsonValue]:
        out: dict[str, JsonValue] = {
            "tags": list(self.tags),
            "group": self.group,
            "max_calls": self.max_calls,
            "timeout": self.timeout,
            "trimmable": self.trimmable,
            "requires_approval": self.requires_approval,
            "background": self.background,
        }
        if self.isolate:  # only when set: the logged form of the other tools is unchanged
            out["isolate"] = True
        return out


@dataclass(frozen=True, slots=True)
class CallContext:
    """Given to a tool function that asks for it (a parameter annotated ``CallContext``)."""

    call: ToolCall
    session: str
    blobs: BlobStore
    turn: int = 0
    extra: Mapping[str, Any] = field(default_factory=dict)
    """What the app passed as ``Agent(context=...)`` (a database handle, a workspace, …)."""


class ArgumentsInvalid(Exception):
    """The model's arguments do not match the tool's schema (the function did not run)."""

    def __init__(self, tool: str, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("; ".join(problems) if problems else f"invalid arguments for {tool}")


@dataclass(frozen=True, eq=False)
class FunctionTool:
    """A Python function as a tool: its schema, its metadata, and the code to call it."""

    fn: Callable[..., Any]
    spec: ToolSpec
    meta: ToolMeta
    arguments: type[pydantic.BaseModel]
    context_param: str | None = None

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def is_async(self) -> bool:
        return inspect.iscoroutinefunction(self.fn)

    def validate(self, arguments: JsonValue) -> dict[str, Any]:
        """The arguments as the function takes them; :class:`ArgumentsInvalid` if they do not fit."""
        if not isinstance(arguments, dict):
            raise ArgumentsInvalid(
                self.name, [f"the arguments must be a JSON object, got {type(arguments).__name__}"]
            )
        try:
            model = self.arguments.model_validate(arguments)
        except pydantic.ValidationError as exc:
            problems = []
            for err in exc.errors(include_url=False):
                where = ".".join(str(p) for p in err["loc"]) or "(arguments)"
                problems.append(f"{where}: {err['msg']}")
            raise ArgumentsInvalid(self.name, problems) from None
        return {name: getattr(model, name) for name in type(model).model_fields}

    def invalid_text(self, exc: ArgumentsInvalid, arguments: JsonValue) -> str:
        """The four-layer error of a call whose arguments did not validate (nothing ran)."""
        schema = self.spec.parameters
        required = get_array(schema, "required")
        props = get_object(schema, "properties")
        shape = ", ".join(
            f"{name}{'' if name in required else '?'}: {type_name(as_object(props[name]))}" for name in props
        )
        hint = (
            f"The call was not run. Send a JSON object with the parameters of {self.name!r}"
            f" ({shape or 'no parameters'}; ? marks optional ones) and fix the fields named above."
        )
        problems = "\n".join(f"- {p}" for p in exc.problems)
        error = ArgumentsInvalid(self.name, exc.problems)
        text = detailed_tool_error(error, self.name, arguments, hint, include_traceback=False)
        return text.replace(f"ArgumentsInvalid: {error}", f"ArgumentsInvalid:\n{problems}", 1)

    async def invoke(
        self, values: dict[str, Any], context: CallContext, timeout: float | None = None
    ) -> Any:
        """Run the function (in a worker thread when it is sync) with validated ``values``.

        ``timeout`` is used by an isolated tool only (counted from the function's start in
        its process, :func:`~ctxline.runner.isolate.in_worker_process`); the others are
        timed by the caller."""
        kwargs = dict(values)
        if self.context_param is not None:
            kwargs[self.context_param] = context
        if self.meta.isolate:
            module, qualname = check_isolable(self.fn, self.name)
            return await in_worker_process(module, qualname, kwargs, timeout)
        if self.is_async:
            return await self.fn(**kwargs)
        return await in_daemon_thread(self.fn, kwargs)


async def in_daemon_thread(fn: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    """``fn(**kwargs)`` in a daemon thread of its own: a call abandoned at its timeout
    (a read of a FIFO, a hung socket) never blocks the loop's shutdown or the process's
    exit, as a thread of the default executor would (``run()`` would never return)."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()
    context = contextvars.copy_context()

    def settle(ok: bool, value: Any) -> None:
        if not future.done():
            (future.set_result if ok else future.set_exception)(value)

    def work() -> None:
        try:
            result: tuple[bool, Any] = (True, context.run(fn, **kwargs))
        except BaseException as exc:
            result = (False, exc)
        with contextlib.suppress(RuntimeError):  # the loop closed: the call was abandoned
            loop.call_soon_threadsafe(settle, *result)

    threading.Thread(
        target=work, name=f"ctxline-tool-{getattr(fn, '__name__', 'fn')}", daemon=True
    ).start()
    return await future


def function_tool(
    fn: Callable[..., Any] | FunctionTool,
    *,
    name: str | None = None,
    description: str | None = None,
    meta: ToolMeta | None = None,
) -> FunctionTool:
    """``fn`` as a :class:`FunctionTool` (see the module docstring); names what is wrong."""
    if isinstance(fn, FunctionTool):
        if name is None and description is None and meta is None:
            return fn
        fn = fn.fn
    if not callable(fn):
        raise ValidationError(f"a tool must be a function, got {fn!r}", field="tools")
    tool_name = str(name or getattr(fn, "__name__", ""))
    if not TOOL_NAME.match(tool_name):
        raise ValidationError(
            f"tool name {tool_name!r} must be 1-64 letters, digits, '_' or '-'", field="tools"
        )
    doc, param_docs = docstring(fn)
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception as exc:
        raise ValidationError(
            f"the annotations of tool {tool_name!r} cannot be resolved: {exc}", field="tools"
        ) from None
    fields: dict[str, Any] = {}
    context_param = None
    for param in inspect.signature(fn).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ValidationError(
                f"tool {tool_name!r} takes *{param.name}: a tool needs named parameters",
                field="tools",
            )
        annotation = hints.get(param.name, Any)
        if is_context(annotation, CallContext):
            context_param = param.name
            continue
        default = ... if param.default is param.empty else param.default
        info = pydantic.Field(default, description=param_docs.get(param.name))
        fields[param.name] = (annotation, info)
    try:
        model = pydantic.create_model(
            f"{tool_name}_arguments",
            __config__=pydantic.ConfigDict(extra="forbid", arbitrary_types_allowed=False),
            **fields,
        )
        schema = strip_titles(model.model_json_schema())
    except (pydantic.PydanticSchemaGenerationError, pydantic.PydanticUserError, TypeError) as exc:
        raise ValidationError(
            f"tool {tool_name!r} has a parameter pydantic cannot describe: {exc}", field="tools"
        ) from None
    schema.setdefault("properties", {})
    spec = ToolSpec(tool_name, str(description) if description is not None else doc, schema)
    meta = meta or ToolMeta()
    if meta.isolate:
        check_isolable(fn, tool_name)
        if context_param is not None:
            raise ValidationError(
                f"tool {tool_name!r} is isolated, so it cannot take a CallContext"
                " (the store stays in the agent's process)",
                field="tools",
            )
    return FunctionTool(fn, spec, meta, model, context_param)


@overload
def tool(
    fn: Callable[..., Any],
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    tags: tuple[str, ...] | list[str] = (),
    group: str = "",
    max_calls: int | None = None,
    timeout: float | None = None,
    trimmable: bool = True,
    requires_approval: bool = False,
    background: bool = False,
    isolate: bool = False,
) -> FunctionTool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    tags: tuple[str, ...] | list[str] = (),
    group: str = "",
    max_calls: int | None = None,
    timeout: float | None = None,
    trimmable: bool = True,
    requires_approval: bool = False,
    background: bool = False,
    isolate: bool = False,
) -> Callable[[Callable[..., Any]], FunctionTool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    tags: tuple[str, ...] | list[str] = (),
    group: str = "",
    max_calls: int | None = None,
    timeout: float | None = None,
    trimmable: bool = True,
    requires_approval: bool = False,
    background: bool = False,
    isolate: bool = False,
) -> FunctionTool | Callable[[Callable[..., Any]], FunctionTool]:
    """Decorate a function as a tool, with or without metadata (``@tool`` or ``@tool(...)``);
    ``tool(fn, name=…)`` makes a tool of an existing function."""
    meta = ToolMeta(
        tuple(tags), group, max_calls, timeout, trimmable, requires_approval, background, isolate
    )

    def wrap(f: Callable[..., Any]) -> FunctionTool:
        return function_tool(f, name=name, description=description, meta=meta)

    return wrap(fn) if fn is not None else wrap


def render_value(value: Any) -> ToolOutcome:
    """A tool's return value as the result text: ``str`` as it is, anything else as JSON.

    A :class:`~ctxline.tools.base.ToolOutcome` passes through (its events are appended
    with the result); ``None`` is ``(no output)``.
    """
    if isinstance(value, ToolOutcome):
        return value
    if isinstance(value, str):
        return ToolOutcome(value)
    if value is None:
        return ToolOutcome("(no output)")
    if isinstance(value, bytes | bytearray):
        return ToolOutcome(bytes(value).decode("utf-8", "replace"))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = dataclasses.asdict(value)
    try:
        data = to_jsonable_python(value)
        return ToolOutcome(json.dumps(data, ensure_ascii=False, indent=2))
    except (TypeError, ValueError, PydanticSerializationError):
        return ToolOutcome(str(value))
