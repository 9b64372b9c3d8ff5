"""Options and step inputs of ``prepare``: everything besides the record that shapes a request.

Both are logged in each request header (``to_json``), so a request can be rebuilt from
the record and its header alone.

    options = PrepareOptions(provider="anthropic", context_window=200_000, max_output=32_000)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime
from functools import lru_cache

from ctxline.errors import ValidationError
from ctxline.record.codec import format_at, parse_at
from ctxline.record.events import JsonValue
from ctxline.render.neutral import Provider
from ctxline.sources.timectx import zone_info

__all__ = ["FRESH_CAP", "FRESH_MIN", "FRESH_SHARE", "PrepareOptions", "Provider", "StepInputs"]

FRESH_SHARE = 0.05
"""The default fresh limit's share of the input limit."""
FRESH_MIN = 1_000
"""The default fresh limit's floor (never above a quarter of a tiny window)."""
FRESH_CAP = 25_000
"""The default fresh limit's ceiling: Claude Code's cap on one tool output (its
``MAX_MCP_OUTPUT_TOKENS`` default), a size agents are built to read whole."""


@dataclass(frozen=True, slots=True)
class PrepareOptions:
    """How a request is prepared: provider, model, window, output reserve, tokenizer, budget."""

    provider: Provider = "openai"
    model: str = "gpt-4.1"
    context_window: int = 128_000
    max_output: int = 4_096
    tokenizer: str = "o200k_base"
    pressure: float = 0.8
    target: float = 0.6
    cache: bool = True
    """Anthropic: put cache_control breakpoints at the end of the prefix and of history."""
    offload_tokens: int | None = None
    """An *older* tool result over this many tokens becomes a preview and a handle at the
    next reduction of the view (0: never; None: 1,000, or a quarter of the input limit if
    that is less). Peers keep outputs of 5–10k characters (Letta, Pydantic AI Harness);
    1,000 tokens is about 4k characters. The newest turn's results are whole up to
    ``fresh_tokens``."""
    fresh_tokens: int | None = None
    """A tool result over this many tokens is shown as a preview from the start; under it,
    the model sees the output it just asked for whole (0: every result over the offload
    limit is a preview at once, the behaviour before there was a fresh limit; None: 5 % of
    the input limit, at least 1,000 and at most 25,000 tokens — Claude Code's own cap on
    one tool output). Measured on the shared sessions (docs/budget.md), 5 % meets every
    bound of the budget — cache breaks, billed input — while a quarter cost a compaction
    more on mini-swe-agent; ``compact_target + fresh`` stays far under ``target``, so a
    compaction can always make room for the newest result."""
    compact_target: float = 0.3
    """Compaction, the last rung, reduces to this share of the input limit: it breaks the
    cache and summarizes, so when it has to run it buys a longer quiet period."""
    timestamps: str | None = None
    """An IANA zone: prefix user messages and tool results with ``[YYYY-MM-DD HH:MM:SS]``
    of their append time in that zone (seed 001's side-channel stamps). None: off."""
    min_compaction_saving: float = 0.05
    """A compaction must save at least this share of the request, or it stops with
    :class:`~ctxline.errors.CompactionError` and writes nothing (peers have been seen to
    compact 29 times for 0.4 %)."""
    keep_groups: int = 2
    """The most recent assistant groups, whose results are never trimmed."""
    summary_tokens: int = 2_000
    """The most a compaction summary may take."""
    cache_read: float | None = None
    """Price of a cached input token as a share of a normal one (None: the model's price in
    ``ctxline/data/pricing.json``, else the provider's default in :mod:`ctxline.cost`)."""
    cache_write: float | None = None
    """Price of an input token written to the cache, as a share of a normal one (1.25 for
    Anthropic's 5-minute cache; None: from the model or the provider, as ``cache_read``)."""
    edit_gain: float | None = 5.0
    """Under the pressure line the view is edited (folds, trims) only when the edit is
    expected to save, over the coming steps, at least this many times what re-sending the
    whole request uncached costs (docs/budget.md: few, large edits; 1 makes them as soon
    as they pay). None: never under the pressure line."""
    defer: bool = True
    """Over the pressure line (and under the input limit), wait while the extra cache reads
    of waiting cost less than the reduction's price (ski rental, docs/budget.md)."""
    reduce_weight: float = 3.0
    """The ski rental's price of a reduction, in rewrites of the target: besides the
    rewrite itself, a reduction before the limit breaks the cache (a slow first token)
    and gives up the room left under the limit, so the next reduction comes sooner
    (docs/budget.md: 3 takes mini-swe-agent from 1.45 to 1.1 cache breaks per 100 steps
    for 7 % more billed input; 1 is the plain rewrite)."""

    hide_ended_rules: bool = True
    """A rule's ``set``/``replace`` block whose rule a later op ended (revoked, expired or
    replaced) shows as its attributes with ``ended="yes"``, its text left out: a model
    that still read the text named the revoked rule's language in 10 of 20 ``ctxline eval``
    instances, 4 of 20 with it hidden (docs/eval.md). The view renders again from the cut
    when a rule ends (one cache break). False: every version shown as recorded, as in
    headers logged before the option (``from_json``)."""
    call_labels: bool = False
    """Start each tool result with ``[call #3 of read_file]`` (its number among the calls
    of that tool in the record), so a model can tell repeated calls apart. Off: the
    results are shown as recorded (and the logged options leave the key out)."""

    def __post_init__(self) -> None:
        if self.provider not in ("openai", "anthropic"):
            raise ValidationError(
                f"unknown provider {self.provider!r} (openai, anthropic)", field="provider"
            )
        if (
            self.context_window <= 0
            or self.max_output < 0
            or self.max_output >= self.context_window
        ):
            raise ValidationError(
                f"need 0 <= max_output < context_window, got {self.max_output} and {self.context_window}",
                field="max_output",
            )
        if not 0 < self.target <= self.pressure <= 1:
            raise ValidationError("need 0 < target <= pressure <= 1", field="pressure")
        if self.timestamps is not None:
            zone_info(self.timestamps)
        if not 0 < self.compact_target <= self.target:
            raise ValidationError("need 0 < compact_target <= target", field="compact_target")
        for name in ("offload_tokens", "fresh_tokens"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise ValidationError(f"{name} must be a non-negative integer or None", field=name)
        if self.cache_read is not None and not 0 <= self.cache_read <= 1:
            raise ValidationError("cache_read must be within [0, 1]", field="cache_read")
        if self.cache_write is not None and self.cache_write < 1:
            raise ValidationError("cache_write must be >= 1", field="cache_write")
        if not self.reduce_weight >= 1:
            raise ValidationError("reduce_weight must be >= 1", field="reduce_weight")
        if self.edit_gain is not None and self.edit_gain < 0:
            raise ValidationError("edit_gain must be >= 0 or None", field="edit_gain")

    @property
    def input_limit(self) -> int:
        return self.context_window - self.max_output

    @property
    def pressure_line(self) -> int:
        """Over this many tokens the reduction ladder runs."""
        return int(self.input_limit * self.pressure)

    @property
    def target_line(self) -> int:
        """The ladder stops under this many tokens (the hysteresis below the pressure line)."""
        return int(self.input_limit * self.target)

    @property
    def offload_limit(self) -> int:
        if self.offload_tokens is not None:
            return self.offload_tokens
        return min(1_000, self.input_limit // 4)

    @property
    def fresh_limit(self) -> int:
        """A result over this many tokens is a preview from the start (see ``fresh_tokens``)."""
        if self.fresh_tokens is not None:
            return self.fresh_tokens or self.offload_limit
        return min(FRESH_CAP, max(FRESH_MIN, int(self.input_limit * FRESH_SHARE)), self.input_limit // 4)

    def to_json(self) -> dict[str, JsonValue]:
        return dict(_options_json(self))

    @classmethod
    def from_json(cls, data: Mapping[str, JsonValue]) -> PrepareOptions:
        """Options from a logged header. A header from before the fresh limit (no
        ``fresh_tokens``) showed every result over the offload limit as a preview at once:
        ``fresh_tokens=0`` renders it that way again; one from before ``reduce_weight``
        weighed a reduction as its plain rewrite (1); one from before ``hide_ended_rules``
        showed every rule version's text."""
        known = set(cls.__dataclass_fields__)
        values = {k: v for k, v in data.items() if k in known}
        values.setdefault("fresh_tokens", 0)
        values.setdefault("reduce_weight", 1.0)
        values.setdefault("hide_ended_rules", False)
        # the logged values are JSON: the fields' own checks (__post_init__) judge them
        make: Callable[..., PrepareOptions] = cls
        return make(**values)


@lru_cache(maxsize=64)
def _options_json(options: PrepareOptions) -> dict[str, JsonValue]:
    out: dict[str, JsonValue] = asdict(options)  # options are frozen: their JSON never changes
    for name, default in _LOGGED_WHEN_SET.items():
        if out[name] == default:
            del out[name]  # a header from before the option reads the same
    return out


_LOGGED_WHEN_SET: dict[str, JsonValue] = {"call_labels": False}
"""Options newer than the logged form: in a header only when set (from_json: the default)."""


@dataclass(frozen=True, slots=True)
class StepInputs:
    """What a step adds besides the record, all logged in the request header.

    ``tail`` are rendered blocks placed as the last user-role message (status bar,
    dynamic context); ``system_suffix`` is appended to the system prompt (the time
    context in the system placement of seed 004); ``meta`` is logged, not rendered
    (the time reading, the status strategy decision, …). ``tool_choice`` is ``auto``,
    ``none``, ``required`` or the name of the one tool the model must call.
    """

    now: datetime | None = None
    tail: tuple[str, ...] = ()
    system_suffix: str = ""
    meta: Mapping[str, JsonValue] = field(default_factory=dict)
    tool_choice: str | None = None
    allowed_tools: tuple[str, ...] | None = None
    """The offered tools the model may call now (staged exposure); None: every one."""

    def allowed_sent(self, provider: Provider) -> bool:
        """Whether the body narrows the choice to ``allowed_tools`` (OpenAI only: Anthropic
        has no field for it, and narrowing its tools array would break the cache)."""
        choice = self.tool_choice
        return (
            self.allowed_tools is not None
            and provider == "openai"
            and choice in (None, "auto", "required")
        )

    def body_extra(self, provider: Provider) -> dict[str, JsonValue]:
        """Top-level body keys of this step (the provider's form of ``tool_choice``; with
        ``allowed_tools``, OpenAI's ``{"type": "allowed_tools", ...}`` form)."""
        choice = self.tool_choice
        if self.allowed_sent(provider):
            assert self.allowed_tools is not None
            tools: list[JsonValue] = [
                {"type": "function", "function": {"name": name}} for name in self.allowed_tools
            ]
            mode = "required" if choice == "required" else "auto"
            return {
                "tool_choice": {"type": "allowed_tools", "allowed_tools": {"mode": mode, "tools": tools}}
            }
        if choice is None:
            return {}
        if provider == "openai":
            if choice in ("auto", "none", "required"):
                return {"tool_choice": choice}
            return {"tool_choice": {"type": "function", "function": {"name": choice}}}
        if choice in ("auto", "none"):
            return {"tool_choice": {"type": choice}}
        if choice == "required":
            return {"tool_choice": {"type": "any"}}
        return {"tool_choice": {"type": "tool", "name": choice}}

    def to_json(self) -> dict[str, JsonValue]:
        out: dict[str, JsonValue] = {
            "now": None if self.now is None else format_at(self.now),
            "tail": list(self.tail),
        }
        if self.system_suffix:
            out["system_suffix"] = self.system_suffix
        if self.meta:
            out["meta"] = dict(self.meta)
        if self.tool_choice is not None:
            out["tool_choice"] = self.tool_choice
        if self.allowed_tools is not None:
            out["allowed_tools"] = list(self.allowed_tools)
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, JsonValue]) -> StepInputs:
        now, tail = data.get("now"), data.get("tail") or []
        meta = data.get("meta")
        allowed = data.get("allowed_tools")
        return cls(
            now=None if now is None else parse_at(now, where="inputs.now"),
            tail=tuple(str(t) for t in tail) if isinstance(tail, list) else (),
            system_suffix=str(data.get("system_suffix") or ""),
            meta=meta if isinstance(meta, dict) else {},
            tool_choice=str(data["tool_choice"]) if data.get("tool_choice") is not None else None,
            allowed_tools=tuple(str(a) for a in allowed) if isinstance(allowed, list) else None,
        )
