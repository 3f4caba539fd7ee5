"""The MCP endpoint's bearer tokens: create (shown once), authenticate, touch, revoke.

A token is ``ahmcp_`` plus 43 URL-safe characters (256 random bits). Only its SHA-256 is
stored; authenticating hashes what the client sent and looks the hash up (an indexed equality
on a digest of a high-entropy secret: the lookup reveals nothing a timing attack could use,
and the final comparison is ``hmac.compare_digest``).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.contrib.auth import get_user_model
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext, ngettext

from sessions_app import db
from sessions_app.conf import ahentic_settings

from ..errors import AhenticError
from ..models import McpToken

TOKEN_PREFIX = "ahmcp_"
# What the list shows of a token: the prefix and four characters of the secret.
SHOWN_CHARS = len(TOKEN_PREFIX) + 4
# ``last_used_at`` is written at most this often per token (one UPDATE a minute, not a request).
TOUCH_EVERY = timedelta(minutes=1)
NAME_MAX = 100
# What the admin shows of a connected app's stand-in row (it has no secret to show a part of).
STAND_IN_PREFIX = "oauth"


@dataclass(frozen=True)
class IssuedToken:
    """A new token and the secret, which exists only here (never stored, never shown again)."""

    token: McpToken
    secret: str


def token_digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


def token_create(
    *, user, name: str, expires_at: datetime | None = None, created_by=None
) -> IssuedToken:
    """A new token for ``user`` (by the user, or by staff: ``created_by``)."""
    name = (name or "").strip()
    if not name or len(name) > NAME_MAX:
        raise AhenticError(
            "ahentic_invalid_input",
            gettext("A token needs a name of 1 to %(max)s characters.") % {"max": NAME_MAX},
            400,
        )
    if expires_at is not None and expires_at <= timezone.now():
        raise AhenticError(
            "ahentic_invalid_input", gettext("expiresAt must be in the future."), 400
        )
    secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
    with db.atomic(McpToken):
        # The user's row, locked: two requests at once count and insert one after the other.
        db.primary(get_user_model()).select_for_update().filter(pk=user.pk).first()
        problem = limit_problem(user)
        if problem:
            raise AhenticError("ahentic_mcp_token_limit", problem, 409)
        token = McpToken.objects.create(
            user=user,
            name=name,
            prefix=secret[:SHOWN_CHARS],
            token_hash=token_digest(secret),
            expires_at=expires_at,
            created_by=created_by or user,
        )
    return IssuedToken(token=token, secret=secret)


def stand_in_create(*, user, name: str) -> McpToken:
    """The row that stands for an OAuth client of ``user`` in the MCP calls' history (a
    connected app, ``oauth/services.py``). Its secret is drawn and dropped: nobody knows it,
    so the row never authenticates (the client's OAuth access tokens do). Not counted against
    ``MCP_TOKENS_PER_USER`` and not listed with the user's personal tokens."""
    secret = secrets.token_urlsafe(32)
    return McpToken.objects.create(
        user=user,
        name=(name or "OAuth client")[:NAME_MAX],
        prefix=STAND_IN_PREFIX,
        token_hash=token_digest(secret),
        created_by=user,
    )


def personal(tokens):
    """``tokens`` less the stand-ins of OAuth clients."""
    return tokens.filter(oauth_connection__isnull=True)


def limit_problem(user) -> str | None:
    """Why ``user`` may not have another token (``MCP_TOKENS_PER_USER`` live ones: not revoked,
    not expired), or None."""
    limit = ahentic_settings.MCP_TOKENS_PER_USER
    if limit is None or personal(McpToken.objects.usable().filter(user=user)).count() < limit:
        return None
    return ngettext(
        "A user may hold at most %(limit)s live MCP token: revoke one first.",
        "A user may hold at most %(limit)s live MCP tokens: revoke one first.",
        limit,
    ) % {"limit": limit}


def token_authenticate(secret: str) -> McpToken | None:
    """The usable token (not revoked, not expired) this secret is, with its user, else None.
    Records the use (``token_touch``)."""
    if not secret.startswith(TOKEN_PREFIX) or len(secret) > 200:
        return None
    digest = token_digest(secret)
    token = McpToken.objects.usable().select_related("user").filter(token_hash=digest).first()
    if token is None or not hmac.compare_digest(token.token_hash, digest):
        return None
    token_touch(token)
    return token


def token_touch(token: McpToken) -> None:
    """Record a use: at most one write a minute per token, and a conditional one (two requests
    at once write once)."""
    now = timezone.now()
    if token.last_used_at is not None and now - token.last_used_at < TOUCH_EVERY:
        return
    stale = now - TOUCH_EVERY
    McpToken.objects.filter(pk=token.pk).filter(
        Q(last_used_at__isnull=True) | Q(last_used_at__lt=stale)
    ).update(last_used_at=now)
    token.last_used_at = now


def token_revoke(*, token: McpToken) -> bool:
    """Revoke a token (kept for its history of calls). False when it was already revoked."""
    revoked = McpToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(
        revoked_at=timezone.now()
    )
    return bool(revoked)
