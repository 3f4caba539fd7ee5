"""The agent's mails in the admin: the log of mails sent (one row per mail, its claim) and each
user's opt-outs. Both read-only: users choose in the sidebar's settings
(``notifications.preference_update``), and the log is written when a mail is sent."""

from __future__ import annotations

from django.contrib import admin

from sessions_app.admin.base import ReadOnlyAdmin, UsernameColumn

from ..models import Notification, NotificationPreference


@admin.register(Notification)
class NotificationAdmin(ReadOnlyAdmin):
    list_display = ["created_at", "kind", "user_name", "session", "key"]
    list_filter = ["kind"]
    search_fields = ["key"]
    user_relations = ["user"]
    list_select_related = ["user", "session"]
    fields = ["kind", "key", "user", "session", "created_at"]
    date_hierarchy = "created_at"
    user_name = UsernameColumn("user")


@admin.register(NotificationPreference)
class NotificationPreferenceAdmin(ReadOnlyAdmin):
    list_display = ["user_name", "approvals_mail", "schedules_mail", "updated_at"]
    list_filter = ["approvals_mail", "schedules_mail"]
    user_relations = ["user"]
    list_select_related = ["user"]
    fields = ["user", "approvals_mail", "schedules_mail", "updated_at"]
    user_name = UsernameColumn("user")
