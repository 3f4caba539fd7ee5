"""Skills and workflows: Markdown files with front matter, injected into the system prompt.

A file looks like::

    ---
    name: seo_writing
    description: Write web copy that ranks.
    ---
    The body: instructions the agent follows while the skill is active.

Found in ``AHENTIC["SKILL_DIRS"]`` / ``["WORKFLOW_DIRS"]`` and in each installed app's
``ahentic/skills/`` and ``ahentic/workflows/`` folders. Files are read when needed (they are
small and few); a later directory overrides an earlier one with the same name.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from django.apps import apps

from sessions_app.conf import ahentic_settings


@dataclass(frozen=True)
class Expertise:
    name: str
    description: str
    body: str
    path: str


def parse(path: Path) -> Expertise | None:
    text = path.read_text(encoding="utf-8")
    meta: dict[str, str] = {}
    body = text
    if text.startswith("---"):
        head, sep, rest = text[3:].partition("\n---")
        if sep:
            for line in head.strip().splitlines():
                key, colon, value = line.partition(":")
                if colon:
                    meta[key.strip()] = value.strip().strip("\"'")
            body = rest.lstrip("-").lstrip("\n")
    name = meta.get("name") or path.stem
    return Expertise(
        name=name, description=meta.get("description", ""), body=body.strip(), path=str(path)
    )


def _dirs(kind: str) -> list[Path]:
    configured = ahentic_settings.SKILL_DIRS if kind == "skills" else ahentic_settings.WORKFLOW_DIRS
    found = [Path(app.path) / "ahentic" / kind for app in apps.get_app_configs()]
    return [d for d in (*found, *map(Path, configured or [])) if d.is_dir()]


def _load(kind: str) -> dict[str, Expertise]:
    items: dict[str, Expertise] = {}
    for directory in _dirs(kind):
        for path in sorted(directory.glob("*.md")):
            item = parse(path)
            if item is not None:
                items[item.name] = item
    return items


def skills() -> dict[str, Expertise]:
    return _load("skills")


def workflows() -> dict[str, Expertise]:
    return _load("workflows")


def catalog(items: dict[str, Expertise]) -> list[dict[str, str]]:
    return [
        {"name": i.name, "description": i.description}
        for i in sorted(items.values(), key=lambda i: i.name)
    ]
