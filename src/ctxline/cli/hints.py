"""The fix to print beside an error: "did you mean", the right base URL, ``--create``.

Why: an error that only says what is wrong (``no session 's1'``, ``NotFoundError: 404``,
``Connection error.``) leaves a newcomer guessing. These helpers turn the common
mistakes into one line that also says what to type instead. They never raise: a hint
that cannot be worked out is left off.

    session_hint(["mini-swe-agent/psf__requests-2317@replay1"], "mini-swe-agent/psf__requests-2317")
    # "did you mean 'mini-swe-agent/psf__requests-2317@replay1'?"
    explain_model_error("openai:m: APIConnectionError: Connection error.", "http://127.0.0.1:9")
"""

from __future__ import annotations

import difflib
import errno
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ctxline.errors import UnknownSession, UnknownTimeline, ValidationError

__all__ = [
    "ENDPOINT_ERRORS",
    "MAX_CANDIDATES",
    "close_matches",
    "explain_model_error",
    "hint_for",
    "is_endpoint_error",
    "session_hint",
]

MAX_CANDIDATES = 20_000
"""Session ids compared for a "did you mean" (the first ones, in id order)."""

ENDPOINT_ERRORS = (
    "APIConnectionError",
    "APITimeoutError",
    "NotFoundError",
    "AuthenticationError",
    "PermissionDeniedError",
)
"""SDK errors (OpenAI and Anthropic name them alike) that mean the endpoint is wrong, not
the request: every later call would fail the same way."""


def close_matches(known: Iterable[str], typed: str, limit: int = 3) -> list[str]:
    """Up to ``limit`` of ``known`` that ``typed`` probably meant: the ids it is a prefix
    of (``run-1`` → ``run-1@replay1``) first, then difflib's close matches."""
    candidates: list[str] = []
    for i, name in enumerate(known):
        if i >= MAX_CANDIDATES:
            break
        candidates.append(name)
    prefixed = sorted(c for c in candidates if c != typed and c.startswith(typed) and typed)
    close = difflib.get_close_matches(typed, candidates, n=limit, cutoff=0.75)
    out: list[str] = []
    for name in [*prefixed, *close]:
        if name not in out and name != typed:
            out.append(name)
    return out[:limit]


def session_hint(known: Iterable[str], typed: str) -> str:
    """``did you mean 'x'?`` (or ``… 'x' or 'y'?``), or "" when nothing is close."""
    matches = close_matches(known, typed)
    if not matches:
        return ""
    return "did you mean " + " or ".join(repr(m) for m in matches) + "?"


def is_endpoint_error(error: BaseException | str) -> bool:
    """Whether ``error`` (a ModelError, or the message a run recorded for one) came from
    an endpoint that is wrong or down."""
    if isinstance(error, str):
        return any(f": {name}: " in error for name in ENDPOINT_ERRORS) or any(
            mark in error for mark in _ENDPOINT_MARKS
        )
    cause = error.__cause__
    return cause is not None and type(cause).__name__ in ENDPOINT_ERRORS


_ENDPOINT_MARKS = (": HTTP 404: ", ": HTTP 401: ", ": HTTP 403: ", ": cannot connect: ", ": no reply within ")
"""How ctxline's own client words the same failures (``openai:m at URL: HTTP 404: …``)."""


def _base(base_url: str | None) -> str:
    return (base_url or "").strip().rstrip("/")


def explain_model_error(message: str, base_url: str | None) -> str:
    """``message`` (a failed model call) with what was called and how to fix it.

    A 404 from a base URL without ``/v1`` suggests the URL with it; a refused
    connection names the URL and asks whether the server runs there; a refused key
    names the variable. Any other message comes back as it was.
    """
    base = _base(base_url)
    where = base or "the provider's default endpoint"
    first = message.strip().splitlines()[0] if message.strip() else message
    short = first if len(first) <= 300 else first[:299] + "…"
    if "NotFoundError" in message or "Error code: 404" in message or ": HTTP 404: " in message:
        if base and not base.endswith("/v1"):
            return (
                f"the model server at {base} answered 404 Not Found: an OpenAI-compatible"
                f" base URL usually ends in /v1, try --base-url {base}/v1 ({short})"
            )
        return (
            f"the model server at {where} answered 404 Not Found: check that it serves this"
            f" model (--model kind:NAME; GET {base or '…'}/models lists them) ({short})"
        )
    if any(m in message for m in ("APIConnectionError", "Connection error", ": cannot connect: ")):
        return (
            f"cannot connect to the model server at {where}: start it, or fix the host and"
            f" port in --base-url ({short})"
        )
    if "APITimeoutError" in message or ": no reply within " in message:
        return (
            f"the model server at {where} did not answer in time: check that it is up and"
            f" not overloaded ({short})"
        )
    if "AuthenticationError" in message or "Error code: 401" in message or ": HTTP 401: " in message:
        return (
            f"the model server at {where} refused the API key: set $OPENAI_API_KEY"
            f" (or $ANTHROPIC_API_KEY) to a valid key ({short})"
        )
    return message


def _near_paths(typed: str | Path) -> str:
    """``did you mean 'x'?`` over the entries beside a path that does not exist."""
    path = Path(typed)
    parent = path.parent if str(path.parent) else Path(".")
    try:
        names = [p.name for _, p in zip(range(MAX_CANDIDATES), parent.iterdir(), strict=False)]
    except OSError:
        return ""
    matches = difflib.get_close_matches(path.name, names, n=2, cutoff=0.7)
    if not matches:
        return ""
    return "did you mean " + " or ".join(repr(str(parent / m)) for m in matches) + "?"


def _known_sessions(db: str) -> list[str]:
    from ctxline.record.store import open_store

    if not db or db in (":memory:", "memory:", "memory://"):
        return []
    store = open_store(db, read_only=True)
    try:
        return [s.id for _, s in zip(range(MAX_CANDIDATES), store.sessions(), strict=False)]
    finally:
        store.close()


def _known_timelines(db: str, session: str) -> list[str]:
    from ctxline.record.store import open_store

    store = open_store(db, read_only=True)
    try:
        return [t.name for t in store.timelines(session)]
    finally:
        store.close()


def _session_hint(exc: UnknownSession, command: str, params: Mapping[str, Any]) -> str:
    db = str(params.get("db") or "")
    near = session_hint(_known_sessions(db), exc.session) if db else ""
    if command == "append":
        fix = "add --create to start a new session by that name"
        return f"{near} (or {fix})" if near else fix
    listing = (
        "see `ctxline sessions` with the same --db"  # never echo a URL: it may hold a password
    )
    return f"{near} ({listing})" if near else listing


def _model_hint(typed: str) -> str:
    from ctxline.models import KINDS

    kind, sep, name = typed.partition(":")
    if not sep:
        return f"did you mean 'openai:{typed}'?" if typed.strip() else ""
    close = difflib.get_close_matches(kind, KINDS, n=1, cutoff=0.6)
    return f"did you mean '{close[0]}:{name}'?" if close and name.strip() else ""


def _validation_hint(exc: ValidationError, params: Mapping[str, Any]) -> str:
    message = exc.message
    if exc.field == "db" and message.startswith("no such database"):
        near = _near_paths(str(params.get("db") or ""))
        create = "create one with `ctxline import FILE --db PATH` or `ctxline append --create`"
        return near or create
    if exc.field == "format" and message.startswith("unknown format"):
        from ctxline.importers import FORMATS

        typed = str(params.get("fmt") or "")
        close = difflib.get_close_matches(typed.replace("_", "-"), list(FORMATS), n=1)
        return f"did you mean {close[0]!r}?" if close else ""
    if exc.field == "model" and "kind:name" in message:
        return _model_hint(str(params.get("model") or ""))
    if exc.field == "step" and message.startswith("no request step"):
        session = params.get("session")
        return f"see `ctxline requests --session {session}` with the same --db for the logged steps"
    if exc.field == "id" and message.startswith("no memory"):
        return "see `ctxline memory list` with the same --db and owner options"
    if message == "no such file or folder" and exc.source:
        return _near_paths(exc.source)
    if exc.field == "catalog" and message.startswith("no such catalog"):
        return _near_paths(str(params.get("catalog_path") or ""))
    if exc.field == "dir" and message.startswith("no such skills folder"):
        return _near_paths(str(params.get("folder") or ""))
    return ""


def hint_for(exc: BaseException, command: str, params: Mapping[str, Any]) -> str:
    """What to do about ``exc``, raised by ``command`` run with ``params`` ("" if nothing
    useful can be said). Never raises: a hint that fails is left off."""
    try:
        if isinstance(exc, UnknownSession):
            return _session_hint(exc, command, params)
        if isinstance(exc, UnknownTimeline):
            db = str(params.get("db") or "")
            return session_hint(_known_timelines(db, exc.session), exc.timeline) if db else ""
        if isinstance(exc, ValidationError):
            return _validation_hint(exc, params)
        if isinstance(exc, OSError) and exc.errno == errno.ENOENT and exc.filename:
            return _near_paths(str(exc.filename))
    except Exception:  # a hint is a courtesy: never let it replace the error
        return ""
    return ""
