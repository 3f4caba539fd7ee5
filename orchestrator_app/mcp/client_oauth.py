"""OAuth 2.1 for MCP servers, as the MCP authorization spec describes it: the HTTP half.

Discovery: the server's protected-resource metadata (RFC 9728,
``/.well-known/oauth-protected-resource``) names its authorization server, whose metadata
(RFC 8414, ``/.well-known/oauth-authorization-server``, or OpenID discovery) gives the
endpoints. Dynamic client registration (RFC 7591) when the server offers it, else the client
id staff entered. Authorization code with PKCE (S256), ``resource`` (RFC 8707) on every
request, and the refresh_token grant.

Every request (discovery documents, registration, token) goes through the outbound-address
policy (``orchestrator_app/outbound.py``): the addresses a server's metadata names are
resolved and checked like the server's own, the connection goes to the checked address, and
no redirect is followed.

Pure HTTP with no database and no secrets in messages: ``mcp/tools.py`` stores what it returns
in the vault. Failures are ``McpFailure(AUTH_REQUIRED, ...)``, or
``McpFailure("ahentic_outbound_refused", ...)`` for an address the policy refuses.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode, urlsplit, urlunsplit

import httpx2 as httpx

from .. import outbound
from .client import AUTH_REQUIRED, McpFailure, rule, scheme_problem

HTTP_TIMEOUT_S = 15


@dataclass(frozen=True)
class AuthServer:
    authorization_endpoint: str
    token_endpoint: str
    registration_endpoint: str | None
    scopes: str
    resource: str


@dataclass(frozen=True)
class TokenSet:
    access_token: str
    refresh_token: str
    expires_in: int | None
    scope: str


def _refused(exc: outbound.OutboundRefused) -> McpFailure:
    return McpFailure(exc.code, f"OAuth request refused: {exc.message}")


def _get_json(url: str) -> dict[str, Any] | None:
    if scheme_problem(url):
        return None
    try:
        with outbound.client(rule(), timeout=HTTP_TIMEOUT_S) as http:
            response = http.get(url, headers={"Accept": "application/json"})
    except outbound.OutboundRefused as exc:
        raise _refused(exc) from None
    except (httpx.HTTPError, outbound.OutboundError):
        return None
    if response.status_code != 200:
        return None
    try:
        data = response.json()
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _well_known(url: str, name: str) -> list[str]:
    """RFC 8615 locations of ``name`` for ``url``: path-aware first, then the root."""
    parts = urlsplit(url)
    path = parts.path.rstrip("/")
    found = [urlunsplit((parts.scheme, parts.netloc, f"/.well-known/{name}{path}", "", ""))]
    if path:
        found.append(urlunsplit((parts.scheme, parts.netloc, f"/.well-known/{name}", "", "")))
    return found


def discover(server_url: str) -> AuthServer:
    """The authorization server of the MCP server at ``server_url``."""
    resource = server_url
    issuer = None
    scopes = ""
    for url in _well_known(server_url, "oauth-protected-resource"):
        metadata = _get_json(url)
        if metadata and metadata.get("authorization_servers"):
            issuer = str(metadata["authorization_servers"][0])
            resource = str(metadata.get("resource") or server_url)
            scopes = " ".join(metadata.get("scopes_supported") or [])
            break
    if issuer is None:  # the 2025-03 spec's fallback: the server's origin is its own issuer
        parts = urlsplit(server_url)
        issuer = urlunsplit((parts.scheme, parts.netloc, "", "", ""))
    for name in ("oauth-authorization-server", "openid-configuration"):
        for url in _well_known(issuer, name):
            metadata = _get_json(url)
            if (
                metadata
                and metadata.get("authorization_endpoint")
                and metadata.get("token_endpoint")
            ):
                return AuthServer(
                    authorization_endpoint=str(metadata["authorization_endpoint"]),
                    token_endpoint=str(metadata["token_endpoint"]),
                    registration_endpoint=metadata.get("registration_endpoint"),
                    scopes=scopes or " ".join(metadata.get("scopes_supported") or []),
                    resource=resource,
                )
    raise McpFailure(AUTH_REQUIRED, "The server does not publish OAuth metadata.")


def register(registration_endpoint: str, *, redirect_uri: str, name: str) -> tuple[str, str]:
    """(client_id, client_secret or "") from dynamic client registration (RFC 7591)."""
    body = {
        "client_name": name,
        "redirect_uris": [redirect_uri],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
    }
    data = _post(registration_endpoint, json=body, expect=(200, 201))
    if not data.get("client_id"):
        raise McpFailure(AUTH_REQUIRED, "The server's client registration gave no client_id.")
    return str(data["client_id"]), str(data.get("client_secret") or "")


def pkce_pair() -> tuple[str, str]:
    """(verifier, S256 challenge)."""
    verifier = secrets.token_urlsafe(64)
    digest = hashlib.sha256(verifier.encode()).digest()
    return verifier, base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def authorization_url(
    server: AuthServer, *, client_id: str, redirect_uri: str, state: str, challenge: str
) -> str:
    query = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": redirect_uri,
        "state": state,
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "resource": server.resource,
    }
    if server.scopes:
        query["scope"] = server.scopes
    separator = "&" if "?" in server.authorization_endpoint else "?"
    return f"{server.authorization_endpoint}{separator}{urlencode(query)}"


def _post(url: str, *, expect=(200,), **kwargs) -> dict[str, Any]:
    problem = scheme_problem(url)
    if problem:
        raise McpFailure(AUTH_REQUIRED, f"OAuth endpoint refused: {problem}")
    try:
        with outbound.client(rule(), timeout=HTTP_TIMEOUT_S) as http:
            response = http.post(url, **kwargs)
    except outbound.OutboundRefused as exc:
        raise _refused(exc) from None
    except (httpx.HTTPError, outbound.OutboundError) as exc:
        raise McpFailure(
            AUTH_REQUIRED, f"The authorization server cannot be reached ({type(exc).__name__})."
        ) from None
    if response.status_code not in expect:
        raise McpFailure(
            AUTH_REQUIRED, f"The authorization server answered HTTP {response.status_code}."
        )
    try:
        data = response.json()
    except ValueError:
        data = None
    if not isinstance(data, dict):
        raise McpFailure(AUTH_REQUIRED, "The authorization server's answer is not JSON.")
    return data


def _token_request(
    token_endpoint: str, form: dict[str, str], client_id: str, client_secret: str
) -> TokenSet:
    form = {**form, "client_id": client_id}
    auth = (client_id, client_secret) if client_secret else None
    data = _post(token_endpoint, data=form, auth=auth)
    if not data.get("access_token"):
        raise McpFailure(AUTH_REQUIRED, "The authorization server gave no access token.")
    expires_in = data.get("expires_in")
    return TokenSet(
        access_token=str(data["access_token"]),
        refresh_token=str(data.get("refresh_token") or ""),
        expires_in=int(expires_in) if isinstance(expires_in, int | float) else None,
        scope=str(data.get("scope") or ""),
    )


def exchange_code(
    token_endpoint: str,
    *,
    code: str,
    verifier: str,
    redirect_uri: str,
    client_id: str,
    client_secret: str = "",
    resource: str = "",
) -> TokenSet:
    form = {
        "grant_type": "authorization_code",
        "code": code,
        "code_verifier": verifier,
        "redirect_uri": redirect_uri,
    }
    if resource:
        form["resource"] = resource
    return _token_request(token_endpoint, form, client_id, client_secret)


def refresh(
    token_endpoint: str,
    *,
    refresh_token: str,
    client_id: str,
    client_secret: str = "",
    resource: str = "",
) -> TokenSet:
    form = {"grant_type": "refresh_token", "refresh_token": refresh_token}
    if resource:
        form["resource"] = resource
    return _token_request(token_endpoint, form, client_id, client_secret)
