"""Adding an event kind without handling it fails the type check.

Every dispatch over event kinds (``describe``, the codec, the history renderer, the token
text, the folds) is a ``match`` ending in ``assert_never``. This test shows the mechanism
on the real :data:`~ctxline.record.events.Event` union: a match that handles every kind
type-checks under ``mypy --strict``; the same match over the union plus one new kind is
refused, naming the kind that is not handled.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from ctxline.record.events import Event

REPO = Path(__file__).resolve().parents[1]


def _cases() -> str:
    names = sorted({t.__name__ for t in Event.__args__})
    return "\n".join(f"        case {name}():\n            return {name!r}" for name in names)


def _module(extra_kind: bool) -> str:
    names = sorted({t.__name__ for t in Event.__args__})
    union = "Event | Weather" if extra_kind else "Event"
    return textwrap.dedent(
        """\
        from __future__ import annotations

        from dataclasses import dataclass
        from typing import ClassVar, Literal, assert_never

        from ctxline.record.events import Event, {names}


        @dataclass(frozen=True)
        class Weather:
            kind: ClassVar[Literal["weather"]] = "weather"
            text: str


        def name(event: {union}) -> str:
            match event:
        {cases}
                case _:
                    assert_never(event)
        """
    ).format(names=", ".join(names), union=union, cases=_cases())


def _check(tmp_path: Path, source: str) -> tuple[str, int]:
    path = tmp_path / "dispatch.py"
    path.write_text(source)
    # in a process of its own: mypy raises the recursion limit of the process it runs in
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--no-incremental",
            "--config-file",
            str(REPO / "pyproject.toml"),
            "--python-version",
            "3.11",
            str(path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    return done.stdout + done.stderr, done.returncode


def test_a_match_over_every_kind_type_checks(tmp_path: Path) -> None:
    out, status = _check(tmp_path, _module(extra_kind=False))
    assert status == 0, out


def test_a_new_kind_without_a_case_fails_the_type_check(tmp_path: Path) -> None:
    out, status = _check(tmp_path, _module(extra_kind=True))
    assert status == 1, out
    assert "Weather" in out
    assert "assert_never" in out
