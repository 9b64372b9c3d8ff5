"""Slots: the named, typed pieces of state an environment holds (seed 002).

A :class:`SlotSpec` declares a slot: its JSON schema (validated with ``jsonschema``,
Draft 2020-12 unless the schema names another), its update policy, its retention tier,
an optional TTL and a default. A slot's value lives in the record as ``slot`` events
(:class:`~ctxline.record.events.Slot`); :class:`SlotFold` folds them into
:class:`SlotValue`\\ s — value, version (the seq of the last change), ``last_updated``
and who changed it.

- **policy** — how environment actions may change it: ``overwrite`` (set or clear),
  ``append`` (add items, never rewrite them), ``read-only`` (no action may; the app sets
  it with :meth:`Environment.set <ctxline.environment.Environment.set>`).
- **tier** — ``resident`` (shown in every request's ``<ctx-env>`` block),
  ``on-demand`` (listed by name; read with ``read_slot``), ``discardable`` (shown, and
  dropped first under pressure).
- **ttl** — after it the slot expires: an ``expire`` event is recorded and the slot is
  demoted to the on-demand list (its last value stays readable); ``state[name]`` is then None.
- **shared** — the slot lives on the environment's blackboard, shared with other agents.
- **commutative** — a write that conflicts on the blackboard is re-applied on the latest
  value instead of refused (appends to a log, a counter).

    >>> goal = SlotSpec("goal", {"type": "string", "maxLength": 200})
    >>> goal.problem("Refund booking ABC123") is None
    True
    >>> print(goal.problem(42))
    42 is not of type 'string'
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

from ctxline.errors import ValidationError
from ctxline.record.events import JsonValue, Slot, StoredEvent

__all__ = [
    "POLICIES",
    "SLOT_NAME",
    "TIERS",
    "Policy",
    "SlotFold",
    "SlotSpec",
    "SlotValue",
    "Tier",
    "apply_change",
    "schema_problem",
    "specs_by_name",
]

Policy = Literal["overwrite", "append", "read-only"]
Tier = Literal["resident", "on-demand", "discardable"]
POLICIES: tuple[Policy, ...] = ("overwrite", "append", "read-only")
TIERS: tuple[Tier, ...] = ("resident", "on-demand", "discardable")
SLOT_NAME = re.compile(r"^[a-z][a-z0-9_.-]{0,63}$")
"""Slot names: lower case, digits, ``_ . -``; they start lines of the block, so no spaces."""


def _validator(schema: dict[str, JsonValue], name: str) -> Any:
    # imported here: jsonschema is 6 MB of RSS that a process without slot schemas (one
    # reading a large output back, say) should not hold (issue 25)
    import jsonschema

    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise ValidationError(
            f"slot {name!r}: not a valid JSON schema: {exc.message}", field=f"slots.{name}.schema"
        ) from None
    return cls(schema)


def schema_problem(validator: Any, value: JsonValue) -> str | None:
    """The most relevant schema error of ``value`` (None when it is valid), with its path."""
    from jsonschema.exceptions import best_match

    error = best_match(validator.iter_errors(value))
    if error is None:
        return None
    where = "".join(f"[{p!r}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
    return f"at {where.lstrip('.')}: {error.message}" if where else str(error.message)


@dataclass(frozen=True)
class SlotSpec:
    """A slot's declaration (see the module docstring)."""

    name: str
    schema: Mapping[str, JsonValue] = field(default_factory=dict)
    """JSON schema of the value (``{}``: any JSON value)."""
    policy: Policy = "overwrite"
    tier: Tier = "resident"
    ttl: timedelta | None = None
    description: str = ""
    """What the slot holds (``read_slot`` and the on-demand list show it)."""
    default: JsonValue = None
    """The value before any change (None: no value)."""
    shared: bool = False
    commutative: bool = False
    max_chars: int = 600
    """Longer values are shown clipped in the block, with a pointer to ``read_slot``."""
    _check: Any = field(init=False, repr=False, compare=False, default=None)

    def __post_init__(self) -> None:
        where = f"slots.{self.name}"
        if not isinstance(self.name, str) or not SLOT_NAME.match(self.name):
            raise ValidationError(
                f"slot name {self.name!r} must be 1-64 of a-z 0-9 _ . - (starting with a letter)",
                field="slots",
            )
        if self.policy not in POLICIES:
            raise ValidationError(
                f"policy must be one of {', '.join(POLICIES)}; got {self.policy!r}", field=where
            )
        if self.tier not in TIERS:
            raise ValidationError(
                f"tier must be one of {', '.join(TIERS)}; got {self.tier!r}", field=where
            )
        if self.ttl is not None and not self.ttl > timedelta(0):
            raise ValidationError(f"ttl must be positive, got {self.ttl!r}", field=where)
        if self.max_chars < 20:
            raise ValidationError("max_chars must be at least 20", field=where)
        object.__setattr__(self, "_check", _validator(dict(self.schema), self.name))
        if self.default is not None:
            problem = self.problem(self.default)
            if problem is not None:
                raise ValidationError(
                    f"the default does not fit the schema: {problem}", field=where
                )

    def problem(self, value: JsonValue) -> str | None:
        """Why ``value`` does not fit the schema (None: it does)."""
        return schema_problem(self._check, value)


@dataclass(frozen=True, slots=True)
class SlotValue:
    """A slot as the record has it now."""

    name: str
    value: JsonValue = None
    """The last value (kept after expiry, for ``read_slot``); None when cleared or never set."""
    version: int = 0
    """The seq of the last change in its timeline (0: never changed)."""
    updated_at: datetime | None = None
    by: str = ""
    """Who made the last change: ``app``, an agent's role, or ``ctxline`` (an expiry)."""
    expired: bool = False

    @property
    def current(self) -> JsonValue:
        """The value that holds now (None when expired)."""
        return None if self.expired else self.value


def _by(meta: Mapping[str, JsonValue]) -> str:
    by = meta.get("by")
    return by if isinstance(by, str) else ""


class SlotFold:
    """Slot values from ``slot`` events, fed once each, in seq order (snapshots are skipped)."""

    def __init__(self) -> None:
        self.values: dict[str, SlotValue] = {}
        self.head = 0
        """The seq of the last event fed."""

    def feed(self, stored: StoredEvent) -> None:
        self.head = stored.seq
        event = stored.event
        if isinstance(event, Slot) and event.op != "snapshot":
            self.values[event.name] = apply_change(
                self.values.get(event.name), event, stored.seq, stored.at
            )

    def get(self, name: str) -> SlotValue:
        return self.values.get(name) or SlotValue(name)


def apply_change(old: SlotValue | None, event: Slot, seq: int, at: datetime | None) -> SlotValue:
    """The slot after ``event`` (an ``append`` to a non-list value starts a list)."""
    by = _by(event.meta)
    if event.op == "set":
        return SlotValue(event.name, event.value, seq, at, by)
    if event.op == "append":
        before = old.value if old is not None and isinstance(old.value, list) else []
        items = event.value if isinstance(event.value, list) else [event.value]
        return SlotValue(event.name, [*before, *items], seq, at, by)
    if event.op == "clear":
        return SlotValue(event.name, None, seq, at, by)
    # expire: the value stays readable
    value = old.value if old is not None else None
    return SlotValue(event.name, value, seq, at, by or "ctxline", expired=True)


def specs_by_name(specs: Sequence[SlotSpec]) -> dict[str, SlotSpec]:
    """The specs by name; two with one name are refused."""
    out: dict[str, SlotSpec] = {}
    for spec in specs:
        if spec.name in out:
            raise ValidationError(f"two slots are named {spec.name!r}", field="slots")
        out[spec.name] = spec
    return out
