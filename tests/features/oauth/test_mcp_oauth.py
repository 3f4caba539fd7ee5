"""OAuth 2.1 for the site's MCP endpoint, end to end: the ``mcp`` SDK's OAuth client
(``mcp.client.auth``) against a live server of the test site, discovering the authorization
server from a 401, registering, going through the site's login and consent (posted over HTTP
here; tests/test_oauth_consent_browser.py drives the page), then calling tools.
"""

import asyncio
import html
import json
import re
from urllib.parse import parse_qs, urlsplit

import httpx2
import pytest
from django.core.cache import cache
from django.core.checks import run_checks
from django.test import Client
from django.urls import clear_url_caches
from mcp.client.auth import OAuthClientProvider
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientMetadata
from oauth2_provider.cimd import CIMDError
from oauth2_provider.models import AccessToken, Application, RefreshToken

from orchestrator_app.models import OAuthClient, OAuthConnection
from orchestrator_app.oauth.services import MetadataFetcher
from sessions_app.models import Session
from tests.support.api import API

pytestmark = pytest.mark.django_db(transaction=True)

REDIRECT = "http://localhost:8976/callback"
HIDDEN = re.compile(r'<input type="hidden" name="([^"]+)" value="([^"]*)"')


def mcp_url(live_server) -> str:
    return f"{live_server.url}{API}/mcp"


class Storage:
    """The client's token and registration store, in memory."""

    def __init__(self):
        self.tokens = None
        self.client_info = None

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens):
        self.tokens = tokens

    async def get_client_info(self):
        return self.client_info

    async def set_client_info(self, client_info):
        self.client_info = client_info


def session_cookie(user) -> str:
    client = Client()
    client.force_login(user)
    return client.cookies["sessionid"].value


class Consent:
    """The user's side of the authorization: opens the authorization URL with the user's
    session and answers the consent page (``write``: also the tools that change data)."""

    def __init__(self, live_server, user, *, write=True, allow=True):
        self.live_server = live_server
        self.cookie = session_cookie(user)
        self.write = write
        self.allow = allow
        self.url = None
        self.page = None

    async def redirect_handler(self, url: str) -> None:
        self.url = url

    async def callback_handler(self) -> AuthorizationCodeResult:
        async with httpx2.AsyncClient(
            cookies={"sessionid": self.cookie}, timeout=30, follow_redirects=False
        ) as browser:
            page = await browser.get(self.url)
            assert page.status_code == 200, page.text[:500]
            self.page = page.text
            fields = {name: html.unescape(value) for name, value in HIDDEN.findall(page.text)}
            if self.write:
                fields["write"] = "on"
            if self.allow:
                fields["allow"] = "Authorize"
            answer = await browser.post(
                self.url, data=fields, headers={"X-CSRFToken": fields["csrfmiddlewaretoken"]}
            )
        assert answer.status_code == 302, answer.text[:500]
        query = parse_qs(urlsplit(answer.headers["Location"]).query)
        return AuthorizationCodeResult(
            code=query["code"][0],
            state=query.get("state", [None])[0],
            iss=query.get("iss", [None])[0],  # RFC 9207: the client checks it
        )


def provider(live_server, consent, storage, scope=None, **kwargs) -> OAuthClientProvider:
    return OAuthClientProvider(
        server_url=mcp_url(live_server),
        client_metadata=OAuthClientMetadata(
            client_name="Test client",
            redirect_uris=[REDIRECT],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
            scope=scope,
        ),
        storage=storage,
        redirect_handler=consent.redirect_handler,
        callback_handler=consent.callback_handler,
        **kwargs,
    )


async def _session(url, auth, work):
    async with httpx2.AsyncClient(auth=auth, timeout=30) as http:
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write) as client:
                await client.initialize()
                return await work(client)


def with_oauth(live_server, auth, work):
    return asyncio.run(_session(mcp_url(live_server), auth, work))


def text_of(result) -> str:
    return "".join(block.text for block in result.content)


def post_mcp(live_server, access_token, body):
    return httpx2.post(
        mcp_url(live_server),
        json=body,
        headers={"Authorization": f"Bearer {access_token}"},
        timeout=30,
    )


LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}


def test_a_site_without_agents_shows_the_settings_tools_on_consent(live_server, owner, tool_calls):
    # The endpoint serves the AHENTIC settings' tools when the site has no agent: the consent
    # page names them too (it said "You may not use any agent" before).
    from sessions_app.models import Agent

    Agent.objects.all().delete()
    consent = Consent(live_server, owner)

    async def work(client):
        return await client.list_tools()

    listed = with_oauth(live_server, provider(live_server, consent, Storage()), work)

    assert "echo" in consent.page and "notes_create" in consent.page
    assert "You may not use any agent" not in consent.page
    assert {"echo", "notes_create"} <= {tool.name for tool in listed.tools}


def test_a_client_discovers_registers_gets_consent_and_calls_tools(
    live_server, owner, owner_client, tool_calls
):
    consent = Consent(live_server, owner)
    storage = Storage()

    async def work(client):
        listed = await client.list_tools()
        read = await client.call_tool("echo", {"text": "hello"})
        write = await client.call_tool("notes_create", {"title": "Groceries"})
        return listed, read, write

    listed, read, write = with_oauth(live_server, provider(live_server, consent, storage), work)

    # Registered dynamically, through the consent page on the user's login.
    application = Application.objects.get()
    assert application.registration_source == Application.RegistrationSource.DCR
    assert application.redirect_uris == REDIRECT
    assert "Test client" in consent.page and "echo" in consent.page
    assert "notes_create" in consent.page
    assert "Changes still wait for your approval" in consent.page
    names = {tool.name for tool in listed.tools}
    assert {"echo", "notes_create"} <= names
    assert json.loads(text_of(read)) == {"ok": True, "echo": "hello"}
    assert "Waiting for approval at" in text_of(write)
    assert tool_calls == [{"tool": "echo", "input": {"text": "hello"}}]
    # The token is bound to the endpoint, short-lived, and its scopes are the consent's.
    token = AccessToken.objects.get(user=owner)
    assert token.resource == [mcp_url(live_server)]
    assert set(token.scope.split()) >= {"tools:read", "tools:write"}
    # The calls are recorded in a chat named after the client.
    assert Session.objects.get(owner=owner).title.startswith("MCP: OAuth: Test client ")
    connection = OAuthConnection.objects.get(user=owner)
    assert connection.token.calls.count() == 2
    # The row that stands for the app in the calls' history is no personal token.
    assert owner_client.get(f"{API}/mcp-tokens").json() == []
    # Another agent than the one granted: a step-up challenge naming it.
    other_agent = httpx2.post(
        f"{mcp_url(live_server)}?agent=reviewer",
        json=LIST,
        headers={"Authorization": f"Bearer {storage.tokens.access_token}"},
        timeout=30,
    )
    assert other_agent.status_code == 403
    assert 'error="insufficient_scope"' in other_agent.headers["WWW-Authenticate"]
    assert "agent:reviewer" in other_agent.headers["WWW-Authenticate"]


def test_a_401_names_the_metadata_that_names_the_authorization_server(live_server, owner):
    answer = httpx2.post(mcp_url(live_server), json=LIST, timeout=30)
    assert answer.status_code == 401
    challenge = answer.headers["WWW-Authenticate"]
    metadata_url = re.search(r'resource_metadata="([^"]+)"', challenge).group(1)
    resource = httpx2.get(metadata_url, timeout=30).json()
    assert resource["resource"] == mcp_url(live_server)
    [issuer] = resource["authorization_servers"]
    assert issuer == live_server.url
    # RFC 8414's root document, also served under the app.
    root = httpx2.get(f"{live_server.url}/.well-known/oauth-authorization-server").json()
    in_app = httpx2.get(f"{live_server.url}{API}/oauth").json()
    assert root == in_app
    assert root["issuer"] == issuer
    assert root["code_challenge_methods_supported"] == ["S256"]
    assert root["client_id_metadata_document_supported"] is True
    assert root["registration_endpoint"] == f"{live_server.url}{API}/oauth/register"
    probed = httpx2.get(f"{live_server.url}/.well-known/oauth-protected-resource{API}/mcp")
    assert probed.json() == resource


def test_a_refresh_rotates_the_refresh_token_and_revoking_the_app_stops_it_at_once(
    live_server, owner, owner_client, tool_calls
):
    consent = Consent(live_server, owner)
    storage = Storage()
    auth = provider(live_server, consent, storage)

    async def listing(client):
        return await client.list_tools()

    with_oauth(live_server, auth, listing)
    first = storage.tokens
    # The client refreshes (its access token is short-lived): a new pair, the old refresh
    # token spent.
    answer = httpx2.post(
        f"{live_server.url}{API}/oauth/token",
        data={
            "grant_type": "refresh_token",
            "refresh_token": first.refresh_token,
            "client_id": storage.client_info.client_id,
            "resource": mcp_url(live_server),
        },
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    second = answer.json()
    assert second["refresh_token"] != first.refresh_token
    assert post_mcp(live_server, second["access_token"], LIST).status_code == 200
    assert post_mcp(live_server, first.access_token, LIST).status_code == 401

    listed = owner_client.get(f"{API}/connected-apps").json()
    assert [app["client"] for app in listed] == ["Test client"]
    assert "tools:write" in listed[0]["scopes"]
    assert owner_client.delete(f"{API}/connected-apps/{listed[0]['id']}").status_code == 204

    refused = post_mcp(live_server, second["access_token"], LIST)
    assert refused.status_code == 401
    assert "resource_metadata=" in refused.headers["WWW-Authenticate"]
    assert not AccessToken.objects.filter(user=owner).exists()
    assert not RefreshToken.objects.filter(user=owner).exists()
    assert owner_client.get(f"{API}/connected-apps").json() == []
    assert owner_client.delete(f"{API}/connected-apps/{listed[0]['id']}").status_code == 404
    # The spent refresh token is gone with the rest.
    again = httpx2.post(
        f"{live_server.url}{API}/oauth/token",
        data={
            "grant_type": "refresh_token",
            "refresh_token": second["refresh_token"],
            "client_id": storage.client_info.client_id,
        },
        timeout=30,
    )
    assert again.status_code == 400


def test_a_read_only_grant_lists_only_read_tools_and_a_write_call_is_insufficient_scope(
    live_server, owner, tool_calls
):
    consent = Consent(live_server, owner, write=False)
    storage = Storage()

    async def listing(client):
        return await client.list_tools()

    listed = with_oauth(live_server, provider(live_server, consent, storage), listing)
    names = {tool.name for tool in listed.tools}
    assert "echo" in names and "notes_create" not in names
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "notes_create", "arguments": {"title": "x"}},
    }
    answer = post_mcp(live_server, storage.tokens.access_token, call)
    assert answer.status_code == 403
    challenge = answer.headers["WWW-Authenticate"]
    assert 'error="insufficient_scope"' in challenge
    assert "tools:write" in re.search(r'scope="([^"]+)"', challenge).group(1)
    assert tool_calls == []


def test_a_token_for_another_resource_is_refused(live_server, owner):
    consent = Consent(live_server, owner)
    storage = Storage()
    other = "https://elsewhere.example/api"

    async def check_resource(server_url, prm_resource):
        return None

    auth = provider(live_server, consent, storage, validate_resource_url=check_resource)
    auth.context.get_resource_url = lambda: other  # the client asks for another resource

    async def listing(client):
        return await client.list_tools()

    with pytest.raises(Exception):  # noqa: B017 - the SDK gives up after the second 401
        with_oauth(live_server, auth, listing)
    token = AccessToken.objects.get(user=owner)
    assert token.resource == [other]
    refused = post_mcp(live_server, storage.tokens.access_token, LIST)
    assert refused.status_code == 401


def test_registration_checks_redirect_uris_and_is_rate_limited(live_server, settings):
    url = f"{live_server.url}{API}/oauth/register"
    bad = httpx2.post(url, json={"redirect_uris": ["http://evil.example/cb"]}, timeout=30)
    assert bad.status_code == 400
    assert bad.json()["error"] == "invalid_redirect_uri"
    assert bad.json()["code"] == "ahentic_oauth_invalid_redirect_uri"
    assert httpx2.post(url, content=b"[", timeout=30).status_code == 400
    assert not Application.objects.exists()
    cache.clear()
    settings.AHENTIC = {**settings.AHENTIC, "THROTTLE_OAUTH_REGISTRATIONS": "2/hour"}
    body = {"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none"}
    statuses = [httpx2.post(url, json=body, timeout=30).status_code for _ in range(3)]
    assert statuses == [201, 201, 429]


def test_with_approval_on_a_new_client_waits_for_staff(live_server, owner, settings):
    settings.AHENTIC = {**settings.AHENTIC, "MCP_OAUTH_CLIENT_APPROVAL": True}
    url = f"{live_server.url}{API}/oauth/register"
    body = {"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none"}
    client_id = httpx2.post(url, json=body, timeout=30).json()["client_id"]
    cookie = session_cookie(owner)
    authorize = (
        f"{live_server.url}{API}/oauth/authorize?response_type=code&client_id={client_id}"
        f"&redirect_uri={REDIRECT}&code_challenge=abcdefghijabcdefghijabcdefghijabcdefghij123"
        "&code_challenge_method=S256&state=s"
    )
    page = httpx2.get(authorize, cookies={"sessionid": cookie}, timeout=30)
    assert page.status_code == 403
    assert "waits for approval" in page.text
    review = OAuthClient.objects.get(application__client_id=client_id)
    assert review.status == OAuthClient.Status.PENDING


# --- client ID metadata documents -------------------------------------------------------------


class DocumentFetcher(MetadataFetcher):
    """The site's fetcher with the network answer replaced: the document a client publishes at
    its https URL (no https server runs in the tests). The outbound policy's refusals are
    tested through the real fetcher below."""

    documents: dict = {}

    def fetch(self, client_id):
        if client_id not in self.documents:
            return super().fetch(client_id)
        return self.documents[client_id], 300


def test_a_client_id_metadata_document_registers_the_client(live_server, owner, settings):
    client_id = "https://client.example/oauth/metadata.json"
    DocumentFetcher.documents = {
        client_id: {
            "client_id": client_id,
            "client_name": "Metadata client",
            "redirect_uris": [REDIRECT],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
        }
    }
    settings.OAUTH2_PROVIDER = {
        **settings.OAUTH2_PROVIDER,
        "CIMD_METADATA_FETCHER": "tests.features.oauth.test_mcp_oauth.DocumentFetcher",
    }
    consent = Consent(live_server, owner)
    storage = Storage()

    async def listing(client):
        return await client.list_tools()

    auth = provider(live_server, consent, storage, client_metadata_url=client_id)
    listed = with_oauth(live_server, auth, listing)

    assert "echo" in {tool.name for tool in listed.tools}
    application = Application.objects.get()
    assert application.client_id == client_id
    assert application.registration_source == Application.RegistrationSource.CIMD
    assert "Metadata client" in consent.page


def test_a_metadata_document_on_a_private_address_is_never_fetched(live_server, owner):
    # The outbound-address policy: 127.0.0.1 is refused before any connection is made.
    with pytest.raises(CIMDError, match="loopback"):
        MetadataFetcher().fetch("https://127.0.0.1:9/client.json")
    with pytest.raises(CIMDError, match="https"):
        MetadataFetcher().fetch("http://client.example/client.json")
    cookie = session_cookie(owner)
    page = httpx2.get(
        f"{live_server.url}{API}/oauth/authorize",
        params={
            "response_type": "code",
            "client_id": "https://localhost:9/client.json",
            "redirect_uri": REDIRECT,
            "code_challenge": "a" * 43,
            "code_challenge_method": "S256",
        },
        cookies={"sessionid": cookie},
        timeout=30,
    )
    assert page.status_code == 400
    assert not Application.objects.exists()


# --- checks -------------------------------------------------------------------------------------


def check_ids(**kwargs) -> list[str]:
    return [message.id for message in run_checks(include_deployment_checks=False, **kwargs)]


def test_a_host_without_the_well_known_documents_is_warned(settings):
    assert "ahentic.W022" not in check_ids()
    settings.ROOT_URLCONF = "tests.urls_without_well_known"
    clear_url_caches()
    assert "ahentic.W022" in check_ids()


def test_a_host_whose_oauth2_provider_lacks_the_endpoints_keys_is_an_error(settings):
    assert "ahentic.E044" not in check_ids()
    settings.OAUTH2_PROVIDER = {**settings.OAUTH2_PROVIDER, "PKCE_REQUIRED": False}
    assert "ahentic.E044" in check_ids()


def test_a_tampered_consent_answer_is_a_400_page_and_grants_nothing(owner_client):
    url = f"{API}/oauth/authorize"
    answers = [
        owner_client.post(url, {"client_secret": "\x00"}),
        owner_client.post(
            url,
            {
                "allow": "Authorize",
                "client_id": "unknown",
                "redirect_uri": REDIRECT,
                "response_type": "code",
            },
        ),
        owner_client.put(f"{url}?scope=x"),
    ]
    assert [answer.status_code for answer in answers] == [400, 400, 400]
    assert b"This connection cannot be made" in answers[0].content
    assert not AccessToken.objects.exists()


def test_staff_approve_a_waiting_client_and_revoke_it_in_the_admin(
    live_server, owner, admin_client, settings
):
    settings.AHENTIC = {**settings.AHENTIC, "MCP_OAUTH_CLIENT_APPROVAL": True}
    url = f"{live_server.url}{API}/oauth/register"
    body = {
        "client_name": "Waiting",
        "redirect_uris": [REDIRECT],
        "token_endpoint_auth_method": "none",
    }
    httpx2.post(url, json=body, timeout=30)
    review = OAuthClient.objects.get()
    changelist = "/admin/orchestrator_app/oauthclient/"
    assert b"Waiting" in admin_client.get(changelist).content
    admin_client.post(changelist, {"action": "approve", "_selected_action": [review.pk]})
    review.refresh_from_db()
    assert review.status == OAuthClient.Status.APPROVED

    # Approved: the user connects it; then staff revoke it and its token stops at once.
    consent = Consent(live_server, owner)
    storage = Storage()

    async def listing(client):
        return await client.list_tools()

    auth = provider(live_server, consent, storage)
    client_id = review.application.client_id

    async def preregistered():
        from mcp.shared.auth import OAuthClientInformationFull

        return OAuthClientInformationFull(
            client_id=client_id,
            redirect_uris=[REDIRECT],
            token_endpoint_auth_method="none",
        )

    storage.get_client_info = preregistered
    with_oauth(live_server, auth, listing)
    assert post_mcp(live_server, storage.tokens.access_token, LIST).status_code == 200
    admin_client.post(changelist, {"action": "revoke", "_selected_action": [review.pk]})
    review.refresh_from_db()
    assert review.status == OAuthClient.Status.REVOKED
    assert post_mcp(live_server, storage.tokens.access_token, LIST).status_code == 401
    assert not OAuthConnection.objects.filter(revoked_at__isnull=True).exists()
    page = httpx2.get(consent.url, cookies={"sessionid": consent.cookie}, timeout=30)
    assert page.status_code == 403 and "revoked" in page.text
