"""The root ``/.well-known/`` documents MCP clients probe, for the host's root URLconf:

    path("", include("orchestrator_app.oauth.urls")),

``/.well-known/oauth-authorization-server`` serves the authorization server metadata (the
issuer is the site's origin; a path after it, which some clients append, is answered the same),
and
``/.well-known/oauth-protected-resource`` (with or without the endpoint's path after it: RFC
9728's form, ``.../ahentic/v1/mcp``) the endpoint's protected resource metadata. The system
check ``ahentic.W022`` warns while they are not mounted.
"""

from django.urls import re_path

from ..mcp import server as mcp_server
from . import api

urlpatterns = [
    re_path(
        r"^\.well-known/oauth-authorization-server(?:/(?P<issuer_path>.*))?$",
        api.authorization_server_metadata,
        name="ahentic-oauth-authorization-server",
    ),
    re_path(
        r"^\.well-known/oauth-protected-resource(?:/(?P<resource_path>.*))?$",
        mcp_server.resource_metadata,
        name="ahentic-oauth-protected-resource",
    ),
]
