"""The token ledger and the owner's "always allow" grants; the feature wings' models (webhooks,
notifications, schedules, MCP, OAuth) live in their packages and are imported at the end of this module,
where Django loads an app's models from (same app label, same tables)."""

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


class Spend(UsageRecord):
    """The ledger as the admin's spend chart (``spend/admin.py``): no table or permissions of its
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


# The feature wings' models (their tables are this app's).
from .mcp.models import (  # noqa: E402
    McpAuthorization,
    McpCall,
    McpCredential,
    McpServer,
    McpToken,
    McpTokenQuerySet,
    McpTool,
)
from .notifications.models import Notification, NotificationPreference  # noqa: E402
from .oauth.models import OAuthClient, OAuthConnection  # noqa: E402
from .schedules.models import Schedule, ScheduleRun, validate_cron, validate_time_zone  # noqa: E402
from .webhooks.models import (  # noqa: E402
    WebhookDelivery,
    WebhookEndpoint,
    WebhookEvent,
    new_webhook_secret,
)

__all__ = [
    "DailyUsage",
    "McpAuthorization",
    "McpCall",
    "McpCredential",
    "McpServer",
    "McpTool",
    "McpToken",
    "McpTokenQuerySet",
    "Notification",
    "NotificationPreference",
    "OAuthClient",
    "OAuthConnection",
    "Schedule",
    "ScheduleRun",
    "Spend",
    "ToolGrant",
    "UsageRecord",
    "WebhookDelivery",
    "WebhookEndpoint",
    "WebhookEvent",
    "new_webhook_secret",
    "validate_cron",
    "validate_time_zone",
]
