"""Import recorded agent sessions from other tools' logs.

Why: real trajectories are the test bed for context engineering — replaying them
shows what a view would have been at every step. Each format has its own module
(``events``, ``openai_messages``, ``tau_bench``, ``swe_agent``, ``mini_swe_agent``,
``claude_code``); all of them produce :class:`ImportedSession` values whose events
are valid for the store (every tool result answers an earlier call; a result whose
call is missing is kept as an ``import.orphan_result`` event and counted in
``meta["orphan_results"]``), carry deterministic client ids (re-importing is
idempotent), and have every string cleaned of lone surrogates.

    >>> import json, tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> chat = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    >>> _ = (folder / "chat.json").write_text(json.dumps(chat))
    >>> sessions = load(folder / "chat.json")
    >>> sessions[0].id, [p.event.kind for p in sessions[0].events]
    ('chat', ['user.message', 'assistant.message'])

:func:`detect_format` looks at the content, not only the name; every error is a
:class:`~ctxline.errors.ValidationError` naming the file (and line, for JSONL).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ctxline.errors import ValidationError
from ctxline.importers._common import FORMATS, ImportedSession, SourceFile, parse_json
from ctxline.importers.claude_code import RECORD_TYPES, load_claude_code
from ctxline.importers.events import load_events
from ctxline.importers.mini_swe_agent import load_mini_swe_agent
from ctxline.importers.openai_messages import load_openai
from ctxline.importers.swe_agent import load_swe_agent
from ctxline.importers.tau_bench import load_tau_bench

__all__ = ["FORMATS", "ImportedSession", "detect_format", "load", "load_tree"]

_LOADERS: dict[str, Callable[[SourceFile], list[ImportedSession]]] = {
    "events": load_events,
    "openai": load_openai,
    "tau-bench": load_tau_bench,
    "swe-agent": load_swe_agent,
    "mini-swe-agent": load_mini_swe_agent,
    "claude-code": load_claude_code,
}

_SNIFF_LINES = 50
_CLAUDE_KEYS = ("uuid", "sessionId", "parentUuid", "leafUuid", "messageId")


def _known() -> str:
    return "known formats: " + ", ".join(FORMATS)


def _record_format(obj: dict[str, Any]) -> str | None:
    """The format one JSON object (a JSONL line, or a one-object file) belongs to."""
    if isinstance(obj.get("kind"), str):
        return "events"
    if obj.get("type") in RECORD_TYPES and any(k in obj for k in _CLAUDE_KEYS):
        return "claude-code"
    return None


def _document_format(doc: object) -> str | None:
    if isinstance(doc, list):
        first = next((x for x in doc if isinstance(x, dict)), None)
        if first is None:
            return None
        if "traj" in first and ("task_id" in first or "reward" in first):
            return "tau-bench"
        if isinstance(first.get("role"), str):
            return "openai"
        return None
    if not isinstance(doc, dict):
        return None
    record = _record_format(doc)
    if record:
        return record
    if isinstance(doc.get("history"), list) or (
        isinstance(doc.get("trajectory"), list) and ("environment" in doc or "info" in doc)
    ):
        return "swe-agent"
    if isinstance(doc.get("messages"), list):
        fmt = doc.get("trajectory_format")
        if (isinstance(fmt, str) and fmt.startswith("mini-swe-agent")) or (
            "instance_id" in doc and "info" in doc
        ):
            return "mini-swe-agent"
        return "openai"
    return None


def _jsonl_format(lines: Iterable[str]) -> str | None:
    """The format of a JSONL file, from its first records (``lines``: the file's lines)."""
    seen = 0
    for n, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        seen += 1
        if seen > _SNIFF_LINES:
            break
        try:
            obj = parse_json(raw, line=n)
        except ValidationError:
            return None
        found = _record_format(obj) if isinstance(obj, dict) else None
        if found:
            return found
    return None


def _sniff(src: SourceFile) -> str:
    text = src.text.lstrip()
    if not text:
        raise ValidationError(f"the file is empty; {_known()}")
    if text[0] not in "[{":
        raise ValidationError(f"not JSON or JSONL; {_known()}")
    try:
        found = _document_format(src.doc())
    except ValidationError as exc:
        # not one JSON document: JSONL, or broken JSON (then say where)
        found = _jsonl_format(src.text.split("\n"))
        if found is None:
            raise ValidationError(
                f"cannot tell the format ({exc.message}); {_known()}", line=exc.line
            ) from None
    if found is None:
        raise ValidationError(f"cannot tell the format from the content; {_known()}")
    return found


def detect_format(path: Path) -> str:
    """The format of ``path``, told from its content; ValidationError when it cannot tell."""
    path = Path(path)
    try:
        return _sniff(SourceFile(path))
    except ValidationError as exc:
        raise exc if exc.source else exc.located(source=str(path)) from None


def load(path: Path, format: str = "auto") -> list[ImportedSession]:
    """The sessions in ``path`` (``format`` one of :data:`FORMATS`, or ``auto`` to detect it)."""
    path = Path(path)
    if format != "auto" and format not in _LOADERS:
        raise ValidationError(
            f"unknown format {format!r}; {_known()}", field="format", source=str(path)
        )
    fmt = format
    try:
        src = SourceFile(path)
        if fmt == "auto":
            fmt = _sniff(src)
        return _LOADERS[fmt](src)
    except ValidationError as exc:
        raise exc if exc.source else exc.located(source=str(path)) from None
    except (KeyError, TypeError, AttributeError, IndexError, RecursionError) as exc:
        raise ValidationError(
            f"unexpected structure for format {fmt}: {type(exc).__name__}: {exc}", source=str(path)
        ) from exc


TRAJECTORY_SUFFIXES = (".json", ".jsonl", ".traj")


def load_tree(
    path: Path,
    format: str = "auto",
    *,
    skipped: Callable[[Path, ValidationError], None] | None = None,
) -> list[ImportedSession]:
    """The sessions in a file, or in every trajectory file under a folder.

    In a folder, only ``.json``/``.jsonl``/``.traj`` files are read, shallower files
    first (a Claude Code main session loads its ``subagents/*.jsonl`` itself, so its
    version comes first), a repeat of a session already loaded with the same events is
    dropped, and with ``format="auto"`` a file that is not a trajectory is passed to
    ``skipped`` instead of failing the whole folder.
    """
    path = Path(path)
    if not path.exists():
        raise ValidationError("no such file or folder", source=str(path))
    if path.is_file():
        return load(path, format)
    files = sorted(
        (p for p in path.rglob("*") if p.is_file() and p.suffix in TRAJECTORY_SUFFIXES),
        key=lambda p: (len(p.relative_to(path).parts), str(p)),
    )
    sessions: list[ImportedSession] = []
    loaded: dict[str, ImportedSession] = {}
    for file in files:
        if format == "auto":
            try:
                detect_format(file)
            except ValidationError as exc:
                if skipped is not None:
                    skipped(file, exc)
                continue
        for session in load(file, format):
            seen = loaded.get(session.id)
            if seen is not None and seen.events == session.events:
                continue  # loaded already, with its main file
            loaded[session.id] = session
            sessions.append(session)
    return sessions
