"""BFCL v4 multi-turn entries through the three loops, scored by bfcl-eval's own checker.

Why: the small tasks are ours; BFCL's multi-turn categories are a public yardstick with
executable environments (a file system, Twitter, tickets…) and a state-and-response
checker. ``bfcl-eval`` is not a dependency of ctxline: install it on its own,

    pip install --no-deps --target /tmp/bfcl-site bfcl-eval

and pass ``--bfcl N --bfcl-site /tmp/bfcl-site`` to the benchmark. Each entry's function
docs become typed Python functions (the same for every loop); a call runs in bfcl-eval's
environment (``execute_multi_turn_func_call``) and is logged per user turn; the user
turns are sent one after the other in one conversation, each with the turn cap; the log
goes to ``multi_turn_checker`` with the entry's ground truth.

    box = BfclBox(entry, "ctxline-0"); box.functions()   # cd, ls, mkdir, …
"""

from __future__ import annotations

import importlib
import json
import keyword
import time
from collections.abc import Callable
from importlib import resources
from typing import Any

from agent_real.loops import Loop, Outcome, timed

__all__ = ["CATEGORIES", "BfclBox", "entries", "python_function", "run_entry"]

CATEGORIES = ("multi_turn_base", "multi_turn_long_context")
SYSTEM = "You are an assistant that does the user's requests with the tools. Answer briefly."
_TYPES = {
    "string": "str",
    "integer": "int",
    "float": "float",
    "number": "float",
    "boolean": "bool",
    "array": "list[Any]",
    "dict": "dict[str, Any]",
    "object": "dict[str, Any]",
}


def _bfcl(module: str) -> Any:
    """A bfcl-eval module (imported by name: bfcl-eval is optional and untyped)."""
    return importlib.import_module(f"bfcl_eval.{module}")


def _data(name: str) -> list[dict[str, Any]]:
    root = resources.files("bfcl_eval") / "data"
    text = (root / name).read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def entries(per_category: int) -> list[dict[str, Any]]:
    """The ``per_category`` cheapest entries of each category (fewest user turns, then the
    smallest initial state), with their ground truth and function docs attached."""
    mapping = _bfcl("constants.executable_backend_config").MULTI_TURN_FUNC_DOC_FILE_MAPPING
    out: list[dict[str, Any]] = []
    for category in CATEGORIES:
        truth = {
            e["id"]: e["ground_truth"] for e in _data(f"possible_answer/BFCL_v4_{category}.json")
        }
        chosen = sorted(
            _data(f"BFCL_v4_{category}.json"),
            key=lambda e: (len(e["question"]), len(json.dumps(e["initial_config"])), e["id"]),
        )[:per_category]
        for entry in chosen:
            docs: list[dict[str, Any]] = []
            for cls in entry["involved_classes"]:
                docs += _data(f"multi_turn_func_doc/{mapping[cls]}")
            excluded = set(entry.get("excluded_function", []))
            docs = [d for d in docs if d["name"] not in excluded]
            out.append({**entry, "ground_truth": truth[entry["id"]], "docs": docs})
    return out


def _annotation(schema: dict[str, Any]) -> str:
    return _TYPES.get(str(schema.get("type")), "Any")


def python_function(
    doc: dict[str, Any], call: Callable[[str, dict[str, Any]], str]
) -> Callable[..., str]:
    """A typed Python function for a BFCL function doc; calling it calls ``call(name, kwargs)``.

    The signature and a Google-style docstring are generated, so ctxline's ``@tool`` and the
    Agents SDK's ``function_tool`` read the same schema from it.
    """
    name = doc["name"]
    params = doc.get("parameters", {})
    props: dict[str, Any] = params.get("properties", {})
    required = set(params.get("required", []))
    if not name.isidentifier() or keyword.iskeyword(name):
        raise ValueError(f"BFCL function {name!r} is not a Python name")
    args: list[str] = []
    lines: list[str] = []
    for pname, schema in sorted(props.items(), key=lambda kv: kv[0] not in required):
        if not pname.isidentifier() or keyword.iskeyword(pname):
            raise ValueError(f"BFCL parameter {name}.{pname} is not a Python name")
        ann = _annotation(schema)
        if pname in required:
            args.append(f"{pname}: {ann}")
        else:
            args.append(f"{pname}: {ann} | None = None")
        desc = " ".join(str(schema.get("description", "")).split()) or pname
        lines.append(f"        {pname}: {desc}")
    description = " ".join(str(doc.get("description", "")).split())
    docstring = description + ("\n\n    Args:\n" + "\n".join(lines) if lines else "")
    source = (
        f"def {name}({', '.join(args)}) -> str:\n"
        f"    {docstring!r}\n"
        f"    return _call({name!r}, {{k: v for k, v in locals().items() if v is not None}})\n"
    )
    namespace: dict[str, Any] = {"Any": Any, "_call": call}
    exec(source, namespace)
    function: Callable[..., str] = namespace[name]
    function.__doc__ = docstring
    return function


class BfclBox:
    """One entry's tools for one loop run: calls run in bfcl-eval's environment (instances
    named after ``run_name``, so no two runs share state) and are logged per user turn."""

    def __init__(self, entry: dict[str, Any], run_name: str) -> None:
        self.entry = entry
        self.run_name = run_name
        self.turns: list[list[list[str]]] = [[]]
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.threads: list[Any] = []
        self.pending: list[str] = []

    def next_turn(self) -> None:
        self.turns.append([])

    def _call(self, name: str, kwargs: dict[str, Any]) -> str:
        utils = _bfcl("eval_checker.multi_turn_eval.multi_turn_utils")
        self.calls.append((name, kwargs))
        text = f"{name}({', '.join(f'{k}={v!r}' for k, v in kwargs.items())})"
        self.turns[-1].append([text])
        results, _ = utils.execute_multi_turn_func_call(
            [text],
            self.entry["initial_config"],
            self.entry["involved_classes"],
            self.run_name,
            self.entry["id"],
            long_context="long_context" in self.entry["id"],
        )
        return str(results[0])

    def functions(self, *, background: bool = False) -> list[Callable[..., Any]]:
        return [python_function(doc, self._call) for doc in self.entry["docs"]]

    def drain(self) -> list[str]:
        return []

    def check(self) -> dict[str, Any]:
        checker = _bfcl("eval_checker.multi_turn_eval.multi_turn_checker")
        turns = self.turns + [[] for _ in range(len(self.entry["ground_truth"]) - len(self.turns))]
        category = self.entry["id"].rsplit("_", 1)[0]
        try:
            verdict: dict[str, Any] = checker.multi_turn_checker(
                turns, self.entry["ground_truth"], self.entry, category, self.run_name
            )
        except AssertionError as exc:
            return {"valid": False, "error_message": f"checker: {exc}"}
        return verdict


_RUNS = 0


def run_entry(
    loop: Loop, base_url: str, entry: dict[str, Any], max_turns: int, max_output: int
) -> tuple[Outcome, float, bool, int]:
    """Run one entry through ``loop``: the outcome, wall seconds, the checker's verdict and
    the calls that reached a tool."""
    global _RUNS
    _RUNS += 1
    box = BfclBox(entry, f"bench_{_RUNS}_{int(time.time())}")
    prompts = [
        " ".join(m["content"] for m in turn if m["role"] == "user") for turn in entry["question"]
    ]
    outcome, wall = timed(loop, base_url, box, prompts, SYSTEM, max_turns, max_output)
    verdict = box.check()
    return outcome, wall, bool(verdict.get("valid")), len(box.calls)
