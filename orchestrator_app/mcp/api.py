"""The user's connections to MCP servers (the sidebar's Connections panel).

``GET mcp-servers`` lists the servers the user's agents may use with their connection state;
``POST mcp-servers/{slug}/connect`` stores a personal bearer token (``{"token": ...}``) or,
with no token, starts OAuth and answers the URL the browser opens; ``DELETE
mcp-servers/{slug}/connection`` revokes the user's credential. The OAuth redirect lands on
``GET mcp-servers/oauth/callback`` (a browser page, not part of the schema). A server none of
the user's agents lists is a 404. Secrets are never answered back: ``hint`` is ``••••abcd``.
"""

from __future__ import annotations

from django.http import HttpResponse
from django.urls import reverse
from django.utils.html import escape
from django.utils.translation import gettext
from drf_spectacular.utils import OpenApiResponse
from rest_framework import serializers
from rest_framework.response import Response

from .. import outbound
from ..api.errors import ApiError
from ..api.schema import WRITE_ERRORS, describe, described
from ..api.throttles import RunStartThrottle
from ..api.views import AhenticViewSet
from ..models import McpCredential, McpServer
from . import credentials
from . import tools as mcp_tools
from .client import McpFailure


class ConnectionSerializer(serializers.Serializer):
    slug = serializers.CharField()
    name = serializers.CharField()
    auth = serializers.ChoiceField(
        choices=McpServer.Auth.values,
        help_text="none: no credential needed; site: staff set the site's token; user: "
        "each user connects",
    )
    connected = serializers.BooleanField()
    kind = serializers.CharField(allow_null=True, help_text="bearer or oauth")
    hint = serializers.CharField(allow_blank=True, help_text="The token's last characters only")
    expiresAt = serializers.DateTimeField(allow_null=True)  # noqa: N815 - API field
    connectedAt = serializers.DateTimeField(allow_null=True)  # noqa: N815 - API field
    lastUsedAt = serializers.DateTimeField(allow_null=True)  # noqa: N815 - API field


class ConnectionListSerializer(serializers.Serializer):
    servers = ConnectionSerializer(many=True)


class ConnectSerializer(serializers.Serializer):
    token = serializers.CharField(
        required=False,
        max_length=credentials.TOKEN_MAX_CHARS,
        trim_whitespace=True,
        help_text="A personal bearer token; leave it out to connect with OAuth.",
    )


class ConnectAnswerSerializer(serializers.Serializer):
    server = ConnectionSerializer(required=False)
    authorizationUrl = serializers.URLField(  # noqa: N815 - API field
        required=False, help_text="Open it to authorize (OAuth)"
    )


connections_list = describe(
    "mcp_servers_list", "The MCP servers the user's agents use", {200: ConnectionListSerializer}
)
connect = describe(
    "mcp_server_connect",
    "Connect to an MCP server: a personal token, or start OAuth",
    {200: ConnectAnswerSerializer},
    (*WRITE_ERRORS, 409, 429, 503),
    request=ConnectSerializer,
)
disconnect = describe(
    "mcp_server_disconnect",
    "Revoke the user's connection to an MCP server",
    {204: OpenApiResponse(description="Revoked.")},
)


def server_not_found() -> ApiError:
    return ApiError("ahentic_mcp_server_not_found", gettext("MCP server not found."), 404)


def entry(server: McpServer, credential: McpCredential | None) -> dict:
    connected = server.auth == McpServer.Auth.NONE or credential is not None
    if server.auth != McpServer.Auth.USER:
        credential = None  # the site's token is staff's business: connected, nothing more
    return {
        "slug": server.slug,
        "name": server.name,
        "auth": server.auth,
        "connected": connected,
        "kind": credential.kind if credential else None,
        "hint": credential.hint if credential else "",
        "expiresAt": credential.expires_at if credential else None,
        "connectedAt": credential.created_at if credential else None,
        "lastUsedAt": credential.last_used_at if credential else None,
    }


class McpConnectionViewSet(AhenticViewSet):
    """The MCP servers the user's agents use and the user's own connection to each."""

    serializer_class = ConnectionSerializer
    throttles_by_action = {"connect": (RunStartThrottle,)}

    def server(self, slug: str) -> McpServer:
        found = next(
            (s for s in mcp_tools.servers_for_user(self.request.user) if s.slug == slug), None
        )
        if found is None:
            raise server_not_found()
        return found

    @described(connections_list)
    def overview(self, request):
        servers = mcp_tools.servers_for_user(request.user)
        return Response({"servers": [entry(s, credentials.live(s, request.user)) for s in servers]})

    @described(connect)
    def connect(self, request, slug: str):
        server = self.server(slug)
        body = self.validated(ConnectSerializer, request.data, strict=True)
        if server.auth != McpServer.Auth.USER:
            raise ApiError(
                "ahentic_mcp_not_per_user",
                gettext("%(server)s does not take personal connections.") % {"server": server.name},
                400,
            )
        if body.get("token"):
            credential = credentials.bearer_save(
                server=server, user=request.user, token=body["token"]
            )
            return Response({"server": entry(server, credential)})
        callback = request.build_absolute_uri(reverse("ahentic:mcp-oauth-callback"))
        try:
            url = credentials.oauth_start(server=server, user=request.user, redirect_uri=callback)
        except McpFailure as exc:
            # An address the outbound-address policy refuses keeps its own code.
            code = exc.code if exc.code == outbound.REFUSED else "ahentic_mcp_oauth_unavailable"
            raise ApiError(code, exc.message, 400) from None
        return Response({"authorizationUrl": url})

    @described(disconnect)
    def disconnect(self, request, slug: str):
        server = self.server(slug)
        credentials.revoke(server=server, user=request.user)
        return Response(status=204)


class McpOAuthCallbackViewSet(AhenticViewSet):
    """Where the authorization server sends the browser back (``?state=&code=``): a page that
    says the connection is made and tells the sidebar (``postMessage``) before closing."""

    schema = None  # a browser redirect target, not an API route

    def callback(self, request):
        state, code = request.query_params.get("state", ""), request.query_params.get("code", "")
        if request.query_params.get("error"):
            raise ApiError(
                "ahentic_mcp_oauth_denied", gettext("The authorization was refused."), 400
            )
        if not state or not code or len(state) > 64 or len(code) > 2000:
            raise ApiError("ahentic_invalid_input", gettext("state and code are required."), 400)
        try:
            server = credentials.oauth_finish(user=request.user, state=state, code=code)
        except McpFailure as exc:
            raise ApiError("ahentic_mcp_oauth_failed", exc.message, 400) from None
        title = gettext("Connected")
        done = gettext("Connected to %(server)s. You can close this window.") % {
            "server": server.name
        }
        return HttpResponse(
            f"<!doctype html><title>{escape(title)}</title>"
            f"<p>{escape(done)}</p>"
            # The opener may be cut off (Cross-Origin-Opener-Policy): the sidebar also polls.
            "<script>if (window.opener) { window.opener.postMessage("
            '{type: "ahentic-mcp-connected"}, window.location.origin); } window.close();'
            "</script>",
            content_type="text/html; charset=utf-8",
        )
