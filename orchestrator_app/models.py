"""The token ledger, the owner's "always allow" grants, and the outbound webhooks."""

from __future__ import annotations

import base64
import secrets

from django.conf import settings
from django.core.validators import URLValidator
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


class Spend(UsageRecord):
    """The ledger as the admin's spend chart (``admin_spend``): no table or permissions of its
    own; staff who may view the ledger (``orchestrator_app.view_usagerecord``) see it."""

    class Meta:
        proxy = True
        verbose_name = "spend"
        verbose_name_plural = "spend"
        default_permissions = ()


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


# --- outbound webhooks (orchestrator_app/webhooks/) ------------------------------------------


class WebhookEvent(models.TextChoices):
    """The event types an endpoint may subscribe to: one per public signal
    (``orchestrator_app.signals``), plus ``webhook.test``, sent from the admin to one endpoint
    whatever it subscribes to. Labelled with their names: what a receiver switches on."""

    RUN_STARTED = "run.started", "run.started"
    RUN_FINISHED = "run.finished", "run.finished"
    RUN_FAILED = "run.failed", "run.failed"
    APPROVAL_REQUESTED = "approval.requested", "approval.requested"
    TOOL_EXECUTED = "tool.executed", "tool.executed"
    SCHEDULE_RUN_FINISHED = "schedule_run.finished", "schedule_run.finished"
    TEST = "webhook.test", "webhook.test"


def new_webhook_secret() -> str:
    """A Standard Webhooks secret: ``whsec_`` and 32 random bytes in base64."""
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode("ascii")


class WebhookEndpoint(models.Model):
    """A URL staff registered for some event types. The secret signs every delivery; it is
    generated on create and shown in full only once (after creating or rotating it)."""

    name = models.CharField(max_length=100)
    # http(s) only; whether a private address is allowed is checked by the admin form and again
    # when sending (WEBHOOK_ALLOW_PRIVATE).
    url = models.URLField(
        "URL", max_length=500, validators=[URLValidator(schemes=["http", "https"])]
    )
    events = models.JSONField(default=list, help_text="The event types sent to this URL.")
    secret = models.CharField(max_length=120, default=new_webhook_secret, editable=False)
    active = models.BooleanField(default=True)
    disabled_reason = models.CharField(max_length=300, blank=True, default="")
    # Deliveries that gave up in a row (any delivered one resets it); WEBHOOK_DISABLE_AFTER of
    # them disable the endpoint.
    consecutive_failures = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name", "pk"]
        verbose_name = "webhook endpoint"

    def __str__(self) -> str:
        return self.name

    def wants(self, event: str) -> bool:
        return self.active and event in (self.events or [])


class WebhookDelivery(models.Model):
    """One event for one endpoint, and its attempts. ``webhook_id`` is the Standard Webhooks
    message id, the same on every attempt (receivers deduplicate on it)."""

    class Status(models.TextChoices):
        PENDING = "pending"  # not tried yet
        DELIVERED = "delivered"  # a 2xx answer
        FAILED = "failed"  # the last attempt failed; the next is at next_attempt_at
        GAVE_UP = "gave_up"  # WEBHOOK_MAX_ATTEMPTS failed attempts, or a permanent error

    endpoint = models.ForeignKey(
        WebhookEndpoint, on_delete=models.CASCADE, related_name="deliveries"
    )
    event = models.CharField(max_length=40, choices=WebhookEvent.choices)
    webhook_id = models.CharField("webhook-id", max_length=64, unique=True)
    payload = models.JSONField()
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    last_status_code = models.PositiveIntegerField("last HTTP status", null=True, blank=True)
    last_error = models.CharField(max_length=500, blank=True, default="")
    # When the next attempt is due; while an attempt is in flight, when it counts as lost.
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        verbose_name_plural = "webhook deliveries"
        indexes = [
            # The "deliver due" sweep: pending or failed rows whose next attempt is due.
            models.Index(fields=["status", "next_attempt_at"], name="ahentic_webhook_due"),
        ]

    def __str__(self) -> str:
        return f"{self.event} to {self.endpoint} ({self.status})"


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
