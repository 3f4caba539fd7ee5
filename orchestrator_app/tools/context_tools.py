"""Built-in tools for goals, skills and workflows (session state, so they count as readonly)."""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext_lazy as _

from sessions_app import runstate
from sessions_app import services as session_services

from .. import skills
from . import ToolContext, ToolError, tool

NAME = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


@tool(
    name="set_goal",
    label=_("Set a goal"),
    description="Record a goal, or a sub-goal of a goal (parentId), to keep long jobs on track.",
    input_schema={
        "type": "object",
        "properties": {
            "description": {"type": "string", "minLength": 1, "maxLength": 2000},
            "parentId": {"type": "integer"},
        },
        "required": ["description"],
    },
    readonly=True,
    internal=True,
)
def set_goal(ctx: ToolContext, input: dict[str, Any]) -> dict[str, Any]:
    try:
        goal = session_services.goal_create(
            session_id=ctx.session.pk,
            description=input["description"],
            parent_id=input.get("parentId"),
        )
    except ValueError as exc:
        code = str(exc)
        message = "No such goal." if code == "goal_missing" else "Goals nest two levels at most."
        raise ToolError(code, message) from exc
    return {"ok": True, "id": goal.pk, "description": goal.description}


@tool(
    name="complete_goal",
    label=_("Complete a goal"),
    description="Mark a goal (and its sub-goals) completed.",
    input_schema={"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]},
    readonly=True,
    internal=True,
)
def complete_goal(ctx: ToolContext, input: dict[str, Any]) -> dict[str, Any]:
    if not session_services.goal_complete(session_id=ctx.session.pk, goal_id=input["id"]):
        raise ToolError("goal_missing", f"No active goal #{input['id']} in this session.")
    return {"ok": True, "completed": input["id"]}


def _unknown(kind: str, name: str, known: dict) -> ToolError:
    names = ", ".join(sorted(known)) or "none"
    return ToolError(f"unknown_{kind}", f"No {kind} named {name!r}. Available: {names}.")


@tool(
    name="activate_skill",
    label=_("Use a skill"),
    description="Activate a skill: its instructions join your expertise.",
    input_schema=NAME,
    readonly=True,
    internal=True,
)
def activate_skill(ctx: ToolContext, input: dict[str, Any]) -> dict[str, Any]:
    known, _ = skills.for_session(ctx.session)
    if input["name"] not in known:
        raise _unknown("skill", input["name"], known)
    active = list(dict.fromkeys([*(ctx.session.active_skills or []), input["name"]]))
    runstate.session_update(session_id=ctx.session.pk, active_skills=active)
    ctx.session.active_skills = active
    return {"ok": True, "activeSkills": active}


@tool(
    name="deactivate_skill",
    label=_("Stop using a skill"),
    description="Deactivate an active skill.",
    input_schema=NAME,
    readonly=True,
    internal=True,
)
def deactivate_skill(ctx: ToolContext, input: dict[str, Any]) -> dict[str, Any]:
    active = [s for s in (ctx.session.active_skills or []) if s != input["name"]]
    if len(active) == len(ctx.session.active_skills or []):
        raise ToolError("skill_not_active", f"{input['name']!r} is not active.")
    runstate.session_update(session_id=ctx.session.pk, active_skills=active)
    ctx.session.active_skills = active
    return {"ok": True, "activeSkills": active}


@tool(
    name="activate_workflow",
    label=_("Follow a workflow"),
    description="Activate a workflow (one at a time): follow its steps.",
    input_schema=NAME,
    readonly=True,
    internal=True,
)
def activate_workflow(ctx: ToolContext, input: dict[str, Any]) -> dict[str, Any]:
    _, known = skills.for_session(ctx.session)
    if input["name"] not in known:
        raise _unknown("workflow", input["name"], known)
    runstate.session_update(session_id=ctx.session.pk, active_workflow=input["name"])
    ctx.session.active_workflow = input["name"]
    return {"ok": True, "activeWorkflow": input["name"]}


@tool(
    name="deactivate_workflow",
    label=_("Stop following the workflow"),
    description="Deactivate the active workflow.",
    readonly=True,
    internal=True,
)
def deactivate_workflow(ctx: ToolContext, input: dict[str, Any]) -> dict[str, Any]:
    runstate.session_update(session_id=ctx.session.pk, active_workflow="")
    ctx.session.active_workflow = ""
    return {"ok": True, "activeWorkflow": None}
