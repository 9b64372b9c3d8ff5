"""Tool discovery: core tools always visible, the rest found with ``search_tools``.

Seed 003 and DESIGN §9. A :class:`Discovery` holds the discoverable tools (a
:class:`~ctxline.discovery.catalog.Catalog`); it is a context source that offers
``search_tools(query, limit?)``. A search returns names with one-line descriptions
(BM25, best first) and *reveals* them from the next step, in one of two modes:

- ``native``: the revealed schemas join the tools array. Each search that reveals a
  new tool changes the array once — one cache break, reported as ``tools`` in the
  prefix report — and the ladder's rung 3 may drop revealed schemas not used recently
  (:meth:`Discovery.optional`);
- ``cache-stable`` (the default, chosen by ``benchmarks/bench_discovery.py``): the
  tools array never changes (core tools, ``search_tools``, ``call_tool``); the search
  result itself — an appended message — carries the revealed schemas, and every
  revealed tool is called through ``call_tool(name, arguments)``, which checks the
  arguments against the revealed schema before anything runs.

What the model could see is folded from the record (:class:`~.fold.DiscoveryFold`):
a call is checked against the tools revealed when its request was prepared, also
after a resume (:meth:`Discovery.resolve`). An unknown tool is an error naming the
nearest tools — never a silent substitute.

    discovery = Discovery(Catalog.of(many_tools))               # cache-stable
    ctx = Context(store, "s", sources=[discovery])
    Agent(model, core_tools, discovery=Discovery(jira_tools, mode="native"))
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ctxline.errors import ValidationError
from ctxline.record.events import JsonValue, ToolCall
from ctxline.record.jsonvalue import as_object
from ctxline.render.neutral import ToolSpec
from ctxline.sources.base import BaseSource, Block, SourceStep, StepContext
from ctxline.sources.guide import MessageKind
from ctxline.tags import escape
from ctxline.tools.base import Tool, ToolEnv, ToolOutcome

from .catalog import Catalog, CatalogEntry, one_line
from .fold import CALL_TOOL, SEARCH_TOOLS, DiscoveryFold
from .validate import problems

__all__ = ["DEFAULT_MODE", "MODES", "Discovery", "Mode", "Resolution"]

Mode = Literal["cache-stable", "native"]
MODES: tuple[Mode, ...] = ("cache-stable", "native")
DEFAULT_MODE: Mode = "cache-stable"
MAX_SEARCH = 20

REVEALED_KIND = MessageKind(
    "ctx-tools-revealed",
    "the tools you found with search_tools before the summary",
    "They are still available: call them as before; search again to see a schema.",
    owner="discovery",
)


@dataclass(frozen=True, slots=True)
class Resolution:
    """How a call that concerns a discoverable tool is to be run, or why it is refused."""

    call: ToolCall | None
    """The call to run (for ``call_tool``: the inner tool's, with the same id)."""
    refused: str = ""
    """``unknown_tool`` or ``invalid_arguments`` when the call must not run."""
    reason: str = ""
    hint: str = ""

    def text(self, call: ToolCall) -> str:
        """The error result of a refused call: what, the arguments, why, a hint."""
        try:
            args = json.dumps(call.arguments, ensure_ascii=False, indent=2, sort_keys=True)
        except (TypeError, ValueError):
            args = repr(call.arguments)
        return "\n\n".join(
            [
                f"Error: the call to {call.name!r} was refused and not run: {self.reason}",
                "Arguments:\n" + args,
                "Hint: " + self.hint,
            ]
        )


def _spec(
    name: str, description: str, properties: dict[str, JsonValue], required: list[str]
) -> ToolSpec:
    schema: dict[str, JsonValue] = {
        "type": "object",
        "properties": properties,
        "required": list(required),
        "additionalProperties": False,
    }
    return ToolSpec(name, description, schema)


class Discovery(BaseSource):
    """Discoverable tools and the ``search_tools`` / ``call_tool`` tools (module docstring)."""

    name = "discovery"

    def __init__(
        self,
        tools: Catalog | Iterable[Any],
        *,
        mode: Mode = DEFAULT_MODE,
        reveal: int = 5,
        keep_recent: int = 3,
        handlers: Mapping[str, Callable[[dict[str, JsonValue]], str]] | None = None,
    ) -> None:
        if mode not in MODES:
            raise ValidationError(f"mode must be one of {list(MODES)}, got {mode!r}", field="mode")
        if isinstance(reveal, bool) or not isinstance(reveal, int) or not 1 <= reveal <= MAX_SEARCH:
            raise ValidationError(
                f"reveal must be 1 to {MAX_SEARCH}, got {reveal!r}", field="reveal"
            )
        if isinstance(keep_recent, bool) or not isinstance(keep_recent, int) or keep_recent < 0:
            raise ValidationError(
                f"keep_recent must be >= 0, got {keep_recent!r}", field="keep_recent"
            )
        items = list(tools) if not isinstance(tools, Catalog) else []
        self.catalog = tools if isinstance(tools, Catalog) else Catalog.of(items)
        self.tools_by_name: dict[str, Any] = {
            t.spec.name: t for t in items if hasattr(t, "spec") and hasattr(t, "meta")
        }
        """The runner's tools behind catalog names (the runner runs these itself)."""
        self.mode: Mode = mode
        self.reveal = reveal
        self.keep_recent = keep_recent
        self.handlers = dict(handlers or {})
        for reserved in (SEARCH_TOOLS, CALL_TOOL):
            if reserved in self.catalog:
                raise ValidationError(f"{reserved!r} is discovery's own tool name", field="tools")

    # --- the Source protocol ---------------------------------------------------------

    def kinds(self) -> Sequence[MessageKind]:
        return (REVEALED_KIND,)

    def fold(self) -> DiscoveryFold:
        return DiscoveryFold()

    def step(self, fold: DiscoveryFold, ctx: StepContext) -> SourceStep:
        assert isinstance(fold, DiscoveryFold)
        return SourceStep(meta={"mode": self.mode, "revealed": list(fold.revealed)})

    def tools(self) -> Sequence[Tool]:
        search = Tool(self.search_spec(), self._search)
        if self.mode == "native":
            return (search,)
        return (search, Tool(self.call_spec(), self._call))

    def reaffirm(self, fold: DiscoveryFold) -> Sequence[Block]:
        assert isinstance(fold, DiscoveryFold)
        lines = []
        for name in fold.revealed:
            entry = self.catalog.get(name)
            lines.append(f"- {name}: {entry.summary() if entry else '(no longer in the catalog)'}")
        if not lines:
            return ()
        how = "call_tool(name, arguments)" if self.mode == "cache-stable" else "your tools"
        return (Block("ctx-tools-revealed", "\n" + "\n".join(lines) + "\n", (("via", how),)),)

    # --- what the next request offers ------------------------------------------------

    def offered(self, fold: DiscoveryFold, forced: str | None = None) -> tuple[ToolSpec, ...]:
        """The discovered schemas the tools array holds next (native: the revealed ones;
        cache-stable: none). A ``forced`` catalog tool (``tool_choice``) is always in it."""
        names = list(fold.revealed) if self.mode == "native" else []
        if forced and forced in self.catalog and forced not in names:
            names.append(forced)
        return tuple(e.spec for n in names if (e := self.catalog.get(n)) is not None)

    def offer(self, ctx: Any, core: Sequence[Any] = (), forced: str | None = None) -> bool:
        """Before a request on a :class:`~ctxline.Context` (``ctx``): offer the ``core``
        tools and what :meth:`offered` adds, the revealed ones optional for rung 3.
        Returns whether the offered set changed (the runner calls this each step)."""
        fold = ctx.fold(self.name)
        assert isinstance(fold, DiscoveryFold), (
            "the Context was not given this Discovery as a source"
        )
        revealed = self.offered(fold, forced)
        changed: bool = ctx.set_tools([*core, *revealed], optional=self.optional(fold))
        return changed

    def optional(self, fold: DiscoveryFold) -> tuple[str, ...]:
        """The revealed schemas rung 3 may drop, least needed first (native mode only)."""
        return tuple(fold.drop_order(self.keep_recent)) if self.mode == "native" else ()

    def search_spec(self) -> ToolSpec:
        native = self.mode == "native"
        then = (
            "their full schemas are added to your tools from your next step"
            if native
            else "their full schemas come with the result; call them with call_tool"
        )
        return _spec(
            SEARCH_TOOLS,
            f"Find more tools: {len(self.catalog)} tools are available but not shown. Give words "
            f"about what you need (an action, a system, a parameter); the best matches are "
            f"listed with one line each and {then}. No match reveals nothing.",
            {
                "query": {
                    "type": "string",
                    "description": "What the tool should do.",
                    "minLength": 1,
                },
                "limit": {
                    "type": "integer",
                    "description": f"How many tools at most (default {self.reveal}).",
                    "minimum": 1,
                    "maximum": MAX_SEARCH,
                },
            },
            ["query"],
        )

    @staticmethod
    def call_spec() -> ToolSpec:
        return _spec(
            CALL_TOOL,
            "Call a tool that search_tools revealed: its name, and its arguments as its schema says.",
            {
                "name": {"type": "string", "description": "The revealed tool's name."},
                "arguments": {"type": "object", "description": "The tool's arguments."},
            },
            ["name", "arguments"],
        )

    # --- search_tools ----------------------------------------------------------------

    def search_text(self, query: str, limit: int) -> tuple[str, list[str]]:
        """The result text of a search and the names it reveals (ValidationError for a
        query without words)."""
        hits = self.catalog.search(query, limit)
        shown = one_line(query, 120)
        if not hits:
            return (
                f'No tools match "{shown}"; nothing was revealed. Try other words: what the tool '
                "does, the system it works on, or a parameter name.",
                [],
            )
        lines = [f'{len(hits)} tool{"s" if len(hits) != 1 else ""} for "{shown}" (best first):']
        lines += [f"- {h.name}: {h.entry.summary()}" for h in hits]
        if self.mode == "native":
            lines.append("Their schemas are in your tools from your next step.")
        else:
            lines.append("Call them with call_tool(name, arguments). Schemas (JSON, one a line):")
            lines += [escape(h.entry.schema_json()) for h in hits]
        return "\n".join(lines), [h.name for h in hits]

    def _search(self, call: ToolCall, env: ToolEnv) -> ToolOutcome:
        args = call.arguments if isinstance(call.arguments, dict) else {}
        query, limit = args.get("query"), args.get("limit", self.reveal)
        if isinstance(limit, float) and limit.is_integer():
            limit = int(limit)
        if not isinstance(query, str) or not query.strip():
            return ToolOutcome("[search_tools needs a query: words about the tool you need.]", True)
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_SEARCH:
            return ToolOutcome(
                f"[search_tools: limit must be a whole number from 1 to {MAX_SEARCH}.]", True
            )
        try:
            text, names = self.search_text(query, limit)
        except ValidationError as exc:
            return ToolOutcome(f"[search_tools: {escape(exc.message)}]", True)
        meta: dict[str, JsonValue] = {"discovery": {"query": query[:500], "revealed": list(names)}}
        return ToolOutcome(text, meta=meta)

    # --- checking a call against what the model saw ----------------------------------

    def nearest(self, name: str, others: Iterable[str] = ()) -> list[str]:
        found = self.catalog.nearest(name, 3)
        import difflib

        for other in difflib.get_close_matches(
            str(name).lower(), [o.lower() for o in others], 2, 0.6
        ):
            match = next(o for o in others if o.lower() == other)
            if match not in found:
                found.insert(0, match)
        return found[:3]

    def resolve(
        self, call: ToolCall, fold: DiscoveryFold, others: Iterable[str] = ()
    ) -> Resolution | None:
        """How to run ``call`` (None: it concerns no discoverable tool — run it as usual).

        A ``call_tool`` call is unwrapped into the inner tool's call after checking that
        the tool was revealed when the request was prepared and that the arguments fit
        its schema; a direct call of a discoverable tool (native) must name one the
        tools array held. ``others`` are the other tool names, for the nearest-tool hint.
        """
        if call.name == CALL_TOOL and self.mode == "cache-stable":
            args = call.arguments if isinstance(call.arguments, dict) else None
            name = args.get("name") if args is not None else None
            inner = args.get("arguments", {}) if args is not None else None
            if not isinstance(name, str) or not isinstance(inner, dict):
                return Resolution(
                    None,
                    "invalid_arguments",
                    'call_tool takes {"name": <a revealed tool>, "arguments": {…}}',
                    "Send the tool's name as a string and its arguments as a JSON object.",
                )
            return self._check(ToolCall(call.id, name, inner), fold, fold.seen_revealed, others)
        if call.name in self.catalog:
            if self.mode == "cache-stable" and call.name in fold.seen_revealed:
                return Resolution(
                    None,
                    "unknown_tool",
                    f"{one_line(call.name, 80)!r} is a revealed tool, not one of your tools",
                    f'Nothing was run. Call it as call_tool(name="{call.name}", arguments={{…}}).',
                )
            seen = fold.seen_array if self.mode == "native" else frozenset()
            return self._check(call, fold, seen or frozenset(), others)
        return None

    def _check(
        self, call: ToolCall, fold: DiscoveryFold, visible: frozenset[str], others: Iterable[str]
    ) -> Resolution:
        entry = self.catalog.get(call.name)
        shown = one_line(call.name, 80)
        if entry is None:
            near = self.nearest(call.name, others)
            return Resolution(
                None,
                "unknown_tool",
                f"there is no tool named {shown!r}",
                f"The nearest tools: {', '.join(near)}. Call search_tools to reveal one."
                if near
                else "Call search_tools with words about what you need.",
            )
        if call.name not in visible:
            how = (
                "search_tools reveals it"
                if call.name not in fold.revealed
                else ("it was revealed after this request was prepared: call it in your next step")
            )
            return Resolution(
                None,
                "unknown_tool",
                f"{shown!r} is not among the tools you were shown for this step",
                f"Nothing was run; {how}.",
            )
        found = problems(call.arguments, entry.spec.parameters)
        if found:
            schema = escape(json.dumps(entry.spec.parameters, ensure_ascii=False, sort_keys=True))
            listed = "; ".join(escape(p) for p in found)
            return Resolution(
                None,
                "invalid_arguments",
                f"the arguments do not fit the schema of {shown!r}: {listed}",
                f"Fix the fields named above; the schema of {shown!r} is {schema}",
            )
        return Resolution(call)

    def _call(self, call: ToolCall, env: ToolEnv) -> ToolOutcome:
        """``call_tool`` answered by a Context alone (the runner runs its tools itself)."""
        fold = env.fold(self.name)
        resolution = self.resolve(
            call, fold if isinstance(fold, DiscoveryFold) else DiscoveryFold()
        )
        assert resolution is not None
        if resolution.call is None:
            return ToolOutcome(resolution.text(call), True)
        inner = resolution.call
        handler = self.handlers.get(inner.name)
        if handler is None:
            return ToolOutcome(
                f"Error: {one_line(inner.name, 80)!r} has no handler in this process; the app"
                " runs it (Discovery.resolve gives the call to run). Nothing was run.",
                True,
            )
        return ToolOutcome(
            str(handler(dict(as_object(inner.arguments, "arguments")))), meta={"discovery": {"tool": inner.name}}
        )

    def entry(self, name: str) -> CatalogEntry | None:
        return self.catalog.get(name)
