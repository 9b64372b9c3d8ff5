"""Agent Skills folders: ``SKILL.md`` with YAML front matter, resources beside it.

The format (agentskills.io): a skill is a folder whose ``SKILL.md`` starts with YAML
front matter — ``name`` (1-64 lowercase letters, digits and single hyphens, the folder's
name), ``description`` (1-1024 characters: what it does and when to use it), and
optionally ``license``, ``compatibility``, ``metadata`` (a map of strings) and
``allowed-tools`` — followed by Markdown instructions. Files beside it (``scripts/``,
``references/``, ``assets/``) are resources the instructions refer to.

The front matter is parsed with PyYAML's safe loader (no tags, no objects) and every
field is checked; an error names the file and the field. Everything is read only from
inside the skills folder: a skill folder or ``SKILL.md`` that is a symlink leading out of
it is refused, and so are a resource's ``..``, absolute paths and symlinks that lead out.

    skills = load_skills("skills/")      # every folder holding a SKILL.md, by name
    skills["pdf"].body                   # the instructions
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ctxline.errors import ValidationError

__all__ = [
    "MAX_FILE_BYTES",
    "SKILL_FILE",
    "SKILL_NAME",
    "Skill",
    "load_skill",
    "load_skills",
    "resource",
]

SKILL_FILE = "SKILL.md"
SKILL_NAME = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
MAX_SKILL_BYTES = 1_000_000
MAX_FILE_BYTES = 2_000_000
MAX_LISTED = 200
SKIP = {".git", "__pycache__", ".venv", "node_modules", ".DS_Store"}


MAX_FRONT_CHARS = 16_000
"""Front matter longer than this is refused before YAML reads it."""


class _AliasRefused(ValueError):
    pass


class _FrontLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses aliases: front matter never needs them, and a few
    hundred bytes of nested aliases expand to gigabytes (the billion-laughs bomb)."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
            raise _AliasRefused(
                f"YAML aliases ('*name') are not allowed in the front matter (line {mark.line + 2});"
                " write the value out"
            )
        return super().compose_node(parent, index)


@dataclass(frozen=True, slots=True)
class Skill:
    """One skill: its front matter, its instructions and its folder."""

    name: str
    description: str
    body: str
    folder: Path
    license: str = ""
    compatibility: str = ""
    metadata: Mapping[str, str] = field(default_factory=dict)
    allowed_tools: tuple[str, ...] = ()

    def files(self) -> list[str]:
        """The resources beside ``SKILL.md`` (relative paths, sorted, at most 200)."""
        out: list[str] = []
        for root, dirs, names in os.walk(self.folder):
            dirs[:] = sorted(d for d in dirs if d not in SKIP and not d.startswith("."))
            for name in sorted(names):
                if name.startswith(".") or name in SKIP:
                    continue
                rel = (Path(root) / name).relative_to(self.folder).as_posix()
                if rel != SKILL_FILE:
                    out.append(rel)
                if len(out) >= MAX_LISTED:
                    return sorted(out)
        return sorted(out)


def _field(front: Mapping[object, object], key: str, where: str, limit: int, required: bool) -> str:
    value = front.get(key)
    if value is None:
        if required:
            raise ValidationError(f"{where}: the front matter has no {key!r}", field=key)
        return ""
    if not isinstance(value, str):
        raise ValidationError(
            f"{where}: {key!r} must be text, got {type(value).__name__} (quote it)", field=key
        )
    value = value.strip()
    if required and not value:
        raise ValidationError(f"{where}: {key!r} is empty", field=key)
    if len(value) > limit:
        raise ValidationError(f"{where}: {key!r} is longer than {limit} characters", field=key)
    return value


def parse_skill(text: str, where: str, folder: Path) -> Skill:
    """The skill a ``SKILL.md`` text describes (``where`` names it in errors)."""
    text = text.removeprefix("\ufeff")
    lines = text.split("\n")
    if not lines or lines[0].strip() != "---":
        raise ValidationError(
            f"{where}: SKILL.md must start with '---' and YAML front matter", field="front matter"
        )
    end = next((i for i in range(1, len(lines)) if lines[i].strip() == "---"), None)
    if end is None:
        raise ValidationError(
            f"{where}: the front matter has no closing '---'", field="front matter"
        )
    head = "\n".join(lines[1:end])
    if len(head) > MAX_FRONT_CHARS:
        raise ValidationError(
            f"{where}: the front matter is {len(head):,} characters; the limit is"
            f" {MAX_FRONT_CHARS:,}",
            field="front matter",
        )
    try:
        front = yaml.load(head, Loader=_FrontLoader)
    except _AliasRefused as exc:
        raise ValidationError(f"{where}: {exc}", field="front matter") from None
    except RecursionError:
        raise ValidationError(
            f"{where}: the YAML front matter is nested too deeply", field="front matter"
        ) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 2}" if mark is not None else ""
        raise ValidationError(
            f"{where}: invalid YAML front matter{at}", field="front matter"
        ) from None
    if not isinstance(front, dict):
        raise ValidationError(
            f"{where}: the front matter must be a YAML mapping", field="front matter"
        )
    name = _field(front, "name", where, 64, True)
    if not SKILL_NAME.match(name):
        raise ValidationError(
            f"{where}: name {name[:80]!r} must be lowercase letters, digits and single hyphens",
            field="name",
        )
    if folder.name != name:
        raise ValidationError(
            f"{where}: name {name!r} must match its folder {folder.name!r}", field="name"
        )
    meta = front.get("metadata") or {}
    if not isinstance(meta, dict) or not all(isinstance(k, str) for k in meta):
        raise ValidationError(f"{where}: 'metadata' must map names to text", field="metadata")
    tools = _field(front, "allowed-tools", where, 2000, False)
    return Skill(
        name,
        _field(front, "description", where, 1024, True),
        "\n".join(lines[end + 1 :]).strip("\n"),
        folder,
        _field(front, "license", where, 500, False),
        _field(front, "compatibility", where, 500, False),
        {k: str(v) for k, v in meta.items()},
        tuple(tools.split()),
    )


def _inside(path: Path, base: Path, what: str) -> None:
    """Refuse ``path`` when it resolves outside ``base`` (a symlink that leads out)."""
    target = path.resolve()
    if not target.is_relative_to(base.resolve()):
        raise ValidationError(
            f"{path} is a symlink to {target}, outside {base}: a {what} is loaded only from"
            " inside its folder (copy it in instead of linking it)",
            field="skill",
        )


def load_skill(folder: str | Path) -> Skill:
    """The skill in ``folder`` (its ``SKILL.md``); ValidationError naming what is wrong,
    also when ``SKILL.md`` is a symlink that leads out of ``folder``."""
    folder = Path(folder)
    path = folder / SKILL_FILE
    try:
        if path.exists():
            _inside(path, folder, "skill file")
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):  # a FIFO or a device would block or never end
            raise ValidationError(f"{path}: not a regular file", field="skill")
        if info.st_size > MAX_SKILL_BYTES:
            raise ValidationError(f"{path}: larger than {MAX_SKILL_BYTES:,} bytes", field="skill")
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ValidationError(f"no {SKILL_FILE} in {folder}", field="skill") from None
    except UnicodeDecodeError as exc:
        raise ValidationError(f"{path}: not UTF-8 text ({exc.reason})", field="skill") from None
    except OSError as exc:
        raise ValidationError(f"{path}: cannot be read ({exc.strerror})", field="skill") from None
    return parse_skill(text, str(path), folder.resolve())


def load_skills(root: str | Path) -> dict[str, Skill]:
    """Every skill under ``root``: ``root`` itself when it holds a ``SKILL.md``, else each
    folder directly inside it that does; by name, sorted. A skill folder (or its
    ``SKILL.md``) that is a symlink leading out of ``root`` is refused, never loaded."""
    root = Path(root)
    if not root.is_dir():
        raise ValidationError(f"no such skills folder: {root}", field="dir")
    if (root / SKILL_FILE).is_file():
        folders = [root]
    else:
        folders = sorted(p for p in root.iterdir() if p.is_dir() and (p / SKILL_FILE).is_file())
    skills: dict[str, Skill] = {}
    for folder in folders:
        _inside(folder, root, "skill folder")
        skill = load_skill(folder)
        skills[skill.name] = skill
    return dict(sorted(skills.items()))


def resource(skill: Skill, path: str) -> Path:
    """The file ``path`` of ``skill`` (relative to its folder), or ValidationError when it
    leaves the folder (``..``, an absolute path, a symlink out) or is not a file."""
    if not isinstance(path, str) or not path.strip() or "\x00" in path:
        raise ValidationError(
            "the path must be a file of the skill, relative to its folder", field="path"
        )
    base = skill.folder.resolve()
    target = (base / path).resolve()
    if not target.is_relative_to(base):
        raise ValidationError(
            f"{path[:200]!r} is outside the skill's folder: paths are relative to it, and '..'"
            " or symlinks that lead out of it are refused",
            field="path",
        )
    if not target.is_file():
        raise ValidationError(f"the skill {skill.name!r} has no file {path[:200]!r}", field="path")
    return target
