"""The sidebar in a real browser: Playwright and Debian's chromium, and what the browser tests
share (opening the panel, sending, reading the transcript, the approval card, screenshots).

Importing this module skips the importing test module when playwright or /usr/bin/chromium is
missing, so ``make test`` passes on any machine; ``AHENTIC_REQUIRE_BROWSER=1`` (set by
.ci/browser-leg) turns that skip into a failure. The fixtures (``browser``, ``context``,
``page``...) are in tests/browser/conftest.py.
"""

import json
import os
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.test import Client

CHROMIUM = "/usr/bin/chromium"
REQUIRE_BROWSER = os.environ.get("AHENTIC_REQUIRE_BROWSER") == "1"


def unavailable(reason: str) -> None:
    if REQUIRE_BROWSER:
        pytest.fail(f"browser tests required but {reason}", pytrace=False)
    pytest.skip(reason, allow_module_level=True)


try:
    from playwright.sync_api import expect, sync_playwright  # noqa: F401  (the conftest uses it)
except ImportError:
    unavailable("playwright is not installed (pip install -e '.[browser]')")
if not Path(CHROMIUM).exists():
    unavailable(f"{CHROMIUM} is missing (apt-get install chromium)")

from sessions_app.models import Session  # noqa: E402
from tests.support import tools_for_sidebar  # noqa: E402, F401  (registers the sidebar_* tools)

CHROMIUM_ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
# Generous: a run's steps happen inside the live server's request thread.
expect.set_options(timeout=15_000)


# --- helpers ------------------------------------------------------------------------------------


def open_home(page):
    page.goto("/")
    expect(page.locator("#ahentic-panel")).to_be_visible()


def sidebar(page):
    return page.locator("#ahentic-sidebar")


def new_chat(page):
    page.get_by_role("button", name="New chat").click()
    expect(page.locator(".ahentic-tab.is-active")).to_contain_text("New Agent")


def send(page, text: str):
    box = page.get_by_label("Message the agent")
    box.fill(text)
    box.press("Enter")


def open_history(page):
    """Open the History panel (its header button) and wait for its first page."""
    page.get_by_role("button", name="History", exact=True).click()
    panel = page.locator('[data-role="history-panel"]')
    expect(panel).to_be_visible()
    expect(panel.locator('[role="status"]')).not_to_have_text("Loading…")


def open_from_history(page, session_id):
    """Open a chat from the History panel."""
    open_history(page)
    page.locator(f'.ahentic-history-open[data-session="{session_id}"]').click()


def assistant_messages(page):
    return page.locator(".ahentic-assistant .ahentic-msg-text")


def transcript(page):
    return page.locator('[data-role="transcript"]')


def hitl_card(page):
    return page.locator('[data-role="hitl"]')


def make_staff(user):
    """Verbose and Debug are offered to staff only: a test that switches to them is staff's
    (before the page loads: the sidebar reads it once)."""
    user.is_staff = True
    user.save(update_fields=["is_staff"])


def set_view_mode(page, mode: str):
    """Choose Basic, Verbose or Debug in the More menu's view mode (Verbose and Debug are
    offered to staff only)."""
    more = page.get_by_role("button", name="More", exact=True)
    if more.get_attribute("aria-expanded") != "true":
        more.click()
    group = page.get_by_role("group", name="View mode")
    group.get_by_role("menuitemradio", name=mode.capitalize()).click()
    expect(page.locator(f'[role="menuitemradio"][data-view-mode="{mode}"]')).to_have_attribute(
        "aria-checked", "true"
    )


def menu_item(page, name: str):
    """Open the header's More menu and return its item ``name`` (a menuitem or a
    menuitemcheckbox, by accessible name)."""
    more = page.get_by_role("button", name="More", exact=True)
    if more.get_attribute("aria-expanded") != "true":
        more.click()
    menu = page.get_by_role("menu", name="More")
    return menu.get_by_role("menuitemcheckbox", name=name).or_(
        menu.get_by_role("menuitem", name=name)
    )


def status_is(page, status: str):
    expect(sidebar(page)).to_have_attribute("data-status", status)


def tool_result_block(request: dict, call_id: str) -> dict:
    [block] = [
        block
        for message in request["messages"]
        for block in message["content"]
        if isinstance(block, dict)
        and block.get("type") == "tool_result"
        and block.get("tool_use_id") == call_id
    ]
    return block


def tool_result_json(request: dict, call_id: str) -> dict:
    content = tool_result_block(request, call_id)["content"]
    if isinstance(content, list):
        content = "".join(part.get("text", "") for part in content)
    return json.loads(content)


def only_session() -> Session:
    return Session.objects.get()


def screenshot(page, name: str) -> None:
    """Screenshots for looking at the layout: AHENTIC_SCREENSHOT_DIR=/tmp pytest ..."""
    directory = os.environ.get("AHENTIC_SCREENSHOT_DIR")
    if directory:
        page.screenshot(path=str(Path(directory) / f"{name}.png"))


def admin_page(browser, live_server, viewport):
    from tests.support.factories import UserFactory

    staff = UserFactory(username="staff", is_staff=True, is_superuser=True)
    client = Client()
    client.force_login(staff)
    cookie = client.cookies[django_settings.SESSION_COOKIE_NAME]
    context = browser.new_context(base_url=live_server.url, viewport=viewport)
    context.add_cookies([{"name": cookie.key, "value": cookie.value, "url": live_server.url}])
    return context


def covered(page, locator) -> bool:
    """True when something else (the panel) is on top of the element's centre."""
    return locator.evaluate(
        """e => {
            const r = e.getBoundingClientRect();
            const top = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
            return !(top && (top === e || e.contains(top)));
        }"""
    )


LONG_REPLY = " ".join(f"Part {n} of a long answer." for n in range(1, 41))


def open_at(browser, live_server, owner, width: int, height: int, errors: list):
    """A logged-in page at one viewport size, the panel open."""
    client = Client()
    client.force_login(owner)
    cookie = client.cookies[django_settings.SESSION_COOKIE_NAME]
    context = browser.new_context(
        base_url=live_server.url, viewport={"width": width, "height": height}
    )
    context.add_cookies(
        [{"name": cookie.key, "value": cookie.value, "url": live_server.url, "httpOnly": True}]
    )
    page = context.new_page()
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto("/")
    launcher = page.get_by_role("button", name="Open the agent panel")
    if launcher.is_visible():  # narrow screens start folded
        launcher.click()
    expect(page.locator("#ahentic-panel")).to_be_visible()
    return context, page


REACHABLE_JS = """(node) => {
  const r = node.getBoundingClientRect();
  const x = r.left + r.width / 2, y = r.top + r.height / 2;
  const hit = document.elementFromPoint(x, y);
  return {
    rect: [Math.round(r.left), Math.round(r.top), Math.round(r.right), Math.round(r.bottom)],
    inside: r.width > 0 && r.height > 0 && r.top >= 0 && r.left >= 0
      && r.bottom <= window.innerHeight && r.right <= window.innerWidth,
    onTop: !!hit && (hit === node || node.contains(hit)),
  };
}"""


def assert_reachable(locator, what: str) -> dict:
    """Inside the viewport and not covered: the element itself is what a tap at its centre hits."""
    found = locator.evaluate(REACHABLE_JS)
    assert found["inside"], f"{what} is outside the viewport: {found['rect']}"
    assert found["onTop"], f"{what} is covered by another element: {found['rect']}"
    return found
