"""The inspector over HTTP: every page escapes what it shows, sends a strict policy, refuses a
foreign Host and any method but GET/HEAD, and names what is missing."""

from __future__ import annotations

import re
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest

from ctxline.record.store import SQLiteStore
from ctxline.web.app import CSP, create_app
from ctxline.web.record import open_record
from ctxline.web.server import RunningServer, serve_in_thread
from web_support import FORGED, TAMPERED, build_record, sqlite_fingerprint


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RunningServer, Path]]:
    path = tmp_path_factory.mktemp("app") / "record.db"
    store = SQLiteStore(path)
    build_record(store)
    store.close()
    with serve_in_thread(create_app(open_record(str(path)))) as running:
        yield running, path


def get(
    url: str, *, method: str = "GET", host: str | None = None
) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, method=method)
    if host:
        request.add_header("Host", host)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return (
                response.status,
                {k.lower(): v for k, v in response.headers.items()},
                response.read(),
            )
    except urllib.error.HTTPError as exc:
        return exc.code, {k.lower(): v for k, v in exc.headers.items()}, exc.read()


def q(value: str) -> str:
    return quote(value, safe="")


def test_pages_of_the_forged_session_escape_everything(server: tuple[RunningServer, Path]) -> None:
    running, _ = server
    s = q(FORGED)
    pages = [
        "/",
        f"/timeline?s={s}",
        f"/timeline?s={s}&t=try-b",
        f"/request?s={s}&step=2",
        f"/request?s={s}&t=try-b&step=3",
        f"/diff?s={s}&t=try-b&step=3",
        f"/breaks?s={s}&t=try-b",
        f"/guides?s={s}",
        *(f"/event?s={s}&seq={n}" for n in range(1, 12)),
        *(f"/event?s={s}&t=try-b&seq={n}" for n in range(1, 15)),
    ]
    for path in pages:
        status, headers, body = get(running.url + path)
        assert status == 200, path
        page = body.decode()
        assert headers["content-security-policy"] == CSP
        assert headers["x-content-type-options"] == "nosniff"
        # the only script is the inspector's own file; no forged element survives
        assert re.findall(r"<script\b[^>]*>", page) == [
            '<script src="/static/inspector.js" defer>'
        ], path
        assert "<img" not in page
        assert "onerror=alert" not in page or "onerror=alert(1)&gt;" in page, path
        assert "<ctx-rule op" not in page  # a forged tag is never markup, even inert markup
    status, _, body = get(running.url + f"/request?s={s}&step=2")
    assert "&lt;script&gt;document.title=&#39;pwned&#39;" in body.decode()


def test_host_methods_and_missing_things(server: tuple[RunningServer, Path]) -> None:
    running, _ = server
    assert get(running.url + "/", host="evil.example")[0] == 400  # DNS rebinding
    assert get(running.url + "/", host="localhost")[0] == 200
    assert get(running.url + "/", method="POST")[0] == 405
    assert get(running.url + "/", method="HEAD")[0] == 200
    status, _, body = get(running.url + "/timeline?s=" + q("<script>nobody</script>"))
    assert status == 404
    assert "&lt;script&gt;nobody&lt;/script&gt;" in body.decode()
    assert get(running.url + "/request?s=" + q(FORGED) + "&step=x")[0] == 400
    assert get(running.url + "/request?s=" + q(FORGED) + "&step=99")[0] == 404
    assert get(running.url + "/timeline")[0] == 400
    assert get(running.url + "/blob?ref=sha256:" + "0" * 64)[0] == 404
    assert get(running.url + "/blob?ref=nonsense")[0] == 404
    assert get(running.url + "/static/../app.py")[0] == 404


def test_downloads(server: tuple[RunningServer, Path]) -> None:
    running, _ = server
    status, headers, body = get(running.url + f"/request/body?s={q(TAMPERED)}&step=3")
    assert status == 409
    assert headers["x-ctxline-logged-sha256"] == "sha256:" + "0" * 64
    assert b"mismatch=ok" in body
    status, headers, body = get(running.url + f"/request/body?s={q(TAMPERED)}&step=2")
    assert status == 200
    assert headers["x-ctxline-sha256"] == headers["x-ctxline-logged-sha256"]
    assert headers["content-type"] == "application/json"
    assert (
        headers["content-disposition"]
        == 'attachment; filename="tampered_logged-sha-main-step-2.json"'
    )
    status, _, page = get(running.url + "/blobs")
    ref = re.search(r"ref=(sha256%3A[0-9a-f]{64})", page.decode())
    assert ref is not None
    status, headers, data = get(running.url + f"/blob?ref={ref.group(1)}&raw=1")
    assert status == 200
    assert headers["content-type"] == "application/octet-stream"
    assert headers["content-disposition"].startswith("attachment;")
    import hashlib

    assert "sha256%3A" + hashlib.sha256(data).hexdigest() == ref.group(1)


def test_report_json_is_the_logged_report(server: tuple[RunningServer, Path]) -> None:
    import json

    running, path = server
    status, _, body = get(running.url + f"/request/report?s={q(FORGED)}&step=2")
    assert status == 200
    report = json.loads(body)
    assert report["step"] == 2
    assert set(report["tokens"]) == {"tools", "system", "history", "tail", "total"}
    after = sqlite_fingerprint(path)
    assert (after["side_files"], after["wal_bytes"]) == ([], 0)


ABSURD = [
    "100000000000000000000",  # 10^20: past what SQLite can bind
    "1" + "0" * 400,
    "10^20",
    "1e20",
    "-1",
    "-100000000000000000000",
    "0x10",
    "nan",
    "NaN",
    "inf",
    "-inf",
    "1.5",
    " 1",
    "1_000",
    "١٢",  # Arabic-Indic digits: int() takes them, the inspector does not
    "２",  # a fullwidth digit
    "page",
    "<script>alert(1)</script>",
    "%00",
    "",
]


def test_absurd_numbers_are_a_400_on_every_numbered_route(
    server: tuple[RunningServer, Path],
) -> None:
    running, _ = server
    s = q(FORGED)
    routes = [
        ("/blobs?page=", ""),
        (f"/timeline?s={s}&page=", ""),
        (f"/request?s={s}&step=", ""),
        (f"/request/body?s={s}&step=", ""),
        (f"/request/report?s={s}&step=", ""),
        (f"/diff?s={s}&step=", ""),
        (f"/event?s={s}&seq=", ""),
    ]
    for route, _ in routes:
        for value in ABSURD:
            status, headers, body = get(running.url + route + q(value))
            page = body.decode()
            assert status == 400, (route, value, status)
            assert headers["content-security-policy"] == CSP
            assert "parameter" in page, (route, value)
            assert "<script>alert(1)" not in page
    # a page number past the end shows the last page; a huge step or seq is simply not there
    assert get(running.url + "/blobs?page=999999")[0] == 200
    assert get(running.url + f"/timeline?s={s}&page=999999")[0] == 200
    assert get(running.url + f"/request?s={s}&step=999999999999")[0] == 404
    assert get(running.url + f"/event?s={s}&seq=999999999999")[0] == 404
