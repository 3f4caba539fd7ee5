"""The MCP endpoint's OAuth consent page and the sidebar's "Connected apps", in a real browser
(Playwright + Debian's chromium) against the live server: a client registers, the logged-in
user reads the consent page (client, agent, tools, "changes still wait for your approval") and
allows; the client's token works; the user revokes the app in the sidebar and the token stops
working at once. The fixtures and the skip rule are those of ``test_sidebar_browser``.
"""

import base64
import hashlib
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx2
import pytest

from tests.support.browser import expect, menu_item, open_home, screenshot

pytestmark = pytest.mark.django_db(transaction=True)

REDIRECT = "http://localhost:8976/callback"
VERIFIER = "v" * 50


def list_tools(live_server, access_token) -> int:
    return httpx2.post(
        f"{live_server.url}/ahentic/v1/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
        headers={"Authorization": f"Bearer {access_token}"},
        timeout=30,
    ).status_code


def test_the_user_consents_in_the_page_and_revokes_the_app_in_the_sidebar(
    page,  # noqa: F811
    live_server,
    owner,
):
    api = f"{live_server.url}/ahentic/v1"
    registered = httpx2.post(
        f"{api}/oauth/register",
        json={
            "client_name": "Browser client",
            "redirect_uris": [REDIRECT],
            "token_endpoint_auth_method": "none",
        },
        timeout=30,
    ).json()
    client_id = registered["client_id"]
    challenge = (
        base64.urlsafe_b64encode(hashlib.sha256(VERIFIER.encode()).digest()).rstrip(b"=").decode()
    )
    query = urlencode(
        {
            "response_type": "code",
            "client_id": client_id,
            "redirect_uri": REDIRECT,
            "code_challenge": challenge,
            "code_challenge_method": "S256",
            "state": "xyz",
            "scope": "tools:read tools:write",
            "resource": f"{api}/mcp",
        }
    )
    returned = []

    def callback(route):
        returned.append(route.request.url)
        route.fulfill(status=200, body="back in the client")

    page.route("http://localhost:8976/**", callback)
    page.goto(f"/ahentic/v1/oauth/authorize?{query}")
    consent = page.locator("#ahentic-consent")
    expect(page.locator("h1")).to_contain_text("Browser client")
    expect(consent).to_contain_text("echo")
    expect(consent).to_contain_text("notes_create")
    expect(consent).to_contain_text("Changes still wait for your approval")
    screenshot(page, "oauth-consent")
    consent.get_by_role("button", name="Allow").click()
    page.wait_for_url("http://localhost:8976/**")

    [url] = returned
    answer = parse_qs(urlsplit(url).query)
    assert answer["state"] == ["xyz"]
    tokens = httpx2.post(
        f"{api}/oauth/token",
        data={
            "grant_type": "authorization_code",
            "code": answer["code"][0],
            "redirect_uri": REDIRECT,
            "client_id": client_id,
            "code_verifier": VERIFIER,
            "resource": f"{api}/mcp",
        },
        timeout=30,
    ).json()
    assert list_tools(live_server, tokens["access_token"]) == 200

    page.on("dialog", lambda dialog: dialog.accept())
    open_home(page)
    menu_item(page, "MCP access").click()
    apps = page.locator("#ahentic-mcp [data-role=mcp-apps]")
    expect(apps.locator(".ahentic-child-title")).to_have_text(["Browser client"])
    expect(apps).to_contain_text("may call tools that change data")
    apps.get_by_role("button", name="Revoke Browser client").click()
    expect(page.locator("#ahentic-mcp [data-role=mcp-no-apps]")).to_be_visible()
    assert list_tools(live_server, tokens["access_token"]) == 401
