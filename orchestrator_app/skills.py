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

import functools
from dataclasses import dataclass
from pathlib import Path

from django.apps import apps

from sessions_app import agents
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


def _dirs(kind: str, configured: tuple[str, ...]) -> list[Path]:
    found = [Path(app.path) / "ahentic" / kind for app in apps.get_app_configs()]
    return [d for d in (*found, *map(Path, configured)) if d.is_dir()]


def _load(kind: str) -> dict[str, Expertise]:
    configured = ahentic_settings.SKILL_DIRS if kind == "skills" else ahentic_settings.WORKFLOW_DIRS
    return _read(kind, tuple(map(str, configured or ())))


@functools.lru_cache(maxsize=16)
def _read(kind: str, configured: tuple[str, ...]) -> dict[str, Expertise]:
    """The files are read once per process and setting (every step builds its prompt from
    them); a new or edited skill file needs a restart of the web and worker processes."""
    items: dict[str, Expertise] = {}
    for directory in _dirs(kind, configured):
        for path in sorted(directory.glob("*.md")):
            item = parse(path)
            if item is not None:
                items[item.name] = item
    return items


def skills() -> dict[str, Expertise]:
    return _load("skills")


def workflows() -> dict[str, Expertise]:
    return _load("workflows")


def for_session(
    session, settings: agents.AgentSettings | None = None
) -> tuple[dict[str, Expertise], dict[str, Expertise]]:
    """The skills and workflows the session's agent may use (its version's ``SKILLS`` and
    ``WORKFLOWS``, names; None: all of the site's). ``settings``: its agent's settings when
    the caller holds them."""
    if settings is None:
        settings = agents.settings_for(session)

    def allowed(items: dict[str, Expertise], names) -> dict[str, Expertise]:
        return items if names is None else {k: v for k, v in items.items() if k in names}

    return allowed(skills(), settings.SKILLS), allowed(workflows(), settings.WORKFLOWS)


def catalog(items: dict[str, Expertise]) -> list[dict[str, str]]:
    return [
        {"name": i.name, "description": i.description}
        for i in sorted(items.values(), key=lambda i: i.name)
    ]
