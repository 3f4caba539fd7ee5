"""The token ledger, tool grants, and the run actions of the Session admin.

The Session admin itself belongs to sessions_app; this module adds the run actions to it through
``extend_session_admin``. Cancel, continue and heal need the ``sessions_app.control_runs``
permission, exporting diagnostics the view permission; each calls a service, never saves.
"""

from __future__ import annotations

import json
from typing import Any

from django.contrib import admin, messages
from django.http import HttpResponse

from sessions_app.admin import ReadOnlyAdmin, UsernameColumn, extend_session_admin
from sessions_app.models import Session

from . import (
    admin_schedules,  # noqa: F401  (registers the schedules' admin)
    admin_spend,  # noqa: F401  (the spend page)
)
from .control import runs, toolcalls
from .errors import AhenticError
from .ledger.diagnostics import session_diagnostics
from .models import ToolGrant, UsageRecord
from .oauth import admin as oauth_admin  # noqa: F401  (the MCP endpoint's OAuth clients)


def counted(number: int, noun: str) -> str:
    """ "1 run", "2 runs"."""
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def status_words(session_id) -> str:
    """A session's status as words ("awaiting human"), read now."""
    status = Session.objects.filter(pk=session_id).values_list("status", flat=True).first()
    return str(status or "gone").replace("_", " ")


@admin.action(description="Cancel the run", permissions=["run_control"])
def cancel_runs(model_admin, request, queryset):
    username = request.user.get_username()
    ids = list(queryset.values_list("pk", flat=True))
    done = sum(runs.run_cancel(session_id=pk, staff_username=username) for pk in ids)
    if len(ids) == 1:
        if done:
            model_admin.message_user(request, "Cancelled the run.", messages.SUCCESS)
        else:
            model_admin.message_user(
                request,
                f"Nothing to cancel: the session is {status_words(ids[0])}.",
                messages.INFO,
            )
        return
    if not done:
        text = f"Nothing to cancel in {counted(len(ids), 'session')}."
    else:
        text = f"Cancelled {counted(done, 'run')}."
        if done < len(ids):
            text += f" Nothing to cancel in {counted(len(ids) - done, 'other session')}."
    model_admin.message_user(request, text, messages.SUCCESS if done else messages.INFO)


# What a continue did, for one session, and counted over several.
CONTINUED = {
    "resumed": "Continued the run: it resumes where it stopped.",
    "requeued": "Continued the run: its stalled step is queued again.",
    "browser_timeout": "Continued the run: the browser's overdue answer was timed out.",
    "waiting": "A worker holds the run: it goes on, or, if that worker stopped, continues when "
    "its lease runs out.",
    "cap_raised": "Raised the chat's spend cap past its spend: it takes messages again.",
}
CONTINUED_COUNTS = {
    "resumed": "resumed",
    "requeued": "re-queued after a stall",
    "browser_timeout": "past a timed-out browser wait",
    "waiting": "held by a worker (continued if its lease runs out)",
    "cap_raised": "with a raised spend cap",
}


@admin.action(description="Continue / requeue", permissions=["run_control"])
def continue_runs(model_admin, request, queryset):
    ids = list(queryset.values_list("pk", flat=True))
    outcomes: dict[Any, str] = {}
    refusals: list[str] = []
    for pk in ids:
        try:
            outcomes[pk] = runs.run_continue(session_id=pk, user=request.user)
        except AhenticError as exc:  # no model, the daily token limit, the spend cap
            refusals.append(exc.detail)
    for detail in dict.fromkeys(refusals):
        model_admin.message_user(request, f"Could not continue: {detail}", messages.ERROR)
    if not outcomes:
        return
    if len(ids) == 1:
        outcome = outcomes[ids[0]]
        if outcome in CONTINUED:
            model_admin.message_user(request, CONTINUED[outcome], messages.SUCCESS)
        else:
            model_admin.message_user(
                request,
                f"Nothing to continue: the session is {status_words(ids[0])}.",
                messages.INFO,
            )
        return
    values = list(outcomes.values())
    continued = [o for o in values if o in CONTINUED]
    if not continued:
        text = f"Nothing to continue in {counted(len(outcomes), 'session')}."
        model_admin.message_user(request, text, messages.INFO)
        return
    kinds = ", ".join(f"{values.count(o)} {CONTINUED_COUNTS[o]}" for o in CONTINUED if o in values)
    text = f"Continued {counted(len(continued), 'run')} ({kinds})."
    if len(continued) < len(outcomes):
        idle = len(outcomes) - len(continued)
        text += f" Nothing to continue in {counted(idle, 'other session')}."
    model_admin.message_user(request, text, messages.SUCCESS)


@admin.action(description="Heal orphaned tool calls", permissions=["run_control"])
def heal_tool_calls(model_admin, request, queryset):
    healed = sum(
        toolcalls.heal_orphans(session_id=pk) for pk in queryset.values_list("pk", flat=True)
    )
    if healed:
        model_admin.message_user(
            request, f"Answered {counted(healed, 'orphaned tool call')}.", messages.SUCCESS
        )
    else:
        model_admin.message_user(request, "No orphaned tool calls to answer.", messages.INFO)


@admin.action(description="Export diagnostics (JSON)", permissions=["view"])
def export_diagnostics(model_admin, request, queryset):
    bundles = [session_diagnostics(session) for session in queryset]
    data = bundles[0] if len(bundles) == 1 else {"sessions": bundles}
    name = f"ahentic-diagnostics-{bundles[0]['id']}" if len(bundles) == 1 else "ahentic-diagnostics"
    response = HttpResponse(
        json.dumps(data, indent=2, ensure_ascii=False), content_type="application/json"
    )
    response["Content-Disposition"] = f'attachment; filename="{name}.json"'
    return response


def cancel_before_delete(session_id) -> None:
    # As DELETE sessions/{id}: a live run is cancelled first, so a worker holding its lease
    # sees "cancelled" and starts nothing new.
    runs.run_cancel(session_id=session_id)


extend_session_admin(
    actions=[cancel_runs, continue_runs, heal_tool_calls, export_diagnostics],
    before_delete=cancel_before_delete,
)


@admin.register(UsageRecord)
class UsageRecordAdmin(ReadOnlyAdmin):
    list_display = [
        "created_at",
        "user_name",
        "session",
        "model",
        "purpose",
        "input_tokens",
        "output_tokens",
        "cache_read_tokens",
        "cache_write_tokens",
        "cost_usd",
        "duration_ms",
    ]
    list_filter = ["purpose", "model", "created_at"]
    search_fields = ["model", "session__title"]
    user_relations = ["user"]
    list_select_related = ["user", "session"]
    date_hierarchy = "created_at"
    fields = [
        ("created_at", "duration_ms", "stop_reason"),
        ("user", "session", "run"),
        ("model", "purpose"),
        ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"),
        "cost_usd",
    ]
    user_name = UsernameColumn("user")


@admin.register(ToolGrant)
class ToolGrantAdmin(ReadOnlyAdmin):
    """Grants are made from the chat ("always allow"); an admin may only revoke them."""

    list_display = ["user_name", "tool_name", "created_at"]
    list_filter = ["tool_name"]
    search_fields = ["tool_name"]
    user_relations = ["user"]
    list_select_related = ["user"]
    fields = ["user", "tool_name", "created_at"]
    user_name = UsernameColumn("user")

    def has_delete_permission(self, request, obj=None) -> bool:
        return admin.ModelAdmin.has_delete_permission(self, request, obj)


# The mail log and opt-outs, the MCP endpoint's tokens, the MCP servers the agent uses (their
# tools and credentials): they build on the admins above.
from . import admin_mcp, admin_mcp_tokens, admin_notifications  # noqa: E402, F401
