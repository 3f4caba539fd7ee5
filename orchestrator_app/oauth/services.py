"""The MCP endpoint's OAuth: scopes, the validator hooks, the metadata documents' fetcher, the
clients' registration and review, the users' connections and the endpoint's bearer check.

Scopes: ``tools:read`` (list and call the tools that change nothing), ``tools:write`` (also
the tools that change data; each such call still waits for the user's approval in the
sidebar) and ``agent:<slug>`` (which agent the client talks to; the consent page adds it).

Every token is django-oauth-toolkit's: this module never issues, hashes or parses one. The
endpoint asks the toolkit to verify a bearer token (``bearer_access``), then holds it to the
endpoint's own resource (RFC 8707: a token whose ``resource`` does not name the endpoint is
refused, even one the toolkit would accept elsewhere) and to a live connection.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx2
from django.contrib.auth import get_user_model
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext
from oauth2_provider.cimd import CIMDError
from oauth2_provider.models import (
    get_access_token_model,
    get_application_model,
    get_grant_model,
    get_refresh_token_model,
)
from oauth2_provider.oauth2_backends import get_oauthlib_core
from oauth2_provider.oauth2_validators import OAuth2Validator
from oauth2_provider.scopes import BaseScopes
from oauth2_provider.settings import oauth2_settings

from sessions_app import db
from sessions_app.conf import ahentic_settings
from sessions_app.models import Agent

from .. import outbound
from ..errors import AhenticError
from ..mcp import tokens as mcp_tokens
from ..models import McpToken, OAuthClient, OAuthConnection

READ = "tools:read"
WRITE = "tools:write"
AGENT = "agent:"
SCOPE_DESCRIPTIONS = {
    READ: "List and call the tools that change nothing",
    WRITE: "Call the tools that change data (each call still waits for approval)",
}
CLIENT_NAME_MAX = 255
REDIRECT_URIS_MAX = 10
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")
MAX_AGE = re.compile(r"max-age\s*=\s*(\d+)", re.IGNORECASE)


def resource_url(request) -> str:
    """The endpoint's resource identifier (RFC 8707, RFC 9728): its absolute URL."""
    return request.build_absolute_uri(reverse("ahentic:mcp"))


def issuer_url(request) -> str:
    """The authorization server's issuer (RFC 8414): the site's origin, the value the toolkit
    also puts in the authorization response's ``iss`` (RFC 9207). Its metadata is at the root
    ``/.well-known/oauth-authorization-server`` (``oauth/urls.py``) and at the app's ``oauth``."""
    return request.build_absolute_uri("/").rstrip("/")


def server_url(request, name: str) -> str:
    """The absolute URL of one of the server's routes (``authorize``, ``token``...)."""
    return request.build_absolute_uri(reverse(f"ahentic:oauth-{name}"))


def agent_of(scopes) -> str | None:
    """The agent slug a set of scopes names (``agent:<slug>``), else None."""
    for scope in sorted(scopes):
        if scope.startswith(AGENT) and len(scope) > len(AGENT):
            return scope[len(AGENT) :]
    return None


class Scopes(BaseScopes):
    """The scopes backend (``SCOPES_BACKEND_CLASS``): the two fixed scopes and one per agent."""

    def get_all_scopes(self):
        found = dict(SCOPE_DESCRIPTIONS)
        for slug, name in Agent.objects.filter(active=True).values_list("slug", "name"):
            found[f"{AGENT}{slug}"] = gettext("Talk to the agent %(name)s") % {"name": name}
        return found

    def get_available_scopes(self, application=None, request=None, *args, **kwargs):
        return list(self.get_all_scopes())

    def get_default_scopes(self, application=None, request=None, *args, **kwargs):
        return [READ, WRITE]


class Validator(OAuth2Validator):
    """The toolkit's validator (``OAUTH2_VALIDATOR_CLASS``), plus: a token issued to a user
    opens (or refreshes) that user's connection to the client, the connected app the sidebar
    lists and revokes; a client staff has not approved (or revoked) gets no token."""

    def validate_client_id(self, client_id, request, *args, **kwargs):
        if not super().validate_client_id(client_id, request, *args, **kwargs):
            return False
        return client_review(request.client).status == OAuthClient.Status.APPROVED

    def save_bearer_token(self, token, request, *args, **kwargs):
        super().save_bearer_token(token, request, *args, **kwargs)
        user = getattr(request, "user", None)
        if user is not None and getattr(user, "is_authenticated", False) and request.client:
            connection_open(user=user, application=request.client, scope=token.get("scope", ""))


# --- client ID metadata documents -----------------------------------------------------------


class MetadataFetcher:
    """Fetches a client ID metadata document (``CIMD_METADATA_FETCHER``) under the site's
    outbound-address policy (``outbound.py``: the address checked and pinned, no redirects, no
    proxies), within ``CIMD_FETCH_TIMEOUT_SECONDS`` in all and ``CIMD_MAX_DOCUMENT_SIZE`` bytes.
    Answers ``(metadata, max_age_seconds)``; ``CIMDError`` otherwise (the toolkit then treats
    the client as unknown and backs off)."""

    def fetch(self, client_id: str):
        parts = urlsplit(client_id)
        if (
            parts.scheme != "https"
            or not parts.hostname
            or parts.username
            or parts.password
            or parts.fragment
            or not parts.path
            or any(segment in (".", "..") for segment in parts.path.split("/"))
        ):
            raise CIMDError("the client_id is not an https URL with a path")
        limit = oauth2_settings.CIMD_MAX_DOCUMENT_SIZE
        seconds = oauth2_settings.CIMD_FETCH_TIMEOUT_SECONDS
        deadline = time.monotonic() + seconds
        try:
            with outbound.client(outbound.policy(), timeout=httpx2.Timeout(seconds)) as http:
                with http.stream(
                    "GET", client_id, headers={"Accept": "application/json"}
                ) as response:
                    if response.status_code != 200:
                        raise CIMDError(f"the document answered HTTP {response.status_code}")
                    media = response.headers.get("Content-Type", "").split(";")[0].strip()
                    if media.lower() != "application/json" and not media.lower().endswith("+json"):
                        raise CIMDError(f"the document is not JSON ({media!r})")
                    body = bytearray()
                    for chunk in response.iter_bytes():
                        body.extend(chunk)
                        if len(body) > limit:
                            raise CIMDError("the document is over the size limit")
                        if time.monotonic() > deadline:
                            raise CIMDError("the document took too long")
                    cache_control = response.headers.get("Cache-Control", "")
        except outbound.OutboundError as exc:
            raise CIMDError(exc.message) from None
        except httpx2.HTTPError as exc:
            raise CIMDError(f"the document could not be fetched: {exc}") from None
        try:
            data = json.loads(bytes(body))
        except ValueError:
            raise CIMDError("the document is not valid JSON") from None
        if not isinstance(data, dict):
            raise CIMDError("the document is not a JSON object")
        return data, max_age(cache_control)


def max_age(cache_control: str) -> int:
    floor = oauth2_settings.CIMD_METADATA_MIN_AGE_SECONDS
    ceiling = oauth2_settings.CIMD_METADATA_MAX_AGE_SECONDS
    age = ceiling
    if "no-store" in cache_control.lower() or "no-cache" in cache_control.lower():
        age = floor
    elif match := MAX_AGE.search(cache_control):
        age = int(match.group(1))
    return max(floor, min(age, ceiling))


# --- clients --------------------------------------------------------------------------------


def client_review(application) -> OAuthClient:
    """The staff review of ``application``, made when first asked: a client registered by
    itself (dynamically or by its metadata document) waits for approval when
    ``MCP_OAUTH_CLIENT_APPROVAL`` is on; one staff made in the admin is approved."""
    self_registered = application.registration_source != application.RegistrationSource.MANUAL
    waits = self_registered and ahentic_settings.MCP_OAUTH_CLIENT_APPROVAL
    status = OAuthClient.Status.PENDING if waits else OAuthClient.Status.APPROVED
    review, _ = OAuthClient.objects.get_or_create(
        application=application, defaults={"status": status}
    )
    return review


def client_decide(*, review: OAuthClient, status: str, by=None) -> bool:
    """Approve or revoke a client (the admin's actions). Revoking ends every connection to it
    and deletes its tokens at once. False when the client had that status already."""
    changed = (
        OAuthClient.objects.filter(pk=review.pk)
        .exclude(status=status)
        .update(status=status, decided_at=timezone.now(), decided_by=by)
    )
    if changed and status == OAuthClient.Status.REVOKED:
        for connection in OAuthConnection.objects.filter(
            application=review.application, revoked_at__isnull=True
        ):
            connection_revoke(connection=connection)
        tokens_delete(application=review.application)
    return bool(changed)


def registration_error(message: str, error: str = "invalid_client_metadata") -> AhenticError:
    problem = AhenticError(f"ahentic_oauth_{error}", message, 400)
    problem.oauth_error = error
    return problem


def redirect_uri_problem(uri: str) -> str | None:
    """Why ``uri`` cannot be a redirect URI: an absolute https URI, or http on a loopback host
    (a native client's), without a fragment."""
    try:
        parts = urlsplit(uri)
        parts.port  # noqa: B018 (raises ValueError on a bad port)
    except ValueError:
        return gettext("%(uri)s is not a valid URI.") % {"uri": uri[:200]}
    host = (parts.hostname or "").lower()
    if parts.fragment or not host:
        return gettext("%(uri)s must be absolute and carry no fragment.") % {"uri": uri[:200]}
    if parts.scheme == "https" or (parts.scheme == "http" and host in LOOPBACK_HOSTS):
        return None
    return gettext("%(uri)s must be https (or http on localhost).") % {"uri": uri[:200]}


@dataclass(frozen=True)
class Registered:
    application: object
    review: OAuthClient
    secret: str | None  # a confidential client's secret: in the registration answer only


def client_register(metadata) -> Registered:
    """Register a client from its RFC 7591 metadata (dynamic client registration). Only the
    authorization code grant (and its refresh tokens) and the ``code`` response type; the
    redirect URIs are kept as given and matched exactly."""
    if not isinstance(metadata, dict):
        raise registration_error(gettext("The body must be a JSON object."))
    uris = metadata.get("redirect_uris")
    if (
        not isinstance(uris, list)
        or not uris
        or len(uris) > REDIRECT_URIS_MAX
        or not all(isinstance(uri, str) and uri and len(uri) <= 2000 for uri in uris)
    ):
        raise registration_error(
            gettext("redirect_uris must list 1 to %(max)s URIs.") % {"max": REDIRECT_URIS_MAX},
            "invalid_redirect_uri",
        )
    for uri in uris:
        if any(ch.isspace() for ch in uri):
            raise registration_error(
                gettext("A redirect URI holds no spaces."), "invalid_redirect_uri"
            )
        problem = redirect_uri_problem(uri)
        if problem:
            raise registration_error(problem, "invalid_redirect_uri")
    grants = metadata.get("grant_types", ["authorization_code"])
    if not isinstance(grants, list) or not set(grants) <= {"authorization_code", "refresh_token"}:
        raise registration_error(gettext("Only authorization_code and refresh_token are offered."))
    if "authorization_code" not in grants:
        raise registration_error(gettext("grant_types must include authorization_code."))
    responses = metadata.get("response_types", ["code"])
    if not isinstance(responses, list) or set(responses) != {"code"}:
        raise registration_error(gettext("Only the code response type is offered."))
    method = metadata.get("token_endpoint_auth_method", "client_secret_basic")
    if method not in ("none", "client_secret_basic", "client_secret_post"):
        raise registration_error(
            gettext(
                "token_endpoint_auth_method must be none, client_secret_basic or "
                "client_secret_post."
            )
        )
    name = metadata.get("client_name", "")
    if not isinstance(name, str) or len(name) > CLIENT_NAME_MAX or "\x00" in name:
        raise registration_error(
            gettext("client_name must be text of at most %(max)s characters.")
            % {"max": CLIENT_NAME_MAX}
        )
    Application = get_application_model()
    public = method == "none"
    application = Application(
        name=name.strip(),
        redirect_uris=" ".join(uris),
        client_type=Application.CLIENT_PUBLIC if public else Application.CLIENT_CONFIDENTIAL,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        registration_source=Application.RegistrationSource.DCR,
    )
    secret = None if public else application.client_secret  # hashed when saved
    with db.atomic(OAuthClient):
        application.save()
        review = client_review(application)
    return Registered(application=application, review=review, secret=secret)


# --- connections ----------------------------------------------------------------------------


def connection_open(*, user, application, scope: str) -> OAuthConnection:
    """The user's live connection to ``application``, made at its first token (with the row
    that stands for the client in the calls' history), its scope kept up to date after."""
    with db.atomic(OAuthConnection):
        # The user's row, locked: two token requests at once make one connection.
        db.primary(get_user_model()).select_for_update().filter(pk=user.pk).first()
        live = (
            db.primary(OAuthConnection)
            .filter(user=user, application=application, revoked_at__isnull=True)
            .first()
        )
        if live is not None:
            if live.scope != scope:
                OAuthConnection.objects.filter(pk=live.pk).update(scope=scope)
                live.scope = scope
            return live
        name = application.name or urlsplit(application.client_id).hostname or "client"
        token = mcp_tokens.stand_in_create(user=user, name=f"OAuth: {name}")
        return OAuthConnection.objects.create(
            user=user, application=application, token=token, scope=scope
        )


def tokens_delete(*, application, user=None) -> None:
    """Delete the access and refresh tokens and pending codes of ``application`` (for
    ``user`` only when given): they stop working at once."""
    found = {"application": application}
    if user is not None:
        found["user"] = user
    get_access_token_model().objects.filter(**found).delete()
    get_refresh_token_model().objects.filter(**found).delete()
    get_grant_model().objects.filter(**found).delete()


def connection_revoke(*, connection: OAuthConnection) -> bool:
    """Revoke a connected app: its tokens are deleted at once (the next call is a 401), its
    stand-in row revoked (kept, with the calls' history). False when it was revoked already."""
    revoked = OAuthConnection.objects.filter(pk=connection.pk, revoked_at__isnull=True).update(
        revoked_at=timezone.now()
    )
    if not revoked:
        return False
    mcp_tokens.token_revoke(token=connection.token)
    tokens_delete(application=connection.application, user=connection.user)
    return True


def connections_of(user):
    """The user's live connections, newest first, with their client and stand-in row."""
    return (
        OAuthConnection.objects.filter(user=user, revoked_at__isnull=True)
        .select_related("application", "token")
        .order_by("-created_at")
    )


# --- the endpoint's bearer check ------------------------------------------------------------


@dataclass(frozen=True)
class Access:
    """What an OAuth access token lets its client do at the endpoint."""

    token: McpToken  # the connection's stand-in row: the client in the calls' history
    scopes: frozenset[str]

    @property
    def agent(self) -> str | None:
        return agent_of(self.scopes)

    @property
    def writes(self) -> bool:
        return WRITE in self.scopes

    @property
    def reads(self) -> bool:
        return READ in self.scopes or WRITE in self.scopes


def bearer_access(request) -> Access | None:
    """The access of the request's OAuth bearer token, or None (unknown, expired, revoked,
    issued for another resource, or its connection revoked)."""
    valid, checked = get_oauthlib_core().verify_request(request, scopes=[])
    access_token = getattr(checked, "access_token", None) if valid else None
    if access_token is None or access_token.user is None:
        return None
    if resource_url(request) not in (access_token.resource or []):
        return None
    connection = (
        OAuthConnection.objects.filter(
            user=access_token.user,
            application=access_token.application,
            revoked_at__isnull=True,
        )
        .select_related("token__user")
        .first()
    )
    if connection is None or connection.token.revoked_at is not None:
        return None
    mcp_tokens.token_touch(connection.token)
    return Access(token=connection.token, scopes=frozenset(access_token.scope.split()))
