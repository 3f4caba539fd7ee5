"""The addresses every caller of the outbound-address policy is tested with
(``orchestrator_app/outbound.py``), and two seams for those tests: a resolver (``Dns``) and a
record of the connections made (``Connections``).

``REFUSED``: hosts a request must never reach unless a setting allows non-public addresses,
each with a word of the refusal it gets. ``PUBLIC``: hosts that are allowed. Host names here
resolve only through ``Dns``.
"""

import socket

import anyio

PRIVATE_NAME = "intranet.example.test"
MIXED_NAME = "mixed.example.test"  # one public and one private address: refused
PUBLIC_NAME = "public.example.test"
PUBLIC_ADDRESS = "93.184.215.14"

NAMES = {
    PRIVATE_NAME: ["10.0.0.5"],
    MIXED_NAME: [PUBLIC_ADDRESS, "127.0.0.1"],
    PUBLIC_NAME: [PUBLIC_ADDRESS],
}

# (host, a word of why it is refused)
REFUSED = [
    ("127.0.0.1", "loopback"),
    ("10.0.0.5", "private"),
    ("172.16.0.1", "private"),
    ("192.168.1.1", "private"),
    ("169.254.169.254", "link-local"),
    ("100.64.0.1", "shared"),
    ("0.0.0.0", "unspecified"),
    ("224.0.0.1", "multicast"),
    ("::1", "loopback"),
    ("fe80::1", "link-local"),
    ("fc00::1", "unique-local"),
    ("fd00::1", "unique-local"),
    ("::ffff:127.0.0.1", "embeds 127.0.0.1, a loopback"),
    ("::127.0.0.1", "IPv4-compatible"),
    ("64:ff9b::7f00:1", "embeds 127.0.0.1, a loopback"),
    ("64:ff9b:1::a00:5", "NAT64"),
    ("2002:7f00:1::1", "embeds 127.0.0.1, a loopback"),
    ("2002:a00:5::1", "embeds 10.0.0.5, a private"),
    ("2001:0:4136:e378:8000:63bf:3fff:fdd2", "Teredo"),
    (PRIVATE_NAME, "resolves to 10.0.0.5, a private"),
    (MIXED_NAME, "resolves to 127.0.0.1, a loopback"),
    ("localhost", "names this machine"),
]

# (host, the address connected to)
PUBLIC = [
    (PUBLIC_ADDRESS, PUBLIC_ADDRESS),
    ("2606:2800:21f:cb07:6820:80da:af6b:8b2c", "2606:2800:21f:cb07:6820:80da:af6b:8b2c"),
    (PUBLIC_NAME, PUBLIC_ADDRESS),
]


def in_url(host: str) -> str:
    """``host`` as a URL writes it (IPv6 in brackets)."""
    return f"[{host}]" if ":" in host else host


class Dns:
    """``socket.getaddrinfo`` for the test names: a name answers its lists of addresses in
    turn (the last one again when they run out); other names resolve as usual. ``asked``: the
    names looked up."""

    def __init__(self, monkeypatch, names: dict[str, list] | None = None):
        self.answers = {name: [addresses] for name, addresses in NAMES.items()}
        for name, answers in (names or {}).items():
            self.answers[name] = answers
        self.asked: list[str] = []
        real = socket.getaddrinfo

        def getaddrinfo(host, port, *args, **kwargs):
            name = host.decode() if isinstance(host, bytes) else host
            if name not in self.answers:
                return real(host, port, *args, **kwargs)
            self.asked.append(name)
            queue = self.answers[name]
            addresses = queue.pop(0) if len(queue) > 1 else queue[0]
            return [
                (
                    socket.AF_INET6 if ":" in a else socket.AF_INET,
                    socket.SOCK_STREAM,
                    socket.IPPROTO_TCP,
                    "",
                    (a, int(port or 0), 0, 0) if ":" in a else (a, int(port or 0)),
                )
                for a in addresses
            ]

        monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


class Connections:
    """Every TCP connection the code under test opens (``socket.create_connection`` for
    ``http.client`` and httpx2's sync transport, ``anyio.connect_tcp`` for its async one),
    as (address, port). Connections to ``127.0.0.1`` go through (the tests' own servers);
    any other is refused at once, so nothing leaves the machine."""

    def __init__(self, monkeypatch):
        self.made: list[tuple[str, int]] = []
        real_sync, real_async = socket.create_connection, anyio.connect_tcp

        def create_connection(address, *args, **kwargs):
            host, port = address[0], int(address[1])
            self.made.append((host, port))
            if host != "127.0.0.1":
                raise ConnectionRefusedError(f"test: no connection to {host}")
            return real_sync(address, *args, **kwargs)

        async def connect_tcp(remote_host, remote_port, *args, **kwargs):
            host = str(remote_host)
            self.made.append((host, int(remote_port)))
            if host != "127.0.0.1":
                raise ConnectionRefusedError(f"test: no connection to {host}")
            return await real_async(remote_host, remote_port, *args, **kwargs)

        monkeypatch.setattr(socket, "create_connection", create_connection)
        monkeypatch.setattr(anyio, "connect_tcp", connect_tcp)

    def addresses(self) -> list[str]:
        return [address for address, _ in self.made]
