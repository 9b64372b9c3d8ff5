"""What checks and actions read: the environment's state as a read-only mapping, and constraints.

:class:`EnvState` maps every declared slot to the value that holds now (its default
when it was never set, None when it was cleared or has expired); ``slot(name)`` gives
the :class:`~ctxline.environment.slots.SlotValue` with its version and ``last_updated``.
It carries the time and the role of the agent acting, so a check can say "within 24
hours of booking" or "planners only".

A :class:`Constraint` is one item of the ``constraints`` slot: an id, the text, the
entities it names (``booking`` for every booking, ``booking:ABC123`` for one) and who
wrote it. A constraint the model added (``by="model"``) is a note it keeps for itself: it
is marked as such in the block, only the model's own constraints can be removed by the
model, and no check of ctxline's reads constraint texts — a constraint grants nothing.

    >>> c = Constraint("refund-window", "Refunds only within 24 h of booking.", ("booking",))
    >>> c.applies_to({"booking:ABC123"}), c.applies_to({"flight:HAT069"})
    (True, False)
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from ctxline.environment.slots import SlotSpec, SlotValue
from ctxline.errors import ValidationError
from ctxline.record.events import JsonValue

__all__ = ["CONSTRAINT_SCHEMA", "ENTITY", "Constraint", "EnvState", "UnknownSlot", "entity_matches"]

ENTITY = r"^[a-z][a-z0-9_-]{0,39}(:[^\s]{1,80})?$"
"""An entity key: a kind (``booking``) or a kind and an id (``booking:ABC123``)."""

CONSTRAINT_SCHEMA: dict[str, JsonValue] = {
    "type": "array",
    "items": {
        "type": "object",
        "required": ["id", "text", "by"],
        "additionalProperties": False,
        "properties": {
            "id": {"type": "string", "pattern": r"^[A-Za-z0-9_.-]{1,40}$"},
            "text": {"type": "string", "minLength": 1, "maxLength": 500},
            "entities": {"type": "array", "items": {"type": "string", "pattern": ENTITY}},
            "by": {"enum": ["app", "model"]},
        },
    },
}


class UnknownSlot(ValidationError, KeyError):
    """A slot name the environment does not declare."""

    def __str__(self) -> str:
        return ValidationError.__str__(self)


def entity_matches(named: str, touched: str) -> bool:
    """Whether a constraint naming ``named`` applies to the entity ``touched`` (``kind:id``)."""
    if named == touched:
        return True
    kind = touched.split(":", 1)[0]
    return named in (kind, f"{kind}:*")


@dataclass(frozen=True, slots=True)
class Constraint:
    """One constraint (see the module docstring)."""

    id: str
    text: str
    entities: tuple[str, ...] = ()
    by: Literal["app", "model"] = "app"

    def to_json(self) -> dict[str, JsonValue]:
        out: dict[str, JsonValue] = {"id": self.id, "text": self.text, "by": self.by}
        if self.entities:
            out["entities"] = list(self.entities)
        return out

    @classmethod
    def from_json(cls, obj: JsonValue) -> Constraint | None:
        """The constraint an item of the slot holds (None when it is not one)."""
        if not isinstance(obj, dict):
            return None
        ident, text, by = obj.get("id"), obj.get("text"), obj.get("by")
        entities = obj.get("entities") or []
        if not (isinstance(ident, str) and isinstance(text, str) and isinstance(entities, list)):
            return None
        return cls(
            ident, text, tuple(str(e) for e in entities), "model" if by == "model" else "app"
        )

    def applies_to(self, touched: set[str]) -> bool:
        return any(entity_matches(e, t) for e in self.entities for t in touched)


class EnvState(Mapping[str, JsonValue]):
    """The values that hold now, by slot name (see the module docstring). Read-only."""

    def __init__(
        self,
        specs: Mapping[str, SlotSpec],
        slots: Mapping[str, SlotValue],
        *,
        now: datetime,
        role: str,
    ) -> None:
        self._specs = specs
        self._slots = slots
        self.now = now
        self.role = role

    def __getitem__(self, name: str) -> JsonValue:
        return self.slot(name).current

    def __contains__(self, name: object) -> bool:
        return name in self._specs

    def __iter__(self) -> Iterator[str]:
        return iter(self._specs)

    def __len__(self) -> int:
        return len(self._specs)

    def spec(self, name: str) -> SlotSpec:
        spec = self._specs.get(name)
        if spec is None:
            known = ", ".join(self._specs) or "none"
            raise UnknownSlot(f"no slot named {name!r} (declared: {known})", field="slot")
        return spec

    def slot(self, name: str) -> SlotValue:
        """The slot with its version and last change (the default when never set)."""
        spec = self.spec(name)
        found = self._slots.get(name)
        if found is None or (found.version == 0 and found.value is None):
            return SlotValue(name, spec.default)
        return found

    @property
    def constraints(self) -> tuple[Constraint, ...]:
        """The constraints in force (empty when the environment declares no ``constraints``)."""
        if "constraints" not in self._specs:
            return ()
        items = self["constraints"]
        found = (Constraint.from_json(i) for i in items) if isinstance(items, list) else ()
        return tuple(c for c in found if c is not None)

    def linked(self, touched: set[str]) -> tuple[Constraint, ...]:
        """The constraints that name one of the ``touched`` entities."""
        return tuple(c for c in self.constraints if c.applies_to(touched)) if touched else ()
