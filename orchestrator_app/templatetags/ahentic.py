"""``{% load ahentic %}{% ahentic_sidebar %}``: the agent's chat sidebar on any page.

The tag renders nothing for anonymous users and for users without ``AHENTIC["PERMISSION"]``,
so a base template can include it unconditionally. ``{% ahentic_sidebar admin=True %}`` (used
by the admin's ``base_site.html``) also renders nothing unless ``AHENTIC["ADMIN_SIDEBAR"]`` is
true. The sidebar talks to the API mounted with ``include("orchestrator_app.urls")``; a page
that renders the tag without that mount fails loudly (NoReverseMatch), which is a setup error.
"""

from __future__ import annotations

from django import template
from django.middleware.csrf import get_token
from django.template.loader import render_to_string
from django.urls import reverse

from sessions_app.conf import ahentic_settings

from ..api.permissions import may_use_agent as agent_may_use
from ..jsi18n import catalog_url
from ..tools.browser_tools import SENSITIVE_AUTOCOMPLETE_PATTERN, SENSITIVE_FIELD_PATTERN

register = template.Library()

# The client polling contract: a live session is polled this often.
POLL_INTERVAL_MS = 650


def api_base_url() -> str:
    """The API root (``/ahentic/v1/``), wherever the host mounted it."""
    sessions_url = reverse("ahentic:session-list")
    return sessions_url[: -len("sessions")] if sessions_url.endswith("sessions") else sessions_url


def may_use_agent(user) -> bool:
    """The API's answer (``HasAgentPermission``): any user model, with or without
    ``PermissionsMixin``."""
    if not user or not user.is_authenticated or not user.is_active:
        return False
    return agent_may_use(user)


@register.simple_tag(takes_context=True)
def ahentic_sidebar(context, admin: bool = False) -> str:
    request = context.get("request")
    if request is None:  # rendered without a request (an email, a management command)
        return ""
    if admin and not ahentic_settings.ADMIN_SIDEBAR:
        return ""
    user = getattr(request, "user", None)
    if not may_use_agent(user):
        return ""
    return render_to_string(
        "ahentic/sidebar.html",
        {
            "api_base_url": api_base_url(),
            "catalog_url": catalog_url(),
            "csrf_token": get_token(request),
            "poll_interval_ms": POLL_INTERVAL_MS,
            "browser_timeout_s": int(ahentic_settings.BROWSER_TIMEOUT_S),
            "user_key": user.pk,
            "in_admin": bool(admin),
            # Verbose and Debug (tool traffic, raw blocks) are offered to staff only.
            "is_staff": bool(user.is_staff),
            "sensitive_fields": SENSITIVE_FIELD_PATTERN,
            "sensitive_autocomplete": SENSITIVE_AUTOCOMPLETE_PATTERN,
        },
    )
