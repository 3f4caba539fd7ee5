"""Mount with ``path("ahentic/v1/", include("orchestrator_app.urls"))``.

The viewsets (``api/views.py``) are registered on one router; every route answers with and
without a trailing slash. ``schema`` serves the OpenAPI description; any other path under the
prefix is a JSON 404 ``ahentic_not_found``.
"""

from django.urls import re_path
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.renderers import (
    OpenApiJsonRenderer,
    OpenApiJsonRenderer2,
    OpenApiYamlRenderer,
    OpenApiYamlRenderer2,
)
from drf_spectacular.views import SpectacularAPIView
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.routers import SimpleRouter

from .api import memory, schema, views
from .api.errors import exception_handler, not_found_view
from .api.permissions import HasAgentPermission, SessionAuthentication401
from .jsi18n import javascript_catalog
from .mcp import api as mcp_connections
from .mcp import api_tokens as mcp_tokens
from .mcp import server as mcp_server
from .notifications import api as notifications
from .oauth import api as oauth_api


class OptionalSlashRouter(SimpleRouter):
    def __init__(self):
        super().__init__()
        self.trailing_slash = "/?"


class SchemaView(SpectacularAPIView):
    """The OpenAPI schema of this API only (not the host site's other DRF views), with the
    mount point as its server URL; same access as the API.

    Every policy is set here, none read from the host's REST_FRAMEWORK or
    SPECTACULAR_SETTINGS: a host that only followed the install steps serves it (the viewsets set
    drf-spectacular's ``AutoSchema`` themselves)."""

    authentication_classes = [SessionAuthentication401]
    permission_classes = [HasAgentPermission]
    content_negotiation_class = DefaultContentNegotiation
    generator_class = SchemaGenerator
    urlconf = "orchestrator_app.urls"
    serve_public = True
    schema = None  # not part of the API it describes
    # JSON first, like every other route (errors included), also for Accept:
    # application/json; YAML for Accept: application/vnd.oai.openapi (or application/yaml)
    # and ?format=yaml.
    renderer_classes = [
        OpenApiJsonRenderer,
        OpenApiJsonRenderer2,
        OpenApiYamlRenderer,
        OpenApiYamlRenderer2,
    ]

    def get_exception_handler(self):
        return exception_handler

    def get(self, request, *args, **kwargs):
        prefix = request.path[: request.path.rindex("schema")]
        self.custom_settings = {**SCHEMA_SETTINGS, "SERVERS": [{"url": prefix.rstrip("/")}]}
        return super().get(request, *args, **kwargs)


SCHEMA_SETTINGS = {
    "TITLE": "django-ahentic API",
    "DESCRIPTION": "Agent sessions, runs, approvals and catalogs. Errors are {code, detail}.",
    "VERSION": "1",
    "COMPONENT_SPLIT_REQUEST": True,
    "ENUM_NAME_OVERRIDES": schema.ENUM_NAME_OVERRIDES,
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "orchestrator_app.api.schema.postprocess",
    ],
}

router = OptionalSlashRouter()
router.register("sessions", views.SessionViewSet, basename="session")
router.register("agents", views.AgentViewSet, basename="agent")
router.register("tools", views.ToolViewSet, basename="tools")
router.register("skills", views.SkillViewSet, basename="skills")
router.register("workflows", views.WorkflowViewSet, basename="workflows")
router.register("stats/tokens", views.TokenStatsViewSet, basename="stats-tokens")
router.register("mcp-tokens", mcp_tokens.McpTokenViewSet, basename="mcp-tokens")

app_name = "ahentic"
urlpatterns = [
    *router.urls,
    # What an agent remembers about the user (api/memory.py).
    re_path(
        r"^agents/(?P<slug>[-a-zA-Z0-9_]+)/memory/?$",
        memory.MemoryViewSet.as_view({"get": "overview", "delete": "clear"}),
        name="agent-memory",
    ),
    re_path(
        r"^agents/(?P<slug>[-a-zA-Z0-9_]+)/memory/(?P<path>[\s\S]+)$",
        memory.MemoryViewSet.as_view({"get": "retrieve", "delete": "destroy"}),
        name="agent-memory-file",
    ),
    # The user's mail preferences (notifications/api.py).
    re_path(
        r"^me/notifications/?$",
        notifications.NotificationPreferenceViewSet.as_view(
            {"get": "retrieve", "patch": "partial_update"}
        ),
        name="me-notifications",
    ),
    # The user's connections to MCP servers (mcp/api.py).
    re_path(
        r"^mcp-servers/?$",
        mcp_connections.McpConnectionViewSet.as_view({"get": "overview"}),
        name="mcp-servers",
    ),
    re_path(
        r"^mcp-servers/oauth/callback/?$",
        mcp_connections.McpOAuthCallbackViewSet.as_view({"get": "callback"}),
        name="mcp-oauth-callback",
    ),
    re_path(
        r"^mcp-servers/(?P<slug>[-a-zA-Z0-9_]+)/connect/?$",
        mcp_connections.McpConnectionViewSet.as_view({"post": "connect"}),
        name="mcp-server-connect",
    ),
    re_path(
        r"^mcp-servers/(?P<slug>[-a-zA-Z0-9_]+)/connection/?$",
        mcp_connections.McpConnectionViewSet.as_view({"delete": "disconnect"}),
        name="mcp-server-connection",
    ),
    re_path(r"^schema/?$", SchemaView.as_view(), name="schema"),
    # The sidebar's translations (jsi18n.py): a script, not REST, so not in the schema.
    re_path(r"^jsi18n/?$", javascript_catalog, name="jsi18n"),
    # The site as an MCP server (mcp/server.py): JSON-RPC, not REST, so not in the schema.
    re_path(r"^mcp/?$", mcp_server.endpoint, name="mcp"),
    re_path(
        r"^mcp/oauth-protected-resource/?$",
        mcp_server.resource_metadata,
        name="mcp-resource-metadata",
    ),
    # The endpoint's OAuth authorization server and the user's connected apps (oauth/api.py).
    *oauth_api.urlpatterns,
    re_path(r"^.*$", not_found_view),
]
