"""The sidebar's "MCP access" panel (``tokens.js``): make a token (shown once), see it listed
with its last use, use it against the MCP endpoint, revoke it (confirmed).

In a real browser (Playwright + Debian's chromium) against the live server; the fixtures and
the skip rule are those of ``test_sidebar_browser``.
"""

import httpx2
import pytest

from tests.support.browser import expect, menu_item, open_home, screenshot

pytestmark = pytest.mark.django_db(transaction=True)


def ping(live_server, secret: str) -> int:
    return httpx2.post(
        f"{live_server.url}/ahentic/v1/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
        headers={"Authorization": f"Bearer {secret}"},
    ).status_code


def test_a_user_makes_uses_and_revokes_an_mcp_token(page, live_server, owner):  # noqa: F811
    from orchestrator_app.models import McpToken

    page.on("dialog", lambda dialog: dialog.accept())
    open_home(page)
    menu_item(page, "MCP access").click()
    panel = page.locator("#ahentic-mcp")
    expect(panel).to_be_visible()
    expect(panel).to_contain_text("/ahentic/v1/mcp")
    expect(panel.locator("[data-role=mcp-tokens]")).to_have_text("No tokens yet.")

    panel.get_by_label("Token name").fill("Laptop")
    panel.get_by_label("Expires after").select_option("30")
    panel.get_by_role("button", name="Create token").click()
    secret_box = panel.locator("[data-role=mcp-secret]")
    expect(secret_box).to_contain_text("ahmcp_")
    secret = secret_box.text_content()
    expect(panel.locator("li .ahentic-child-title")).to_have_text(["Laptop"])
    expect(panel.locator("li")).to_contain_text("last used never")
    screenshot(page, "sidebar-mcp-tokens")

    assert ping(live_server, secret) == 200
    # Closed and opened again: the secret is gone, the use is listed.
    menu_item(page, "MCP access").click()
    menu_item(page, "MCP access").click()
    expect(panel.locator("[data-role=mcp-issued]")).to_be_hidden()
    expect(panel.locator("li")).not_to_contain_text("last used never")

    panel.get_by_role("button", name="Revoke Laptop").click()
    expect(panel.locator("[data-role=mcp-tokens]")).to_have_text("No tokens yet.")
    assert McpToken.objects.get().revoked_at is not None
    assert ping(live_server, secret) == 401
