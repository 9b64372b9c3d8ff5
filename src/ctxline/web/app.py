"""``ctxline serve``'s web app: what the model saw at every step, what changed, what it cost.

A Starlette app over a :class:`~ctxline.web.record.InspectorRecord`: it only reads
(GET and HEAD; the record is opened read-only), renders Jinja2 templates with
autoescaping on for every value, sends a strict Content-Security-Policy (scripts and
styles from its own ``/static`` only, which ships inside the package: no CDN, no build
step) and refuses a ``Host`` it does not serve, so a web page elsewhere cannot read the
record through DNS rebinding. Sessions, timelines and steps travel as query
parameters (session ids hold slashes).

    app = create_app(open_record("ctxline.db"))
    uvicorn.run(app, host="127.0.0.1", port=8765)
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from ctxline.errors import BlobError, CtxlineError, UnknownSession, UnknownTimeline
from ctxline.pricing import format_usd
from ctxline.record.store.base import MAIN
from ctxline.web import pages
from ctxline.web.record import InspectorRecord

__all__ = ["CSP", "Inspector", "create_app", "url"]

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
LOOPBACK = ("127.0.0.1", "localhost", "::1", "[::1]")


def url(path: str, **params: object) -> str:
    """A link inside the app (parameters URL-encoded; None ones left out)."""
    query = urlencode({k: v for k, v in params.items() if v is not None})
    return f"{path}?{query}" if query else path


class Inspector:
    """The record and the templates (each page reads what it shows: nothing is cached here)."""

    def __init__(self, record: InspectorRecord) -> None:
        self.record = record
        folder = Path(str(resources.files("ctxline.web").joinpath("templates")))
        self.env = Environment(
            loader=FileSystemLoader(folder),
            autoescape=select_autoescape(default=True, default_for_string=True),
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.env.globals.update(url=url, usd=format_usd, describe=record.describe)
        self.env.filters["n"] = lambda v: f"{int(v):,}" if isinstance(v, int | float) else "—"

    def render(self, template: str, status: int = 200, **context: Any) -> HTMLResponse:
        return HTMLResponse(self.env.get_template(template).render(**context), status_code=status)


def _param(request: Request, name: str, default: str | None = None) -> str:
    value = request.query_params.get(name, default)
    if value is None or value == "":
        raise HTTPException(400, f"the {name!r} parameter is missing")
    return value


MAX_NUMBER = 10**12
"""The largest number a page, step or seq parameter may be (far above any record's)."""


def _int(request: Request, name: str, default: int | None = None, *, least: int = 0) -> int:
    """A whole-number parameter: ASCII digits only, from ``least`` to :data:`MAX_NUMBER`.

    Anything else (a sign, a fraction, ``nan``, exponent forms, other scripts' digits,
    a number past the limit) is a 400 naming the parameter, never a 500 from a database
    that cannot hold the number.
    """
    raw = request.query_params.get(name)
    if raw is None and default is not None:
        return default
    text = _param(request, name)
    if (
        not (text.isascii() and text.isdigit())
        or len(text) > 13
        or not least <= int(text) <= MAX_NUMBER
    ):
        shown = text if len(text) <= 40 else text[:40] + "…"
        raise HTTPException(
            400,
            f"the {name!r} parameter must be a whole number from {least} to {MAX_NUMBER:,}"
            f" (got {shown!r})",
        )
    return int(text)


Handler = Callable[[Inspector, Request], Response]


def _page(fn: Handler, app: Inspector) -> Callable[[Request], Awaitable[Response]]:
    """A sync handler run in the thread pool, with ctxline's errors as readable pages."""
    from starlette.concurrency import run_in_threadpool

    async def endpoint(request: Request) -> Response:
        try:
            return await run_in_threadpool(fn, app, request)
        except (UnknownSession, UnknownTimeline) as exc:
            return app.render("error.html", 404, title="Not found", message=str(exc))
        except HTTPException as exc:
            return app.render(
                "error.html", exc.status_code, title="Bad request", message=str(exc.detail)
            )
        except BlobError as exc:
            return app.render("error.html", 404, title="Blob unavailable", message=str(exc))
        except CtxlineError as exc:
            return app.render(
                "error.html", 500, title="The record cannot be read", message=str(exc)
            )

    return endpoint


def sessions_page(app: Inspector, request: Request) -> Response:
    q = request.query_params.get("q", "").strip()
    rows = app.record.sessions()
    shown = (
        [r for r in rows if q.lower() in r.id.lower() or q.lower() in str(r.meta).lower()]
        if q
        else rows
    )
    blobs, blob_bytes = app.record.blob_count()
    return app.render(
        "sessions.html",
        title="Sessions",
        q=q,
        rows=shown,
        total=len(rows),
        totals=pages.session_totals(rows),
        blobs=blobs,
        blob_bytes=blob_bytes,
    )


def timeline_page(app: Inspector, request: Request) -> Response:
    session, timeline = _param(request, "s"), request.query_params.get("t") or MAIN
    kind = request.query_params.get("kind") or None
    page = _int(request, "page", 1, least=1)
    ctx = pages.timeline(app.record, session, timeline, kind, page)
    return app.render("timeline.html", title=f"{session} · {timeline}", **ctx)


def request_page(app: Inspector, request: Request) -> Response:
    session, timeline = _param(request, "s"), request.query_params.get("t") or MAIN
    step = _int(request, "step")
    ctx = pages.request(app.record, session, timeline, step, app.record.timelines(session))
    return app.render("request.html", title=f"Step {step} · {session}", **ctx)


def body_download(app: Inspector, request: Request) -> Response:
    session, timeline = _param(request, "s"), request.query_params.get("t") or MAIN
    step = _int(request, "step")
    rebuilt = pages.rebuilt_step(app.record, session, timeline, step, app.record.timelines(session))
    digest = "sha256:" + hashlib.sha256(rebuilt.body).hexdigest()
    headers = {"X-Ctxline-Sha256": digest, "X-Ctxline-Logged-Sha256": rebuilt.header.sha256}
    name = pages.file_name(session, timeline, step)
    if not rebuilt.matches and request.query_params.get("mismatch") != "ok":
        return Response(
            f"step {step} does not rebuild to the logged bytes: {rebuilt.error}\n"
            "add mismatch=ok to download what the record rebuilds to now (not what was sent)\n",
            status_code=409,
            media_type="text/plain; charset=utf-8",
            headers=headers,
        )
    headers["Content-Disposition"] = (
        f'attachment; filename="{name if rebuilt.matches else "MISMATCH-" + name}"'
    )
    return Response(rebuilt.body, media_type="application/json", headers=headers)


def report_json(app: Inspector, request: Request) -> Response:
    session, timeline = _param(request, "s"), request.query_params.get("t") or MAIN
    step = _int(request, "step")
    return JSONResponse(pages.locate(app.record, session, timeline, step).header.report)


def diff_page(app: Inspector, request: Request) -> Response:
    session, timeline = _param(request, "s"), request.query_params.get("t") or MAIN
    step = _int(request, "step")
    ctx = pages.diff(app.record, session, timeline, step, app.record.timelines(session))
    return app.render("diff.html", title=f"Step {step} vs {step - 1} · {session}", **ctx)


def breaks_page(app: Inspector, request: Request) -> Response:
    session, timeline = _param(request, "s"), request.query_params.get("t") or MAIN
    page = _int(request, "page", 1, least=1)
    ctx = pages.breaks_page(app.record, session, timeline, app.record.timelines(session), page)
    return app.render("breaks.html", title=f"Cache breaks · {session}", **ctx)


def event_page(app: Inspector, request: Request) -> Response:
    session, timeline = _param(request, "s"), request.query_params.get("t") or MAIN
    seq = _int(request, "seq")
    head = next((t.head for t in app.record.timelines(session) if t.name == timeline), None)
    if head is None:
        raise UnknownTimeline(session, timeline)
    found = app.record.read(session, timeline, after_seq=seq - 1, limit=1) if seq else []
    if not found or found[0].seq != seq:
        raise HTTPException(404, f"no event {seq} in {session}/{timeline} (it has {head})")
    ctx = pages.event(session, timeline, found[0], head)
    return app.render("event.html", title=f"Event {seq} · {session}", **ctx)


def guides_page(app: Inspector, request: Request) -> Response:
    session, timeline = _param(request, "s"), request.query_params.get("t") or MAIN
    guides = app.record.read(session, timeline, kind="guide")
    return app.render(
        "guides.html",
        title=f"Guide versions · {session}",
        session=session,
        timeline=timeline,
        guides=pages.guide_versions(guides),
    )


def blobs_page(app: Inspector, request: Request) -> Response:
    page = _int(request, "page", 1, least=1)
    count, size = app.record.blob_count()
    last = max(1, -(-count // pages.BLOBS_PER_PAGE))
    page = min(page, last)  # past the end: the last page (as the timeline does)
    rows = app.record.blobs(offset=(page - 1) * pages.BLOBS_PER_PAGE, limit=pages.BLOBS_PER_PAGE)
    return app.render(
        "blobs.html",
        title="Blobs",
        rows=[pages.blob_row(r) for r in rows],
        page=page,
        count=count,
        size=size,
        pages=last,
    )


def blob_page(app: Inspector, request: Request) -> Response:
    ref = _param(request, "ref")
    data = app.record.blob(ref)
    if request.query_params.get("raw") == "1":
        return Response(
            data,
            media_type="application/octet-stream",
            headers={"Content-Disposition": f'attachment; filename="{ref.replace(":", "-")}.bin"'},
        )
    return app.render(
        "blob.html", title="Blob", ref=ref, size=len(data), text=pages.blob_text(data)
    )


async def security_headers(
    request: Request, call_next: Callable[[Request], Awaitable[Response]]
) -> Response:
    response = await call_next(request)
    response.headers["Content-Security-Policy"] = CSP
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "no-referrer"
    response.headers["X-Frame-Options"] = "DENY"
    response.headers["Cache-Control"] = "no-store"
    return response


def create_app(record: InspectorRecord, *, host: str = "127.0.0.1") -> Starlette:
    """The inspector over ``record``; ``host`` is where it is served (for the Host check)."""
    from starlette.middleware.base import BaseHTTPMiddleware

    app = Inspector(record)
    routes: list[Route | Mount] = [
        Route(path, _page(fn, app), methods=["GET", "HEAD"])
        for path, fn in (
            ("/", sessions_page),
            ("/timeline", timeline_page),
            ("/request", request_page),
            ("/request/body", body_download),
            ("/request/report", report_json),
            ("/diff", diff_page),
            ("/breaks", breaks_page),
            ("/event", event_page),
            ("/guides", guides_page),
            ("/blobs", blobs_page),
            ("/blob", blob_page),
        )
    ]
    static = Path(str(resources.files("ctxline.web").joinpath("static")))
    routes.append(Mount("/static", StaticFiles(directory=static), name="static"))
    allowed = ["*"] if host in ("0.0.0.0", "::", "") else [*LOOPBACK, host]
    return Starlette(
        routes=routes,
        middleware=[
            Middleware(TrustedHostMiddleware, allowed_hosts=allowed),
            Middleware(BaseHTTPMiddleware, dispatch=security_headers),
        ],
    )
