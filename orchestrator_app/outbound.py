"""Outbound requests: the one address policy for every request the site makes on someone's
behalf (webhook deliveries, the MCP client, MCP OAuth discovery, registration and token
requests, the client ID metadata documents of the site's own OAuth server: ``oauth/services.py``). docs/reference/settings.md, "Outbound requests", states it for users.

The policy, for a URL:

1. The scheme is http or https (each caller may narrow it: the MCP client wants https).
2. The host is resolved (``socket.getaddrinfo``). An address is refused when it is not a
   public unicast address: unspecified, loopback, link-local, private, unique-local
   (``fc00::/7``), shared (``100.64.0.0/10``), multicast, reserved or otherwise not global.
   IPv6 forms that carry an IPv4 address are judged by that address, whatever
   ``ipaddress.is_global`` says of the IPv6 form (on Python 3.11 it calls
   ``::127.0.0.1`` and ``64:ff9b::7f00:1`` global): IPv4-mapped (``::ffff:a.b.c.d``),
   NAT64 (``64:ff9b::/96``) and 6to4 (``2002::/16``); the deprecated IPv4-compatible form
   (``::a.b.c.d``), local-use NAT64 (``64:ff9b:1::/48``) and Teredo (``2001::/32``) are
   refused outright. A name is refused when any of its addresses is (a name that resolves to
   both a public and a private address is not half trusted). ``localhost`` and
   ``*.localhost`` are refused by name.
3. Non-public addresses are allowed when ``OUTBOUND_ALLOW_PRIVATE`` is on (every caller), when
   the caller's own older setting is on (``WEBHOOK_ALLOW_PRIVATE`` for webhooks,
   ``MCP_ALLOW_INSECURE_LOCAL`` for the MCP client and its OAuth requests), or for one
   address inside ``OUTBOUND_ALLOWED_NETWORKS`` (CIDR strings).
4. The connection goes to the address that was checked, never to a second resolution of the
   name (DNS rebinding gains nothing), with the name kept as the ``Host`` header and as the
   TLS server name (SNI and certificate check).
5. Redirects are not followed by the callers here; a request that follows one anyway goes
   through the same check for its new host (``PinnedTransport`` checks every request).
6. Environment proxies (``HTTPS_PROXY``...) are not used: a proxy would resolve the name
   itself and the check would mean nothing.

Two ways to connect, both pinned: ``PinnedConnection`` (``http.client``, the webhooks) and
``PinnedTransport`` / ``AsyncPinnedTransport`` (httpx2 transports, the MCP SDK and OAuth),
which send each request to the checked address with the ``sni_hostname`` request extension.
``client`` / ``async_client`` build httpx2 clients that use them.

Refusals are ``OutboundRefused`` (code ``ahentic_outbound_refused``, the message names the
address, why it is refused and the setting that allows it); a name that does not resolve is
``OutboundError`` (code ``ahentic_outbound_unresolved``).
"""

from __future__ import annotations

import http.client
import ipaddress
import socket
import ssl
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import anyio
import httpx2

from sessions_app.conf import ahentic_settings

REFUSED = "ahentic_outbound_refused"
UNRESOLVED = "ahentic_outbound_unresolved"
SCHEMES = ("http", "https")
DEFAULT_PORTS = {"http": 80, "https": 443}
LOCAL_NAMES = ("localhost",)

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

NAT64 = ipaddress.ip_network("64:ff9b::/96")
LOCAL_NAT64 = ipaddress.ip_network("64:ff9b:1::/48")
TEREDO = ipaddress.ip_network("2001::/32")
IPV4_COMPATIBLE = ipaddress.ip_network("::/96")
UNIQUE_LOCAL = ipaddress.ip_network("fc00::/7")
SHARED = ipaddress.ip_network("100.64.0.0/10")


class OutboundError(Exception):
    """A request the policy did not let out. ``permanent``: trying again cannot help."""

    def __init__(self, code: str, message: str, *, permanent: bool):
        super().__init__(message)
        self.code = code
        self.message = message
        self.permanent = permanent


class OutboundRefused(OutboundError):
    def __init__(self, message: str):
        super().__init__(REFUSED, message, permanent=True)


@dataclass(frozen=True)
class Policy:
    """Who may be reached. ``allow_private``: every address (a setting said so);
    ``setting``: the caller's own setting, named in refusals next to
    ``OUTBOUND_ALLOW_PRIVATE``."""

    allow_private: bool = False
    setting: str = ""
    networks: tuple = field(default_factory=tuple)

    def hint(self) -> str:
        names = "OUTBOUND_ALLOW_PRIVATE"
        if self.setting:
            names += f" (or {self.setting})"
        return f"set {names} or list the network in OUTBOUND_ALLOWED_NETWORKS to allow it"


def allowed_networks() -> tuple:
    """``OUTBOUND_ALLOWED_NETWORKS`` as networks; entries that do not parse are skipped (the
    system check ``ahentic.E043`` reports them)."""
    found = []
    for entry in ahentic_settings.OUTBOUND_ALLOWED_NETWORKS or ():
        try:
            found.append(ipaddress.ip_network(str(entry), strict=False))
        except ValueError:
            continue
    return tuple(found)


def policy(setting: str = "", *, allowed: bool | None = None) -> Policy:
    """The policy of a caller whose own older setting (``WEBHOOK_ALLOW_PRIVATE``,
    ``MCP_ALLOW_INSECURE_LOCAL``) also allows non-public addresses; ``allowed``: that
    setting's value when the caller has it already (else it is read)."""
    if allowed is None:
        allowed = bool(setting and getattr(ahentic_settings, setting))
    allow = bool(ahentic_settings.OUTBOUND_ALLOW_PRIVATE) or bool(allowed)
    return Policy(allow_private=allow, setting=setting, networks=allowed_networks())


def _kind(address: IPAddress) -> str | None:
    """What makes a plain address non-public, or None for a public one."""
    if address.is_unspecified:
        return "an unspecified address"
    if address.is_loopback:
        return "a loopback address"
    if address.is_link_local:
        return "a link-local address"
    if address.is_multicast:
        return "a multicast address"
    if address.version == 6 and address in UNIQUE_LOCAL:
        return "a unique-local address"
    if address.version == 4 and address in SHARED:
        return "a shared (carrier-grade NAT) address"
    if address.is_private:
        return "a private address"
    if address.is_reserved:
        return "a reserved address"
    if not address.is_global:
        return "not a public address"
    return None


def refusal(address: IPAddress) -> str | None:
    """Why ``address`` is not a public address ("a loopback address", "embeds 127.0.0.1, a
    loopback address" ...), or None when it is one."""
    if isinstance(address, ipaddress.IPv6Address):
        embedded = None
        if address.ipv4_mapped is not None:
            embedded = address.ipv4_mapped
        elif address in NAT64:
            embedded = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
        elif address.sixtofour is not None:
            embedded = address.sixtofour
        elif address in LOCAL_NAT64:
            return "a local-use NAT64 address"
        elif address in TEREDO:
            return "a Teredo address"
        elif address in IPV4_COMPATIBLE and int(address) > 1:
            return (
                f"a deprecated IPv4-compatible address "
                f"(embeds {ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)})"
            )
        if embedded is not None:
            kind = _kind(embedded)
            return f"embeds {embedded}, {kind}" if kind else None
    return _kind(address)


def parse_address(text: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return None


def address_problem(address: IPAddress, rule: Policy) -> str | None:
    """``address`` and why ``rule`` refuses it ("10.0.0.5, a private address"); None when
    it is allowed."""
    if rule.allow_private:
        return None
    why = refusal(address)
    if why is None or any(address in network for network in rule.networks):
        return None
    return f"{address}, which {why}" if why.startswith("embeds") else f"{address}, {why}"


def is_local_name(host: str) -> bool:
    host = host.lower().rstrip(".")
    return host in LOCAL_NAMES or host.endswith(".localhost")


def host_problem(host: str, rule: Policy) -> str | None:
    """The check that needs no resolution (forms): ``localhost`` names and non-public address
    literals. None for anything else (a name is checked when it is resolved)."""
    if rule.allow_private:
        return None
    if is_local_name(host):
        return f"The URL names this machine ({host}); {rule.hint()}."
    address = parse_address(host)
    problem = address_problem(address, rule) if address is not None else None
    return f"The URL's host is {problem}; {rule.hint()}." if problem else None


@dataclass(frozen=True)
class Target:
    """A checked URL: connect to ``address``, say ``host`` (Host header, TLS name)."""

    scheme: str
    host: str
    port: int
    address: str


def resolve(host: str, port: int, rule: Policy) -> str:
    """The address to connect to for ``host``: the first one it resolves to, after every one
    passed ``rule``. ``OutboundRefused`` / ``OutboundError``."""
    if not rule.allow_private and is_local_name(host):
        raise OutboundRefused(f"Refused: {host} names this machine; {rule.hint()}.")
    if parse_address(host) is not None:
        addresses = [host]
    else:
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (socket.gaierror, UnicodeError) as exc:
            raise OutboundError(
                UNRESOLVED, f"Could not resolve {host}: {exc}", permanent=False
            ) from None
        addresses = [info[4][0] for info in infos]
    if not addresses:
        raise OutboundError(UNRESOLVED, f"Could not resolve {host}.", permanent=False)
    for text in addresses:
        address = parse_address(text)
        problem = (
            f"{text} is not an IP address" if address is None else address_problem(address, rule)
        )
        if problem:
            shown = problem if host == text else f"{host} resolves to {problem}"
            raise OutboundRefused(f"Refused: {shown}; {rule.hint()}.")
    return addresses[0]


def url_problem(url: str, rule: Policy) -> str | None:
    """What is wrong with ``url`` before any resolution (the admin forms' check): not
    http(s), no host, a bad port, or a host ``rule`` refuses by its name or literal."""
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
    return host_problem(host, rule)


def check(url: str, rule: Policy) -> Target:
    """Check ``url`` and resolve its host under ``rule``: where to connect."""
    problem = url_problem(url, rule)
    if problem:
        raise OutboundRefused(problem)
    parts = urlsplit(url)
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    port = parts.port or DEFAULT_PORTS[scheme]
    return Target(scheme=scheme, host=host, port=port, address=resolve(host, port, rule))


# --- http.client ----------------------------------------------------------------------------


class PinnedConnection(http.client.HTTPConnection):
    """An HTTP(S) connection to ``host`` (its Host header and TLS name) made to ``address``,
    the address that was checked. Follows no redirects and reads no proxy settings."""

    def __init__(self, host: str, port: int, *, address: str, timeout: float, tls: bool):
        super().__init__(host, port, timeout=timeout)
        self.address = address
        self.tls_context = ssl.create_default_context() if tls else None

    def connect(self) -> None:
        sock = socket.create_connection((self.address, self.port), self.timeout)
        if self.tls_context is not None:
            sock = self.tls_context.wrap_socket(sock, server_hostname=self.host)
        self.sock = sock


def connection(target: Target, *, timeout: float) -> PinnedConnection:
    return PinnedConnection(
        target.host,
        target.port,
        address=target.address,
        timeout=timeout,
        tls=target.scheme == "https",
    )


# --- httpx2 ---------------------------------------------------------------------------------


class _Pins:
    """The checked address of each (scheme, host, port) one client reached, kept for the
    client's life: every request to a name goes to the address checked the first time."""

    def __init__(self, rule: Policy):
        self.rule = rule
        self.addresses: dict[tuple[str, str, int], str] = {}

    @staticmethod
    def key(url: httpx2.URL) -> tuple[str, str, int]:
        """(scheme, host in its ASCII form, port)."""
        scheme = url.scheme.lower()
        if scheme not in SCHEMES:
            raise OutboundRefused("Only http and https URLs are allowed.")
        host = url.raw_host.decode("ascii").lower()
        if not host:
            raise OutboundRefused("The URL has no host.")
        return scheme, host, url.port or DEFAULT_PORTS[scheme]

    def known(self, request: httpx2.Request) -> tuple[tuple[str, str, int], str | None]:
        key = self.key(request.url)
        return key, self.addresses.get(key)

    def pin(self, key: tuple[str, str, int], address: str) -> str:
        return self.addresses.setdefault(key, address)

    @staticmethod
    def pinned(request: httpx2.Request, address: str) -> httpx2.Request:
        """``request`` sent to ``address``: same headers (``Host`` included), same body, the
        name as TLS server name (httpcore's documented ``sni_hostname`` extension)."""
        host = request.url.raw_host.decode("ascii")
        return httpx2.Request(
            request.method,
            request.url.copy_with(host=address),
            headers=request.headers,
            stream=request.stream,
            extensions={**request.extensions, "sni_hostname": host},
        )


class PinnedTransport(httpx2.BaseTransport):
    """An httpx2 transport that checks each request's host under ``rule`` and connects to
    the checked address. One inner transport per name, so a TLS connection made for one name
    is never reused for another name on the same address."""

    def __init__(self, rule: Policy, **transport_options):
        self.pins = _Pins(rule)
        self.options = transport_options
        self.inner: dict[tuple[str, str, int], httpx2.HTTPTransport] = {}

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        key, address = self.pins.known(request)
        if address is None:
            address = self.pins.pin(key, resolve(key[1], key[2], self.pins.rule))
        if key not in self.inner:
            self.inner[key] = httpx2.HTTPTransport(**self.options)
        return self.inner[key].handle_request(self.pins.pinned(request, address))

    def close(self) -> None:
        for transport in self.inner.values():
            transport.close()


class AsyncPinnedTransport(httpx2.AsyncBaseTransport):
    """``PinnedTransport`` for ``httpx2.AsyncClient`` (resolution runs in a thread)."""

    def __init__(self, rule: Policy, **transport_options):
        self.pins = _Pins(rule)
        self.options = transport_options
        self.inner: dict[tuple[str, str, int], httpx2.AsyncHTTPTransport] = {}

    def pin_url(self, url: str) -> str:
        """Check ``url``'s host now, before any request, and keep its address for the
        requests; the address."""
        try:
            key = self.pins.key(httpx2.URL(url))
        except httpx2.InvalidURL:
            raise OutboundRefused("The URL is not valid.") from None
        return self.pins.pin(key, resolve(key[1], key[2], self.pins.rule))

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        key, address = self.pins.known(request)
        if address is None:
            found = await anyio.to_thread.run_sync(
                resolve, key[1], key[2], self.pins.rule, abandon_on_cancel=True
            )
            address = self.pins.pin(key, found)
        if key not in self.inner:
            self.inner[key] = httpx2.AsyncHTTPTransport(**self.options)
        return await self.inner[key].handle_async_request(self.pins.pinned(request, address))

    async def aclose(self) -> None:
        for transport in self.inner.values():
            await transport.aclose()


def client(rule: Policy, **options) -> httpx2.Client:
    """An httpx2 client under ``rule``: pinned, no redirects, no environment proxies."""
    return httpx2.Client(
        transport=PinnedTransport(rule), follow_redirects=False, trust_env=False, **options
    )


def async_client(transport: AsyncPinnedTransport, **options) -> httpx2.AsyncClient:
    """An httpx2 async client on ``transport``: no redirects, no environment proxies."""
    return httpx2.AsyncClient(
        transport=transport, follow_redirects=False, trust_env=False, **options
    )
