"""The one settings object of django-ahentic.

Every value is read from ``settings.AHENTIC`` at attribute access time, never at import, so
``override_settings(AHENTIC={...})`` works in tests and host sites can change values per
environment. Unknown keys raise ``AttributeError`` so typos fail loudly.
"""

from __future__ import annotations

import os
from typing import Any

from django.conf import settings

DEFAULTS: dict[str, Any] = {
    "MODEL": "claude-sonnet-5-5",
    "BRAIN_MODEL": "claude-haiku-5-5",
    "API_KEY": lambda: os.environ.get("ANTHROPIC_API_KEY", ""),
    "BASE_URL": lambda: os.environ.get("ANTHROPIC_BASE_URL", ""),
    "MAX_OUTPUT_TOKENS": 8000,
    "MAX_OUTPUT_TOKENS_CONTENT_WORK": 16000,
    "LLM_TIMEOUT_S": 120,
    "LLM_MAX_RETRIES": 2,
    "MAX_STEPS_PER_RUN": 24,
    "MAX_STEPS_PER_RUN_CONTENT_WORK": 48,
    "MAX_TOOLS_PER_STEP": 8,
    "ENTRY_RETENTION": 400,
    "TRACE_CAP": 300,
    "TRACE_HEAD": 60,
    "TRACE_POLL_WINDOW": 60,
    "MESSAGES_WINDOW": 50,
    "MAX_MESSAGE_CHARS": 32000,
    "CONTEXT_BUDGET_TOKENS": 190000,
    "CONTEXT_EVICT_TO": 0.66,
    "SESSION_SOFT_TOKEN_BUDGET": 200000,
    "DAILY_TOKEN_LIMIT": 1000000,
    "ARTIFACT_MAX_BYTES": 200000,
    "ARTIFACT_MAX_ITEMS": 10,
    "AUTO_STAGE_BYTES": 6000,
    "TOOL_TIMEOUT_S": 180,
    # A worker refreshes its lease every third of this while it works, a running tool included
    # (a heartbeat thread), so a dead worker is noticed within about RUN_LEASE_S.
    "RUN_LEASE_S": 30,
    "BROWSER_TIMEOUT_S": 45,
    "BUSY_POLICY": "enqueue",
    "SOUL": None,
    "SKILL_DIRS": [],
    "WORKFLOW_DIRS": [],
    "SUBAGENT_MAX_DEPTH": 1,
    "NAME_REFRESH_INTERVAL": 30,
    "PRICES": {},
    # The model's wider surface (orchestrator_app/loop/prompt.py); each may be a value for both
    # modes or {"agent": value, "ask": value}.
    "THINKING": "off",  # "off", "adaptive" or a budget in tokens (>= 1024, < max_tokens)
    "THINKING_DISPLAY": None,  # None (the model's default), "summarized" or "omitted"
    "EFFORT": None,  # None, "low", "medium", "high", "xhigh" or "max"
    "WEB_SEARCH": None,  # None (off) or {"max_uses", "allowed_domains", "blocked_domains"}
    "WEB_FETCH": None,  # None (off) or {"max_uses", "allowed_domains", ..., "max_content_tokens"}
    "WEB_SEARCH_PRICE_PER_1000": 10,  # USD per 1,000 searches, added to the ledger's cost
    "PERMISSION": "sessions_app.use_agent",
    # Seconds a user's answer to PERMISSION is cached (Django's default cache); 0 is off.
    "PERMISSION_CACHE_S": 60,
    # Per-user rates (DRF throttles, 429 ahentic_throttled + Retry-After); None is off.
    "THROTTLE_MESSAGES": "30/min",  # every route that can start or resume a run, shared
    "THROTTLE_SESSIONS": "60/hour",  # POST sessions
    # What the session payload carries stays bounded whatever the history.
    "MAX_PENDING_MESSAGES": 20,  # queued messages per session; more is 409 ahentic_queue_full
    "GOALS_WINDOW": 30,  # goals shown: active ones first, then the latest completed
    "ADMIN_SIDEBAR": False,
    # None (off), "all", or ["app_label.model", ...]: ModelAdmins the agent may use.
    "ADMIN_TOOLS": None,
    # Attachments (docs/howto/attachments.md): a STORAGES alias (None: default_storage), the largest
    # image (its base64 must stay under the API's 5 MB) and PDF, how many a message and a
    # session may hold, and the Files API for PDFs (not built yet: must stay False).
    "ATTACHMENT_STORAGE": None,
    "ATTACHMENT_MAX_IMAGE_BYTES": 3_750_000,
    "ATTACHMENT_MAX_PDF_BYTES": 10 * 1024 * 1024,
    "ATTACHMENT_MAX_PER_MESSAGE": 5,
    "ATTACHMENT_MAX_PER_SESSION": 50,
    # The most pixels an uploaded image may decode to (a JPEG at its reduced draft scale) when it
    # is scaled down to 2000 px on a side; more is a 413 before any decoding.
    "ATTACHMENT_MAX_IMAGE_PIXELS": 25_000_000,
    # The bytes of attachments one user may hold over all their chats (None: no quota); an upload
    # past it is a 409 ahentic_attachment_quota.
    "ATTACHMENT_QUOTA_BYTES": 256 * 1024 * 1024,
    # The site as an MCP server (docs/howto/mcp-server.md): the endpoint on or off,
    # and how long a tools/call waits for its answer before telling the client to call again.
    "MCP_SERVER": True,
    "MCP_CALL_WAIT_S": 20,
    # A client that can ask its user (elicitation, protocol 2026-07-28) asks there too when a
    # call waits for approval, and its answer decides; False: approvals are given in the site only.
    "MCP_ELICITATION": True,
    # The live tokens (not revoked, not expired) one user may hold for the endpoint; None: no cap.
    "MCP_TOKENS_PER_USER": 20,
    # OAuth 2.1 for the endpoint (docs/howto/connectors.md): on or off (off: the protected
    # resource metadata names no authorization server and the OAuth routes are 404); whether a
    # newly registered client waits for staff approval in the admin before anyone can connect it;
    # registrations (dynamic and by metadata document URL) per client address (None: no limit).
    "MCP_OAUTH": True,
    "MCP_OAUTH_CLIENT_APPROVAL": False,
    "THROTTLE_OAUTH_REGISTRATIONS": "20/hour",
    "FILES_API": False,
    # Scheduled runs (docs/howto/schedules.md): how late a due time may still fire (a due time
    # older than this when a tick sees it is missed, never backfilled), and how many firings in
    # a row refused for good (user, permission, agent) pause a schedule.
    "SCHEDULE_GRACE_S": 120,
    "SCHEDULE_MAX_FAILURES": 3,
    "FILES_API_MIN_BYTES": 1024 * 1024,
    # Outbound webhooks (docs/howto/webhooks.md): seconds one attempt may take (connect, and each
    # read); attempts per delivery; deliveries that give up in a row before the endpoint is
    # disabled; the first retry's delay (each next one is 4 times longer); whether a URL may
    # reach a private, loopback or link-local address (off: no requests into the site's own
    # network); days a finished delivery stays in the log.
    "WEBHOOK_TIMEOUT_S": 5,
    "WEBHOOK_MAX_ATTEMPTS": 6,
    "WEBHOOK_DISABLE_AFTER": 5,
    "WEBHOOK_BACKOFF_S": 60,
    "WEBHOOK_ALLOW_PRIVATE": False,
    "WEBHOOK_LOG_DAYS": 30,
    # Outbound requests made on someone's behalf (webhooks, the MCP client and its OAuth
    # requests; orchestrator_app/outbound.py): allow every non-public address (loopback,
    # private, link-local...), or only those inside these networks (CIDR strings).
    # WEBHOOK_ALLOW_PRIVATE and MCP_ALLOW_INSECURE_LOCAL still allow them for their caller.
    "OUTBOUND_ALLOW_PRIVATE": False,
    "OUTBOUND_ALLOWED_NETWORKS": [],
    # The django-q2 cluster (queue) that runs the delivery attempts: "" is the site's own
    # Q_CLUSTER, shared with the chats' steps; a name (with an ALT_CLUSTERS entry in Q_CLUSTER
    # and its own ``Q_CLUSTER_NAME=<name> manage.py qcluster``) keeps a slow receiver from
    # holding the workers chats wait for.
    "WEBHOOK_CLUSTER": "",
    # History (docs: the sidebar's History panel): seconds a deleted chat can be restored (the
    # sidebar's "Undo"; POST sessions/<id>/restore) before it is purged with all it holds;
    # 0 purges at once.
    "HISTORY_UNDO_S": 60,
    # Email notifications (docs/howto/notifications.md): a run waiting this many seconds for
    # an approval the owner has not seen (no poll of the chat since) mails them once; 0 is off.
    "NOTIFY_APPROVAL_AFTER_S": 300,
    # The absolute URL of a page that shows the sidebar, for the links in mails (the chat opens
    # with ?ahentic_session=<id>). "" : https:// and the current django.contrib.sites domain.
    "SITE_URL": "",
    # MCP servers the agent uses as a client (docs/howto/mcp-client.md).
    # Slugs of the registered servers (orchestrator_app.McpServer) agents use; an agent
    # version overrides it with its own MCP_SERVERS ([] for none), like every site key.
    "MCP_SERVERS": [],
    # Seconds a server's cached tool list is used before the next step lists it again.
    "MCP_TOOLS_TTL_S": 300,
    # Seconds a tools/call may take when the server sets no timeout of its own.
    "MCP_CALL_TIMEOUT_S": 30,
    # Development only: allow http:// server URLs whose host is localhost or a loopback or
    # private IP address literal (never a DNS name that could resolve elsewhere).
    "MCP_ALLOW_INSECURE_LOCAL": False,
    # Fernet keys (urlsafe base64 of 32 bytes), newest first, that encrypt MCP credentials and
    # webhook signing secrets at rest; rotation: prepend a new key, run ``manage.py ahentic_vault_rotate``, then drop the
    # old key. Never derived from SECRET_KEY.
    "VAULT_KEYS": [],
    # OpenTelemetry (docs/howto/observability.md): record prompts, replies, tool inputs and
    # results on the spans, redacted (``orchestrator_app.telemetry``). Off: sizes and ids only.
    "OTEL_CAPTURE_CONTENT": False,
}


class AhenticSettings:
    """Lazy view over ``settings.AHENTIC`` with the defaults above."""

    def __getattr__(self, name: str) -> Any:
        return self.read((name,))[name]

    def read(self, names: tuple[str, ...]) -> dict[str, Any]:
        """Several values at once, with one look at ``settings.AHENTIC`` (an agent's settings
        resolve theirs this way: ``sessions_app.agents.AgentSettings``)."""
        configured = getattr(settings, "AHENTIC", None) or {}
        values = {}
        for name in names:
            if name not in DEFAULTS:
                raise AttributeError(f"Unknown AHENTIC setting {name!r}")
            if name in configured:
                values[name] = configured[name]
            else:
                default = DEFAULTS[name]
                values[name] = default() if callable(default) else default
        return values


ahentic_settings = AhenticSettings()


def model_prices(model: str) -> dict[str, Any] | None:
    """The model's entry in ``AHENTIC["PRICES"]`` (USD per million tokens), None when it has
    none: the ledger cannot price its calls, so a USD cap on it would never be reached."""
    return (ahentic_settings.PRICES or {}).get(model) or None
