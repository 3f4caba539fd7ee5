"""Links to a chat: the sidebar opens the chat a link names (``?ahentic_session=<id>``) on a
page of the site. The mails and the MCP endpoint's answers link to chats this way."""

from __future__ import annotations

from urllib.parse import urlencode, urlsplit

from django.apps import apps
from django.core.exceptions import ImproperlyConfigured

from sessions_app.conf import ahentic_settings
from sessions_app.models import Session

# The query parameter the sidebar reads to open a chat.
CHAT_PARAM = "ahentic_session"  # main.js reads it


def page_origin(session: Session | None) -> str:
    """The scheme and host of the page the chat was last used on (its page context, sent by
    the sidebar with each message), "" when it has none: the request's own address."""
    url = ((session.page_context or {}) if session is not None else {}).get("url")
    parts = urlsplit(url) if isinstance(url, str) else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
        return ""
    return f"{parts.scheme}://{parts.netloc}/"


def site_url(session: Session | None = None) -> str:
    """The absolute URL of a page with the sidebar: ``SITE_URL``, else the scheme and host the
    chat was used on (``page_origin``), else https:// and the current site's domain
    (django.contrib.sites), else "/" (a relative link: check W013)."""
    base = str(ahentic_settings.SITE_URL or "") or page_origin(session)
    if base:
        return base
    if apps.is_installed("django.contrib.sites"):
        from django.contrib.sites.models import Site

        try:
            return f"https://{Site.objects.get_current().domain}/"
        except (ImproperlyConfigured, Site.DoesNotExist):
            pass
    return "/"


def chat_url(session_id, session: Session | None = None) -> str:
    """The link that opens the chat in the sidebar (on ``site_url(session)``)."""
    base = site_url(session)
    separator = "&" if "?" in base else "?"
    return f"{base}{separator}{urlencode({CHAT_PARAM: str(session_id)})}"
