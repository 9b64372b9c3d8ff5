"""``ctxline serve`` as users run it: a real process on a free port, saying where it listens and
that it reads only; clear one-line errors for a missing database or a missing extra."""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.request
from pathlib import Path

from click.testing import CliRunner

from conftest import REPO
from ctxline.cli import main
from ctxline.record.store import SQLiteStore
from web_support import build_record, sqlite_fingerprint


def test_serve_a_record_in_a_real_process(tmp_path: Path) -> None:
    path = tmp_path / "record.db"
    store = SQLiteStore(path)
    build_record(store)
    store.close()
    before = sqlite_fingerprint(path)
    cli = Path(sys.executable).with_name("ctxline")
    with subprocess.Popen(
        [str(cli), "serve", "--db", str(path), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=tmp_path,
    ) as proc:
        try:
            assert proc.stdout is not None
            first = proc.stdout.readline()
            second = proc.stdout.readline()
            assert first.startswith("ctxline inspector on http://127.0.0.1:")
            assert f"{path}, opened read-only" in first
            assert "only this machine can connect" in second
            url = first.split()[3]
            with urllib.request.urlopen(url, timeout=30) as response:
                page = response.read().decode()
            assert "mini-swe-agent/psf__requests-2317" in page
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    assert sqlite_fingerprint(path) == before


def test_a_missing_database_is_one_line_and_creates_nothing(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["serve", "--db", str(tmp_path / "typo.db")])
    assert result.exit_code == 2
    assert "no such database" in result.output
    assert "nothing was created" in result.output
    assert list(tmp_path.iterdir()) == []


def test_without_the_web_extra_it_names_the_extra(tmp_path: Path) -> None:
    code = (
        "import sys; sys.modules['starlette'] = None; sys.modules['uvicorn'] = None\n"
        "from ctxline.cli import main\n"
        f"main(['serve', '--db', {str(tmp_path / 'x.db')!r}])\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ},
        timeout=60,
    )
    assert result.returncode == 2
    assert (
        "ctxline serve needs the web extra (starlette, uvicorn missing): pip install 'ctxline[web]'"
        in result.stderr
    )


def test_the_reports_need_no_web_extra(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "for name in ('starlette', 'jinja2', 'uvicorn'): sys.modules[name] = None\n"
        "from ctxline.cli import main\n"
        f"main(['doctor', '--cache', 'examples/data/claude-code/short.jsonl', '--html', {str(tmp_path / 'c.html')!r}],"
        " standalone_mode=False)\n"
        f"main(['replay', 'examples/data/tau-bench', '--db', ':memory:', '--report', {str(tmp_path / 'r.html')!r},"
        " '--json'], standalone_mode=False)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert '<svg class="chart"' in (tmp_path / "c.html").read_text()
    assert '<svg class="chart"' in (tmp_path / "r.html").read_text()
