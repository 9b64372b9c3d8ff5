"""The README's environment example runs as written and prints what the README shows."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_the_readme_environment_example_prints_what_it_says() -> None:
    section = README.read_text().split("## Context as an environment", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```(python)?\n(.*?)```", section, re.S)
    code = next(body for lang, body in blocks if lang == "python")
    shown = next(body for lang, body in blocks if not lang)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, str(README), "exec"), {})
    assert out.getvalue() == shown
