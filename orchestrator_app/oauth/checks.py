"""System checks of the MCP endpoint's OAuth (registered by ``apps.py``).

- ``ahentic.E044``: the host's ``OAUTH2_PROVIDER`` differs from ``orchestrator_app.oauth.
  OAUTH2_PROVIDER`` on a key the endpoint relies on (its validator, scopes, PKCE, rotation, the
  metadata documents' fetcher).
- ``ahentic.E045``: ``oauth2_provider`` is not in ``INSTALLED_APPS``.
- ``ahentic.W022``: the root ``/.well-known/`` documents (``orchestrator_app.oauth.urls``) are
  not mounted: claude.ai, ChatGPT and the SDKs cannot discover the authorization server.
"""

from __future__ import annotations

from django.apps import apps
from django.conf import settings
from django.core.checks import Error, Tags, Warning, register
from django.urls import NoReverseMatch, reverse

from sessions_app.conf import ahentic_settings

from . import OAUTH2_PROVIDER, REQUIRED

MOUNT = 'path("", include("orchestrator_app.oauth.urls"))'


def _on() -> bool:
    return bool(ahentic_settings.MCP_SERVER and ahentic_settings.MCP_OAUTH)


@register()
def check_oauth_settings(app_configs=None, **kwargs):
    if not _on():
        return []
    if not apps.is_installed("oauth2_provider"):
        return [
            Error(
                "The MCP endpoint's OAuth needs django-oauth-toolkit: oauth2_provider is not in "
                "INSTALLED_APPS.",
                hint='Add "oauth2_provider" to INSTALLED_APPS (or set AHENTIC["MCP_OAUTH"] to '
                "False).",
                id="ahentic.E045",
            )
        ]
    host = getattr(settings, "OAUTH2_PROVIDER", None) or {}
    wrong = [key for key in REQUIRED if host.get(key) != OAUTH2_PROVIDER[key]]
    if not wrong:
        return []
    return [
        Error(
            f"OAUTH2_PROVIDER does not set what the MCP endpoint's OAuth needs: "
            f"{', '.join(wrong)}.",
            hint="from orchestrator_app.oauth import OAUTH2_PROVIDER in settings.py (or "
            "OAUTH2_PROVIDER = {**OAUTH2_PROVIDER, ...your keys})",
            id="ahentic.E044",
        )
    ]


@register(Tags.urls)
def check_well_known(app_configs=None, **kwargs):
    if not _on():
        return []
    try:
        reverse("ahentic:oauth-issuer")
    except NoReverseMatch:
        return []  # the app itself is not mounted: nothing to discover
    missing = []
    for name in ("ahentic-oauth-authorization-server", "ahentic-oauth-protected-resource"):
        try:
            reverse(name)
        except NoReverseMatch:
            missing.append(name)
    if not missing:
        return []
    return [
        Warning(
            "The root /.well-known/ documents of the MCP endpoint's OAuth are not mounted: "
            "clients such as claude.ai and ChatGPT cannot find its authorization server.",
            hint=f"Add {MOUNT} to the root URLconf (docs/howto/connectors.md).",
            id="ahentic.W022",
        )
    ]
