"""The sidebar's Settings panel (the mail opt-outs) and the chat link a mail carries.

In a real browser (Playwright + Debian's chromium) against the live server and the local
Messages API server; the fixtures and the skip rule are those of ``test_sidebar_browser``.
"""

import pytest

from tests.support.browser import expect, menu_item, open_home, screenshot

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("llm_strict"),
]


def preferences(user) -> dict:
    from orchestrator_app.notifications import services as notifications

    found = notifications.preference_for(user)
    return {"approvals": found.approvals_mail, "schedules": found.schedules_mail}


def test_the_settings_panel_turns_a_mail_off_and_the_api_reflects_it(page, llm, owner):  # noqa: F811
    open_home(page)
    # The Settings item of the header's More menu (the menu closes once it is chosen).
    toggle = page.locator('[data-role="settings-toggle"]')
    expect(toggle).to_have_attribute("aria-expanded", "false")
    menu_item(page, "Settings").click()
    expect(toggle).to_have_attribute("aria-expanded", "true")
    panel = page.get_by_role("region", name="Settings")
    approvals = panel.get_by_label("An approval has waited a while and I have not seen it")
    schedules = panel.get_by_label("A scheduled run finishes or fails")
    expect(approvals).to_be_checked()
    expect(schedules).to_be_checked()
    expect(approvals).to_be_focused()  # focus moves into the panel on open

    schedules.click()
    expect(panel.get_by_role("status")).to_have_text("Saved.")
    expect(schedules).not_to_be_checked()
    assert preferences(owner) == {"approvals": True, "schedules": False}
    screenshot(page, "sidebar-settings")

    page.keyboard.press("Escape")  # closes the settings, not the agent panel
    expect(panel).to_be_hidden()
    # The item sits in the closed More menu: focus is back on More.
    expect(page.get_by_role("button", name="More", exact=True)).to_be_focused()
    expect(page.locator("#ahentic-panel")).to_be_visible()

    # Opened again (as on another page): the server's values.
    page.reload()
    menu_item(page, "Settings").click()
    expect(page.get_by_label("A scheduled run finishes or fails")).not_to_be_checked()
    expect(
        page.get_by_label("An approval has waited a while and I have not seen it")
    ).to_be_checked()


def test_a_mail_link_opens_its_chat_in_the_sidebar(page, llm, owner):  # noqa: F811
    from orchestrator_app.links import chat_url
    from sessions_app import services

    session = services.session_create(owner=owner, title="Quarterly report")
    url = chat_url(session.pk)
    assert f"?ahentic_session={session.pk}" in url
    page.goto("/" + url[url.index("?") :])
    expect(page.locator("#ahentic-panel")).to_be_visible()
    expect(page.locator(".ahentic-tab.is-active")).to_contain_text("Quarterly report")
    assert "ahentic_session" not in page.url  # opened once: a reload keeps the user's tab
