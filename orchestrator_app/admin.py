"""The token ledger, tool grants, and the full Session admin.

The Session admin is assembled here, in the top app: sessions_app's read-only admin plus the
session's artifacts and the run actions, which need artifacts_app and the orchestrator (imports
point down only, so sessions_app/admin.py cannot reach them).
"""

from __future__ import annotations

import json

from django.contrib import admin, messages
from django.http import HttpResponse

from artifacts_app.admin import artifacts_table
from sessions_app import services as session_services
from sessions_app.admin import ReadOnlyAdmin
from sessions_app.admin import SessionAdmin as BaseSessionAdmin
from sessions_app.models import Session

from . import runs, toolcalls
from .api.payload import session_diagnostics
from .models import ToolGrant, UsageRecord

admin.site.unregister(Session)


@admin.register(Session)
class SessionAdmin(BaseSessionAdmin):
    # Run actions: each calls a service, never saves the model.
    actions = ["cancel_runs", "continue_runs", "heal_tool_calls", "export_diagnostics"]

    @admin.action(description="Cancel the run")
    def cancel_runs(self, request, queryset):
        done = sum(runs.run_cancel(session_id=pk) for pk in queryset.values_list("pk", flat=True))
        self.message_user(request, f"Cancelled {done} run(s).", messages.SUCCESS)

    @admin.action(description="Continue / requeue")
    def continue_runs(self, request, queryset):
        outcomes = [
            runs.run_continue(session_id=pk) for pk in queryset.values_list("pk", flat=True)
        ]
        summary = ", ".join(f"{o}: {outcomes.count(o)}" for o in sorted(set(outcomes)))
        self.message_user(request, f"Continue: {summary}.", messages.SUCCESS)

    @admin.action(description="Heal orphaned tool calls")
    def heal_tool_calls(self, request, queryset):
        healed = sum(
            toolcalls.heal_orphans(session_id=pk) for pk in queryset.values_list("pk", flat=True)
        )
        self.message_user(request, f"Answered {healed} orphaned tool call(s).", messages.SUCCESS)

    @admin.action(description="Export diagnostics (JSON)")
    def export_diagnostics(self, request, queryset):
        bundles = [session_diagnostics(session) for session in queryset]
        data = bundles[0] if len(bundles) == 1 else {"sessions": bundles}
        name = (
            f"ahentic-diagnostics-{bundles[0]['id']}"
            if len(bundles) == 1
            else "ahentic-diagnostics"
        )
        response = HttpResponse(
            json.dumps(data, indent=2, ensure_ascii=False), content_type="application/json"
        )
        response["Content-Disposition"] = f'attachment; filename="{name}.json"'
        return response

    # The base sections with "Artifacts" inserted before the (long) event timeline.
    fieldsets = [
        section
        for base_section in BaseSessionAdmin.fieldsets
        for section in (
            [("Artifacts", {"fields": ["artifacts_table"]}), base_section]
            if base_section[0] == "Timeline"
            else [base_section]
        )
    ]

    @admin.display(description="artifacts")
    def artifacts_table(self, obj: Session):
        return artifacts_table(obj)

    def delete_model(self, request, obj) -> None:
        # As DELETE sessions/{id}: a live run is cancelled first, so a worker holding its
        # lease sees "cancelled" and starts nothing new.
        runs.run_cancel(session_id=obj.pk)
        session_services.session_delete(session_id=obj.pk)

    def delete_queryset(self, request, queryset) -> None:
        for session_id in queryset.values_list("pk", flat=True):
            runs.run_cancel(session_id=session_id)
            session_services.session_delete(session_id=session_id)


@admin.register(UsageRecord)
class UsageRecordAdmin(ReadOnlyAdmin):
    list_display = [
        "created_at",
        "user",
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
    search_fields = ["model", "user__username", "session__title"]
    list_select_related = ["user", "session"]
    date_hierarchy = "created_at"
    fields = [
        ("created_at", "duration_ms", "stop_reason"),
        ("user", "session", "run"),
        ("model", "purpose"),
        ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"),
        "cost_usd",
    ]


@admin.register(ToolGrant)
class ToolGrantAdmin(ReadOnlyAdmin):
    """Grants are made from the chat ("always allow"); an admin may only revoke them."""

    list_display = ["user", "tool_name", "created_at"]
    list_filter = ["tool_name"]
    search_fields = ["user__username", "tool_name"]
    list_select_related = ["user"]
    fields = ["user", "tool_name", "created_at"]

    def has_delete_permission(self, request, obj=None) -> bool:
        return admin.ModelAdmin.has_delete_permission(self, request, obj)
