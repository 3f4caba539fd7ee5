"""What agents remember, in the admin: staff see each memory file by agent and user, read its
content and history, and redact it (edit its content, or the "Redact" action). Every write is
a versioned change authored by the staff member (``sessions_app.memory.redact``); nothing here
saves a row itself. Deleting a file is a redaction to nothing. The change rows are read-only.
"""

from __future__ import annotations

from django.contrib import admin, messages
from django.utils.safestring import SafeString

from .. import memory
from ..models import MemoryChange, MemoryFile
from .base import ReadOnlyAdmin, UserColumnsAdmin, UsernameColumn, excerpt, html_table

REDACTED = "[redacted by staff]"


@admin.register(MemoryFile)
class MemoryFileAdmin(UserColumnsAdmin):
    list_display = ["shown_path", "agent", "owner_name", "size", "updated_at"]
    list_filter = ["agent"]
    search_fields = ["path", "content"]
    user_relations = ["owner"]
    list_select_related = ["agent", "owner"]
    fields = ["agent", "owner", "shown_path", ("size", "updated_at"), "content", "history"]
    readonly_fields = ["agent", "owner", "shown_path", "size", "updated_at", "history"]
    actions = ["redact"]
    owner_name = UsernameColumn("owner")

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    @admin.display(description="path", ordering="path")
    def shown_path(self, obj: MemoryFile) -> str:
        prefix = "" if obj.owner_id else f"{memory.SHARED}/"
        return memory.shown(prefix + obj.path)

    @admin.display(description="history")
    def history(self, obj: MemoryFile) -> SafeString:
        rows = MemoryChange.objects.filter(
            agent_id=obj.agent_id, owner_id=obj.owner_id, path=obj.path
        ).select_related("by")
        return html_table(
            ["when", "command", "author", "by", "session", "before", "after"],
            (
                (
                    c.created_at,
                    c.command,
                    c.author,
                    c.by.get_username() if c.by else "-",
                    c.session_id or "-",
                    excerpt(c.before or "", 120) or "-",
                    excerpt(c.after or "", 120) or "-",
                )
                for c in rows[:50]
            ),
        )

    def save_model(self, request, obj, form, change) -> None:
        try:
            memory.redact(obj, obj.content, staff=request.user)
        except memory.MemoryError as exc:
            self.message_user(request, exc.message, messages.ERROR)

    def delete_model(self, request, obj) -> None:
        memory.redact(obj, "", staff=request.user)

    def delete_queryset(self, request, queryset) -> None:
        for obj in queryset:
            memory.redact(obj, "", staff=request.user)

    @admin.action(description="Redact the selected memory files", permissions=["change"])
    def redact(self, request, queryset) -> None:
        for obj in queryset:
            memory.redact(obj, REDACTED, staff=request.user)
        self.message_user(request, f"Redacted {queryset.count()} memory file(s).")


@admin.register(MemoryChange)
class MemoryChangeAdmin(ReadOnlyAdmin):
    list_display = ["created_at", "agent", "owner_name", "path", "command", "author", "session"]
    list_filter = ["agent", "author", "command"]
    search_fields = ["path"]
    user_relations = ["owner", "by"]
    list_select_related = ["agent", "owner"]
    fields = [
        ("agent", "owner"),
        ("path", "command"),
        ("author", "by", "session"),
        "created_at",
        "before",
        "after",
    ]
    owner_name = UsernameColumn("owner")
