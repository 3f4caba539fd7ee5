"""The OAuth routes of the MCP endpoint, mounted under the app's prefix by ``urls.py``
(``urlpatterns`` below), and the root ``/.well-known/`` documents a host mounts with
``oauth/urls.py``.

- ``oauth`` (the issuer): RFC 8414 metadata (also at the root ``/.well-known/`` forms). The protected resource metadata (``mcp/oauth-protected-resource``) names the issuer.
- ``oauth/authorize``: the consent page, on the site's own login (``LOGIN_URL``): the client,
  the agent and its tools, and that changes still wait for approval; the user picks the agent
  and whether the client may call the tools that change data.
- ``oauth/token``, ``oauth/revoke``: django-oauth-toolkit's token and revocation endpoints.
- ``oauth/register``: dynamic client registration (RFC 7591), rate-limited per address.
- ``connected-apps``, ``connected-apps/{id}``: the user's connections (the sidebar's "Connected
  apps"): list, revoke (the client's tokens are deleted at once).
"""

from __future__ import annotations

import json

from django.http import Http404, JsonResponse
from django.shortcuts import render
from django.urls import re_path
from django.utils.translation import gettext
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from oauth2_provider.models import get_application_model
from oauth2_provider.views import AuthorizationView, RevokeTokenView, TokenView
from rest_framework import serializers
from rest_framework.response import Response

from sessions_app import agents
from sessions_app.conf import ahentic_settings
from sessions_app.models import Agent

from ..api.errors import ApiError
from ..api.schema import READ_ERRORS, describe, described
from ..api.throttles import OAuthRegistrationThrottle, throttles_for
from ..api.views import AhenticViewSet
from ..errors import AhenticError
from ..json_limits import json_depth_exceeds
from ..mcp import calls as mcp_calls
from ..models import OAuthClient
from . import services

REGISTRATION_MAX_BYTES = 16 * 1024


def enabled() -> bool:
    return bool(ahentic_settings.MCP_SERVER and ahentic_settings.MCP_OAUTH)


def oauth_json(status: int, error: str, description: str, code: str, **headers) -> JsonResponse:
    """An OAuth error body (``error``, ``error_description``) that also carries the API's
    ``{code, detail}``."""
    response = JsonResponse(
        {"error": error, "error_description": description, "code": code, "detail": description},
        status=status,
    )
    for name, value in headers.items():
        response[name.replace("_", "-")] = value
    return response


def not_found() -> JsonResponse:
    return oauth_json(404, "not_found", gettext("OAuth is off on this site."), "ahentic_not_found")


def metadata(request) -> dict:
    def url(name: str) -> str:
        return services.server_url(request, name)

    methods = ["none", "client_secret_basic", "client_secret_post"]
    return {
        "issuer": services.issuer_url(request),
        "authorization_endpoint": url("authorize"),
        "token_endpoint": url("token"),
        "registration_endpoint": url("register"),
        "revocation_endpoint": url("revoke"),
        "authorization_response_iss_parameter_supported": True,
        "scopes_supported": [services.READ, services.WRITE],
        "response_types_supported": ["code"],
        "response_modes_supported": ["query"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "token_endpoint_auth_methods_supported": methods,
        "revocation_endpoint_auth_methods_supported": methods,
        "code_challenge_methods_supported": ["S256"],
        "client_id_metadata_document_supported": True,
    }


def authorization_server_metadata(request, issuer_path: str | None = None):
    """RFC 8414 authorization server metadata (GET). Served at the app's ``oauth`` issuer and
    at the root ``/.well-known/oauth-authorization-server`` forms (oauth/urls.py)."""
    if not enabled():
        return not_found()
    if request.method not in ("GET", "HEAD"):
        return oauth_json(
            405,
            "invalid_request",
            gettext("Use GET."),
            "ahentic_method_not_allowed",
            Allow="GET, HEAD",
        )
    response = JsonResponse(metadata(request))
    response["Cache-Control"] = "max-age=3600"
    response["Access-Control-Allow-Origin"] = "*"  # public, read by browser-based clients
    return response


@csrf_exempt  # no cookies are read: an anonymous JSON API (RFC 7591)
def register(request):
    """Dynamic client registration (RFC 7591): POST the client's metadata, get its
    ``client_id`` (and a confidential client's ``client_secret``)."""
    if not enabled():
        return not_found()
    if request.method != "POST":
        return oauth_json(
            405,
            "invalid_request",
            gettext("Use POST."),
            "ahentic_method_not_allowed",
            Allow="POST",
        )
    for throttle in throttles_for(OAuthRegistrationThrottle):
        if not throttle.allow_request(request, None):
            wait = int(throttle.wait() or 1)
            return oauth_json(
                429,
                "slow_down",
                gettext("Too many registrations; try again later."),
                "ahentic_throttled",
                Retry_After=str(wait),
            )
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    if length > REGISTRATION_MAX_BYTES or len(request.body) > REGISTRATION_MAX_BYTES:
        return oauth_json(
            413,
            "invalid_client_metadata",
            gettext("The metadata is over %(max)s bytes.") % {"max": REGISTRATION_MAX_BYTES},
            "ahentic_body_too_large",
        )
    try:
        data = json.loads(request.body)
    except (ValueError, RecursionError):
        data = None
    if data is None or json_depth_exceeds(data):
        return oauth_json(
            400,
            "invalid_client_metadata",
            gettext("The body is not a JSON object."),
            "ahentic_oauth_invalid_client_metadata",
        )
    try:
        registered = services.client_register(data)
    except AhenticError as exc:
        return oauth_json(
            exc.status,
            getattr(exc, "oauth_error", "invalid_client_metadata"),
            exc.detail,
            exc.code,
        )
    application = registered.application
    body = {
        "client_id": application.client_id,
        "client_id_issued_at": int(application.created.timestamp()),
        "client_name": application.name,
        "redirect_uris": application.redirect_uris.split(),
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": data.get("token_endpoint_auth_method")
        or "client_secret_basic",
        "scope": f"{services.READ} {services.WRITE}",
    }
    if registered.secret:
        body["client_secret"] = registered.secret
        body["client_secret_expires_at"] = 0
    return JsonResponse(body, status=201)


class ConsentView(AuthorizationView):
    """django-oauth-toolkit's authorization endpoint with the site's consent page."""

    template_name = "ahentic/oauth/consent.html"

    def dispatch(self, request, *args, **kwargs):
        if not enabled():
            raise Http404
        return super().dispatch(request, *args, **kwargs)

    def unapproved(self, client_id: str | None):
        """The page for a client staff has not approved (or revoked), else None."""
        application = (
            get_application_model().objects.filter(client_id=client_id).first()
            if client_id
            else None
        )
        if application is None:
            return None
        review = services.client_review(application)
        if review.status == OAuthClient.Status.APPROVED:
            return None
        return render(
            self.request,
            "ahentic/oauth/unapproved.html",
            {"application": application, "pending": review.status == OAuthClient.Status.PENDING},
            status=403,
        )

    def get(self, request, *args, **kwargs):
        response = self.unapproved(request.GET.get("client_id"))
        if response is not None:
            return response
        response = super().get(request, *args, **kwargs)
        if response.status_code >= 400:
            # A client a metadata document registered just now may wait for approval.
            return self.unapproved(request.GET.get("client_id")) or response
        return response

    def get_initial(self):
        initial = super().get_initial()
        # A client that named no resource still gets a token bound to the endpoint.
        initial["resource"] = initial.get("resource") or services.resource_url(self.request)
        return initial

    def choices(self) -> list[dict]:
        """The agents the user may connect, each with the tools a client would get."""
        found = []
        default = agents.default_agent()
        for agent in agents.usable_agents(self.request.user):
            try:
                version = agents.version_for_new_session(self.request.user, agent.slug)
            except agents.AgentNotFound:
                continue
            tools = mcp_calls.mcp_tools(self.request.user, version)
            found.append(
                {
                    "agent": agent,
                    "default": default is not None and agent.pk == default.pk,
                    "read_tools": [t for t in tools if t.readonly],
                    "write_tools": [t for t in tools if not t.readonly],
                }
            )
        if not found and not Agent.objects.filter(active=True).exists():
            # A site without agents: its MCP endpoint serves the AHENTIC settings' tools.
            tools = mcp_calls.mcp_tools(self.request.user, None)
            found.append(
                {
                    "agent": None,
                    "default": True,
                    "read_tools": [t for t in tools if t.readonly],
                    "write_tools": [t for t in tools if not t.readonly],
                }
            )
        return found

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        scopes = (
            set(self.oauth2_data.get("scopes") or []) if hasattr(self, "oauth2_data") else set()
        )
        context["choices"] = self.choices()
        context["asks_write"] = not scopes or services.WRITE in scopes
        application = context.get("application")
        context["client_name"] = (
            getattr(application, "name", "") or context.get("client_id") or gettext("An app")
        )
        return context

    def form_invalid(self, form):
        """A consent answer whose hidden fields were changed or lost: no grant, a plain 400."""
        problem = {"description": gettext("The authorization request is incomplete or invalid.")}
        return render(
            self.request, self.template_name, {"error": problem, "client_name": ""}, status=400
        )

    def post(self, request, *args, **kwargs):
        client_id = request.POST.get("client_id") or ""
        if not get_application_model().objects.filter(client_id=client_id).exists():
            return self.form_invalid(None)
        response = self.unapproved(client_id)
        if response is not None:
            return response
        return super().post(request, *args, **kwargs)

    def form_valid(self, form):
        asked = set((form.cleaned_data.get("scope") or "").split())
        usable = {agent.slug: agent for agent in agents.usable_agents(self.request.user)}
        default = agents.default_agent()
        slug = self.request.POST.get("agent") or ""
        if slug not in usable:
            slug = default.slug if default is not None and default.slug in usable else ""
        if not slug and form.cleaned_data.get("allow") and (usable or default is not None):
            # The site has agents and this user may use none of them.
            return render(
                self.request, "ahentic/oauth/unapproved.html", {"no_agent": True}, status=403
            )
        # No agent at all on the site: the endpoint's chats run on the settings alone.
        granted = [services.READ] + ([f"{services.AGENT}{slug}"] if slug else [])
        wants_write = self.request.POST.get("write") == "on"
        if wants_write and (not asked or services.WRITE in asked or services.READ not in asked):
            granted.append(services.WRITE)
        form.cleaned_data["scope"] = " ".join(granted)
        return super().form_valid(form)


# --- connected apps -------------------------------------------------------------------------


class ConnectedAppSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    client = serializers.SerializerMethodField(help_text="The client's name (or its id).")
    clientId = serializers.CharField(source="application.client_id")  # noqa: N815 - API field
    agent = serializers.SerializerMethodField()
    scopes = serializers.SerializerMethodField()
    createdAt = serializers.DateTimeField(source="created_at")  # noqa: N815 - API field
    lastUsedAt = serializers.DateTimeField(  # noqa: N815 - API field
        source="token.last_used_at", allow_null=True
    )

    def get_client(self, connection) -> str:
        return connection.application.name or connection.application.client_id

    def get_agent(self, connection) -> str | None:
        return services.agent_of(connection.scope.split())

    def get_scopes(self, connection) -> list[str]:
        return sorted(connection.scope.split())


CONNECTION_ID = OpenApiParameter("connection_id", int, OpenApiParameter.PATH)
connected_apps_list = describe(
    "connected_apps_list",
    "The apps the user connected to the MCP endpoint with OAuth",
    {200: ConnectedAppSerializer(many=True)},
)
connected_app_revoke = describe(
    "connected_app_revoke",
    "Revoke a connected app (its tokens stop working at once)",
    {204: OpenApiResponse(description="Revoked.")},
    READ_ERRORS,
    parameters=[CONNECTION_ID],
)


class ConnectedAppViewSet(AhenticViewSet):
    serializer_class = ConnectedAppSerializer

    @described(connected_apps_list)
    def list(self, request):
        connections = services.connections_of(request.user)
        return Response(ConnectedAppSerializer(connections, many=True).data)

    @described(connected_app_revoke)
    def destroy(self, request, connection_id=None):
        gone = ApiError("ahentic_connected_app_not_found", gettext("No such connected app."), 404)
        if not str(connection_id).isdigit() or len(str(connection_id)) > 18:
            raise gone
        connection = services.connections_of(request.user).filter(pk=int(connection_id)).first()
        if connection is None or not services.connection_revoke(connection=connection):
            raise gone
        return Response(status=204)


urlpatterns = [
    re_path(r"^oauth/?$", authorization_server_metadata, name="oauth-issuer"),
    re_path(r"^oauth/authorize/?$", ConsentView.as_view(), name="oauth-authorize"),
    re_path(r"^oauth/token/?$", TokenView.as_view(), name="oauth-token"),
    re_path(r"^oauth/revoke/?$", RevokeTokenView.as_view(), name="oauth-revoke"),
    re_path(r"^oauth/register/?$", register, name="oauth-register"),
    re_path(
        r"^connected-apps/?$",
        ConnectedAppViewSet.as_view({"get": "list"}),
        name="connected-apps",
    ),
    re_path(
        r"^connected-apps/(?P<connection_id>[^/]+)/?$",
        ConnectedAppViewSet.as_view({"delete": "destroy"}),
        name="connected-app",
    ),
]
