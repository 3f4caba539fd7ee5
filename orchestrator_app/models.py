"""The token ledger and the owner's "always allow" grants."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class UsageRecord(models.Model):
    """One row per model call (steps, brain, memory). Session counters are its running sum."""

    class Purpose(models.TextChoices):
        STEP = "step"
        BRAIN = "brain"
        MEMORY = "memory"

    session = models.ForeignKey(
        "sessions_app.Session",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="usage_records",
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="agent_usage",
    )
    run = models.PositiveIntegerField(default=0)
    model = models.CharField(max_length=128)
    purpose = models.CharField(max_length=16, choices=Purpose.choices, default=Purpose.STEP)
    input_tokens = models.BigIntegerField(default=0)
    output_tokens = models.BigIntegerField(default=0)
    cache_read_tokens = models.BigIntegerField(default=0)
    cache_write_tokens = models.BigIntegerField(default=0)
    # Server tool requests the call made (billed per use besides the tokens).
    web_search_requests = models.PositiveIntegerField(default=0)
    web_fetch_requests = models.PositiveIntegerField(default=0)
    cost_usd = models.DecimalField(max_digits=14, decimal_places=6, null=True, blank=True)
    duration_ms = models.PositiveIntegerField(default=0)
    stop_reason = models.CharField(max_length=32, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            # stats/tokens: one user's rows in a date range.
            models.Index(fields=["user", "created_at"], name="ahentic_usage_user_day"),
        ]

    def __str__(self) -> str:
        return f"{self.model} {self.purpose} {self.tokens_used} tokens"

    @property
    def tokens_in(self) -> int:
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens

    @property
    def tokens_used(self) -> int:
        return self.tokens_in + self.output_tokens


class ToolGrant(models.Model):
    """The owner chose "always allow" for this tool."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="agent_tool_grants"
    )
    tool_name = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "tool_name"], name="ahentic_toolgrant_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.user.get_username()} always allows {self.tool_name}"


class DailyUsage(models.Model):
    """Tokens the whole site used per day (the site's TIME_ZONE), kept by ``usage_record`` in
    the transaction that writes the ledger row, so the daily limit is one indexed read instead
    of a sum over the day's calls."""

    day = models.DateField(unique=True)
    tokens = models.BigIntegerField(default=0)

    class Meta:
        verbose_name_plural = "daily usage"

    def __str__(self) -> str:
        return f"{self.day}: {self.tokens} tokens"


class NotificationPreference(models.Model):
    """A user's choice of the agent's mails (README "Email notifications"). No row: every
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
    # approval: "<session id>:<tool_use_id>"; schedule_run: the schedule run's id.
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
