"""The token ledger, the owner's "always allow" grants, outbound webhooks, mail notifications,
scheduled runs, the MCP endpoint's tokens and calls, and the MCP servers the agent uses."""

from __future__ import annotations

import base64
import secrets
from datetime import datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator, URLValidator
from django.db import models
from django.utils import timezone
from oauth2_provider.settings import oauth2_settings


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


# --- scheduled runs (orchestrator_app/control/schedules.py) -----------------------------------


def validate_cron(value: str) -> None:
    """Five cron fields (minute granularity), as ``croniter`` reads them."""
    from croniter import CroniterError, croniter

    if len(value.split()) != 5 or not croniter.is_valid(value):
        raise ValidationError(
            f"{value!r} is not a cron expression of five fields (minute hour day month weekday), "
            'e.g. "0 7 * * 1-5".',
            code="ahentic_schedule_cron",
        )
    try:  # "0 0 30 2 *" parses but never comes due
        croniter(value, datetime(2000, 1, 1)).get_next(datetime)
    except CroniterError:
        raise ValidationError(f"{value!r} never comes due.", code="ahentic_schedule_cron") from None


def validate_time_zone(value: str) -> None:
    """An IANA time zone name ``zoneinfo`` knows (``Europe/Berlin``, ``UTC``)."""
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValidationError(
            f"{value!r} is not an IANA time zone name (e.g. Europe/Berlin).",
            code="ahentic_schedule_time_zone",
        ) from None


class Schedule(models.Model):
    """A run the site starts by itself: ``first_message`` posted as ``run_as`` to the agent
    whenever ``cron`` comes due in ``time_zone`` (``orchestrator_app.control.schedules``, the
    one writer of this model and of ``ScheduleRun``)."""

    class ChatMode(models.TextChoices):
        NEW = "new", "A new chat each firing"
        CONTINUE = "continue", "Continue one chat"

    name = models.CharField(max_length=128)
    # SET_NULL, not CASCADE: a removed agent leaves the schedule, which fails, says why and
    # pauses itself instead of vanishing.
    agent = models.ForeignKey(
        "sessions_app.Agent", null=True, on_delete=models.SET_NULL, related_name="schedules"
    )
    agent_version = models.ForeignKey(
        "sessions_app.AgentVersion",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="schedules",
        help_text="Pin a version of the agent; empty: its latest version at each firing.",
    )
    run_as = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="agent_schedules",
        help_text="The user the run acts for: the chat is theirs, and so are its permissions.",
    )
    cron = models.CharField(
        max_length=100,
        validators=[validate_cron],
        help_text='Five fields: minute hour day month weekday, e.g. "0 7 * * 1-5".',
    )
    time_zone = models.CharField(
        max_length=64,
        default="UTC",
        validators=[validate_time_zone],
        help_text="An IANA name (Europe/Berlin): the cron expression is wall-clock time there.",
    )
    first_message = models.TextField(help_text="The message each firing posts.")
    chat_mode = models.CharField(max_length=8, choices=ChatMode.choices, default=ChatMode.NEW)
    # The chat "continue one chat" posts to (kept by the first firing).
    chat = models.ForeignKey(
        "sessions_app.Session",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    spend_cap_usd = models.DecimalField(
        max_digits=12,
        decimal_places=4,
        null=True,
        blank=True,
        help_text="The cap in USD of the chats it makes, over the agent's SPEND_CAP_USD.",
    )
    paused = models.BooleanField(default=False)
    paused_reason = models.CharField(max_length=255, blank=True, default="")
    consecutive_failures = models.PositiveIntegerField(default=0)
    # The earliest due time that may still fire (UTC): the tick's index; moved past "now" by
    # every tick, pause and unpause, so nothing before it ever fires (no backfill).
    next_due_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name", "pk"]
        indexes = [
            # The tick: active schedules that came due.
            models.Index(fields=["paused", "next_due_at"], name="ahentic_schedule_due"),
        ]

    def __str__(self) -> str:
        return self.name


class ScheduleRun(models.Model):
    """One due time of a schedule: the run it started and how it ended. Its insert is the
    claim of the due time: the unique (schedule, due_at) lets one cluster fire it, whatever
    number of clusters tick at once."""

    class Status(models.TextChoices):
        RUNNING = "running"
        AWAITING_HUMAN = "awaiting_human"
        DONE = "done"
        FAILED = "failed"
        CANCELLED = "cancelled"
        SKIPPED = "skipped"

    # Rows the tick still watches for their run's end.
    OPEN = (Status.RUNNING, Status.AWAITING_HUMAN)

    schedule = models.ForeignKey(Schedule, on_delete=models.CASCADE, related_name="runs")
    due_at = models.DateTimeField()
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    session = models.ForeignKey(
        "sessions_app.Session",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="schedule_runs",
    )
    # The session's run number this firing started (its ledger rows carry it: the cost).
    run = models.PositiveIntegerField(default=0)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.RUNNING)
    cost_usd = models.DecimalField(max_digits=14, decimal_places=6, null=True, blank=True)
    error_code = models.CharField(max_length=64, blank=True, default="")
    error = models.TextField(blank=True, default="")
    # Run now (staff) rather than the cron expression.
    manual = models.BooleanField(default=False)

    class Meta:
        ordering = ["-due_at"]
        constraints = [
            models.UniqueConstraint(fields=["schedule", "due_at"], name="ahentic_schedule_run_once")
        ]
        indexes = [
            # The tick's settle pass: rows whose run has not ended yet.
            models.Index(fields=["status"], name="ahentic_schedule_run_status"),
        ]

    def __str__(self) -> str:
        return f"{self.schedule} at {self.due_at:%Y-%m-%d %H:%M} UTC: {self.status}"


# --- the site as an MCP server (api/mcp_server.py) ---------------------------------------------


class McpTokenQuerySet(models.QuerySet):
    def usable(self):
        """Tokens that authenticate now: not revoked, not expired."""
        return self.filter(revoked_at__isnull=True).filter(
            models.Q(expires_at__isnull=True) | models.Q(expires_at__gt=timezone.now())
        )


class McpToken(models.Model):
    """A user's bearer token for the site's MCP endpoint (``api/mcp_server.py``).

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


# --- remote MCP servers the agent uses (tools/mcp.py) ---------------------------------------


class McpServer(models.Model):
    """A remote MCP server (Streamable HTTP) whose tools an agent may use
    (docs/howto/mcp-client.md). An agent lists the servers it uses by slug
    (``MCP_SERVERS``); its tools reach the model as ``mcp__<slug>__<tool>``."""

    class Auth(models.TextChoices):
        NONE = "none", "No authentication"
        SITE = "site", "One bearer token for the whole site (entered by staff)"
        USER = "user", "Each user connects (a personal token or OAuth)"

    slug = models.SlugField(
        max_length=24,
        unique=True,
        # "__" separates the slug from the tool's name in mcp__<slug>__<tool>.
        validators=[
            RegexValidator(
                r"^(?!.*__)(?!.*_$)[a-zA-Z0-9_-]+$",
                "Letters, digits, - and _ (not two in a row, nor last).",
            )
        ],
        help_text="Names its tools to the model: mcp__<slug>__<tool>. Letters, digits, - and _.",
    )
    name = models.CharField(max_length=100)
    url = models.URLField(
        max_length=500,
        help_text="The Streamable HTTP endpoint, https:// (http:// only for local development "
        "addresses with AHENTIC['MCP_ALLOW_INSECURE_LOCAL']).",
    )
    active = models.BooleanField(default=True)
    auth = models.CharField(max_length=8, choices=Auth.choices, default=Auth.NONE)
    readonly_default_allow = models.BooleanField(
        "read-only tools run without asking",
        default=False,
        help_text="A tool the server marks readOnlyHint starts with the policy always_allow "
        "when it is first listed (other tools start with always_ask).",
    )
    timeout_s = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Seconds a tool call may take (empty: AHENTIC['MCP_CALL_TIMEOUT_S']).",
    )
    oauth_client_id = models.CharField(
        max_length=255,
        blank=True,
        help_text="For OAuth servers without dynamic client registration: the client id "
        "registered for this site (public client, PKCE).",
    )
    # The server's tools as it last listed them (name, description, inputSchema, annotations),
    # and when: a step lists them again once AHENTIC["MCP_TOOLS_TTL_S"] has passed.
    tool_list = models.JSONField(default=list, blank=True)
    tools_fetched_at = models.DateTimeField(null=True, blank=True)
    tools_error = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        verbose_name = "MCP server"

    def __str__(self) -> str:
        return self.name


class McpTool(models.Model):
    """Staff's settings for one tool of a server: whether the agent may use it, and whether a
    call asks the user first."""

    class Policy(models.TextChoices):
        ALWAYS_ASK = "always_ask", "Ask the user (grants apply)"
        ALWAYS_ALLOW = "always_allow", "Run without asking"
        NEVER = "never", "Never (disabled)"

    server = models.ForeignKey(McpServer, on_delete=models.CASCADE, related_name="tool_settings")
    name = models.CharField(max_length=128)
    enabled = models.BooleanField(default=True)
    policy = models.CharField(max_length=16, choices=Policy.choices, default=Policy.ALWAYS_ASK)

    class Meta:
        ordering = ["server", "name"]
        verbose_name = "MCP tool"
        constraints = [
            models.UniqueConstraint(fields=["server", "name"], name="ahentic_mcptool_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.server.slug}: {self.name}"


class McpCredential(models.Model):
    """A token for a server, the site's (``user`` empty) or one user's. Secrets are sealed by
    ``orchestrator_app.vault``; ``hint`` is all that is ever shown of them."""

    class Kind(models.TextChoices):
        BEARER = "bearer"
        OAUTH = "oauth"

    server = models.ForeignKey(McpServer, on_delete=models.CASCADE, related_name="credentials")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="mcp_credentials",
    )
    kind = models.CharField(max_length=8, choices=Kind.choices, default=Kind.BEARER)
    access_token = models.TextField(blank=True)  # sealed
    refresh_token = models.TextField(blank=True)  # sealed
    hint = models.CharField(max_length=16, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    scope = models.CharField(max_length=500, blank=True)
    client_id = models.CharField(max_length=255, blank=True)
    client_secret = models.TextField(blank=True)  # sealed
    token_endpoint = models.URLField(max_length=500, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "MCP credential"
        constraints = [
            # One live credential per user and server, and one for the site (NULL users are
            # distinct to a plain unique constraint, hence the second one).
            models.UniqueConstraint(
                fields=["server", "user"],
                condition=models.Q(revoked_at__isnull=True, user__isnull=False),
                name="ahentic_mcpcredential_live_user",
            ),
            models.UniqueConstraint(
                fields=["server"],
                condition=models.Q(revoked_at__isnull=True, user__isnull=True),
                name="ahentic_mcpcredential_live_site",
            ),
        ]

    def __str__(self) -> str:
        owner = self.user.get_username() if self.user_id else "site"
        return f"{self.server.slug} ({owner}) {self.hint}"


class McpAuthorization(models.Model):
    """An OAuth authorization a user started (``connect``) and the callback finishes: the
    ``state`` it is found by and the PKCE verifier, kept server-side, used once."""

    state = models.CharField(max_length=64, unique=True)
    server = models.ForeignKey(McpServer, on_delete=models.CASCADE, related_name="+")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    verifier = models.TextField()  # sealed
    client_id = models.CharField(max_length=255)
    client_secret = models.TextField(blank=True)  # sealed
    token_endpoint = models.URLField(max_length=500)
    redirect_uri = models.URLField(max_length=500)
    resource = models.URLField(max_length=500, blank=True)
    scope = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.server.slug} authorization for {self.user_id}"


# --- The MCP endpoint's OAuth clients and connections (orchestrator_app/oauth/) ---------------
# An ``OAuthClient`` row follows each django-oauth-toolkit application that asked for the MCP
# endpoint: whether staff approved it (``MCP_OAUTH_CLIENT_APPROVAL``) or revoked it. An
# ``OAuthConnection`` is a user's grant to one client (a "connected app"): the scopes, and the
# ``McpToken`` row that stands for the client in the MCP calls' history (it has no secret anyone
# knows, so it never authenticates: the client's OAuth access tokens do).


class OAuthClient(models.Model):
    class Status(models.TextChoices):
        APPROVED = "approved", "approved"
        PENDING = "pending", "waiting for approval"
        REVOKED = "revoked", "revoked"

    application = models.OneToOneField(
        oauth2_settings.APPLICATION_MODEL,
        on_delete=models.CASCADE,
        related_name="ahentic_client",
    )
    status = models.CharField(max_length=16, choices=Status.choices)
    created_at = models.DateTimeField(auto_now_add=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        verbose_name = "OAuth client"
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.application.name or self.application.client_id


class OAuthConnection(models.Model):
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="agent_oauth_connections"
    )
    application = models.ForeignKey(
        oauth2_settings.APPLICATION_MODEL, on_delete=models.CASCADE, related_name="+"
    )
    # The client in the MCP calls' history (McpCall.token) and chat titles.
    token = models.OneToOneField(
        McpToken, on_delete=models.CASCADE, related_name="oauth_connection"
    )
    scope = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "OAuth connection"
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["user", "application"],
                condition=models.Q(revoked_at__isnull=True),
                name="ahentic_oauthconnection_live",
            )
        ]

    def __str__(self) -> str:
        return f"{self.token.name} ({self.user})"
