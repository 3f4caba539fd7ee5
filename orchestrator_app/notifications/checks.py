"""The mails' system checks."""

from __future__ import annotations

from django.apps import apps
from django.conf import settings
from django.core.checks import Error, Warning, register

from sessions_app.conf import ahentic_settings

from ..checks import at_least

# Cache backends whose entries one process cannot see from another.
PROCESS_LOCAL_CACHES = (
    "django.core.cache.backends.locmem.LocMemCache",
    "django.core.cache.backends.dummy.DummyCache",
)


@register()
def check_notifications(app_configs=None, **kwargs):
    """E030: NOTIFY_APPROVAL_AFTER_S is not a whole number of seconds >= 0. E031: SITE_URL is
    not an absolute http(s) URL. W013: approval mails are on but their links can only be
    relative (no SITE_URL and no django.contrib.sites)."""
    from urllib.parse import urlsplit

    errors = []
    delay = ahentic_settings.NOTIFY_APPROVAL_AFTER_S
    if not at_least(delay, 0):
        errors.append(
            Error(
                f"AHENTIC['NOTIFY_APPROVAL_AFTER_S'] must be a whole number of seconds >= 0, "
                f"not {delay!r}.",
                hint="300 mails after five minutes; 0 turns approval mails off.",
                id="ahentic.E030",
            )
        )
        delay = 0
    site_url = ahentic_settings.SITE_URL
    if site_url:
        parts = urlsplit(str(site_url)) if isinstance(site_url, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
            errors.append(
                Error(
                    f"AHENTIC['SITE_URL'] must be an absolute http(s) URL, not {site_url!r}.",
                    hint='The address of a page that shows the sidebar, e.g. "https://example.com/".',
                    id="ahentic.E031",
                )
            )
    elif delay and not apps.is_installed("django.contrib.sites"):
        errors.append(
            Warning(
                "Approval mails are on but their links to the chat are relative: AHENTIC has "
                "no SITE_URL and django.contrib.sites is not installed.",
                hint='Set AHENTIC["SITE_URL"] to the address of a page that shows the sidebar.',
                id="ahentic.W013",
            )
        )
    return errors


@register(deploy=True)
def check_notification_cache(app_configs=None, **kwargs):
    """W014 (``check --deploy``): approval mails are on and the default cache is per process,
    so the worker that decides to mail never sees the sidebar's polls (notifications/services.py)."""
    delay = ahentic_settings.NOTIFY_APPROVAL_AFTER_S
    backend = (getattr(settings, "CACHES", {}).get("default") or {}).get(
        "BACKEND", PROCESS_LOCAL_CACHES[0]
    )
    if not delay or backend not in PROCESS_LOCAL_CACHES:
        return []
    return [
        Warning(
            f"Approval mails are on, and the default cache ({backend.rsplit('.', 1)[-1]}) is "
            "not shared between processes: the worker never sees that the user watches the "
            "chat, so every approval waiting NOTIFY_APPROVAL_AFTER_S is mailed.",
            hint="Use a shared cache (Redis, Memcached, the database cache), or set "
            'AHENTIC["NOTIFY_APPROVAL_AFTER_S"] to 0.',
            id="ahentic.W014",
        )
    ]
