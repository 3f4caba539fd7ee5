"""One outbound-address policy for every request the site makes on someone's behalf: webhook
deliveries, the MCP client, and MCP OAuth discovery, registration and token requests, each
tested with the same table of addresses (``tests/support/outbound_addresses.py``). No connection
leaves the machine: names resolve through a test resolver and connections to anything but
127.0.0.1 are recorded and refused."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from cryptography.fernet import Fernet
from django.core.checks import run_checks

from orchestrator_app import outbound, signals
from orchestrator_app.mcp import client_oauth as mcp_oauth
from orchestrator_app.mcp.client import McpFailure
from orchestrator_app.models import McpServer, WebhookDelivery, WebhookEndpoint
from orchestrator_app.webhooks.delivery import endpoint_create
from tests.support.api import API
from tests.support.outbound_addresses import (
    PRIVATE_NAME,
    PUBLIC,
    PUBLIC_ADDRESS,
    REFUSED,
    Connections,
    Dns,
    in_url,
)
from tests.support.paths import ROOT

KEY = Fernet.generate_key().decode()
HOOK_NAME = "hooks.example.test"


@pytest.fixture
def dns(monkeypatch):
    return Dns(monkeypatch)


@pytest.fixture
def connections(monkeypatch):
    return Connections(monkeypatch)


@pytest.fixture
def ahentic(settings):
    """Change AHENTIC keys for one test: ``ahentic(WEBHOOK_ALLOW_PRIVATE=False)``."""

    def change(**values):
        settings.AHENTIC = {**settings.AHENTIC, **values}

    return change


class Receiver:
    """An HTTP server on 127.0.0.1 that records each request's path and Host header and
    answers with the next of ``answers`` ((status, headers); 204 when empty)."""

    def __init__(self):
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def handle_one(self):
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                receiver.requests.append({"path": self.path, "host": self.headers["Host"]})
                status, headers = receiver.answers.pop(0) if receiver.answers else (204, {})
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_GET = do_POST = handle_one

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.requests: list[dict] = []
        self.answers: list = []
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver():
    server = Receiver()
    yield server
    server.stop()


# --- webhooks -------------------------------------------------------------------------------


@pytest.fixture
def deliver(django_capture_on_commit_callbacks, session):
    """Send ``run_finished`` as the app does; the delivery task runs (sync mode). The
    delivery row."""

    def send(url: str) -> WebhookDelivery:
        endpoint_create(name="Hooks", url=url, events=["run.finished"])
        with django_capture_on_commit_callbacks(execute=True):
            signals.send_after_commit(
                signals.run_finished, session, run=1, outcome="idle", error_code=""
            )
        return WebhookDelivery.objects.get()

    return send


@pytest.mark.parametrize(("host", "why"), REFUSED)
def test_a_webhook_to_a_refused_address_is_never_connected_to(
    host, why, deliver, ahentic, dns, connections
):
    ahentic(WEBHOOK_ALLOW_PRIVATE=False)

    delivery = deliver(f"http://{in_url(host)}:8080/hooks")

    assert connections.made == []
    assert (delivery.status, delivery.attempts) == ("gave_up", 1)  # permanent: no retries
    assert why in delivery.last_error
    assert "OUTBOUND_ALLOW_PRIVATE" in delivery.last_error
    assert "WEBHOOK_ALLOW_PRIVATE" in delivery.last_error


@pytest.mark.parametrize(("host", "address"), PUBLIC)
def test_a_webhook_to_a_public_address_is_sent_to_the_checked_address(
    host, address, deliver, ahentic, dns, connections
):
    ahentic(WEBHOOK_ALLOW_PRIVATE=False)

    delivery = deliver(f"http://{in_url(host)}:8080/hooks")

    assert connections.made == [(address, 8080)]
    assert (delivery.status, delivery.attempts) == ("failed", 1)  # retried later
    assert "ConnectionRefusedError" in delivery.last_error  # the test's network said no


def test_a_webhook_name_is_resolved_once_and_the_delivery_goes_to_that_address(
    deliver, ahentic, monkeypatch, connections, receiver
):
    # DNS rebinding: the name answers 127.0.0.1 first and 10.255.0.1 after that.
    dns = Dns(monkeypatch, {HOOK_NAME: [["127.0.0.1"], ["10.255.0.1"]]})
    ahentic(WEBHOOK_ALLOW_PRIVATE=False, OUTBOUND_ALLOWED_NETWORKS=["127.0.0.0/8"])

    delivery = deliver(f"http://{HOOK_NAME}:{receiver.port}/hooks")

    assert delivery.status == "delivered", delivery.last_error
    assert dns.asked == [HOOK_NAME]
    assert connections.made == [("127.0.0.1", receiver.port)]
    assert receiver.requests == [{"path": "/hooks", "host": f"{HOOK_NAME}:{receiver.port}"}]


def test_outbound_allow_private_lets_a_webhook_reach_a_local_address(
    deliver, ahentic, dns, connections, receiver
):
    ahentic(WEBHOOK_ALLOW_PRIVATE=False, OUTBOUND_ALLOW_PRIVATE=True)

    delivery = deliver(f"http://127.0.0.1:{receiver.port}/hooks")

    assert delivery.status == "delivered", delivery.last_error
    assert [r["path"] for r in receiver.requests] == ["/hooks"]


def test_a_webhook_redirect_to_a_refused_address_is_not_followed(
    deliver, ahentic, dns, connections, receiver
):
    ahentic(WEBHOOK_ALLOW_PRIVATE=False, OUTBOUND_ALLOWED_NETWORKS=["127.0.0.1/32"])
    receiver.answers.append((302, {"Location": "http://169.254.169.254/latest/meta-data/"}))

    delivery = deliver(f"http://127.0.0.1:{receiver.port}/hooks")

    assert connections.made == [("127.0.0.1", receiver.port)]
    assert (delivery.status, delivery.last_status_code) == ("failed", 302)
    assert "redirects are not followed" in delivery.last_error


@pytest.mark.parametrize(
    "url", ["http://[::127.0.0.1]/in", "http://[64:ff9b::7f00:1]/in", "http://100.64.0.1/in"]
)
def test_the_webhook_form_refuses_addresses_that_embed_or_hide_a_local_one(
    admin_client, ahentic, url
):
    ahentic(WEBHOOK_ALLOW_PRIVATE=False)
    form = {"name": "R", "url": url, "events": ["run.finished"], "active": "on"}

    response = admin_client.post("/admin/orchestrator_app/webhookendpoint/add/", form)

    assert "OUTBOUND_ALLOW_PRIVATE" in str(response.context["adminform"].form.errors["url"])
    assert not WebhookEndpoint.objects.exists()


# --- the MCP client -------------------------------------------------------------------------


def refresh_tools(admin_client, url: str) -> str:
    """Register a server at ``url`` and press "Refresh tools"; the error it keeps."""
    server = McpServer.objects.create(slug="remote", name="Remote", url=url, timeout_s=5)
    response = admin_client.post(
        "/admin/orchestrator_app/mcpserver/",
        {"action": "refresh_tools", "_selected_action": [server.pk]},
    )
    assert response.status_code == 302
    server.refresh_from_db()
    return server.tools_error


@pytest.mark.parametrize(("host", "why"), REFUSED)
def test_the_mcp_client_never_connects_to_a_refused_address(
    host, why, admin_client, ahentic, dns, connections
):
    ahentic(MCP_ALLOW_INSECURE_LOCAL=False)

    error = refresh_tools(admin_client, f"https://{in_url(host)}/mcp")

    assert connections.made == []
    assert why in error
    assert "OUTBOUND_ALLOW_PRIVATE" in error


@pytest.mark.parametrize(("host", "address"), PUBLIC)
def test_the_mcp_client_connects_to_the_checked_public_address(
    host, address, admin_client, ahentic, dns, connections
):
    ahentic(MCP_ALLOW_INSECURE_LOCAL=False)

    error = refresh_tools(admin_client, f"https://{in_url(host)}/mcp")

    assert connections.made == [(address, 443)]
    assert "cannot be reached" in error


@pytest.mark.parametrize(
    "url",
    [
        "https://169.254.169.254/mcp",
        "https://10.0.0.5/mcp",
        "https://[::ffff:127.0.0.1]/mcp",
        "https://[64:ff9b::7f00:1]/mcp",
        "https://localhost/mcp",
    ],
)
def test_the_mcp_server_form_refuses_a_local_address_unless_allowed(admin_client, ahentic, url):
    ahentic(MCP_ALLOW_INSECURE_LOCAL=False)
    form = {
        "name": "Remote",
        "slug": "remote",
        "url": url,
        "active": "on",
        "auth": "none",
        "tool_settings-TOTAL_FORMS": "0",
        "tool_settings-INITIAL_FORMS": "0",
    }
    page = admin_client.post("/admin/orchestrator_app/mcpserver/add/", form)
    assert "OUTBOUND_ALLOW_PRIVATE" in page.content.decode()
    assert not McpServer.objects.exists()
    ahentic(OUTBOUND_ALLOW_PRIVATE=True)
    assert admin_client.post("/admin/orchestrator_app/mcpserver/add/", form).status_code == 302


# --- MCP OAuth ------------------------------------------------------------------------------


@pytest.fixture
def oauth_server(ahentic):
    """Connect with OAuth to a per-user server at the URL given: the API's answer."""

    def connect(client, url: str):
        ahentic(MCP_ALLOW_INSECURE_LOCAL=False, MCP_SERVERS=["remote"], VAULT_KEYS=[KEY])
        McpServer.objects.create(slug="remote", name="Remote", url=url, auth="user")
        return client.post(f"{API}/mcp-servers/remote/connect", {}, format="json")

    return connect


@pytest.mark.parametrize(("host", "why"), REFUSED)
def test_oauth_discovery_never_fetches_from_a_refused_address(
    host, why, owner_client, oauth_server, dns, connections
):
    response = oauth_server(owner_client, f"https://{in_url(host)}/mcp")

    assert connections.made == []
    assert (response.status_code, response.json()["code"]) == (400, outbound.REFUSED)
    assert why in response.json()["detail"]


@pytest.mark.parametrize(("host", "address"), PUBLIC)
def test_oauth_discovery_fetches_from_the_checked_public_address(
    host, address, owner_client, oauth_server, dns, connections
):
    response = oauth_server(owner_client, f"https://{in_url(host)}/mcp")

    assert set(connections.made) == {(address, 443)}
    assert (response.status_code, response.json()["code"]) == (400, "ahentic_mcp_oauth_unavailable")


OAUTH_REQUESTS = {
    "registration": lambda url: mcp_oauth.register(
        url, redirect_uri="https://site.example/callback", name="site"
    ),
    "code exchange": lambda url: mcp_oauth.exchange_code(
        url, code="c", verifier="v", redirect_uri="https://site.example/callback", client_id="i"
    ),
    "refresh": lambda url: mcp_oauth.refresh(url, refresh_token="r", client_id="i"),
}


@pytest.mark.parametrize("request_kind", sorted(OAUTH_REQUESTS))
@pytest.mark.parametrize(("host", "why"), REFUSED)
def test_oauth_registration_and_token_requests_never_reach_a_refused_address(
    request_kind, host, why, ahentic, dns, connections
):
    ahentic(MCP_ALLOW_INSECURE_LOCAL=False)

    with pytest.raises(McpFailure) as failure:
        OAUTH_REQUESTS[request_kind](f"https://{in_url(host)}/oauth")

    assert connections.made == []
    assert failure.value.code == outbound.REFUSED
    assert why in failure.value.message


@pytest.mark.parametrize("request_kind", sorted(OAUTH_REQUESTS))
@pytest.mark.parametrize(("host", "address"), PUBLIC)
def test_oauth_registration_and_token_requests_go_to_the_checked_public_address(
    request_kind, host, address, ahentic, dns, connections
):
    ahentic(MCP_ALLOW_INSECURE_LOCAL=False)

    with pytest.raises(McpFailure) as failure:
        OAUTH_REQUESTS[request_kind](f"https://{in_url(host)}/oauth")

    assert connections.made == [(address, 443)]
    assert "cannot be reached" in failure.value.message


# --- the helper's httpx2 client -------------------------------------------------------------


def test_an_httpx_client_keeps_the_address_it_checked_and_a_new_one_checks_again(
    ahentic, monkeypatch, connections, receiver
):
    dns = Dns(monkeypatch, {HOOK_NAME: [["127.0.0.1"], ["10.255.0.1"]]})
    ahentic(OUTBOUND_ALLOWED_NETWORKS=["127.0.0.1/32"])
    url = f"http://{HOOK_NAME}:{receiver.port}/one"

    with outbound.client(outbound.policy()) as http:
        assert http.get(url).status_code == 204
        assert http.get(url).status_code == 204  # the name now answers 10.255.0.1
    assert dns.asked == [HOOK_NAME]
    assert set(connections.made) == {("127.0.0.1", receiver.port)}
    assert [r["host"] for r in receiver.requests] == [f"{HOOK_NAME}:{receiver.port}"] * 2

    with outbound.client(outbound.policy()) as http, pytest.raises(outbound.OutboundRefused):
        http.get(url)
    assert len(receiver.requests) == 2


def test_an_httpx_client_follows_no_redirect_and_refuses_a_hop_to_a_refused_address(
    ahentic, dns, connections, receiver
):
    ahentic(OUTBOUND_ALLOWED_NETWORKS=["127.0.0.1/32"])
    hop = f"http://{PRIVATE_NAME}:{receiver.port}/internal"
    receiver.answers += [(302, {"Location": hop}), (307, {"Location": hop})]
    url = f"http://127.0.0.1:{receiver.port}/start"

    with outbound.client(outbound.policy()) as http:
        assert http.get(url).status_code == 302  # answered, not followed
        with pytest.raises(outbound.OutboundRefused, match="10.0.0.5, a private address"):
            http.get(url, follow_redirects=True)
    assert [r["path"] for r in receiver.requests] == ["/start", "/start"]
    assert set(connections.addresses()) == {"127.0.0.1"}
    assert outbound.check(f"https://{PUBLIC_ADDRESS}/", outbound.policy()).address == (
        PUBLIC_ADDRESS
    )


# --- settings and checks --------------------------------------------------------------------


def check_ids(**kwargs) -> list[str]:
    return [m.id for m in run_checks(databases=["default"], **kwargs)]


def test_an_allowed_network_that_is_not_a_network_is_a_system_error(db, ahentic):
    ahentic(OUTBOUND_ALLOWED_NETWORKS=["10.1.2.0/24"])
    assert "ahentic.E043" not in check_ids()
    ahentic(OUTBOUND_ALLOWED_NETWORKS=["10.1.2.0/24", "intranet"])
    assert "ahentic.E043" in check_ids()
    ahentic(OUTBOUND_ALLOWED_NETWORKS="10.1.2.0/24")
    assert "ahentic.E043" in check_ids()


def test_outbound_allow_private_without_debug_is_a_deploy_warning(db, ahentic, settings):
    settings.DEBUG = False
    ahentic(OUTBOUND_ALLOW_PRIVATE=False)
    assert "ahentic.W021" not in check_ids(include_deployment_checks=True)
    ahentic(OUTBOUND_ALLOW_PRIVATE=True)
    assert "ahentic.W021" in check_ids(include_deployment_checks=True)


# --- the settings that allow local addresses ------------------------------------------------


@pytest.mark.parametrize(
    ("values", "reached", "refused"),
    [
        ({"OUTBOUND_ALLOW_PRIVATE": True}, "10.0.0.5", None),
        ({"MCP_ALLOW_INSECURE_LOCAL": True}, "10.0.0.5", None),
        ({"OUTBOUND_ALLOWED_NETWORKS": ["10.0.0.0/30"]}, "10.0.0.2", "10.0.0.5"),
    ],
)
def test_the_allow_settings_let_the_mcp_client_and_oauth_reach_local_addresses(
    values, reached, refused, admin_client, ahentic, dns, connections
):
    ahentic(**{"MCP_ALLOW_INSECURE_LOCAL": False, **values})

    error = refresh_tools(admin_client, f"https://{reached}/mcp")
    assert connections.made == [(reached, 443)]
    assert "cannot be reached" in error
    with pytest.raises(McpFailure, match="cannot be reached"):
        mcp_oauth.refresh(f"https://{reached}/token", refresh_token="r", client_id="i")
    assert connections.made == [(reached, 443)] * 2
    if refused:
        with pytest.raises(McpFailure, match=f"{refused}, a private address"):
            mcp_oauth.refresh(f"https://{refused}/token", refresh_token="r", client_id="i")
        assert len(connections.made) == 2


def test_the_mcp_client_resolves_the_server_once_per_call_and_keeps_that_address(
    admin_client, ahentic, monkeypatch, connections
):
    # DNS rebinding: the first answer is public, every later one private.
    dns = Dns(monkeypatch, {"mcp.example.test": [[PUBLIC_ADDRESS], ["10.0.0.5"]]})
    ahentic(MCP_ALLOW_INSECURE_LOCAL=False)

    error = refresh_tools(admin_client, "https://mcp.example.test/mcp")

    assert dns.asked == ["mcp.example.test"]
    assert connections.made == [(PUBLIC_ADDRESS, 443)]
    assert "cannot be reached" in error


# --- one way out ----------------------------------------------------------------------------

# The calls that open an HTTP connection or a socket, by module.
CONNECTING = {
    "httpx2": {
        "Client",
        "AsyncClient",
        "get",
        "post",
        "put",
        "patch",
        "delete",
        "request",
        "stream",
        "HTTPTransport",
        "AsyncHTTPTransport",
    },
    "http.client": {"HTTPConnection", "HTTPSConnection"},
    "socket": {"create_connection", "socket"},
    "urllib.request": {"urlopen", "Request"},
}
# Allowed elsewhere: the Messages API seam (the site's own requests, through the anthropic SDK
# and its http client), the demo command's free-port probe, and the test doubles.
CONNECTING_ELSEWHERE = {
    "orchestrator_app/llm.py",
    "orchestrator_app/management/commands/ahentic_demo.py",
}


def connecting_calls(path) -> list[str]:
    import ast

    tree = ast.parse(path.read_text())
    names = {}  # local name -> module
    imported = {}  # local name -> (module, name) of ``from module import name``
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                names[alias.asname or alias.name.split(".")[0]] = alias.name
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                imported[alias.asname or alias.name] = (node.module, alias.name)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            module, name = imported.get(node.func.id, ("", ""))
            if name in CONNECTING.get(module, ()):
                found.append(f"{module}.{name} (line {node.lineno})")
            continue
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        base = node.func.value
        dotted = []
        while isinstance(base, ast.Attribute):
            dotted.insert(0, base.attr)
            base = base.value
        if not isinstance(base, ast.Name) or base.id not in names:
            continue
        module = ".".join([names[base.id], *dotted]) if dotted else names[base.id]
        if node.func.attr in CONNECTING.get(module, ()):
            found.append(f"{module}.{node.func.attr} (line {node.lineno})")
    return found


def test_every_request_made_on_someones_behalf_goes_through_the_outbound_module():

    root = ROOT
    offenders = {}
    for app in ("orchestrator_app", "sessions_app", "artifacts_app"):
        for path in sorted((root / app).rglob("*.py")):
            name = path.relative_to(root).as_posix()
            if name == "orchestrator_app/outbound.py" or name in CONNECTING_ELSEWHERE:
                continue
            if name.startswith("orchestrator_app/testing/") or "/migrations/" in name:
                continue
            calls = connecting_calls(path)
            if calls:
                offenders[name] = calls
    assert offenders == {}
