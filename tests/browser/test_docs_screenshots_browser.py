"""The documentation's screenshots, made in a real browser from the offline demo model.

Each test puts the sidebar (or the admin) in the state a docs page shows, checks that state,
and saves a PNG at 1x, cropped to the panel where the page around it says nothing. With
``AHENTIC_DOCS_SCREENSHOTS=docs/img`` (.ci/browser-leg sets it before building the docs) the
PNGs replace the committed ones, but only when they changed beyond ids and times: each shot is
taken with what shows a time, an id or a count of tokens masked (painted over in the panel's
background), so a new run of the same state writes the same bytes and leaves the file alone.
Without it they go to a temporary directory, so the module checks the same states either way.
Sizes: 1280x860 (a laptop) and 390x844 (a phone). Skipped like the other browser modules without playwright
or chromium, unless AHENTIC_REQUIRE_BROWSER=1.
"""

import os
import struct
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.contrib.sites.models import Site

from orchestrator_app.testing.offline import demo_responder
from sessions_app.models import Session
from tests.support.browser import (
    assistant_messages,
    expect,
    hitl_card,
    new_chat,
    open_at,
    open_home,
    send,
    status_is,
)
from tests.support.factories import UserFactory
from tests.support.paths import ROOT

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("llm_strict"),
]

DOCS = ROOT / "docs"
DESKTOP = {"width": 1280, "height": 860}
PHONE = (390, 844)


@pytest.fixture
def shots(tmp_path) -> Path:
    directory = os.environ.get("AHENTIC_DOCS_SCREENSHOTS")
    return Path(directory) if directory else tmp_path


@pytest.fixture
def owner(db):
    """The demo's ``demo`` login: a superuser, so the admin tools and the admin pages show."""
    return UserFactory(username="demo", is_staff=True, is_superuser=True, agent_permission=True)


@pytest.fixture
def demo(llm, settings):
    from ahentic_site.settings import AHENTIC as DEMO

    settings.AHENTIC = {**settings.AHENTIC, "ADMIN_TOOLS": DEMO["ADMIN_TOOLS"]}
    # Transactional tests flush the tables: the current site is made again when it is gone.
    Site.objects.get_or_create(
        pk=django_settings.SITE_ID, defaults={"domain": "example.com", "name": "example.com"}
    )
    Site.objects.clear_cache()
    llm.responder = demo_responder
    return llm


def png_size(path: Path) -> tuple[int, int]:
    """Width and height from the PNG's IHDR chunk (the file is a PNG, or this fails)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", data[16:24])


# What changes from run to run in the same state: times, ids, token counts (the sidebar's, and
# the admin's rows of the id and the *_at fields, whole: their text changes width).
VOLATILE = (
    "time, [data-role='tokens'], [data-role='progress'], .ahentic-history-when, "
    ".form-row.field-id, .form-row[class*='_at']"
)


def save_if_changed(path: Path, png: bytes) -> bool:
    """Write ``png`` unless ``path`` holds the same bytes already (masked shots of the same
    state are byte for byte the same). True when written."""
    if path.exists() and path.read_bytes() == png:
        return False
    path.write_bytes(png)
    return True


def masked_shot(page, target, path: Path) -> tuple[int, int]:  # noqa: F811
    """A PNG of ``target`` (a locator or the page) with the volatile parts masked, saved
    only when it changed; returns its size."""
    png = target.screenshot(
        animations="disabled", mask=[page.locator(VOLATILE)], mask_color="#f6f8fa"
    )
    save_if_changed(path, png)
    return png_size(path)


def panel_shot(page, path: Path) -> tuple[int, int]:  # noqa: F811
    return masked_shot(page, page.locator("#ahentic-panel"), path)


def ask_for_a_page(page):  # noqa: F811
    """The Quickstart's step 3: the card that asks before the page is written."""
    send(page, "Write a page about coffee")
    card = hitl_card(page)
    expect(card).to_be_visible()
    expect(card.locator(".ahentic-hitl-summary")).to_have_text("Create flat page")
    status_is(page, "awaiting_human")
    return card


def test_the_reply_screenshot_shows_the_answer_to_a_question_about_the_page(
    page,  # noqa: F811
    demo,
    shots,
):
    page.set_viewport_size(DESKTOP)
    open_home(page)
    new_chat(page)

    send(page, "What is on this page?")

    status_is(page, "idle")
    expect(assistant_messages(page).last).to_contain_text("Ahentic demo")
    width, height = panel_shot(page, shots / "sidebar-reply.png")
    # Cropped to the panel: narrower than the window, as tall as the panel.
    assert width < DESKTOP["width"] // 2 and height > 400


def test_the_approval_screenshot_shows_the_request_and_the_card(page, demo, shots):  # noqa: F811
    page.set_viewport_size(DESKTOP)
    open_home(page)
    new_chat(page)

    card = ask_for_a_page(page)

    expect(page.locator(".ahentic-user .ahentic-msg-text")).to_have_text(
        ["Write a page about coffee"]
    )
    expect(card.get_by_role("button", name="Allow once")).to_be_in_viewport()
    width, _ = panel_shot(page, shots / "sidebar-approval.png")
    assert width < DESKTOP["width"] // 2


def test_the_admin_screenshot_shows_the_chat_on_its_session_page(page, demo, owner, shots):  # noqa: F811
    page.set_viewport_size(DESKTOP)
    open_home(page)
    new_chat(page)
    send(page, "What is on this page?")
    expect(assistant_messages(page).last).to_contain_text("Ahentic demo")
    status_is(page, "idle")
    session = Session.objects.get(owner=owner, status=Session.Status.IDLE)

    page.goto(f"/admin/sessions_app/session/{session.pk}/change/")

    expect(page.locator("#content h1")).to_be_visible()
    expect(page.locator("#content")).to_contain_text("What is on this page? (idle)")
    path = shots / "admin-session.png"
    assert masked_shot(page, page, path) == (DESKTOP["width"], DESKTOP["height"])


def test_the_phone_screenshot_shows_the_card_at_390_wide(browser, live_server, owner, demo, shots):  # noqa: F811
    errors: list[str] = []
    phone_context, phone = open_at(browser, live_server, owner, *PHONE, errors)
    try:
        new_chat(phone)
        card = ask_for_a_page(phone)
        expect(card.get_by_role("button", name="Allow once")).to_be_in_viewport()

        path = shots / "sidebar-phone.png"
        assert masked_shot(phone, phone, path) == PHONE
    finally:
        phone_context.close()
    assert not errors, errors


def test_a_shot_of_the_same_state_is_not_written_again(page, demo, shots):  # noqa: F811
    page.set_viewport_size(DESKTOP)
    open_home(page)
    new_chat(page)
    send(page, "What is on this page?")
    status_is(page, "idle")
    expect(assistant_messages(page).last).to_contain_text("Ahentic demo")
    path = shots / "sidebar-same.png"
    panel_shot(page, path)
    written = path.stat().st_mtime_ns
    page.wait_for_timeout(1100)  # a second later: the times on screen would differ, masked

    panel_shot(page, path)  # the same state: the same masked bytes, nothing written

    assert path.stat().st_mtime_ns == written
    path.unlink()
