"""Skills, progressively disclosed: the catalog in the guide, bodies on demand, re-affirmed.

Seed 003 ("技能渐进加载"): the model first sees each skill's name and what it is for;
when a task matches, it loads the instructions; skills it does not need cost one line.
:class:`Skills` is a context source over Agent Skills folders
(:mod:`ctxline.skills.folder`):

- the catalog (name and description, one line each) is part of the guide, so it is in
  the system prompt, stable across steps (it changes only when the skills do);
- ``read_skill(name)`` returns the instructions, the files beside them, and a handle:
  the body is saved as a blob, so ``read_result(handle)`` reads back exactly what was
  loaded; loading a skill runs nothing;
- ``read_skill_file(name, path)`` reads a resource, confined to the skill's folder;
- after a compaction the loaded skills are re-affirmed by name and handle inside
  ``<ctx-reaffirm>`` — not re-inlined — folded from the record (``meta.skills`` of each
  ``read_skill`` result), so the same is restated cold or warm.

Skill texts are untrusted (anyone can write a SKILL.md): descriptions are escaped and
flattened to one line in the catalog; bodies and files are escaped in results.

    skills = Skills("skills/")
    Agent(model, tools, skills=skills)      # or Context(store, "s", sources=[skills])
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from pathlib import Path

from ctxline.errors import ValidationError
from ctxline.record.events import JsonValue, StoredEvent, ToolCall, ToolResult
from ctxline.render.neutral import ToolSpec
from ctxline.sources.base import BaseSource, Block, SourceStep, StepContext
from ctxline.sources.guide import MessageKind
from ctxline.tags import escape
from ctxline.tools.base import Tool, ToolEnv, ToolOutcome

from .folder import MAX_FILE_BYTES, Skill, load_skills, resource

__all__ = ["READ_SKILL", "READ_SKILL_FILE", "Skills", "SkillsFold"]

READ_SKILL = "read_skill"
READ_SKILL_FILE = "read_skill_file"


def _flat(text: str, width: int) -> str:
    flat = " ".join(escape(text).split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


class SkillsFold:
    """The skills loaded on a timeline (name -> handle), from ``read_skill`` results."""

    def __init__(self) -> None:
        self.loaded: dict[str, str] = {}

    def feed(self, stored: StoredEvent) -> Sequence[MessageKind]:
        event = stored.event
        if isinstance(event, ToolResult) and event.name == READ_SKILL and not event.is_error:
            info = event.meta.get("skills")
            if isinstance(info, dict):
                name, handle = info.get("loaded"), info.get("handle")
                if isinstance(name, str) and isinstance(handle, str):
                    self.loaded.pop(name, None)
                    self.loaded[name] = handle
        return ()


def _spec(
    name: str, description: str, props: dict[str, JsonValue], required: list[str]
) -> ToolSpec:
    return ToolSpec(
        name,
        description,
        {
            "type": "object",
            "properties": props,
            "required": list(required),
            "additionalProperties": False,
        },
    )


class Skills(BaseSource):
    """Agent Skills as a context source (see the module docstring)."""

    name = "skills"

    def __init__(self, skills: str | Path | Mapping[str, Skill]) -> None:
        self.skills: dict[str, Skill] = (
            dict(skills) if isinstance(skills, Mapping) else load_skills(skills)
        )

    def kind(self) -> MessageKind | None:
        """The guide's line for skills, with the catalog (None when there is no skill)."""
        if not self.skills:
            return None
        catalog = "\n".join(
            f"  - {name}: {_flat(s.description, 300)}" for name, s in self.skills.items()
        )
        return MessageKind(
            "ctx-skill",
            "a skill you loaded earlier, restated after a summary (name and handle)",
            "Its instructions still apply; read_result(handle) shows them again. The skills you "
            "can load with read_skill(name) when a task matches what one is for (loading runs "
            "nothing; its files are read with read_skill_file):\n" + catalog,
            owner="skills",
        )

    # --- the Source protocol ---------------------------------------------------------

    def kinds(self) -> Sequence[MessageKind]:
        kind = self.kind()
        return (kind,) if kind is not None else ()

    def fold(self) -> SkillsFold:
        return SkillsFold()

    def step(self, fold: SkillsFold, ctx: StepContext) -> SourceStep:
        assert isinstance(fold, SkillsFold)
        return SourceStep(meta={"loaded": list(fold.loaded)}) if fold.loaded else SourceStep()

    def reaffirm(self, fold: SkillsFold) -> Sequence[Block]:
        assert isinstance(fold, SkillsFold)
        return tuple(
            Block(
                "ctx-skill",
                "loaded earlier: its instructions still apply",
                (("name", name), ("handle", handle)),
            )
            for name, handle in fold.loaded.items()
        )

    def tools(self) -> Sequence[Tool]:
        if not self.skills:
            return ()
        names: dict[str, JsonValue] = {"type": "string", "enum": list(self.skills)}
        return (
            Tool(
                _spec(
                    READ_SKILL,
                    "Load a skill's instructions (see the skills in your guide).",
                    {"name": names},
                    ["name"],
                ),
                self._read_skill,
            ),
            Tool(
                _spec(
                    READ_SKILL_FILE,
                    "Read a file of a skill, by its path in the skill's folder.",
                    {"name": names, "path": {"type": "string"}},
                    ["name", "path"],
                ),
                self._read_file,
            ),
        )

    # --- the tools' handlers ---------------------------------------------------------

    def get(self, name: object) -> Skill:
        skill = self.skills.get(name) if isinstance(name, str) else None
        if skill is None:
            shown = _flat(str(name), 80)
            near = difflib.get_close_matches(str(name), list(self.skills), 3, 0.5)
            hint = f" The nearest: {', '.join(near)}." if near else ""
            raise ValidationError(
                f"there is no skill named {shown!r}.{hint} The skills: {', '.join(self.skills)}.",
                field="name",
            )
        return skill

    def _read_skill(self, call: ToolCall, env: ToolEnv) -> ToolOutcome:
        args = call.arguments if isinstance(call.arguments, dict) else {}
        try:
            skill = self.get(args.get("name"))
        except ValidationError as exc:
            return ToolOutcome(f"[read_skill: {exc.message}]", True)
        handle = env.blobs.put(skill.body.encode())
        files = skill.files()
        listed = ", ".join(_flat(f, 200) for f in files) if files else "none"
        head = (
            f"Skill {skill.name} (handle {handle}: read_result re-reads it). Loading it ran "
            f"nothing. Files beside it (read_skill_file): {listed}.\nInstructions:\n"
        )
        meta: dict[str, JsonValue] = {"skills": {"loaded": skill.name, "handle": handle}}
        return ToolOutcome(head + escape(skill.body), meta=meta)

    def _read_file(self, call: ToolCall, env: ToolEnv) -> ToolOutcome:
        args = call.arguments if isinstance(call.arguments, dict) else {}
        path = args.get("path")
        try:
            skill = self.get(args.get("name"))
            target = resource(skill, path if isinstance(path, str) else "")
        except ValidationError as exc:
            return ToolOutcome(f"[read_skill_file: {escape(exc.message)}]", True)
        size = target.stat().st_size
        shown = _flat(str(path), 200)
        if size > MAX_FILE_BYTES:
            return ToolOutcome(
                f"[read_skill_file: {shown} is {size:,} bytes, over the {MAX_FILE_BYTES:,} limit.]",
                True,
            )
        data = target.read_bytes()
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return ToolOutcome(f"{skill.name}/{shown}: a binary file of {size:,} bytes, not shown.")
        return ToolOutcome(f"{skill.name}/{shown} ({size:,} bytes):\n{escape(text)}")
