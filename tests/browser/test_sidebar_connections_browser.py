"""The sidebar's Connections panel: the MCP servers the user's agents use, connecting one with
a personal token (never shown back) and revoking it.

In a real browser (Playwright + Debian's chromium) against the live server; the fixtures and
the skip rule are those of ``test_sidebar_browser``.
"""

import pytest
from cryptography.fernet import Fernet

from tests.support.browser import expect, menu_item, open_home, screenshot

pytestmark = [pytest.mark.django_db(transaction=True)]

TOKEN = "personal-token-0123456789-SECRET"


def test_a_user_connects_an_mcp_server_with_a_token_and_revokes_it(page, llm, owner, settings):  # noqa: F811
    from orchestrator_app.models import McpCredential, McpServer

    settings.AHENTIC = {
        **settings.AHENTIC,
        "MCP_SERVERS": ["tickets"],
        "VAULT_KEYS": [Fernet.generate_key().decode()],
    }
    McpServer.objects.create(
        slug="tickets", name="Tickets", url="https://tickets.example/mcp", auth="user"
    )
    page.on("dialog", lambda dialog: dialog.accept())
    open_home(page)
    menu_item(page, "Connections").click()
    row = page.locator(".ahentic-connections li[data-server='tickets']")
    expect(row).to_contain_text("Tickets")
    expect(row).to_contain_text("Not connected")

    row.get_by_label("Personal token for Tickets").fill(TOKEN)
    row.get_by_role("button", name="Save token").click()
    expect(row).to_contain_text("Connected (token ••••CRET)")
    assert TOKEN not in page.content()
    assert McpCredential.objects.get(user=owner, revoked_at=None).hint == "••••CRET"
    screenshot(page, "sidebar-connections")

    row.get_by_role("button", name="Revoke").click()
    expect(row).to_contain_text("Not connected")
    assert not McpCredential.objects.filter(user=owner, revoked_at=None).exists()


@pytest.fixture(scope="module")
def oauth_server():
    from tests.support.mcp_servers import TicketServer

    server = TicketServer()
    yield server
    server.stop()


def test_a_user_connects_with_oauth_in_a_window_the_sidebar_opens(
    page,  # noqa: F811
    llm,
    owner,
    settings,
    oauth_server,
):
    from orchestrator_app.models import McpCredential, McpServer

    oauth_server.reset()
    settings.AHENTIC = {
        **settings.AHENTIC,
        "MCP_SERVERS": ["tickets"],
        "MCP_ALLOW_INSECURE_LOCAL": True,
        "VAULT_KEYS": [Fernet.generate_key().decode()],
    }
    McpServer.objects.create(slug="tickets", name="Tickets", url=oauth_server.url, auth="user")
    open_home(page)
    menu_item(page, "Connections").click()
    row = page.locator(".ahentic-connections li[data-server='tickets']")
    with page.context.expect_page() as opened:
        row.get_by_role("button", name="Connect with OAuth").click()
    assert opened.value is not None
    # The provider authorizes at once and sends the window back to the site's callback; the
    # sidebar shows the connection.
    expect(row).to_contain_text("Connected (OAuth)", timeout=15000)
    credential = McpCredential.objects.get(user=owner, revoked_at=None)
    assert credential.kind == "oauth" and oauth_server.state["refresh_tokens"]
