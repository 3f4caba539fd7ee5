"""Outbound webhooks: the endpoints staff registered and each delivery of an event to one."""

from __future__ import annotations

import base64
import secrets

from django.core.validators import URLValidator
from django.db import models

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
    generated on create (``webhooks.delivery.endpoint_create``), shown in full only once (after
    creating or rotating it) and stored encrypted by ``orchestrator_app.vault``, like the MCP
    credentials."""

    name = models.CharField(max_length=100)
    # http(s) only; whether a private address is allowed is checked by the admin form and again
    # when sending (WEBHOOK_ALLOW_PRIVATE).
    url = models.URLField(
        "URL", max_length=500, validators=[URLValidator(schemes=["http", "https"])]
    )
    events = models.JSONField(default=list, help_text="The event types sent to this URL.")
    secret = models.TextField(blank=True, default="", editable=False)  # sealed
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
