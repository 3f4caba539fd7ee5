"""The token ledger, the owner's "always allow" grants, and the MCP endpoint's tokens and calls."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


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


class McpTokenQuerySet(models.QuerySet):
    def usable(self):
        """Tokens that authenticate now: not revoked, not expired."""
        return self.filter(revoked_at__isnull=True).filter(
            models.Q(expires_at__isnull=True) | models.Q(expires_at__gt=timezone.now())
        )


class McpToken(models.Model):
    """A user's bearer token for the site's MCP endpoint (``api/mcp.py``).

    Only the SHA-256 of the token is stored: the token is shown once, when it is created
    (``control/mcp_tokens.py``). ``prefix`` is its first characters, enough to recognise it in
    a list."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="agent_mcp_tokens"
    )
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16)
    token_hash = models.CharField(max_length=64, unique=True)  # the endpoint's lookup
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    expires_at = models.DateTimeField(null=True, blank=True)
    # Written at most once a minute (``mcp_tokens.token_touch``), not on every request.
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects = McpTokenQuerySet.as_manager()

    class Meta:
        verbose_name = "MCP token"
        ordering = ["-created_at"]
        indexes = [
            # GET mcp-tokens: one user's tokens, newest first.
            models.Index(fields=["user", "-created_at"], name="ahentic_mcptoken_user"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"


class McpCall(models.Model):
    """One ``tools/call`` of an MCP client: the tool call event it became (``call_id`` in
    ``session``), so a repeated identical call after an approval returns the recorded result
    instead of running the tool again. ``delivered_at``: when the client received the result."""

    token = models.ForeignKey(McpToken, on_delete=models.CASCADE, related_name="calls")
    session = models.ForeignKey(
        "sessions_app.Session", on_delete=models.CASCADE, related_name="mcp_calls"
    )
    call_id = models.CharField(max_length=64, unique=True)
    tool_name = models.CharField(max_length=64)
    input_digest = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "MCP call"
        indexes = [
            # tools/call: this token's undelivered call of the same tool and arguments.
            models.Index(
                fields=["token", "tool_name", "input_digest"],
                condition=models.Q(delivered_at__isnull=True),
                name="ahentic_mcpcall_waiting",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.tool_name} {self.call_id}"
