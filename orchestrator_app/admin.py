"""The token ledger, tool grants, and the run actions of the Session admin.

The Session admin itself belongs to sessions_app; this module adds the run actions to it through
``extend_session_admin``. Cancel, continue and heal need the ``sessions_app.control_runs``
permission, exporting diagnostics the view permission; each calls a service, never saves.
"""

from __future__ import annotations

import json

from django.contrib import admin, messages
from django.http import HttpResponse

from sessions_app.admin import ReadOnlyAdmin, UsernameColumn, extend_session_admin

from . import runs, toolcalls
from .diagnostics import session_diagnostics
from .models import ToolGrant, UsageRecord


@admin.action(description="Cancel the run", permissions=["run_control"])
def cancel_runs(model_admin, request, queryset):
    username = request.user.get_username()
    done = sum(
        runs.run_cancel(session_id=pk, staff_username=username)
        for pk in queryset.values_list("pk", flat=True)
    )
    model_admin.message_user(request, f"Cancelled {done} run(s).", messages.SUCCESS)


@admin.action(description="Continue / requeue", permissions=["run_control"])
def continue_runs(model_admin, request, queryset):
    outcomes = [runs.run_continue(session_id=pk) for pk in queryset.values_list("pk", flat=True)]
    summary = ", ".join(f"{o}: {outcomes.count(o)}" for o in sorted(set(outcomes)))
    model_admin.message_user(request, f"Continue: {summary}.", messages.SUCCESS)


@admin.action(description="Heal orphaned tool calls", permissions=["run_control"])
def heal_tool_calls(model_admin, request, queryset):
    healed = sum(
        toolcalls.heal_orphans(session_id=pk) for pk in queryset.values_list("pk", flat=True)
    )
    model_admin.message_user(request, f"Answered {healed} orphaned tool call(s).", messages.SUCCESS)


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
