"""The MCP endpoint's OAuth clients and connections.

An ``OAuthClient`` row follows each django-oauth-toolkit application that asked for the MCP
endpoint: whether staff approved it (``MCP_OAUTH_CLIENT_APPROVAL``) or revoked it. An
``OAuthConnection`` is a user's grant to one client (a "connected app"): the scopes, and the
``McpToken`` row that stands for the client in the MCP calls' history (it has no secret anyone
knows, so it never authenticates: the client's OAuth access tokens do)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from oauth2_provider.settings import oauth2_settings

from ..mcp.models import McpToken


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
