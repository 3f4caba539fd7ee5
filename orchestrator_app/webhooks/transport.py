"""One signed POST to a webhook URL, on ``http.client``.

Why ``http.client`` and not a client library: it follows no redirects and reads no proxy
settings by itself, and its connection can be pinned to the address that was checked. A URL
whose host resolves to a private, loopback, link-local or otherwise non-public address is
refused unless ``WEBHOOK_ALLOW_PRIVATE`` is on: webhook URLs are typed by staff, but a request
from the server into its own network (a metadata service, an internal admin) is the classic
server-side request forgery. The check runs on the resolved addresses and the connection goes
to the address checked, so a name that resolves differently a second time (DNS rebinding) gains
nothing.
"""

from __future__ import annotations

import http.client
import ipaddress
import socket
import ssl
from dataclasses import dataclass
from urllib.parse import urlsplit

SCHEMES = ("http", "https")
USER_AGENT = "django-ahentic-webhooks"
# The part of a failed answer's body kept as its error text.
BODY_EXCERPT = 200


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


def url_problem(url: str, *, allow_private: bool) -> str | None:
    """Why ``url`` cannot be a webhook URL without resolving its host (the admin form's
    check): a scheme other than http(s), no host, or, unless ``allow_private``, a host that is
    a non-public address literal or ``localhost``. ``None`` when it may be used."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (raises ValueError on a bad port)
    except ValueError:
        return "The URL is not valid."
    if parts.scheme.lower() not in SCHEMES:
        return "Only http and https URLs are allowed."
    host = (parts.hostname or "").lower()
    if not host:
        return "The URL has no host."
    if allow_private:
        return None
    if host == "localhost" or host.endswith(".localhost"):
        return "The URL names this machine; set WEBHOOK_ALLOW_PRIVATE to allow it."
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return None  # a name: its addresses are checked when sending
    if not is_public(address):
        return "The URL is a private address; set WEBHOOK_ALLOW_PRIVATE to allow it."
    return None


def is_public(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    return address.is_global and not address.is_multicast


class PinnedConnection(http.client.HTTPConnection):
    """An HTTP(S) connection to ``host`` (its Host header and TLS name) made to ``address``,
    the address that was checked."""

    def __init__(self, host: str, port: int, *, address: str, timeout: float, tls: bool):
        super().__init__(host, port, timeout=timeout)
        self.address = address
        self.tls_context = ssl.create_default_context() if tls else None

    def connect(self) -> None:
        sock = socket.create_connection((self.address, self.port), self.timeout)
        if self.tls_context is not None:
            sock = self.tls_context.wrap_socket(sock, server_hostname=self.host)
        self.sock = sock


def resolve(host: str, port: int, *, allow_private: bool) -> str:
    """The address to connect to for ``host``; refuses non-public ones unless allowed."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise DeliveryError(f"Could not resolve {host}: {exc}") from exc
    addresses = [info[4][0] for info in infos]
    if not allow_private:
        addresses = [a for a in addresses if is_public(ipaddress.ip_address(a.split("%")[0]))]
        if not addresses:
            raise DeliveryError(
                f"{host} resolves to a private address (WEBHOOK_ALLOW_PRIVATE is off).",
                permanent=True,
            )
    return addresses[0]


def post(
    url: str, body: bytes, headers: dict[str, str], *, timeout: float, allow_private: bool
) -> Answer:
    """POST ``body`` to ``url``; the answer, whatever its status (a redirect is an answer
    like any other: never followed). Raises ``DeliveryError`` when there is no answer."""
    problem = url_problem(url, allow_private=allow_private)
    if problem:
        raise DeliveryError(problem, permanent=True)
    parts = urlsplit(url)
    tls = parts.scheme.lower() == "https"
    port = parts.port or (443 if tls else 80)
    host = parts.hostname or ""
    address = resolve(host, port, allow_private=allow_private)
    target = parts.path or "/"
    if parts.query:
        target += "?" + parts.query
    connection = PinnedConnection(host, port, address=address, timeout=timeout, tls=tls)
    try:
        connection.request(
            "POST",
            target,
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
