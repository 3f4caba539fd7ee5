"""MCP credentials: the one write path of ``McpCredential`` and ``McpAuthorization``.

A server's ``auth`` says whose token a call sends: none, the site's (staff enter it in the
admin) or the calling user's (a personal token pasted in the sidebar, or OAuth). Tokens are
sealed by the vault; ``access_token`` unseals one for the seam's ``Authorization`` header and
refreshes an OAuth token that expires within ``REFRESH_MARGIN_S`` first (refresh_token grant,
then a conditional UPDATE on the token it replaced: a concurrent refresh or a revoke wins).

No transaction is held across a network call: discovery, registration, the code exchange and
refreshes run first, their results are written after.
"""

from __future__ import annotations

import secrets
from datetime import timedelta

from django.db import IntegrityError
from django.utils import timezone
from django.utils.translation import gettext

from sessions_app import db

from .. import vault
from ..errors import AhenticError
from ..models import McpAuthorization, McpCredential, McpServer
from . import client_oauth as oauth
from .client import AUTH_REQUIRED, McpFailure

# An OAuth access token expiring within this many seconds is refreshed before a call.
REFRESH_MARGIN_S = 60
# An authorization started and not finished within this is refused at the callback.
AUTHORIZATION_TTL = timedelta(minutes=10)
TOKEN_MAX_CHARS = 8000


def connect_hint(server: McpServer) -> str:
    if server.auth == McpServer.Auth.USER:
        return f"Connect {server.name} in the sidebar's Connections, then try again."
    return f"Ask staff to set the site's token for {server.name} in the admin."


def live(server: McpServer, user) -> McpCredential | None:
    """The live credential a call to ``server`` by ``user`` uses (None for ``auth`` none)."""
    rows = McpCredential.objects.filter(server=server, revoked_at__isnull=True)
    if server.auth == McpServer.Auth.SITE:
        return rows.filter(user__isnull=True).first()
    if server.auth == McpServer.Auth.USER:
        if user is None or not user.is_authenticated:
            return None
        return rows.filter(user=user).first()
    return None


def has_credential(server: McpServer, user) -> bool:
    return server.auth == McpServer.Auth.NONE or live(server, user) is not None


def access_token(server: McpServer, user) -> str | None:
    """The bearer token for a call by ``user`` (None when the server needs none);
    ``McpFailure(AUTH_REQUIRED)`` when there is none to send."""
    if server.auth == McpServer.Auth.NONE:
        return None
    credential = live(server, user)
    if credential is None:
        raise McpFailure(AUTH_REQUIRED, f"Not connected. {connect_hint(server)}")
    expires = credential.expires_at
    if expires is not None and expires - timedelta(seconds=REFRESH_MARGIN_S) <= timezone.now():
        credential = refreshed(credential, server)
    try:
        return vault.unseal(credential.access_token)
    except vault.VaultError as exc:
        raise McpFailure(AUTH_REQUIRED, str(exc)) from None


def refreshed(credential: McpCredential, server: McpServer) -> McpCredential:
    """``credential`` with a fresh access token (refresh_token grant), stored only if nobody
    replaced or revoked it meanwhile."""
    failure = McpFailure(AUTH_REQUIRED, f"The connection expired. {connect_hint(server)}")
    if credential.kind != McpCredential.Kind.OAUTH or not credential.refresh_token:
        raise failure
    try:
        tokens = oauth.refresh(
            credential.token_endpoint,
            refresh_token=vault.unseal(credential.refresh_token),
            client_id=credential.client_id,
            client_secret=vault.unseal(credential.client_secret),
            resource=server.url,
        )
    except (McpFailure, vault.VaultError):
        # Another worker may have refreshed with the same (rotated) refresh token first.
        current = McpCredential.objects.filter(pk=credential.pk, revoked_at__isnull=True).first()
        if current is not None and current.access_token != credential.access_token:
            return current
        raise failure from None
    fields = token_fields(tokens, keep_refresh=credential.refresh_token)
    won = McpCredential.objects.filter(
        pk=credential.pk, revoked_at__isnull=True, access_token=credential.access_token
    ).update(**fields)
    current = McpCredential.objects.filter(pk=credential.pk, revoked_at__isnull=True).first()
    if current is None:
        raise failure
    if not won and current.access_token == credential.access_token:
        raise failure
    return current


def token_fields(tokens: oauth.TokenSet, *, keep_refresh: str = "") -> dict:
    expires_at = (
        timezone.now() + timedelta(seconds=tokens.expires_in) if tokens.expires_in else None
    )
    return {
        "access_token": vault.seal(tokens.access_token),
        "refresh_token": vault.seal(tokens.refresh_token) if tokens.refresh_token else keep_refresh,
        "hint": vault.hint(tokens.access_token),
        "expires_at": expires_at,
        "scope": tokens.scope[:500],
    }


def note_used(server: McpServer, user) -> None:
    credential = live(server, user)
    if credential is not None:
        McpCredential.objects.filter(pk=credential.pk).update(last_used_at=timezone.now())


def _require_vault() -> None:
    if not vault.configured() or vault.key_problem():
        raise AhenticError(
            "ahentic_vault_not_configured",
            gettext("Credentials cannot be stored: the site has no AHENTIC['VAULT_KEYS']."),
            503,
        )


def _store(server: McpServer, user, **fields) -> McpCredential:
    """Revoke the live credential of (server, user) and store a new one, in one short
    transaction; a concurrent connect that won is a 409."""
    now = timezone.now()
    try:
        with db.atomic(McpCredential):
            McpCredential.objects.filter(server=server, user=user, revoked_at__isnull=True).update(
                revoked_at=now
            )
            return McpCredential.objects.create(server=server, user=user, **fields)
    except IntegrityError:
        raise AhenticError(
            "ahentic_mcp_connect_conflict",
            gettext("Another connection was saved at the same time."),
            409,
        ) from None


def bearer_save(*, server: McpServer, user, token: str) -> McpCredential:
    """Store a static bearer token: ``user`` None is the site's (staff), else the user's own
    for a per-user server."""
    token = token.strip()
    if not token or len(token) > TOKEN_MAX_CHARS or any(c.isspace() for c in token):
        raise AhenticError(
            "ahentic_invalid_input", gettext("A token is one line of at most 8000 characters."), 400
        )
    _require_vault()
    return _store(
        server,
        user,
        kind=McpCredential.Kind.BEARER,
        access_token=vault.seal(token),
        hint=vault.hint(token),
    )


def revoke(*, server: McpServer, user) -> int:
    """Revoke the live credential of (server, user); the number revoked (0 or 1). The server
    is not told (the token stays valid there until it expires or its owner revokes it)."""
    return McpCredential.objects.filter(server=server, user=user, revoked_at__isnull=True).update(
        revoked_at=timezone.now()
    )


# --- OAuth ----------------------------------------------------------------------------------


def oauth_start(*, server: McpServer, user, redirect_uri: str) -> str:
    """Begin an OAuth connection of ``user`` to ``server``: discovery, client registration
    (or the client id staff entered), a PKCE pair and a state kept here. Returns the URL the
    user's browser opens; ``McpFailure`` when the server offers no usable OAuth."""
    _require_vault()
    found = oauth.discover(server.url)
    if found.registration_endpoint:
        client_id, client_secret = oauth.register(
            found.registration_endpoint, redirect_uri=redirect_uri, name="django-ahentic"
        )
    elif server.oauth_client_id:
        client_id, client_secret = server.oauth_client_id, ""
    else:
        raise McpFailure(
            AUTH_REQUIRED,
            "The server offers no client registration and no client id is set for it.",
        )
    verifier, challenge = oauth.pkce_pair()
    state = secrets.token_urlsafe(32)
    with db.atomic(McpCredential):
        # One authorization per user and server at a time; old ones are forgotten.
        McpAuthorization.objects.filter(server=server, user=user).delete()
        McpAuthorization.objects.filter(created_at__lt=timezone.now() - AUTHORIZATION_TTL).delete()
        McpAuthorization.objects.create(
            state=state,
            server=server,
            user=user,
            verifier=vault.seal(verifier),
            client_id=client_id,
            client_secret=vault.seal(client_secret),
            token_endpoint=found.token_endpoint,
            redirect_uri=redirect_uri,
            resource=found.resource,
            scope=found.scopes[:500],
        )
    return oauth.authorization_url(
        found, client_id=client_id, redirect_uri=redirect_uri, state=state, challenge=challenge
    )


def oauth_finish(*, user, state: str, code: str) -> McpServer:
    """The callback: the authorization ``state`` names (this user's, recent, used once), the
    code exchanged for tokens, the credential stored."""
    pending = (
        McpAuthorization.objects.select_related("server")
        .filter(state=state, user=user, created_at__gte=timezone.now() - AUTHORIZATION_TTL)
        .first()
    )
    if pending is None:
        raise AhenticError(
            "ahentic_mcp_oauth_state", gettext("This authorization is unknown or expired.")
        )
    # Used once: whoever deletes the row goes on.
    deleted, _ = McpAuthorization.objects.filter(pk=pending.pk).delete()
    if not deleted:
        raise AhenticError(
            "ahentic_mcp_oauth_state", gettext("This authorization was already used.")
        )
    client_secret = vault.unseal(pending.client_secret)
    tokens = oauth.exchange_code(
        pending.token_endpoint,
        code=code,
        verifier=vault.unseal(pending.verifier),
        redirect_uri=pending.redirect_uri,
        client_id=pending.client_id,
        client_secret=client_secret,
        resource=pending.resource,
    )
    _store(
        pending.server,
        user,
        kind=McpCredential.Kind.OAUTH,
        client_id=pending.client_id,
        client_secret=vault.seal(client_secret),
        token_endpoint=pending.token_endpoint,
        **token_fields(tokens),
    )
    return pending.server
