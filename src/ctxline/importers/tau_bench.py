"""tau-bench result files → one session per trajectory.

Why: tau-bench (sierra-research/tau-bench) stores a run as a JSON list of
``{task_id, reward, info, traj, trial}``; each ``traj`` is a plain OpenAI Chat
Completions message list (system policy, user simulator turns, assistant tool calls,
``role: tool`` results), so the messages go through
:class:`~ctxline.importers.openai_messages.ChatConverter` unchanged. What tau-bench
adds is the grading: ``reward``, ``task_id`` and ``trial`` are kept in the session
meta (with the small ``info`` fields such as ``user_cost``), so a replay can be
compared with the recorded outcome.

The session id names the domain when the file name does (tau-bench's own files are
``<model>-<domain>.json``), else the file stem::

    gpt-4o-airline-tasks-00-24.json, task 3, trial 1  →  tau-bench/airline/3-1
    my-run.json, task 3, trial 1                        →  tau-bench/my-run/3-1
"""

from __future__ import annotations

import re
from typing import Any

from ctxline.errors import ValidationError
from ctxline.importers._common import (
    ImportedSession,
    SessionBuilder,
    SourceFile,
    as_list,
    as_obj,
    small_meta,
    unique_id,
)
from ctxline.importers.openai_messages import convert_messages
from ctxline.record.events import JsonValue

__all__ = ["DOMAINS", "domain_of", "load_tau_bench"]

DOMAINS = ("airline", "retail", "telecom", "mock")
"""The tau-bench / tau2-bench domains recognised in file names."""

_WORD = re.compile(r"[A-Za-z0-9]+")


def domain_of(stem: str) -> str | None:
    """The domain a file name names (the last one, if it names several), else None."""
    found = [w.lower() for w in _WORD.findall(stem) if w.lower() in DOMAINS]
    return found[-1] if found else None


def _scalar_text(value: object, where: str) -> str:
    """A task id or trial as it appears in the session id (ints and strings both occur)."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValidationError(
            f"expected an integer or a string, got {type(value).__name__}", field=where
        )
    return str(value)


def _run_meta(run: dict[str, Any], where: str, domain: str | None) -> dict[str, JsonValue]:
    meta: dict[str, JsonValue] = {"format": "tau-bench"}
    if domain:
        meta["domain"] = domain
    for key in ("task_id", "trial"):
        meta[key] = run.get(key)
    reward = run.get("reward")
    if reward is not None and (isinstance(reward, bool) or not isinstance(reward, int | float)):
        raise ValidationError(
            f"expected a number, got {type(reward).__name__}", field=f"{where}.reward"
        )
    meta["reward"] = reward
    info = run.get("info")
    if isinstance(info, dict):
        extra = small_meta(info, limit=200, skip=("task", "reward_info"))
        if extra:
            meta["info"] = extra
        task = info.get("task")
        if isinstance(task, dict) and isinstance(task.get("user_id"), str):
            meta["user_id"] = task["user_id"]
    return meta


def load_tau_bench(src: SourceFile) -> list[ImportedSession]:
    runs = as_list(src.doc(), "")
    domain = domain_of(src.stem)
    prefix = f"tau-bench/{domain or src.stem}"
    sessions: list[ImportedSession] = []
    taken: set[str] = set()
    for i, item in enumerate(runs):
        where = f"[{i}]"
        run = as_obj(item, where)
        if "traj" not in run:
            raise ValidationError("required list is missing", field=f"{where}.traj")
        task = _scalar_text(run.get("task_id"), f"{where}.task_id")
        trial = _scalar_text(run.get("trial", 0), f"{where}.trial")
        builder = SessionBuilder(unique_id(f"{prefix}/{task}-{trial}", taken))
        convert_messages(builder, run["traj"], f"{where}.traj")
        meta = _run_meta(run, where, domain)
        meta["file"] = src.name
        sessions.append(builder.finish(meta))
    return sessions
