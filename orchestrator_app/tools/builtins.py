"""Built-in tools that every session has. Artifact, goal, skill and browser tools join here."""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext_lazy as _

from sessions_app import runstate
from sessions_app import services as session_services

from ..control import plan as plan_rules
from . import ToolContext, tool


@tool(
    name="ask_user",
    label=_("Ask you a question"),
    description="Ask the user a clarifying question and wait for the answer. Ends this run; "
    "the user's reply starts the next one.",
    input_schema={
        "type": "object",
        "properties": {"question": {"type": "string", "minLength": 1}},
        "required": ["question"],
    },
    readonly=True,
    internal=True,
)
def ask_user(ctx: ToolContext, input: dict[str, Any]) -> dict[str, Any]:
    ctx.stop = ("ask_user", input["question"])
    return {"ok": True, "asked": True}


@tool(
    name="request_capability",
    label=_("Ask for an ability"),
    description="Tell the user you are missing a tool or permission needed for the task.",
    input_schema={
        "type": "object",
        "properties": {
            "ability": {"type": "string", "minLength": 1},
            "reason": {"type": "string"},
        },
        "required": ["ability"],
    },
    readonly=True,
    internal=True,
)
def request_capability(ctx: ToolContext, input: dict[str, Any]) -> dict[str, Any]:
    runstate.capability_request_add(
        session_id=ctx.session.pk, ability=input["ability"], reason=input.get("reason", "")
    )
    return {"ok": True, "recorded": True}


@tool(
    name="update_plan",
    label=_("Update the plan"),
    description="Create or update the visible plan for a multi-step job. The first plan needs at "
    "least 3 steps (max 12); at most one step is in_progress; steps merge by id.",
    input_schema={
        "type": "object",
        "properties": {
            "title": {"type": "string"},
            "steps": {
                "type": "array",
                "minItems": 1,
                "maxItems": plan_rules.MAX_STEPS,
                "items": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "string", "minLength": 1, "maxLength": 64},
                        "content": {"type": "string"},
                        "status": {"enum": list(plan_rules.STEP_STATUSES)},
                    },
                    "required": ["id"],
                },
            },
        },
        "required": ["steps"],
    },
    readonly=True,
    internal=True,
)
def update_plan(ctx: ToolContext, input: dict[str, Any]) -> dict[str, Any]:
    """Merge the steps into the plan under the row lock; a PlanError reaches the model."""
    merged: dict[str, Any] = {}

    def compute(session) -> dict[str, Any]:
        merged.update(plan_rules.merge(session.plan, input["steps"], input.get("title")))
        return {"plan": merged}

    runstate.session_modify(session_id=ctx.session.pk, compute=compute)
    session_services.trace_record(
        session_id=ctx.session.pk,
        type="plan_updated",
        summary=f"Plan: {len(merged['steps'])} steps",
        data={"steps": merged["steps"]},
    )
    return {"ok": True, "plan": merged}
