"""``spawn_subagent``: delegate a self-contained task to a child session.

The child is a normal session (same owner, ``parent``, ``prompt`` = the task, ``granted_tools``)
that runs on its own steps; the tool returns at once. The child's final reply reaches the parent
as a queued ``subagent`` message, shown to the model as a synthetic ``subagent_message``
tool_use/tool_result pair; an idle parent wakes up for it.
"""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext_lazy as _

from sessions_app import agents
from sessions_app import services as session_services
from sessions_app.conf import ahentic_settings
from sessions_app.models import Event, Session

from ..control.runs import message_post
from ..errors import AhenticError
from . import ToolContext, ToolError, get_tool, tool

NAME_PATTERN = r"^[a-z][a-z0-9-]{0,29}$"


def depth(session) -> int:
    level, current = 0, session
    while current.parent_id is not None:
        level += 1
        current = current.parent
    return level


def roster_version(parent, slug: str):
    """The latest version of the roster agent ``slug`` for a sub-agent of ``parent``: one its
    agent version lists (``ROSTER``), active, and usable by the chat's user (a sub-agent never
    has more than the user's own permissions)."""
    roster = agents.settings_for(parent).ROSTER
    if slug not in roster:
        listed = ", ".join(roster) or "none"
        raise ToolError("subagent_agent", f"{slug!r} is not in your roster (roster: {listed}).")
    try:
        return agents.version_for_new_session(parent.owner, slug)
    except agents.AgentNotFound:
        raise ToolError("subagent_agent", f"The agent {slug!r} is not available.") from None


@tool(
    name="spawn_subagent",
    label=_("Start a helper agent"),
    description="Start a sub-agent on a self-contained task (research, a draft...). It works in "
    "parallel with its own context and reports back with one message; you continue meanwhile. "
    "`tools` limits what it may use (default: your tools). `agent` hands the task to another "
    "agent of your roster (its slug; default: yourself).",
    input_schema={
        "type": "object",
        "properties": {
            "name": {"type": "string", "pattern": NAME_PATTERN},
            "task": {"type": "string", "minLength": 1, "maxLength": 8000},
            "tools": {"type": "array", "items": {"type": "string"}, "maxItems": 32},
            "agent": {"type": "string", "maxLength": 64},
        },
        "required": ["name", "task"],
    },
    readonly=True,
    internal=True,
    summary=lambda input: f"Start sub-agent {input.get('name')}",
)
def spawn_subagent(ctx: ToolContext, input: dict[str, Any]) -> dict[str, Any]:
    parent = ctx.session
    if depth(parent) >= int(ahentic_settings.SUBAGENT_MAX_DEPTH):
        raise ToolError("subagent_depth", "Sub-agents cannot start sub-agents of their own.")
    if parent.children.filter(title=input["name"]).exists():
        raise ToolError("subagent_name_taken", f"A sub-agent named {input['name']!r} exists.")
    granted = None
    if "tools" in input:
        names = list(dict.fromkeys(input["tools"]))
        unknown = [n for n in names if get_tool(n) is None]
        if unknown:
            raise ToolError("unknown_tool", f"Unknown tool: {unknown[0]}")
        if parent.granted_tools is not None:
            names = [n for n in names if n in parent.granted_tools]
        granted = [n for n in names if n != "spawn_subagent"]
    elif parent.granted_tools is not None:
        granted = [n for n in parent.granted_tools if n != "spawn_subagent"]
    fork = (
        Event.objects.filter(session_id=parent.pk)
        .order_by("-seq")
        .values_list("pk", flat=True)
        .first()
    )
    version = None
    if input.get("agent"):
        version = roster_version(parent, input["agent"])
        # The other agent's own tools (``TOOLS``), within what the task names.
        granted = None if "tools" not in input else granted
    child = session_services.session_create(
        agent_version=version,
        owner=parent.owner,
        title=input["name"],
        mode=parent.mode,
        parent=parent,
        prompt=input["task"],
        granted_tools=granted,
        fork_event_id=fork,
    )
    deleted_at = Session.objects.filter(pk=parent.pk).values_list("deleted_at", flat=True).first()
    if deleted_at is not None:
        # The chat was deleted while this step ran (after its delete marked the tree): the
        # child goes with it, and its task never starts.
        session_services.session_trash(session_id=child.pk, at=deleted_at)
        raise ToolError("session_deleted", "This chat was deleted; no sub-agent was started.")
    try:
        message_post(session=child, content=input["task"])
    except AhenticError as exc:
        raise ToolError(exc.code, exc.detail) from exc
    return {
        "ok": True,
        "subagent": input["name"],
        "sessionId": str(child.pk),
        "message": f"Sub-agent {input['name']} started. Its report will arrive as a message; "
        "carry on meanwhile.",
    }
