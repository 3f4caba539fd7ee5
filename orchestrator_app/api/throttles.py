"""Per-user rates of the routes that spend money or create rows.

Every route that can start or resume a model run (POST messages, POST actions, POST continue),
and the upload route (POST attachments), count against one shared scope, ``ahentic_runs``
(``AHENTIC["THROTTLE_MESSAGES"]``, SPEC section 1): the cache key is the scope plus the user,
so the routes share one budget. Session
creation has its own rate (``THROTTLE_SESSIONS``). ``None`` turns a rate off. A throttled request answers 429 ``ahentic_throttled`` with ``Retry-After``.
"""

from __future__ import annotations

from rest_framework.throttling import UserRateThrottle

from sessions_app.conf import ahentic_settings


class AhenticRateThrottle(UserRateThrottle):
    setting = ""

    def get_rate(self):
        return getattr(ahentic_settings, self.setting)


class RunStartThrottle(AhenticRateThrottle):
    scope = "ahentic_runs"
    setting = "THROTTLE_MESSAGES"


class SessionCreateThrottle(AhenticRateThrottle):
    scope = "ahentic_sessions"
    setting = "THROTTLE_SESSIONS"


def throttles_for(*classes: type[AhenticRateThrottle]) -> list[AhenticRateThrottle]:
    """Instances of the throttles whose rate is set (a rate of None is off)."""
    return [cls() for cls in classes if getattr(ahentic_settings, cls.setting)]


class OAuthRegistrationThrottle(AhenticRateThrottle):
    """Client registrations at the MCP endpoint's OAuth server (orchestrator_app/oauth/): an
    anonymous route, so the key is the client's address."""

    scope = "ahentic_oauth_registrations"
    setting = "THROTTLE_OAUTH_REGISTRATIONS"
