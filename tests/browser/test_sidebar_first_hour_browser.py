"""The sidebar's first hour on a real site, in a real browser (issue 21, items 4-7 and 10): the
approval card and the composer stay on screen at every size, Stop keeps the partly streamed
reply, the approval card shows a readable diff, the small things of the first hour (one bubble
per turn, History, token count, Copy, Escape, the dock button, chats opened in other windows),
and a missing worker is named within seconds.

Fixtures and helpers come from ``test_sidebar_browser`` (live server, local Messages API,
chromium); like it, this module is skipped without playwright or chromium unless
AHENTIC_REQUIRE_BROWSER=1 (.ci/browser-leg). Screenshots go to AHENTIC_SCREENSHOT_DIR when set.
"""

# The fixtures imported from test_sidebar_browser are parameters of the tests: F811 by design.
# ruff: noqa: F811

import re
import time

import pytest
from django.conf import settings as django_settings
from django.contrib.flatpages.models import FlatPage
from django.contrib.sites.models import Site

from orchestrator_app.testing.localapi import text_reply, tool_call, tool_reply
from sessions_app.models import Event, Session
from tests.support.browser import (
    CHROMIUM,
    assert_reachable,
    assistant_messages,
    expect,
    hitl_card,
    menu_item,
    new_chat,
    open_at,
    open_history,
    open_home,
    screenshot,
    send,
    set_view_mode,
    sidebar,
    status_is,
    transcript,
)
from tests.support.factories import UserFactory

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("llm_strict"),
]

assert CHROMIUM  # the module's skip (or failure) without a browser comes with that import

PAGES = "flatpages.flatpage"


@pytest.fixture
def owner(db):
    """A superuser with the agent permission: the admin tools' diff card needs admin rights."""
    return UserFactory(username="owner", is_staff=True, is_superuser=True, agent_permission=True)


# --- item 4: the approval card and the composer stay on screen --------------------------------

LONG_REPLY = "\n\n".join(
    f"## Part {n}\n\nParagraph {n} of a long answer, long enough to fill the panel."
    for n in range(1, 31)
)
LONG_TITLE = "A note about " + " ".join(f"bean{n}" for n in range(1, 120))
VIEWPORTS = [(1366, 900), (1366, 600), (1366, 500), (390, 844), (360, 640)]


@pytest.mark.parametrize(("width", "height"), VIEWPORTS, ids=[f"{w}x{h}" for w, h in VIEWPORTS])
def test_the_approval_card_and_the_composer_stay_on_screen(
    browser, live_server, owner, llm, width, height
):
    llm.enqueue(
        text_reply(LONG_REPLY),
        tool_reply(tool_call("sidebar_publish_note", {"title": LONG_TITLE}, id="toolu_long")),
        text_reply("Published."),
    )
    errors: list[str] = []
    context, page = open_at(browser, live_server, owner, width, height, errors)
    try:
        send(page, "Tell me a lot")
        expect(assistant_messages(page).last).to_contain_text("Part 30")
        send(page, "Publish it")
        card = hitl_card(page)
        expect(card).to_be_visible()
        # The longest card: the summary unfolded and the raw input opened (Verbose shows it).
        set_view_mode(page, "verbose")
        card.get_by_role("button", name=re.compile("Show more")).first.click()
        card.locator(".ahentic-hitl-input > summary").click()
        expect(card.locator(".ahentic-hitl-input pre")).to_be_visible()
        page.get_by_label("Message the agent").fill("A draft\nover\nseveral\nlines")

        screenshot(page, f"first-hour-approval-{width}x{height}")
        box = page.get_by_label("Message the agent")
        allow = card.get_by_role("button", name=re.compile("^Allow once:"))
        assert_reachable(allow, "Allow once")
        assert_reachable(card.get_by_role("button", name=re.compile("^Deny:")), "Deny")
        assert_reachable(box, "the message box")
        assert_reachable(page.get_by_role("button", name="Send message"), "Send")
        assert_reachable(page.get_by_role("button", name="Stop the run"), "Stop")
        # The status line sits above the box, never over it.
        status_box = page.locator(".ahentic-statusline").bounding_box()
        assert status_box["y"] + status_box["height"] <= box.bounding_box()["y"] + 0.5
        # The conversation scrolls inside the panel instead of pushing the rest away.
        scroll = transcript(page).evaluate(
            "(node) => [node.scrollHeight, node.clientHeight, node.scrollTop]"
        )
        assert scroll[1] > 0 and scroll[0] > scroll[1], scroll

        allow.click()
        expect(assistant_messages(page).last).to_contain_text("Published.")
        assert_reachable(page.get_by_role("button", name="Send message"), "Send after the card")
        assert not errors, errors
    finally:
        context.close()


# --- item 5: Stop keeps the partly streamed reply ---------------------------------------------

STREAMED = " ".join(f"Part {n} of a long answer." for n in range(1, 61))


def test_stop_keeps_the_streamed_text_marked_as_stopped_and_it_survives_a_reload(page, llm):
    llm.enqueue(text_reply(STREAMED, chunk_delay_s=0.12))  # about 7 s of deltas
    open_home(page)
    new_chat(page)
    send(page, "Tell me a long story")
    live = page.locator(".ahentic-live .ahentic-msg-text")
    expect(live).to_contain_text("Part 3 of a long answer.")
    shown = live.inner_text()

    page.get_by_role("button", name="Stop the run").click()

    status_is(page, "cancelled")
    stopped = page.locator(".ahentic-assistant.is-stopped")
    expect(stopped).to_have_count(1)
    expect(stopped.locator(".ahentic-msg-text")).to_contain_text("Part 1 of a long answer.")
    expect(stopped).to_contain_text("Stopped")
    expect(page.locator(".ahentic-live")).to_have_count(0)
    kept = stopped.locator(".ahentic-msg-text").inner_text().strip()
    assert kept.startswith(shown.strip().rstrip("▍").strip()[:40])  # what was shown, or more
    assert not STREAMED.startswith(kept + " Part 61")  # never the whole reply
    screenshot(page, "first-hour-stopped")
    [event] = Event.objects.filter(kind=Event.Kind.AGENT_MESSAGE)
    assert event.payload["meta"] == {"stopped": True}

    page.reload()
    expect(page.locator(".ahentic-assistant.is-stopped .ahentic-msg-text")).to_have_text(kept)


# --- item 6: the approval card shows the summary and a readable diff ----------------------------


@pytest.fixture
def admin_tools(settings):
    settings.AHENTIC = {**settings.AHENTIC, "ADMIN_TOOLS": [PAGES]}
    # Transactional tests flush the tables: the current site is made again when it is gone.
    site, _ = Site.objects.get_or_create(
        pk=django_settings.SITE_ID, defaults={"domain": "example.com", "name": "example.com"}
    )
    Site.objects.clear_cache()
    return site


def test_the_approval_card_shows_the_summary_and_the_diff_with_the_json_folded(
    page, llm, admin_tools
):
    about = FlatPage.objects.create(url="/about/", title="Abut", content="<p>Hi.</p>")
    about.sites.add(admin_tools)
    other = Site.objects.create(domain="shop.example.com", name="Shop")
    llm.enqueue(
        tool_reply(
            tool_call(
                "admin_save",
                {
                    "model": PAGES,
                    "id": about.pk,
                    "values": {"title": "About", "sites": [admin_tools.pk, other.pk]},
                },
                id="toolu_save",
            )
        ),
        text_reply("Renamed the page."),
    )
    open_home(page)
    new_chat(page)
    send(page, "Fix the typo in the about page title")

    card = hitl_card(page)
    expect(card).to_be_visible()
    expect(card.locator(".ahentic-hitl-summary")).to_have_text(
        f"Update flat page “/about/ -- Abut” (#{about.pk})"
    )
    diff = card.locator(".ahentic-hitl-diff")
    expect(diff.locator("dt")).to_have_text(["Title", "Sites"])  # by verbose_name
    expect(diff.locator("dd").nth(0).locator("del")).to_have_text("“Abut”")
    expect(diff.locator("dd").nth(0).locator("ins")).to_have_text("“About”")
    expect(diff.locator("dd").nth(1).locator("ins")).to_have_text(
        f"“example.com” (#{admin_tools.pk}), “shop.example.com” (#{other.pk})"
    )
    expect(card).not_to_contain_text("sites [")  # no bare keys
    expect(card.locator("details.ahentic-hitl-input")).to_have_count(0)  # Basic: words only
    screenshot(page, "first-hour-diff")
    # Verbose keeps the raw input, folded.
    set_view_mode(page, "verbose")
    details = card.locator("details.ahentic-hitl-input")
    expect(details).not_to_have_attribute("open", "")
    expect(details.locator("pre")).to_be_hidden()
    details.locator("summary").click()
    expect(details.locator("pre")).to_be_visible()
    expect(details.locator("pre")).to_contain_text('"model": "flatpages.flatpage"')

    card.get_by_role("button", name=re.compile("^Allow once:")).click()

    expect(assistant_messages(page).last).to_contain_text("Renamed the page.")
    about.refresh_from_db()
    assert about.title == "About"


# --- item 7: the small things of the first hour ----------------------------------------------


def test_a_turns_texts_around_its_tool_calls_are_one_bubble(page, llm, sidebar_calls):
    llm.enqueue(
        tool_reply(tool_call("sidebar_read_status", {}, id="toolu_read"), text="Let me look."),
        text_reply("All good: nothing to do."),
    )
    open_home(page)
    new_chat(page)
    send(page, "Check the status")

    expect(page.locator(".ahentic-assistant")).to_have_count(1)
    bubble = page.locator(".ahentic-assistant")
    expect(bubble.locator(".ahentic-msg-part")).to_have_text(
        ["Let me look.", "All good: nothing to do."]
    )
    expect(bubble.locator(".ahentic-msg-from")).to_have_count(1)
    screenshot(page, "first-hour-one-bubble")


@pytest.fixture
def sidebar_calls():
    from tests.support import tools_for_sidebar

    tools_for_sidebar.CALLS.clear()
    yield tools_for_sidebar.CALLS
    tools_for_sidebar.CALLS.clear()


def test_history_shows_when_and_a_readable_status(page, llm, owner):
    Session.objects.create(owner=owner, title="Old stopped chat", status=Session.Status.CANCELLED)
    Session.objects.create(owner=owner, title="Old failed chat", status=Session.Status.ERROR)
    open_home(page)

    open_history(page)
    rows = page.locator(".ahentic-history-item")
    expect(rows).to_have_count(2)
    expect(page.locator('[data-role="history-panel"] h3')).to_have_text(["Today"])
    texts = page.locator(".ahentic-history-meta").all_inner_texts()
    when = r"\d\d?:\d\d(\s?[AP]M)?"
    assert any(re.fullmatch(rf"{when} · stopped", t) for t in texts), texts
    assert any(re.fullmatch(rf"{when} · failed", t) for t in texts), texts
    assert not any("cancelled" in text or "(error)" in text for text in texts), texts


def test_the_token_count_waits_for_the_first_reply(page, llm, gate):
    llm.enqueue(text_reply("Counted.", gate=gate))
    open_home(page)
    new_chat(page)
    send(page, "Hello")
    status_is(page, "running")

    tokens = page.locator('[data-role="tokens"]')
    expect(tokens).to_have_text("Context 0%")
    page.wait_for_timeout(800)
    expect(tokens).not_to_contain_text("0 tokens")

    gate.set()
    expect(assistant_messages(page)).to_have_text(["Counted."])
    expect(tokens).to_contain_text(re.compile(r"[1-9][\d.,]*k? tokens this chat"))


def test_the_copy_button_never_covers_the_first_line_of_code(page, llm):
    llm.enqueue(text_reply("Run this:\n\n```python\nprint('hello, world and more')\n```"))
    open_home(page)
    new_chat(page)
    send(page, "Show me code")

    code = page.locator(".ahentic-md-code")
    expect(code).to_be_visible()
    copy = code.get_by_role("button", name="Copy code")
    first_line = code.locator("code").evaluate(
        """(node) => {
          const range = document.createRange();
          range.setStart(node.firstChild, 0);
          range.setEnd(node.firstChild, 5);
          const r = range.getBoundingClientRect();
          return {x: r.left, y: r.top, width: r.width, height: r.height};
        }"""
    )
    button = copy.bounding_box()
    assert button["y"] + button["height"] <= first_line["y"] + 0.5, (button, first_line)
    assert_reachable(copy, "Copy")
    screenshot(page, "first-hour-copy")


def test_escape_in_the_message_box_leaves_the_box_and_only_then_closes_the_panel(page):
    open_home(page)
    box = page.get_by_label("Message the agent")
    box.fill("half a thought")

    box.press("Escape")

    expect(page.locator("#ahentic-panel")).to_be_visible()
    expect(box).to_have_value("half a thought")
    expect(box).not_to_be_focused()
    expect(transcript(page)).to_be_focused()

    page.keyboard.press("Escape")  # from outside the box: the panel closes

    expect(page.locator("#ahentic-panel")).to_be_hidden()
    expect(page.get_by_role("button", name="Open the agent panel")).to_be_focused()


def test_a_phone_has_no_dock_button(browser, live_server, owner):
    errors: list[str] = []
    context, page = open_at(browser, live_server, owner, 390, 844, errors)
    try:
        expect(menu_item(page, "Dock the panel beside the page")).to_be_hidden()
        screenshot(page, "first-hour-phone")
    finally:
        context.close()
    context, page = open_at(browser, live_server, owner, 1366, 900, errors)
    try:
        expect(menu_item(page, "Dock the panel beside the page")).to_be_visible()
    finally:
        context.close()
    assert not errors, errors


def test_a_chat_opened_in_one_window_appears_in_the_others(context, page, llm):
    llm.enqueue(text_reply("Hi from the first window."))
    open_home(page)
    second = context.new_page()
    second.goto("/")
    expect(second.locator("#ahentic-panel")).to_be_visible()
    expect(second.locator(".ahentic-tab")).to_have_count(0)

    new_chat(page)
    send(page, "Hello there")
    expect(assistant_messages(page)).to_have_text(["Hi from the first window."])

    tab = second.locator(".ahentic-tab")
    expect(tab).to_have_count(1)
    expect(tab).to_contain_text("Hello there")
    expect(assistant_messages(second)).to_have_text(["Hi from the first window."])
    second.close()


# --- item 10: no worker, said within 10 s ------------------------------------------------------


@pytest.fixture
def no_worker(monkeypatch):
    """Steps go to the queue (django-q2's ORM broker) and no cluster takes them."""
    from django_q.conf import Conf

    monkeypatch.setattr(Conf, "SYNC", False)


def test_without_a_worker_the_sidebar_says_so_within_ten_seconds(page, llm, no_worker):
    open_home(page)
    new_chat(page)
    started = time.monotonic()
    send(page, "Anyone there?")
    status_is(page, "running")

    banner = page.locator('[data-role="banner"]')
    expect(banner).to_contain_text("No worker has picked up this run", timeout=10_000)
    assert time.monotonic() - started < 10.5
    expect(banner).to_contain_text("python manage.py qcluster")
    expect(banner.get_by_role("button", name="Stop")).to_be_visible()
    expect(sidebar(page)).to_have_attribute("data-status", "running")
    # The status line agrees with the banner instead of saying the agent is thinking.
    expect(page.locator('[data-role="progress"]')).to_have_text("Waiting for a worker…")
    screenshot(page, "first-hour-no-worker")
    assert llm.message_requests() == []  # nothing ran the step

    banner.get_by_role("button", name="Stop").click()
    status_is(page, "cancelled")
    expect(banner).to_be_hidden()


def test_a_claimed_run_never_says_no_worker(page, llm, gate):
    llm.enqueue(text_reply("Slow but working.", gate=gate))
    open_home(page)
    new_chat(page)
    send(page, "Take your time")
    status_is(page, "running")

    page.wait_for_timeout(9500)

    expect(page.locator('[data-role="banner"]')).not_to_contain_text("No worker")
    gate.set()
    expect(assistant_messages(page)).to_have_text(["Slow but working."])
