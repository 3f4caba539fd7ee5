"""Plan rules (pure functions): merge by step id, validation, and settling at run end."""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from sessions_app.errors import ModelFacingError

MIN_FIRST_STEPS = 3
MAX_STEPS = 12
STEP_STATUSES = ("pending", "in_progress", "completed", "cancelled")
OPEN = ("pending", "in_progress")


class PlanError(ModelFacingError):
    """A plan the rules refuse (too few steps, two in progress...)."""


def merge(
    current: dict[str, Any] | None, steps: list[dict[str, Any]], title: str | None
) -> dict[str, Any]:
    """Merge ``steps`` into ``current`` by id; new ids are appended in order."""
    existing = {s["id"]: dict(s) for s in (current or {}).get("steps", [])}
    order = [s["id"] for s in (current or {}).get("steps", [])]
    for step in steps:
        sid = str(step["id"])
        merged = existing.get(sid, {"id": sid, "content": "", "status": "pending"})
        if "content" in step:
            merged["content"] = step["content"]
        if "status" in step:
            merged["status"] = step["status"]
        if sid not in existing:
            order.append(sid)
        existing[sid] = merged
    result = [existing[sid] for sid in order]
    if not current and len(result) < MIN_FIRST_STEPS:
        raise PlanError(
            "plan_too_short",
            f"A new plan needs at least {MIN_FIRST_STEPS} steps; for smaller jobs just do the work.",
        )
    if len(result) > MAX_STEPS:
        raise PlanError("plan_too_long", f"A plan has at most {MAX_STEPS} steps.")
    if any(not s["content"] for s in result):
        raise PlanError("plan_step_empty", "Every plan step needs content.")
    if sum(1 for s in result if s["status"] == "in_progress") > 1:
        raise PlanError("plan_multiple_in_progress", "At most one step may be in_progress.")
    return {
        "title": title if title is not None else (current or {}).get("title", ""),
        "steps": result,
        "updatedAt": _now(),
    }


def settle(plan: dict[str, Any] | None, outcome: str) -> dict[str, Any] | None:
    """Settle open steps when a run ends.

    ``finish``: open steps completed; ``ask_user``: in_progress back to pending;
    ``cancel`` (also the daily limit): open steps cancelled; ``failure``: unchanged.
    """
    if not plan:
        return plan
    steps = []
    for step in plan.get("steps", []):
        step = dict(step)
        if outcome == "finish" and step["status"] in OPEN:
            step["status"] = "completed"
        elif outcome == "ask_user" and step["status"] == "in_progress":
            step["status"] = "pending"
        elif outcome == "cancel" and step["status"] in OPEN:
            step["status"] = "cancelled"
        steps.append(step)
    return {**plan, "steps": steps, "updatedAt": _now()}


def reopen_cancelled(plan: dict[str, Any] | None) -> dict[str, Any] | None:
    """On resume, steps a failure or cancel left cancelled become pending again."""
    if not plan:
        return plan
    steps = [
        {**s, "status": "pending"} if s["status"] == "cancelled" else dict(s)
        for s in plan.get("steps", [])
    ]
    return {**plan, "steps": steps}


def advance(plan: dict[str, Any]) -> dict[str, Any]:
    """After a successful mutating tool: the in_progress step is done, the next pending starts."""
    steps = [dict(s) for s in plan.get("steps", [])]
    for index, step in enumerate(steps):
        if step["status"] == "in_progress":
            step["status"] = "completed"
            following = next((s for s in steps[index + 1 :] if s["status"] == "pending"), None)
            if following is not None:
                following["status"] = "in_progress"
            break
    return {**plan, "steps": steps, "updatedAt": _now()}


def _now() -> str:
    # One timestamp format in the API: UTC with "Z".
    return timezone.now().isoformat().replace("+00:00", "Z")
