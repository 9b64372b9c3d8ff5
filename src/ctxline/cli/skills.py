"""``ctxline skills list|show --dir DIR``: the Agent Skills a folder holds, as the model sees them.

ctxline skills list --dir skills/
ctxline skills show release-notes --dir skills/ --json
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from ctxline.cli.common import one_line, one_line_errors
from ctxline.cli.options import harden
from ctxline.skills.source import Skills

__all__ = ["skills_group"]

DIR_OPTION = click.option(
    "--dir",
    "folder",
    required=True,
    type=click.Path(path_type=Path),
    help="A skill folder, or a folder of skill folders.",
)


@click.group("skills")
def skills_group() -> None:
    """Agent Skills folders (SKILL.md): their catalog and their instructions."""


@skills_group.command("list")
@DIR_OPTION
@click.option("--json", "as_json", is_flag=True, help="Print the catalog as JSON.")
def list_cmd(folder: Path, as_json: bool) -> None:
    """The catalog: each skill's name and description (what the guide lists)."""
    with one_line_errors():
        skills = Skills(folder).skills
    if as_json:
        rows = [
            {
                "name": s.name,
                "description": s.description,
                "folder": str(s.folder),
                "files": s.files(),
            }
            for s in skills.values()
        ]
        click.echo(json.dumps(rows, ensure_ascii=False))
        return
    if not skills:
        click.echo(f"No skills in {folder}.")
    for s in skills.values():
        click.echo(f"{s.name}: {one_line(s.description)}")


@skills_group.command("show")
@click.argument("name")
@DIR_OPTION
@click.option("--json", "as_json", is_flag=True, help="Print the skill as JSON.")
def show_cmd(name: str, folder: Path, as_json: bool) -> None:
    """One skill: its front matter, its files and its instructions."""
    with one_line_errors():
        skill = Skills(folder).get(name)
    if as_json:
        click.echo(
            json.dumps(
                {
                    "name": skill.name,
                    "description": skill.description,
                    "license": skill.license,
                    "compatibility": skill.compatibility,
                    "metadata": dict(skill.metadata),
                    "allowed_tools": list(skill.allowed_tools),
                    "folder": str(skill.folder),
                    "files": skill.files(),
                    "body": skill.body,
                },
                ensure_ascii=False,
            )
        )
        return
    click.echo(f"{skill.name}: {one_line(skill.description)}")
    for label, value in (("license", skill.license), ("compatibility", skill.compatibility)):
        if value:
            click.echo(f"{label}: {one_line(value)}")
    click.echo(one_line(f"files: {', '.join(skill.files()) or 'none'}"))
    click.echo("")
    click.echo("\n".join(one_line(line) for line in skill.body.split("\n")))


# hardened where defined, as the ctxline group would: imported directly, it refuses the same
harden(skills_group)
