"""The site as an MCP server (its tokens, the calls MCP clients made) and the remote MCP
servers the agent uses (their tools, the users' credentials, OAuth authorizations in flight)."""

from __future__ import annotations

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models
from django.utils import timezone

# --- the site as an MCP server (mcp/server.py) ---------------------------------------------


class McpTokenQuerySet(models.QuerySet):
    def usable(self):
        """Tokens that authenticate now: not revoked, not expired."""
        return self.filter(revoked_at__isnull=True).filter(
            models.Q(expires_at__isnull=True) | models.Q(expires_at__gt=timezone.now())
        )


class McpToken(models.Model):
    """A user's bearer token for the site's MCP endpoint (``mcp/server.py``).

    Only the SHA-256 of the token is stored: the token is shown once, when it is created
    (``mcp/tokens.py``). ``prefix`` is its first characters, enough to recognise it in
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


# --- remote MCP servers the agent uses (mcp/tools.py) ---------------------------------------


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
