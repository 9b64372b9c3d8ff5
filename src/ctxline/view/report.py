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
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

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

    def to_json(self) -> dict[str, JsonValue]:
        out: dict[str, JsonValue] = {
            "rung": self.rung,
            "count": len(self.candidates),
            "candidates": list(self.candidates[:CONSIDERED_SHOWN]),
            "adopted": list(self.adopted[:CONSIDERED_SHOWN]),
        }
        if self.deferred:
            out["deferred"] = True
        return out


@dataclass(frozen=True, slots=True)
class FirstDifference:
    message: int
    section: Section
    reason: str

    def to_json(self) -> dict[str, JsonValue]:
        return {"message": self.message, "section": self.section, "reason": self.reason}


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
