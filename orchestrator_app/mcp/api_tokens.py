"""The user's tokens for the site's MCP endpoint (the sidebar's "MCP access" panel).

``GET mcp-tokens`` lists the user's tokens that are not revoked; ``POST mcp-tokens`` makes one
and answers it with ``token``, the secret, shown this once (only its hash is stored);
``DELETE mcp-tokens/{id}`` revokes one. Another user's token is a 404 like an unknown id.
"""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone
from django.utils.translation import gettext
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from rest_framework import serializers
from rest_framework.response import Response

from ..api.errors import ApiError
from ..api.schema import READ_ERRORS, WRITE_ERRORS, describe, described
from ..api.serializers import StrictCharField
from ..api.views import AhenticViewSet
from ..models import McpToken
from . import tokens as mcp_tokens

MAX_DAYS = 365


class McpTokenCreateSerializer(serializers.Serializer):
    name = StrictCharField(min_length=1, max_length=mcp_tokens.NAME_MAX, trim_whitespace=True)
    expiresInDays = serializers.IntegerField(  # noqa: N815 - API field
        required=False,
        allow_null=True,
        min_value=1,
        max_value=MAX_DAYS,
        default=90,
        help_text=f"Days until the token expires (1 to {MAX_DAYS}); null: it never expires.",
    )


class McpTokenSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    prefix = serializers.CharField(help_text="The token's first characters, to recognise it.")
    createdAt = serializers.DateTimeField(source="created_at")  # noqa: N815 - API field
    expiresAt = serializers.DateTimeField(source="expires_at", allow_null=True)  # noqa: N815
    lastUsedAt = serializers.DateTimeField(source="last_used_at", allow_null=True)  # noqa: N815
    expired = serializers.SerializerMethodField()

    def get_expired(self, token) -> bool:
        return token.expires_at is not None and token.expires_at <= timezone.now()


class McpTokenIssuedSerializer(McpTokenSerializer):
    token = serializers.CharField(help_text="The token itself: shown this once, never again.")


TOKEN_ID = OpenApiParameter("token_id", int, OpenApiParameter.PATH)
mcp_tokens_list = describe(
    "mcp_tokens_list", "The user's MCP tokens", {200: McpTokenSerializer(many=True)}
)
mcp_token_create = describe(
    "mcp_token_create",
    "Make an MCP token (its secret is in this answer only)",
    {201: McpTokenIssuedSerializer},
    (*WRITE_ERRORS, 409),
    request=McpTokenCreateSerializer,
)
mcp_token_revoke = describe(
    "mcp_token_revoke",
    "Revoke an MCP token",
    {204: OpenApiResponse(description="Revoked.")},
    READ_ERRORS,
    parameters=[TOKEN_ID],
)


def token_not_found() -> ApiError:
    return ApiError("ahentic_mcp_token_not_found", gettext("No such token."), 404)


class McpTokenViewSet(AhenticViewSet):
    serializer_class = McpTokenSerializer
    lookup_url_kwarg = "token_id"
    lookup_value_regex = "[^/]+"

    @described(mcp_tokens_list)
    def list(self, request):
        tokens = mcp_tokens.personal(
            McpToken.objects.filter(user=request.user, revoked_at__isnull=True)
        )
        return Response(McpTokenSerializer(tokens, many=True).data)

    @described(mcp_token_create)
    def create(self, request):
        data = self.validated(McpTokenCreateSerializer, request.data, strict=True)
        days = data.get("expiresInDays")
        expires_at = timezone.now() + timedelta(days=days) if days else None
        issued = mcp_tokens.token_create(
            user=request.user, name=data["name"], expires_at=expires_at
        )
        body = McpTokenSerializer(issued.token).data
        return Response({**body, "token": issued.secret}, status=201)

    @described(mcp_token_revoke)
    def destroy(self, request, token_id=None):
        if not str(token_id).isdigit() or len(str(token_id)) > 18:
            raise token_not_found()
        token = mcp_tokens.personal(
            McpToken.objects.filter(pk=int(token_id), user=request.user, revoked_at__isnull=True)
        ).first()
        if token is None or not mcp_tokens.token_revoke(token=token):
            raise token_not_found()
        return Response(status=204)
