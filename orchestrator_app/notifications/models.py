"""Mail notifications: the users' opt-outs and the log of each mail sent."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class NotificationPreference(models.Model):
    """A user's choice of the agent's mails (docs/howto/notifications.md). No row: every
    mail on. Written by ``notifications.preference_update`` only."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="ahentic_notification_preference",
    )
    approvals_mail = models.BooleanField(
        default=True, help_text="Mail when a run has waited a while for an approval."
    )
    schedules_mail = models.BooleanField(
        default=True, help_text="Mail when a scheduled run finishes or fails."
    )
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"Mail preferences of {self.user.get_username()}"


class Notification(models.Model):
    """A mail sent to a user. Its unique (kind, key) is the claim taken before sending: two
    workers, or a task run twice, send one mail (the loser's insert fails)."""

    class Kind(models.TextChoices):
        APPROVAL = "approval", "Approval waiting"
        SCHEDULE_RUN = "schedule_run", "Scheduled run ended"

    kind = models.CharField(max_length=24, choices=Kind.choices)
    # approval: "<session id>:<run>:<tool_use_id>" (the waiting call); schedule_run: the
    # schedule run's id.
    key = models.CharField(max_length=200)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="ahentic_notifications"
    )
    session = models.ForeignKey(
        "sessions_app.Session",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="notifications",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["kind", "key"], name="ahentic_notification_once"),
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} mail to {self.user.get_username()}"
