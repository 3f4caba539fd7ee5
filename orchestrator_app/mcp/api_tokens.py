"""The user's tokens for the site's MCP endpoint (the sidebar's "MCP access" panel).

``GET mcp-tokens`` lists the user's tokens that are not revoked; ``POST mcp-tokens`` makes one
and answers it with ``token``, the secret, shown this once (only its hash is stored);
``DELETE mcp-tokens/{id}`` revokes one. Another user's token is a 404 like an unknown id.
``GET mcp-tokens/access?agent=<slug>`` says what a client gets with a token: the endpoint for
that agent (the default agent's when none is named), its tools, and why there are none.
"""

from __future__ import annotations

from datetime import timedelta
from urllib.parse import urlencode

from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from rest_framework import serializers
from rest_framework.decorators import action
from rest_framework.response import Response

from sessions_app import agents
from sessions_app.models import Session

from ..api.errors import ApiError, agent_not_found
from ..api.schema import READ_ERRORS, WRITE_ERRORS, describe, described
from ..api.serializers import StrictCharField
from ..api.views import AhenticViewSet
from ..models import McpToken
from ..tools import tools_for
from . import tokens as mcp_tokens
from .calls import mcp_tools

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


class McpAccessAgentSerializer(serializers.Serializer):
    slug = serializers.CharField()
    name = serializers.CharField()
    isDefault = serializers.BooleanField()  # noqa: N815 - API field


class McpAccessSerializer(serializers.Serializer):
    agent = McpAccessAgentSerializer(allow_null=True)
    endpoint = serializers.CharField(
        help_text="The MCP endpoint for this agent (with ?agent= unless it is the default)."
    )
    tools = serializers.ListField(
        child=serializers.CharField(), help_text="The tools a client gets, by name."
    )
    reason = serializers.CharField(
        allow_blank=True, help_text="Why a client gets no tool; empty when it gets some."
    )
    agents = McpAccessAgentSerializer(
        many=True, help_text="The agents the user may use, to pick another."
    )


TOKEN_ID = OpenApiParameter("token_id", int, OpenApiParameter.PATH)
AGENT = OpenApiParameter(
    "agent", str, OpenApiParameter.QUERY, description="An agent's slug; none: the default agent."
)
mcp_access = describe(
    "mcp_access",
    "What an MCP client gets: the endpoint for an agent and its tools",
    {200: McpAccessSerializer},
    parameters=[AGENT],
)
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


def _agent_json(agent, default) -> dict:
    return {"slug": agent.slug, "name": agent.name, "isDefault": agent.pk == default}


def no_tools_reason(user, version, agent) -> str:
    """Why an MCP client of ``user`` gets no tool with ``version``: what its chats offer
    needs a browser page or a chat (or it offers nothing at all)."""
    name = agent.name if agent is not None else gettext("The agent")
    probe = Session(owner=user, agent_version=version, mode=Session.Mode.AGENT)
    offered = sorted(tool.name for tool in tools_for(probe, user))
    if not offered:
        return gettext("%(name)s has no tools you may use.") % {"name": name}
    return gettext(
        "%(name)s's tools all need the sidebar (a browser page or a chat): %(tools)s. Pick "
        "another agent, or give this one tools that run on the server (admin: Agents)."
    ) % {"name": name, "tools": ", ".join(offered)}


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

    @described(mcp_access)
    @action(detail=False, methods=["get"], url_path="access")
    def access(self, request):
        slug = request.query_params.get("agent") or None
        if slug is not None and (len(slug) > 64 or "\x00" in slug):
            raise agent_not_found()
        try:
            version = agents.version_for_new_session(request.user, slug)
        except agents.AgentNotFound:
            raise agent_not_found() from None
        default = agents.default_agent()
        default_pk = default.pk if default is not None else None
        agent = version.agent if version is not None else None
        endpoint = request.build_absolute_uri(reverse("ahentic:mcp"))
        if agent is not None and agent.pk != default_pk:
            endpoint += "?" + urlencode({"agent": agent.slug})
        tools = sorted(tool.name for tool in mcp_tools(request.user, version))
        usable = agents.usable_agents(request.user)
        return Response(
            {
                "agent": _agent_json(agent, default_pk) if agent is not None else None,
                "endpoint": endpoint,
                "tools": tools,
                "reason": "" if tools else no_tools_reason(request.user, version, agent),
                "agents": [_agent_json(a, default_pk) for a in sorted(usable, key=str)],
            }
        )

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
