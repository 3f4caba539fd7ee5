"""Read-only Artifact admin. Artifacts change only through the agent's tools."""

from __future__ import annotations

from django.contrib import admin
from django.utils.safestring import SafeString

from sessions_app.admin.base import (
    ReadOnlyAdmin,
    admin_link,
    extend_session_admin,
    html_table,
    json_column,
)

from .models import Artifact


def artifacts_table(session, site_name: str = "admin") -> SafeString:
    """The session's artifacts as an HTML table (for the Session admin page)."""
    artifacts = Artifact.objects.filter(session=session).defer("payload").order_by("created_at")
    return html_table(
        ["key", "kind", "status", "title", "bytes", "blocks", "step", "updated"],
        (
            (
                admin_link(a, a.key, site_name),
                a.kind,
                a.status,
                a.title,
                a.bytes,
                a.block_count,
                a.step,
                a.updated_at,
            )
            for a in artifacts
        ),
    )


extend_session_admin(sections=[("artifacts_table", "Artifacts", artifacts_table)])


@admin.register(Artifact)
class ArtifactAdmin(ReadOnlyAdmin):
    list_display = ["key", "session", "kind", "status", "bytes", "updated_at"]
    list_filter = ["kind", "status", "updated_at"]
    search_fields = ["key", "title", "session__title"]
    list_select_related = ["session"]
    fields = [
        "session",
        ("key", "kind", "status"),
        "title",
        ("source", "step", "run"),
        ("bytes", "block_count"),
        ("created_at", "updated_at"),
        "payload_json",
    ]
    payload_json = json_column("payload")

    def get_queryset(self, request):
        queryset = super().get_queryset(request)
        # The changelist never shows payloads; they can be up to ARTIFACT_MAX_BYTES each.
        if request.resolver_match and request.resolver_match.url_name.endswith("_changelist"):
            queryset = queryset.defer("payload")
        return queryset
