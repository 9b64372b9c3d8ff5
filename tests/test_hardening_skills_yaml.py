"""Skill front matter is read with bounded work (issue 24): YAML aliases are refused before
anything expands, and an over-long front matter is refused before YAML reads it."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxline.errors import ValidationError
from ctxline.skills.folder import MAX_FRONT_CHARS, load_skill


def _bomb(levels: int) -> str:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, levels):
        prev, cur = chr(ord("a") + i - 1), chr(ord("a") + i)
        lines.append(f"{cur}: &{cur} [{','.join(['*' + prev] * 9)}]")
    return "\n".join(lines)


BOMBS = [
    _bomb(9),  # the 487-byte class: 9**9 strings once expanded
    _bomb(3),
    "name: x\ndescription: &d hello\nlicense: *d",
    "name: &n demo\ndescription: *n",
    "<<: &m {name: demo}\ndescription: d\nextra: *m",
    "name: demo\ndescription: d\nmetadata: {a: &x [1, 2], b: *x}",
]


@pytest.mark.parametrize("front", BOMBS)
def test_aliases_are_refused_with_a_line(tmp_path: Path, front: str) -> None:
    folder = tmp_path / "demo"
    folder.mkdir()
    (folder / "SKILL.md").write_text(f"---\n{front}\n---\nbody\n")
    with pytest.raises(ValidationError, match=r"aliases .* not allowed .*line \d+"):
        load_skill(folder)


@pytest.mark.parametrize("size", [MAX_FRONT_CHARS + 1, 10 * MAX_FRONT_CHARS])
def test_an_over_long_front_matter_is_refused(tmp_path: Path, size: int) -> None:
    folder = tmp_path / "demo"
    folder.mkdir()
    front = "name: demo\ndescription: " + "x" * size
    (folder / "SKILL.md").write_text(f"---\n{front}\n---\nbody\n")
    with pytest.raises(ValidationError, match="the limit is"):
        load_skill(folder)


@pytest.mark.parametrize("depth", [5_000, 50_000])
def test_deep_nesting_is_a_validation_error(tmp_path: Path, depth: int) -> None:
    folder = tmp_path / "demo"
    folder.mkdir()
    front = "name: demo\ndescription: d\nmetadata: " + "[" * min(depth, MAX_FRONT_CHARS - 40)
    (folder / "SKILL.md").write_text(f"---\n{front}\n---\nbody\n")
    with pytest.raises(ValidationError, match="front matter"):
        load_skill(folder)


def test_an_anchor_without_alias_still_loads(tmp_path: Path) -> None:
    folder = tmp_path / "demo"
    folder.mkdir()
    (folder / "SKILL.md").write_text("---\nname: demo\ndescription: &d fine\n---\nbody\n")
    assert load_skill(folder).description == "fine"
