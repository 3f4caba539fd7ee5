"""The admin for operators in a real browser (issue 31, section 4), at 1366 x 900 and 390 x 844.

A session's runs fold and unfold on its page; the floating agent panel never covers the admin's
user links or a change list's filters; docked, it leaves the change list at least 700 px, or
floats when the window is too narrow for both. Measured with bounding boxes. Browser, live
server and login come from the sidebar's browser tests (skipped without playwright/chromium
unless AHENTIC_REQUIRE_BROWSER=1). AHENTIC_SCREENSHOT_DIR=/tmp writes screenshots.
"""

from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth import get_user_model

from sessions_app import services
from sessions_app.services import TraceItem
from tests.support.admin import add_runs
from tests.support.browser import admin_page, covered, expect, menu_item, screenshot
from tests.support.factories import SessionFactory

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("llm_strict"),
]

LAPTOP = {"width": 1366, "height": 900}
PHONE = {"width": 390, "height": 844}
SESSIONS = "/admin/sessions_app/session/"


@pytest.fixture
def admin_sidebar(settings):
    settings.AHENTIC = {**settings.AHENTIC, "ADMIN_SIDEBAR": True}


@pytest.fixture
def open_page(browser, live_server, admin_sidebar):  # noqa: F811
    """``open_page(path, viewport)``: a staff user's page, checked for script errors."""
    contexts, errors = [], []

    def open_page(path: str, viewport: dict):
        context = admin_page(browser, live_server, viewport)
        contexts.append(context)
        page = context.new_page()
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(path)
        # Booted: the sidebar placed itself in the admin.
        page.wait_for_function("document.documentElement.classList.contains('ahentic-admin')")
        return page

    yield open_page
    for context in contexts:
        context.close()
    assert not errors, f"JavaScript errors on the page: {errors}"


def box(page, selector: str) -> dict:
    found = page.locator(selector).first.bounding_box()
    assert found, f"{selector} is not laid out"
    return found


def overlaps(a: dict, b: dict) -> bool:
    return (
        a["x"] < b["x"] + b["width"]
        and b["x"] < a["x"] + a["width"]
        and a["y"] < b["y"] + b["height"]
        and b["y"] < a["y"] + a["height"]
    )


def open_panel(page):
    page.get_by_role("button", name="Open the agent panel").click()
    expect(page.locator("#ahentic-panel")).to_be_visible()


def assert_nothing_covered(page, selectors: list[str]) -> None:
    panel = box(page, "#ahentic-panel")
    for selector in selectors:
        for element in page.locator(selector).all():
            if not element.is_visible():
                continue
            assert not overlaps(panel, element.bounding_box()), f"the panel covers {selector}"
            # elementFromPoint sees only the viewport: a long filter column goes below it.
            element.scroll_into_view_if_needed()
            assert not covered(page, element), f"something covers {selector}"


@pytest.fixture
def sessions(db):
    made = [SessionFactory(title=f"Chat {n}") for n in range(3)]
    add_runs(made[0], 3)
    return made


# --- the runs of a session ------------------------------------------------------------------------


@pytest.mark.parametrize("viewport", [LAPTOP, PHONE], ids=["1366", "390"])
def test_a_sessions_runs_fold_with_the_newest_open(open_page, sessions, viewport):
    page = open_page(f"{SESSIONS}{sessions[0].pk}/change/", viewport)
    runs = page.locator("details.ahentic-run")

    expect(runs).to_have_count(3)
    newest, oldest = runs.nth(0), runs.nth(2)
    expect(newest).to_have_attribute("data-run", "3")
    expect(newest.get_by_text("run 3 message 0")).to_be_visible()
    expect(oldest.get_by_text("run 1 message 0")).to_be_hidden()
    newest.locator("summary").scroll_into_view_if_needed()
    screenshot(page, f"admin-session-runs-{viewport['width']}")

    oldest.locator("summary").click()

    expect(oldest.get_by_text("run 1 message 0")).to_be_visible()
    expect(oldest.get_by_text("run 1 step 1")).to_be_visible()
    time = oldest.locator("td time").first
    assert time.get_attribute("datetime").startswith("20")  # the exact ISO time
    assert time.get_attribute("title")  # the full local date and time


# --- the floating panel ---------------------------------------------------------------------------


def test_the_floating_panel_leaves_the_user_links_and_the_filters_clear(open_page, sessions):
    page = open_page(SESSIONS, LAPTOP)
    launcher = box(page, ".ahentic-launcher")
    assert not overlaps(launcher, box(page, "#changelist-filter"))

    open_panel(page)

    screenshot(page, "admin-panel-floating-changelist-1366")
    assert_nothing_covered(page, ["#user-tools a", "#user-tools button", "#changelist-filter a"])
    panel = box(page, "#ahentic-panel")
    assert panel["width"] >= 320
    assert panel["y"] >= box(page, "#header")["y"] + box(page, "#header")["height"] - 1
    # Scrolled past the header, the panel takes the whole height again.
    page.mouse.wheel(0, 600)
    page.wait_for_function("document.getElementById('header').getBoundingClientRect().bottom < 0")
    expect(page.locator("#ahentic-panel")).to_have_js_property("offsetTop", 0)


def test_on_a_session_page_the_floating_panel_keeps_below_the_header(open_page, sessions):
    page = open_page(f"{SESSIONS}{sessions[0].pk}/change/", LAPTOP)

    open_panel(page)

    screenshot(page, "admin-panel-floating-change-1366")
    assert_nothing_covered(page, ["#user-tools a", "#user-tools button"])


def test_on_a_phone_the_panel_leaves_the_admins_header_in_view(open_page, sessions):
    page = open_page(SESSIONS, PHONE)

    open_panel(page)

    screenshot(page, "admin-panel-390")
    assert_nothing_covered(page, ["#user-tools a", "#user-tools button"])
    panel = box(page, "#ahentic-panel")
    assert panel["width"] == PHONE["width"]  # the phone's whole width below the header


# --- docked ---------------------------------------------------------------------------------------


def dock(page):
    menu_item(page, "Dock the panel beside the page").click()
    expect(page.locator('[data-role="dock"]')).to_have_attribute(
        "aria-label", "Float the panel over the page"
    )


def is_docked(page) -> bool:
    return page.evaluate("document.documentElement.classList.contains('ahentic-docked')")


@pytest.mark.parametrize("path", [SESSIONS, "change"])
def test_docked_the_change_list_keeps_700_px_beside_the_panel(open_page, sessions, path):
    page = open_page(
        SESSIONS if path == SESSIONS else f"{SESSIONS}{sessions[0].pk}/change/", LAPTOP
    )
    open_panel(page)

    dock(page)

    screenshot(page, f"admin-panel-docked-{'list' if path == SESSIONS else 'change'}-1366")
    assert is_docked(page)
    panel = box(page, "#ahentic-panel")
    content = page.locator("#content").evaluate(
        """e => { const s = getComputedStyle(e);
                  return e.clientWidth - parseFloat(s.paddingLeft) - parseFloat(s.paddingRight); }"""
    )
    assert content >= 700
    assert 320 <= panel["width"] <= 400
    assert box(page, "#content")["x"] + box(page, "#content")["width"] <= panel["x"] + 1
    if path == SESSIONS:
        assert box(page, "#changelist")["width"] >= 700
    assert_nothing_covered(page, ["#user-tools a", "#user-tools button", "#changelist-filter a"])
    page.reload()  # docked and open, remembered
    expect(page.locator("#ahentic-panel")).to_be_visible()
    assert is_docked(page)


def test_docked_on_a_wide_screen_the_panel_keeps_its_full_width(open_page, sessions):
    page = open_page(SESSIONS, {"width": 1920, "height": 1080})
    open_panel(page)

    dock(page)

    assert is_docked(page)
    assert box(page, "#ahentic-panel")["width"] == 400


def test_too_narrow_for_both_the_docked_panel_floats_clear_of_the_filters(open_page, sessions):
    page = open_page(SESSIONS, {"width": 1200, "height": 900})
    before = box(page, "#changelist")["width"]
    open_panel(page)

    menu_item(page, "Dock the panel beside the page").click()

    assert not is_docked(page)
    assert box(page, "#changelist")["width"] == before  # the list keeps its width
    assert_nothing_covered(page, ["#user-tools a", "#user-tools button", "#changelist-filter a"])
    # A wider window has room for both: the panel docks.
    page.set_viewport_size(LAPTOP)
    page.wait_for_function("document.documentElement.classList.contains('ahentic-docked')")
    assert box(page, "#changelist")["width"] >= 700


# --- the sidebar's debugger -----------------------------------------------------------------------


@pytest.mark.parametrize("viewport", [LAPTOP, PHONE], ids=["1366", "390"])
def test_the_debugger_lists_the_newest_trace_in_the_order_it_happened(open_page, viewport):
    page = open_page("/admin/", viewport)
    staff = get_user_model().objects.get(username="staff")
    session = SessionFactory(owner=staff, title="Traced")
    start = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
    services.trace_records(
        session_id=session.pk,
        items=[
            TraceItem(type="step", summary=f"step {n}", at=start + timedelta(seconds=n))
            for n in range(25)
        ],
    )
    page.goto(f"/admin/?ahentic_session={session.pk}")

    menu_item(page, "Show the debugger").click()

    rows = page.locator('[data-role="trace"] li')
    expect(rows).to_have_count(20)
    expect(page.locator('[data-role="trace-caption"]')).to_have_text(
        "The newest 20 of 25 trace events, oldest first."
    )
    texts = rows.all_inner_texts()
    assert "step 5" in texts[0] and "step 24" in texts[-1]
    times = rows.locator("time").evaluate_all("ts => ts.map(t => t.getAttribute('datetime'))")
    assert times == sorted(times) and len(times) == 20
    screenshot(page, f"sidebar-debugger-trace-{viewport['width']}")
