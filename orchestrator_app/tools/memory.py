"""The memory tool: Anthropic's ``memory_20250818`` client tool on ``sessions_app.memory``.

When the session's agent version sets ``MEMORY`` (``"user"`` or ``"user+shared"``), the request
carries ``{"type": "memory_20250818", "name": "memory"}`` among its tools (``loop.context.memory_offered``: stable
for the whole chat, so the cached prefix never changes); what memory holds reaches the model
only through tool results, which extend the prefix. The model's calls run through the tool
pipeline as any other tool's, registered here under the name ``memory``.

No approval: memory holds the user's own notes, which they see and delete in the sidebar
("What I remember"); it is allowed in Ask mode too (it changes nothing of the site). Shared
memory (``/memories/shared/``) is read in every chat and written only in chats of staff users.
"""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext_lazy as _

from sessions_app import agents
from sessions_app import memory as store
from sessions_app.models import MemoryChange

from . import ToolContext, ToolError, tool

NAME = "memory"
TOOL_TYPE = "memory_20250818"
DEFINITION = {"type": TOOL_TYPE, "name": NAME}


def mode_for(session) -> str | None:
    """The session's agent's ``MEMORY`` (None: off, also for a session without an agent)."""
    if session.agent_version_id is None:
        return None
    return agents.settings_for(session).MEMORY or None


def _summary(input: dict[str, Any]) -> str:  # noqa: A002 - the tool's input
    path = input.get("path") or input.get("old_path") or store.ROOT
    return f"memory: {input.get('command', '?')} {path}"


@tool(
    name=NAME,
    label=_("Use its memory of you"),
    description="Your memory directory (/memories), kept across chats with this user.",
    input_schema={
        "type": "object",
        "properties": {
            "command": {"enum": list(store.COMMANDS)},
            "path": {"type": "string"},
            "view_range": {"type": "array", "items": {"type": "integer"}},
            "file_text": {"type": "string"},
            "old_str": {"type": "string"},
            "new_str": {"type": "string"},
            "insert_line": {"type": "integer"},
            "insert_text": {"type": "string"},
            "old_path": {"type": "string"},
            "new_path": {"type": "string"},
        },
        "required": ["command"],
    },
    readonly=True,
    internal=True,
    summary=_summary,
)
def memory(ctx: ToolContext, input: dict[str, Any]) -> str:  # noqa: A002 - the tool's input
    session = ctx.session
    mode = mode_for(session)
    if not mode:
        raise ToolError("memory_off", "Error: This agent keeps no memory.")
    try:
        return store.command(
            session.agent_version.agent_id,
            session.owner_id,
            input,
            mode=mode,
            writer=store.Writer(MemoryChange.Author.AGENT, user=ctx.user, session=session),
            may_write_shared=bool(getattr(ctx.user, "is_staff", False)),
        )
    except store.MemoryError as exc:
        raise ToolError(exc.code, exc.message) from None
