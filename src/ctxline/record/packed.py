"""The packed form of a logged request header: what every step logs, without what it repeats.

Why: a ``request`` header carries the step's options, inputs and report so the request
can be rebuilt byte for byte and the step explained; stored plainly it was over half of
every step's bytes, most of it the same every step (the options, mostly defaults) or
derivable from the rest (the budget's lines from the options, the step's number, empty
lists). The packed form stores ``opts`` (the options that differ from :data:`OPTIONS_V1`,
a frozen table: never the live defaults, so an old header reads the same whatever the
defaults become) and ``rep`` (the report without its derivable fields) in place of
``options`` and ``report``.

Exact by construction: :func:`pack` keeps a field out only when :func:`unpack` gives it
back equal, and the whole header is packed only when unpacking gives back exactly the
options and the report it was given; otherwise it is stored plainly. Parsing either form
gives the same :class:`~ctxline.record.events.RequestHeader`; a header read in the plain
form (written before packing) is written plainly again, so its stored bytes, and the hash
chain over them, never change.

    packed = pack(options, report, step=3)
    assert packed is not None and unpack(*packed, step=3) == (options, report)
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping

from ctxline.record.events import JsonValue

__all__ = ["OPTIONS_V1", "pack", "unpack", "unpack_field", "unpacked_report_keys"]

OPTIONS_V1: Mapping[str, JsonValue] = {
    "cache": True,
    "cache_read": None,
    "cache_write": None,
    "compact_target": 0.3,
    "context_window": 128000,
    "defer": True,
    "edit_gain": 5.0,
    "fresh_tokens": None,
    "keep_groups": 2,
    "max_output": 4096,
    "min_compaction_saving": 0.05,
    "model": "gpt-4.1",
    "offload_tokens": None,
    "pressure": 0.8,
    "provider": "openai",
    "reduce_weight": 3.0,
    "summary_tokens": 2000,
    "target": 0.6,
    "timestamps": None,
    "tokenizer": "o200k_base",
}
"""What ``opts`` is relative to (frozen: a new default never changes an old header)."""

_PREFIX_DEFAULTS: Mapping[str, JsonValue] = {"first_difference": None}
_BUDGET_DEFAULTS: Mapping[str, JsonValue] = {"over_limit": False, "over_pressure": False}
_PAIRING = ("duplicates", "late", "orphans", "renamed", "repaired")


_NAMED = re.compile(r"([a-z_]+):([1-9][0-9]{0,17})")
"""A candidate's name in ``considered`` (``trim:812``): packed with the others as one text."""


def _pack_names(names: JsonValue) -> JsonValue:
    """``["trim:8689", "trim:8692", "fold:9001"]`` as ``"trim:8689 +3 fold:9001"`` (a name
    of the previous kind as its distance from the previous seq); other lists as they are."""
    if not isinstance(names, list) or not names:
        return names
    out: list[str] = []
    kind, seq = "", 0
    for name in names:
        match = _NAMED.fullmatch(name) if isinstance(name, str) else None
        if match is None:
            return names
        new_kind, new_seq = match[1], int(match[2])
        if new_kind == kind:
            out.append(f"{new_seq - seq:+d}")
        else:
            out.append(f"{new_kind}:{new_seq}")
        kind, seq = new_kind, new_seq
    return " ".join(out)


def _unpack_names(text: JsonValue) -> JsonValue:
    if not isinstance(text, str):
        return text
    names: list[JsonValue] = []
    kind, seq = "", 0
    for part in text.split(" "):
        if part[:1] in "+-":
            seq += int(part)
        else:
            kind, _, number = part.partition(":")
            seq = int(number)
        names.append(f"{kind}:{seq}")
    return names


def _map_considered(report: dict[str, JsonValue], how: Callable[[JsonValue], JsonValue]) -> None:
    considered = report.get("considered")
    if not isinstance(considered, list):
        return
    items: list[JsonValue] = []
    for item in considered:
        if isinstance(item, dict):
            item = dict(item)
            for key in ("candidates", "adopted"):
                if key in item:
                    item[key] = how(item[key])
        items.append(item)
    report["considered"] = items


def _sorted(obj: dict[str, JsonValue]) -> dict[str, JsonValue]:
    return {k: obj[k] for k in sorted(obj)}


def _derived(options: Mapping[str, JsonValue], step: int) -> tuple[dict[str, JsonValue], ...]:
    """(report fields, prefix fields, budget fields) a report repeats from the rest."""
    report: dict[str, JsonValue] = {"actions": [], "guide_version": None}
    report["provider"], report["tokenizer"], report["step"] = (
        options.get("provider"),
        options.get("tokenizer"),
        step,
    )
    report["pairing"] = {name: [] for name in _PAIRING}
    prefix: dict[str, JsonValue] = {
        **_PREFIX_DEFAULTS,
        "previous_step": step - 1 if step > 1 else None,
    }
    budget: dict[str, JsonValue] = dict(_BUDGET_DEFAULTS)
    window, out = options.get("context_window"), options.get("max_output")
    pressure, target = options.get("pressure"), options.get("target")
    budget["context_window"], budget["max_output"] = window, out
    if isinstance(window, int) and isinstance(out, int) and not isinstance(window, bool):
        limit = window - out
        budget["input_limit"] = limit
        if isinstance(pressure, float | int) and not isinstance(pressure, bool):
            budget["pressure_line"] = int(limit * pressure)
        if isinstance(target, float | int) and not isinstance(target, bool):
            budget["target"] = int(limit * target)
    return report, prefix, budget


_BUDGET_MEMO: dict[tuple[tuple[str, type, JsonValue], ...], dict[str, JsonValue]] = {}
_BUDGET_MEMO_SIZE = 64


def _budget_fields(opts: Mapping[str, JsonValue]) -> dict[str, JsonValue]:
    """``_derived(options, step)[2]`` of a packed header's ``opts`` (the budget's derived
    fields depend on the options alone), memoized by the options' values and their types
    (``1``, ``1.0`` and ``True`` write different JSON): opening a 20,000-step session read
    every header's budget and derived the whole report 20,000 times (issue 25). Callers
    never change what it returns (``_fill`` copies it)."""
    try:
        key = tuple((k, type(v), v) for k, v in sorted(opts.items()))
        found = _BUDGET_MEMO.get(key)
    except TypeError:  # a list or dict value: not hashable, derived every time
        return _derived({**OPTIONS_V1, **opts}, 1)[2]
    if found is None:
        found = _derived({**OPTIONS_V1, **opts}, 1)[2]
        if len(_BUDGET_MEMO) >= _BUDGET_MEMO_SIZE:
            _BUDGET_MEMO.clear()
        _BUDGET_MEMO[key] = found
    return found


def _same(a: JsonValue, b: JsonValue) -> bool:
    """``a`` and ``b`` write the same JSON (stricter is safe: a field it keeps is stored)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        assert isinstance(b, dict)
        return a.keys() == b.keys() and all(_same(v, b[k]) for k, v in a.items())
    if isinstance(a, list):
        assert isinstance(b, list)
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float):
        return repr(a) == repr(b)  # 0.0 and -0.0 are equal, and are written apart
    return a == b  # None, bool, int, str of one type: equal values, equal text


def _text(value: object) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _cost_derived(
    options: Mapping[str, JsonValue], cost: Mapping[str, JsonValue], report: Mapping[str, JsonValue]
) -> dict[str, JsonValue]:
    """The cost decision's ``threshold`` under the line: edit gain × write premium × total."""
    gain, premium, tokens = (
        options.get("edit_gain"),
        cost.get("write_premium"),
        report.get("tokens"),
    )
    total = tokens.get("total") if isinstance(tokens, dict) else None
    numbers = (gain, premium, total)
    if cost.get("decision") not in ("keep", "edit") or not all(
        isinstance(n, int | float) and not isinstance(n, bool) for n in numbers
    ):
        return {}
    assert isinstance(gain, int | float)
    assert isinstance(premium, int | float)
    assert isinstance(total, int | float)
    return {"threshold": round(gain * premium * total)}


def _drop(obj: Mapping[str, JsonValue], derived: Mapping[str, JsonValue]) -> dict[str, JsonValue]:
    return {k: v for k, v in obj.items() if not (k in derived and _same(derived[k], v))}


def _fill(obj: Mapping[str, JsonValue], derived: Mapping[str, JsonValue]) -> dict[str, JsonValue]:
    return _sorted({**derived, **obj})


def pack(
    options: Mapping[str, JsonValue], report: Mapping[str, JsonValue], *, step: int
) -> tuple[dict[str, JsonValue], dict[str, JsonValue]] | None:
    """``(opts, rep)`` when they unpack to exactly ``options`` and ``report``; else None."""
    opts = _drop(options, OPTIONS_V1)
    full = unpack_options(opts)
    rep_fields, prefix_fields, budget_fields = _derived(full, step)
    rep = _drop(dict(report), rep_fields)
    prefix, budget = report.get("prefix"), report.get("budget")
    if isinstance(prefix, dict):
        rep["prefix"] = _drop(prefix, prefix_fields)
    if isinstance(budget, dict):
        rep["budget"] = _drop(budget, budget_fields)
        if not rep["budget"]:
            del rep["budget"]  # every field derived
    cost = report.get("cost")
    if isinstance(cost, dict):
        rep["cost"] = _drop(cost, _cost_derived(full, cost, report))
    _map_considered(rep, _pack_names)
    back_options, back_report = unpack(opts, rep, step=step)
    if _text(back_options) != _text(options) or _text(back_report) != _text(report):
        return None
    return opts, rep


def unpack_options(opts: Mapping[str, JsonValue]) -> dict[str, JsonValue]:
    """The options a packed header's ``opts`` stand for."""
    if not opts:  # most headers: every option the table's (a copy: the caller owns it)
        return dict(_DEFAULT_OPTIONS)
    return _fill(opts, OPTIONS_V1)


def unpack_field(
    opts: Mapping[str, JsonValue], rep: Mapping[str, JsonValue], name: str, *, step: int
) -> JsonValue:
    """``unpack(opts, rep, step=step)[1].get(name)``, without unpacking the other fields."""
    if name not in _UNPACKED:
        return rep.get(name)
    value = rep.get(name)
    if name == "considered":
        one: dict[str, JsonValue] = {name: value} if name in rep else {}
        _map_considered(one, _unpack_names)
        return one.get(name)
    if name not in ("prefix", "budget", "cost"):  # a field unpack fills only when absent
        if name in rep:
            return value
        if name == "actions":
            return []  # what _derived gives, whatever the options
    if name == "budget":  # every step's budget fold reads it: no other field derived
        value = rep.get("budget", {})
        return _fill(value, _budget_fields(opts)) if isinstance(value, dict) else value
    options = {**OPTIONS_V1, **opts}  # unpack_options' merge, unsorted: only read here
    rep_fields, prefix_fields, _ = _derived(options, step)
    if name == "prefix":
        return _fill(value, prefix_fields) if isinstance(value, dict) else value
    if name == "cost":
        return (
            _fill(value, _cost_derived(options, value, rep)) if isinstance(value, dict) else value
        )
    return value if name in rep else rep_fields.get(name)


def unpacked_report_keys() -> frozenset[str]:
    """The report's top-level fields :func:`unpack` fills in or rewrites; every other field
    of a packed report is the report's own, as is."""
    return frozenset(_derived({}, 1)[0]) | {"prefix", "budget", "cost", "considered"}


def unpack(
    opts: Mapping[str, JsonValue], rep: Mapping[str, JsonValue], *, step: int
) -> tuple[dict[str, JsonValue], dict[str, JsonValue]]:
    """``(options, report)`` of a packed header (see :func:`pack`)."""
    options = unpack_options(opts)
    rep_fields, prefix_fields, budget_fields = _derived(options, step)
    report = _fill(rep, rep_fields)
    prefix, budget, cost = rep.get("prefix"), rep.get("budget", {}), rep.get("cost")
    if isinstance(prefix, dict):
        report["prefix"] = _fill(prefix, prefix_fields)
    if isinstance(budget, dict):
        report["budget"] = _fill(budget, budget_fields)
    if isinstance(cost, dict):
        report["cost"] = _fill(cost, _cost_derived(options, cost, report))
    _map_considered(report, _unpack_names)
    return options, report


_UNPACKED = unpacked_report_keys()
_DEFAULT_OPTIONS = _sorted(dict(OPTIONS_V1))
