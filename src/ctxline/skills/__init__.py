"""Agent Skills: folders with a ``SKILL.md``, disclosed progressively (``docs/skills.md``).

from ctxline.skills import Skills
Agent(model, tools, skills=Skills("skills/"))
"""

from ctxline.skills.folder import SKILL_FILE, Skill, load_skill, load_skills, resource
from ctxline.skills.source import READ_SKILL, READ_SKILL_FILE, Skills, SkillsFold

__all__ = [
    "READ_SKILL",
    "READ_SKILL_FILE",
    "SKILL_FILE",
    "Skill",
    "Skills",
    "SkillsFold",
    "load_skill",
    "load_skills",
    "resource",
]
