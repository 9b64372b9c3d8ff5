"""The preparation report: what a request holds and why, as typed values with a JSON form.

:class:`Report` is what :attr:`~ctxline.view.prepare.Preparation.report` holds and what the
request header logs (``to_json()``, a stable contract). It is also a read-only mapping
over that JSON (``report["tokens"]["total"]``), so code that reads logged reports and
code that reads fresh ones look the same. The prefix section says how many tokens the
request shares with the previous request of the same timeline and, where it broke, the
first differing message and why — computed from the record, so it is the same for a
cold cache and a warm one.

    report = ctx.prepare().report
    report.tokens.total, report.prefix.first_difference
    Report.from_json(header.report) == report  # a logged report, typed again
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, TypeVar, cast, get_args

from ctxline.errors import ValidationError
from ctxline.record.events import JsonValue, Reduction
from ctxline.render.neutral import PairingReport

__all__ = [
    "CONSIDERED_SHOWN",
    "MANY_TOOLS",
    "Action",
    "Budget",
    "Considered",
    "CostReport",
    "FirstDifference",
    "Pairing",
    "PrefixReport",
    "Report",
    "Section",
    "TokenSections",
    "action_of",
]

Section = Literal["tools", "system", "history", "tail"]
ActionName = Literal["fold", "trim", "compact", "drop_dynamic", "drop_tools", "compact_failed"]

_T = TypeVar("_T")
_MISSING: object = object()


class _Json:
    """Typed reads of one object of a logged report; a wrong field is a ValidationError
    naming it (``report.tokens.total must be an integer, got str``)."""

    def __init__(self, data: object, where: str) -> None:
        if not isinstance(data, Mapping):
            raise ValidationError(f"{where} must be an object, got {_kind(data)}", field=where)
        self.data = cast(Mapping[str, JsonValue], data)
        self.where = where

    def _get(
        self, key: str, kinds: tuple[type, ...], name: str, default: object, nullable: bool = False
    ) -> object:
        field = f"{self.where}.{key}"
        value = self.data.get(key, default)
        if value is _MISSING:
            raise ValidationError(f"{field} is missing", field=field)
        if value is None and nullable:
            return None
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            raise ValidationError(f"{field} must be {name}, got {_kind(value)}", field=field)
        return value

    def integer(self, key: str, default: int | None = None) -> int:
        got = self._get(key, (int,), "an integer", _MISSING if default is None else default)
        return cast(int, got)

    def opt_integer(self, key: str) -> int | None:
        return cast("int | None", self._get(key, (int,), "an integer or null", None, True))

    def number(self, key: str, default: float | None = None) -> float:
        got = self._get(key, (int, float), "a number", _MISSING if default is None else default)
        return float(cast(float, got))

    def text(self, key: str, default: str | None = None) -> str:
        got = self._get(key, (str,), "a string", _MISSING if default is None else default)
        return cast(str, got)

    def opt_text(self, key: str) -> str | None:
        return cast("str | None", self._get(key, (str,), "a string or null", None, True))

    def flag(self, key: str, default: bool | None = None) -> bool:
        got = self._get(key, (bool,), "true or false", _MISSING if default is None else default)
        return cast(bool, got)

    def obj(self, key: str) -> _Json:
        return _Json(self.data.get(key, _MISSING), f"{self.where}.{key}")

    def opt_obj(self, key: str) -> _Json | None:
        value = self.data.get(key)
        return None if value is None else _Json(value, f"{self.where}.{key}")

    def mapping(self, key: str) -> dict[str, JsonValue] | None:
        got = self._get(key, (Mapping,), "an object or null", None, True)
        return None if got is None else dict(cast(Mapping[str, JsonValue], got))

    def seq(self, key: str, required: bool = False) -> tuple[JsonValue, ...]:
        got = self._get(key, (list, tuple), "a list", _MISSING if required else [])
        return tuple(cast("Sequence[JsonValue]", got))

    def texts(self, key: str, required: bool = False) -> tuple[str, ...]:
        where = f"{self.where}.{key}"
        return tuple(_typed(v, str, where, "strings") for v in self.seq(key, required))

    def integers(self, key: str, required: bool = False) -> tuple[int, ...]:
        where = f"{self.where}.{key}"
        return tuple(_typed(v, int, where, "integers") for v in self.seq(key, required))

    def pairs(self, key: str) -> tuple[tuple[str, str], ...]:
        where = f"{self.where}.{key}"
        out: list[tuple[str, str]] = []
        for item in self.seq(key):
            if not isinstance(item, list | tuple) or len(item) != 2:
                raise ValidationError(
                    f"{where} must hold [a, b] pairs, got {_kind(item)}", field=where
                )
            out.append(
                (_typed(item[0], str, where, "strings"), _typed(item[1], str, where, "strings"))
            )
        return tuple(out)

    def choice(self, key: str, allowed: object) -> str:
        value = self.text(key)
        names = get_args(allowed)
        if value not in names:
            field = f"{self.where}.{key}"
            raise ValidationError(
                f"{field} must be one of {list(names)}, got {value!r}", field=field
            )
        return value

    def objects(self, key: str) -> list[_Json]:
        where = f"{self.where}.{key}"
        return [_Json(v, f"{where}[{i}]") for i, v in enumerate(self.seq(key))]


def _kind(value: object) -> str:
    return "nothing" if value is _MISSING else type(value).__name__


def _typed(value: object, kind: type[_T], where: str, name: str) -> _T:
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise ValidationError(f"{where} must hold {name}, got {_kind(value)}", field=where)
    return value


@dataclass(frozen=True, slots=True)
class TokenSections:
    tools: int
    system: int
    history: int
    tail: int

    @property
    def total(self) -> int:
        return self.tools + self.system + self.history + self.tail

    def to_json(self) -> dict[str, JsonValue]:
        return {
            "tools": self.tools,
            "system": self.system,
            "history": self.history,
            "tail": self.tail,
            "total": self.total,
        }

    @classmethod
    def from_json(cls, data: object, where: str = "report.tokens") -> TokenSections:
        j = _Json(data, where)
        out = cls(j.integer("tools"), j.integer("system"), j.integer("history"), j.integer("tail"))
        total = j.integer("total", out.total)
        if total != out.total:
            raise ValidationError(
                f"{where}.total is {total} but the sections add up to {out.total}",
                field=f"{where}.total",
            )
        return out


@dataclass(frozen=True, slots=True)
class Budget:
    context_window: int
    max_output: int
    input_limit: int
    pressure_line: int
    target: int
    over_pressure: bool
    over_limit: bool

    def to_json(self) -> dict[str, JsonValue]:
        return {
            "context_window": self.context_window,
            "max_output": self.max_output,
            "input_limit": self.input_limit,
            "pressure_line": self.pressure_line,
            "target": self.target,
            "over_pressure": self.over_pressure,
            "over_limit": self.over_limit,
        }

    @classmethod
    def from_json(cls, data: object, where: str = "report.budget") -> Budget:
        j = _Json(data, where)
        return cls(
            j.integer("context_window"),
            j.integer("max_output"),
            j.integer("input_limit"),
            j.integer("pressure_line"),
            j.integer("target"),
            j.flag("over_pressure"),
            j.flag("over_limit"),
        )


@dataclass(frozen=True, slots=True)
class Action:
    """One change the ladder made to this request's view (or could not make)."""

    action: ActionName
    saved_tokens: int = 0
    events: tuple[int, ...] = ()
    """fold, trim: the record seqs of the results changed."""
    upto_seq: int = 0
    kept: tuple[int, ...] = ()
    """compact: the user messages kept verbatim."""
    items: tuple[str, ...] = ()
    """drop_dynamic, drop_tools: the ids dropped."""
    reason: str = ""
    """compact_failed: why nothing was compacted."""

    def to_json(self) -> dict[str, JsonValue]:
        out: dict[str, JsonValue] = {"action": self.action}
        match self.action:
            case "fold" | "trim":
                out.update(saved_tokens=self.saved_tokens, events=list(self.events))
            case "compact":
                out.update(saved_tokens=self.saved_tokens, upto_seq=self.upto_seq)
                out["kept"] = list(self.kept)
            case "drop_dynamic" | "drop_tools":
                out["items"] = list(self.items)
            case "compact_failed":
                out["reason"] = self.reason
        return out

    @classmethod
    def from_json(cls, data: object, where: str = "report.actions[]") -> Action:
        j = _Json(data, where)
        name = cast(ActionName, j.choice("action", ActionName))
        match name:
            case "fold" | "trim":
                return cls(name, j.integer("saved_tokens"), j.integers("events", True))
            case "compact":
                saved, upto = j.integer("saved_tokens"), j.integer("upto_seq")
                return cls(name, saved, upto_seq=upto, kept=j.integers("kept", True))
            case "drop_dynamic" | "drop_tools":
                return cls(name, items=j.texts("items", True))
            case "compact_failed":
                return cls(name, reason=j.text("reason"))


def action_of(reduction: Reduction) -> Action:
    if reduction.action == "fold":
        seqs = tuple(sorted(int(k) for k in reduction.refs))
        return Action("fold", reduction.saved_tokens, seqs)
    if reduction.action == "trim":
        return Action("trim", reduction.saved_tokens, reduction.seqs)
    return Action(
        "compact", reduction.saved_tokens, upto_seq=reduction.upto_seq, kept=reduction.keep
    )


CONSIDERED_SHOWN = 24
"""A rung's candidates listed in the report at most (``count`` says how many it had)."""
MANY_TOOLS = 10
"""Over this many offered tools the report flags the request (``flags``): past about ten
actions, models choose among them less reliably (docs/budget.md)."""


@dataclass(frozen=True, slots=True)
class Considered:
    """What one rung of the ladder weighed at this step, and what it took.

    Candidates are named ``kind:id`` — ``fold:12``, ``trim:12``, ``offload:15``,
    ``args:11``, ``text:20`` (record seqs), ``dynamic:ID``, ``tool:NAME``, ``compact:SEQ``
    (the cut); ``adopted`` are those it made (or, for trims that wait for a compaction,
    ``deferred``)."""

    rung: str
    candidates: tuple[str, ...]
    adopted: tuple[str, ...] = ()
    deferred: bool = False
    count: int | None = None
    """How many candidates it weighed when more than ``candidates`` holds (None: as many;
    a report read back from JSON lists only the first :data:`CONSIDERED_SHOWN`)."""

    def to_json(self) -> dict[str, JsonValue]:
        out: dict[str, JsonValue] = {
            "rung": self.rung,
            "count": len(self.candidates) if self.count is None else self.count,
            "candidates": list(self.candidates[:CONSIDERED_SHOWN]),
            "adopted": list(self.adopted[:CONSIDERED_SHOWN]),
        }
        if self.deferred:
            out["deferred"] = True
        return out

    @classmethod
    def from_json(cls, data: object, where: str = "report.considered[]") -> Considered:
        j = _Json(data, where)
        candidates = j.texts("candidates", True)
        count = j.integer("count", len(candidates))
        deferred = j.flag("deferred", False)
        shown = count if count != len(candidates) else None
        return cls(j.text("rung"), candidates, j.texts("adopted"), deferred, shown)


@dataclass(frozen=True, slots=True)
class FirstDifference:
    message: int
    section: Section
    reason: str

    def to_json(self) -> dict[str, JsonValue]:
        return {"message": self.message, "section": self.section, "reason": self.reason}

    @classmethod
    def from_json(
        cls, data: object, where: str = "report.prefix.first_difference"
    ) -> FirstDifference:
        j = _Json(data, where)
        section = cast(Section, j.choice("section", Section))
        return cls(j.integer("message"), section, j.text("reason"))


@dataclass(frozen=True, slots=True)
class PrefixReport:
    previous_step: int | None = None
    shared_tokens: int = 0
    shared_messages: int = 0
    first_difference: FirstDifference | None = None

    def to_json(self) -> dict[str, JsonValue]:
        diff = self.first_difference
        return {
            "previous_step": self.previous_step,
            "shared_tokens": self.shared_tokens,
            "shared_messages": self.shared_messages,
            "first_difference": None if diff is None else diff.to_json(),
        }

    @classmethod
    def from_json(cls, data: object, where: str = "report.prefix") -> PrefixReport:
        j = _Json(data, where)
        diff = j.data.get("first_difference")
        return cls(
            j.opt_integer("previous_step"),
            j.integer("shared_tokens", 0),
            j.integer("shared_messages", 0),
            None if diff is None else FirstDifference.from_json(diff, f"{where}.first_difference"),
        )


@dataclass(frozen=True, slots=True)
class Pairing:
    repaired: tuple[str, ...] = ()
    orphans: tuple[str, ...] = ()
    duplicates: tuple[str, ...] = ()
    late: tuple[str, ...] = ()
    renamed: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, report: PairingReport) -> Pairing:
        return cls(report.repaired, report.orphans, report.duplicates, report.late, report.renamed)

    def to_json(self) -> dict[str, JsonValue]:
        return {
            "repaired": list(self.repaired),
            "orphans": list(self.orphans),
            "duplicates": list(self.duplicates),
            "late": list(self.late),
            "renamed": [list(pair) for pair in self.renamed],
        }

    @classmethod
    def from_json(cls, data: object, where: str = "report.pairing") -> Pairing:
        j = _Json(data, where)
        return cls(
            j.texts("repaired"),
            j.texts("orphans"),
            j.texts("duplicates"),
            j.texts("late"),
            j.pairs("renamed"),
        )


@dataclass(frozen=True, slots=True)
class CostReport:
    """What the budget's cost model decided at this step, and from what (docs/budget.md).

    ``decision``: ``keep`` (an edit would not pay), ``edit`` (folds and trims under the
    pressure line, because they pay), ``wait`` (over the pressure line, waiting is still
    cheaper than reducing), ``reduce`` (over the line, reducing now), ``edits`` or
    ``compact`` (what the reduction chose). ``alpha`` and ``write_premium`` price cached
    reads and writes; ``steps`` is N, ``gain`` the expected saving in input-token units,
    ``threshold`` what an edit under the line must beat; ``rent`` and ``buy`` the ski-rental
    sums over the line.
    """

    decision: str
    alpha: float
    write_premium: float
    steps: float = 0.0
    gain: int = 0
    threshold: int = 0
    saved: int = 0
    rewritten: int = 0
    rent: int = 0
    buy: int = 0
    waited: int = 0

    def to_json(self) -> dict[str, JsonValue]:
        out: dict[str, JsonValue] = {
            "decision": self.decision,
            "alpha": self.alpha,
            "write_premium": self.write_premium,
        }
        for name in ("steps", "gain", "threshold", "saved", "rewritten", "rent", "buy", "waited"):
            value = getattr(self, name)
            if value:
                out[name] = value
        return out

    @classmethod
    def from_json(cls, data: object, where: str = "report.cost") -> CostReport:
        j = _Json(data, where)
        ints = {
            n: j.integer(n, 0)
            for n in ("gain", "threshold", "saved", "rewritten", "rent", "buy", "waited")
        }
        return cls(
            j.text("decision"),
            j.number("alpha"),
            j.number("write_premium"),
            j.number("steps", 0.0),
            **ints,
        )


@dataclass(frozen=True, slots=True)
class Report(Mapping[str, JsonValue]):
    """The preparation report of one step (a mapping over :meth:`to_json` too)."""

    step: int
    provider: str
    tokenizer: str
    tokens: TokenSections
    budget: Budget
    actions: tuple[Action, ...]
    prefix: PrefixReport
    messages: int
    pairing: Pairing
    guide_version: str | None
    status: Mapping[str, JsonValue] | None = None
    ids: tuple[tuple[str, str], ...] = ()
    """``(view call id, id sent)`` for call ids the provider would not accept as they are
    (see :mod:`ctxline.render.ids`); in the JSON only when there is one."""
    cost: CostReport | None = None
    """The cost model's decision (absent when there was nothing to decide)."""
    considered: tuple[Considered, ...] = ()
    """Each rung that ran, with every candidate it weighed (in the JSON when one ran)."""
    flags: tuple[str, ...] = ()
    """What a developer should look at (``many_tools``); in the JSON only when there is one."""
    exposure: Mapping[str, JsonValue] | None = None
    """Staged exposure: the tools allowed at this step, of how many offered, and whether
    (and how) the request told the provider; in the JSON only when a source narrowed them."""

    def to_json(self) -> dict[str, JsonValue]:
        out: dict[str, JsonValue] = {
            "step": self.step,
            "provider": self.provider,
            "tokenizer": self.tokenizer,
            "tokens": self.tokens.to_json(),
            "budget": self.budget.to_json(),
            "actions": [a.to_json() for a in self.actions],
            "prefix": self.prefix.to_json(),
            "messages": self.messages,
            "pairing": self.pairing.to_json(),
            "guide_version": self.guide_version,
        }
        if self.status is not None:
            out["status"] = dict(self.status)
        if self.ids:
            out["ids"] = [list(pair) for pair in self.ids]
        if self.cost is not None:
            out["cost"] = self.cost.to_json()
        if self.considered:
            out["considered"] = [c.to_json() for c in self.considered]
        if self.flags:
            out["flags"] = list(self.flags)
        if self.exposure is not None:
            out["exposure"] = dict(self.exposure)
        return out

    @classmethod
    def from_json(cls, data: object) -> Report:
        """The typed report of a logged one (``header.report``): the inverse of
        :meth:`to_json` (``Report.from_json(r.to_json()) == r``); a field of the wrong
        shape is a :class:`~ctxline.errors.ValidationError` naming it."""
        j = _Json(data, "report")
        cost = j.opt_obj("cost")
        return cls(
            step=j.integer("step"),
            provider=j.text("provider"),
            tokenizer=j.text("tokenizer"),
            tokens=TokenSections.from_json(j.data.get("tokens", _MISSING)),
            budget=Budget.from_json(j.data.get("budget", _MISSING)),
            actions=tuple(Action.from_json(a.data, a.where) for a in j.objects("actions")),
            prefix=PrefixReport.from_json(j.data.get("prefix", _MISSING)),
            messages=j.integer("messages"),
            pairing=Pairing.from_json(j.data.get("pairing", {})),
            guide_version=j.opt_text("guide_version"),
            status=j.mapping("status"),
            ids=j.pairs("ids"),
            cost=None if cost is None else CostReport.from_json(cost.data, cost.where),
            considered=tuple(
                Considered.from_json(c.data, c.where) for c in j.objects("considered")
            ),
            flags=j.texts("flags"),
            exposure=j.mapping("exposure"),
        )

    def __getitem__(self, key: str) -> JsonValue:
        return self.to_json()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.to_json())

    def __len__(self) -> int:
        return len(self.to_json())


def shared_prefix(a: Sequence[object], b: Sequence[object]) -> int:
    same = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        same += 1
    return same
