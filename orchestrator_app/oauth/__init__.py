"""The site's MCP endpoint as an OAuth 2.1 protected resource, with its authorization server.

The server is django-oauth-toolkit's (authorization code with PKCE S256, refresh tokens rotated
on use, RFC 8707 resource binding, client ID metadata documents), configured by the host's
``OAUTH2_PROVIDER`` setting from ``OAUTH2_PROVIDER`` below. This package adds what the MCP
clients need around it: the RFC 8414 metadata (``api.py``), dynamic client registration with
staff approval and a rate, the consent page, the user's connected apps (``services.py``), the
clients in the admin (``admin.py``) and the checks (``checks.py``). ``urls.py`` is the host's
one line for the root ``/.well-known/`` documents. docs/howto/connectors.md tells the steps.

Nothing here imports Django at import time: a host's ``settings.py`` imports ``OAUTH2_PROVIDER``.
"""

# Short-lived access tokens; the refresh token (rotated on every use) carries the connection.
ACCESS_TOKEN_SECONDS = 3600
REFRESH_TOKEN_SECONDS = 30 * 24 * 3600

# The host's settings: ``OAUTH2_PROVIDER = {**OAUTH2_PROVIDER}`` (the system check
# ahentic.E044 names any of these keys a host changed to a value the endpoint cannot work with).
OAUTH2_PROVIDER = {
    "OAUTH2_VALIDATOR_CLASS": "orchestrator_app.oauth.services.Validator",
    "SCOPES_BACKEND_CLASS": "orchestrator_app.oauth.services.Scopes",
    # Read by the scopes backend only for the descriptions of the fixed scopes.
    "SCOPES": {
        "tools:read": "List and call the tools that change nothing",
        "tools:write": "Call the tools that change data (each call still waits for approval)",
    },
    "DEFAULT_SCOPES": ["tools:read", "tools:write"],
    "PKCE_REQUIRED": True,
    "COMPLIANT_BCP_RFC9700_PKCE_METHOD": True,  # S256 only, "plain" refused
    "COMPLIANT_BCP_RFC9700_IMPLICIT_GRANT": True,
    "COMPLIANT_BCP_RFC9700_PASSWORD_GRANT": True,
    "COMPLIANT_BCP_RFC9700_ACCESS_TOKEN_TRANSPORT": True,  # the Authorization header only
    "COMPLIANT_BCP_RFC9700_AUTHZ_RESPONSE_ISS": True,  # RFC 9207 ``iss``: the site's origin
    "COMPLIANT_BCP_RFC9700_TOKEN_STORAGE": True,  # tokens hashed at rest
    "ROTATE_REFRESH_TOKEN": True,
    "REFRESH_TOKEN_REUSE_PROTECTION": True,
    "ACCESS_TOKEN_EXPIRE_SECONDS": ACCESS_TOKEN_SECONDS,
    "REFRESH_TOKEN_EXPIRE_SECONDS": REFRESH_TOKEN_SECONDS,
    "AUTHORIZATION_CODE_EXPIRE_SECONDS": 60,
    "REQUEST_APPROVAL_PROMPT": "force",
    # Client ID metadata documents, fetched under the outbound-address policy (services.py).
    "CIMD_ENABLED": True,
    "CIMD_METADATA_FETCHER": "orchestrator_app.oauth.services.MetadataFetcher",
    "CIMD_FETCH_TIMEOUT_SECONDS": 5,
    "CIMD_MAX_DOCUMENT_SIZE": 16 * 1024,
}
# The keys the endpoint relies on (ahentic.E044 when the host's value differs).
REQUIRED = (
    "OAUTH2_VALIDATOR_CLASS",
    "SCOPES_BACKEND_CLASS",
    "PKCE_REQUIRED",
    "ROTATE_REFRESH_TOKEN",
    "CIMD_METADATA_FETCHER",
)
