"""The Session admin in a real browser at a laptop's 1366 x 900 (issue 21, item 9).

The list's columns stay readable (no column wraps one word per line), and a run button on a
session's page comes back to that page with a message in words. Browser, live server and login
come from the sidebar's browser tests: skipped without playwright or chromium unless
AHENTIC_REQUIRE_BROWSER=1 (.ci/browser-leg). AHENTIC_SCREENSHOT_DIR=/tmp writes screenshots.
"""

import pytest
from django.conf import settings as django_settings
from django.test import Client

from sessions_app import runstate
from sessions_app.models import Session
from tests.support.browser import expect, screenshot
from tests.support.factories import SessionFactory, UserFactory

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("llm_strict"),
]

LAPTOP = {"width": 1366, "height": 900}
LONG_TITLE = (
    "Rewrite the spring opening hours page for the three shops and announce the change "
    "on the front page, in the newsletter and on every product page that mentions hours"
)


@pytest.fixture
def owner(db):
    return UserFactory(
        username="margaret.hamilton-lovelace",
        email="margaret@example.com",
        is_staff=True,
        is_superuser=True,
        agent_permission=True,
    )


@pytest.fixture
def context(browser, live_server, owner, settings):  # noqa: F811
    """A logged-in browser context at 1366 x 900, the admin with the agent sidebar on (as the
    demo site has it)."""
    settings.AHENTIC = {**settings.AHENTIC, "ADMIN_SIDEBAR": True}
    client = Client()
    client.force_login(owner)
    cookie = client.cookies[django_settings.SESSION_COOKIE_NAME]
    context = browser.new_context(base_url=live_server.url, viewport=LAPTOP)
    context.add_cookies(
        [{"name": cookie.key, "value": cookie.value, "url": live_server.url, "httpOnly": True}]
    )
    yield context
    context.close()


@pytest.fixture
def sessions(owner):
    made = [
        SessionFactory(owner=owner, title=LONG_TITLE),
        SessionFactory(owner=owner, title="Fix the typo on the about page"),
        SessionFactory(owner=owner, title="Coffee"),
    ]
    for status in ("running", "awaiting_human"):
        runstate.session_transition(
            session_id=made[1].pk,
            from_statuses=[made[1].status],
            to_status=status,
            lease_token="",
        )
        made[1].refresh_from_db()
    return made


def line_height(locator) -> float:
    return locator.evaluate("e => parseFloat(getComputedStyle(e).lineHeight) || 16")


def test_the_session_list_keeps_its_columns_on_one_or_two_lines(page, sessions):  # noqa: F811
    page.goto("/admin/sessions_app/session/")
    expect(page.locator("#result_list")).to_be_visible()
    screenshot(page, "admin-session-list-1366")

    cells = page.locator("#result_list thead th, #result_list tbody td, #result_list tbody th")
    # How many lines each cell's own content shows (not the row's height, which the tallest
    # cell of the row sets): the height of its laid-out text, at most the cell's inner height
    # (text clipped away is not shown), over its line height.
    boxes = cells.evaluate_all(
        """cells => cells.map(cell => {
            const range = document.createRange();
            range.selectNodeContents(cell);
            const style = getComputedStyle(cell);
            const line = parseFloat(style.lineHeight) || parseFloat(style.fontSize) * 1.2;
            const inner = cell.clientHeight - parseFloat(style.paddingTop)
                - parseFloat(style.paddingBottom);
            const shown = Math.min(range.getBoundingClientRect().height, inner);
            return {text: cell.innerText.trim(), lines: shown / line};
        })"""
    )
    tall = [b for b in boxes if b["lines"] > 2.5]
    assert not tall, f"cells taller than two lines at 1366 px: {tall}"
    assert len(boxes) == 7 + 3 * 7  # the checkbox and six columns, a header and three rows
    # Every column is in view: the table does not scroll sideways.
    overflow = page.locator(".results").evaluate("e => e.scrollWidth - e.clientWidth")
    assert overflow <= 0, f"the list is {overflow} px too wide"
    # A long title is shortened on the page, and whole in its tooltip.
    clipped = page.locator(f'#result_list a .ahentic-clip[title="{LONG_TITLE}"]')
    expect(clipped).to_be_visible()
    assert clipped.evaluate("e => e.scrollHeight > e.clientHeight")  # more than it shows


def test_a_run_button_comes_back_to_the_session_page(page, sessions):  # noqa: F811
    waiting = sessions[1]
    change = f"/admin/sessions_app/session/{waiting.pk}/change/"
    page.goto(change)
    screenshot(page, "admin-session-page-1366")

    page.get_by_role("button", name="Cancel the run").click()

    expect(page.locator("ul.messagelist li")).to_have_text("Cancelled the run.")
    assert page.url.endswith(change)
    screenshot(page, "admin-session-page-after-cancel-1366")

    page.get_by_role("button", name="Continue / requeue").click()

    expect(page.locator("ul.messagelist li")).to_have_text(
        "Nothing to continue: the session is cancelled."
    )
    assert page.url.endswith(change)
    assert Session.objects.get(pk=waiting.pk).status == "cancelled"
