"""One signed POST to a webhook URL, on ``http.client``, under the outbound-address policy
(``orchestrator_app/outbound.py``).

Why ``http.client`` and not a client library: it follows no redirects and reads no proxy
settings by itself, and its connection is pinned to the address the policy checked. A URL
whose host is or resolves to a private, loopback, link-local or otherwise non-public address
is refused unless ``WEBHOOK_ALLOW_PRIVATE`` or ``OUTBOUND_ALLOW_PRIVATE`` is on (or the address
is inside ``OUTBOUND_ALLOWED_NETWORKS``): webhook URLs are typed by staff, but a request from
the server into its own network (a metadata service, an internal admin) is the classic
server-side request forgery.
"""

from __future__ import annotations

import http.client
from dataclasses import dataclass
from urllib.parse import urlsplit

from .. import outbound

USER_AGENT = "django-ahentic-webhooks"
# The part of a failed answer's body kept as its error text.
BODY_EXCERPT = 200
# The caller's own setting that also allows non-public addresses.
SETTING = "WEBHOOK_ALLOW_PRIVATE"


class DeliveryError(Exception):
    """An attempt that got no answer. ``permanent``: trying again cannot help (a refused
    scheme or address), so the delivery gives up at once."""

    def __init__(self, message: str, *, permanent: bool = False):
        super().__init__(message)
        self.message = message
        self.permanent = permanent


@dataclass(frozen=True)
class Answer:
    status: int
    body: str  # the start of the body, for the delivery log


def rule(allow_private: bool) -> outbound.Policy:
    """The webhooks' policy: ``allow_private`` is ``WEBHOOK_ALLOW_PRIVATE``."""
    return outbound.policy(SETTING, allowed=allow_private)


def url_problem(url: str, *, allow_private: bool) -> str | None:
    """Why ``url`` cannot be a webhook URL without resolving its host (the admin form's
    check): a scheme other than http(s), no host, or a host that is a refused address literal
    or ``localhost``. ``None`` when it may be used."""
    return outbound.url_problem(url, rule(allow_private))


def post(
    url: str, body: bytes, headers: dict[str, str], *, timeout: float, allow_private: bool
) -> Answer:
    """POST ``body`` to ``url``; the answer, whatever its status (a redirect is an answer
    like any other: never followed). Raises ``DeliveryError`` when there is no answer."""
    try:
        target = outbound.check(url, rule(allow_private))
    except outbound.OutboundError as exc:
        raise DeliveryError(exc.message, permanent=exc.permanent) from None
    parts = urlsplit(url)
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    connection = outbound.connection(target, timeout=timeout)
    try:
        connection.request(
            "POST",
            path,
            body=body,
            headers={
                **headers,
                "Content-Type": "application/json",
                "User-Agent": USER_AGENT,
            },
        )
        response = connection.getresponse()
        text = response.read(BODY_EXCERPT).decode("utf-8", "replace")
        return Answer(status=response.status, body=text)
    except TimeoutError as exc:
        raise DeliveryError(f"No answer within {timeout:g} s.") from exc
    except (OSError, http.client.HTTPException) as exc:
        raise DeliveryError(f"{type(exc).__name__}: {exc}") from exc
    finally:
        connection.close()
