"""The history panel, tables, code, images and the keyboard in a real browser (issue 31, §2), at
1366x900 and 390x844: every chat listed by day with its agent and "Open in a tab", search over
message text the browser never loaded, rename, delete with Undo, the panel from the keyboard;
tables that scroll sideways without breaking words, long code that scrolls, images that open
larger; the shortcut to the message box and a focus ring on every control.

Fixtures and helpers come from ``test_sidebar_browser`` (live server, local Messages API,
chromium); like it, this module is skipped without playwright or chromium unless
AHENTIC_REQUIRE_BROWSER=1 (.ci/browser-leg).
"""

# The fixtures imported from test_sidebar_browser are parameters of the tests: F811 by design.
# ruff: noqa: F811

from datetime import timedelta

import pytest
from django.utils import timezone

from orchestrator_app.testing.localapi import text_reply
from sessions_app import agents, services
from sessions_app.models import Event, Session
from tests.support.attachment_files import png
from tests.support.browser import (
    CHROMIUM,
    assistant_messages,
    expect,
    new_chat,
    open_at,
    open_home,
    screenshot,
    send,
)
from tests.support.factories import SessionFactory, agent_create

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("llm_strict"),
]

assert CHROMIUM  # the module's skip (or failure) without a browser comes with that import

VIEWPORTS = [(1366, 900), (390, 844)]
SIZES = pytest.mark.parametrize(
    ("width", "height"), VIEWPORTS, ids=[f"{w}x{h}" for w, h in VIEWPORTS]
)


@pytest.fixture
def sized(request, browser, live_server, owner):
    """``open(width, height)``: a logged-in page at that size with the panel open; closed and
    checked for JavaScript errors at the end."""
    opened = []

    def open_page(width, height):
        errors: list = []
        context, page = open_at(browser, live_server, owner, width, height, errors)
        opened.append((context, errors))
        return page

    yield open_page
    for browser_context, errors in opened:
        browser_context.close()
        assert not errors, f"JavaScript errors on the page: {errors}"


def history_button(page):
    return page.get_by_role("button", name="History", exact=True)


def history_panel(page):
    return page.locator('[data-role="history-panel"]')


def open_history(page):
    history_button(page).click()
    expect(history_panel(page)).to_be_visible()
    expect(history_panel(page).locator('[role="status"]')).not_to_have_text("Loading…")


def rows(page):
    return history_panel(page).locator(".ahentic-history-item")


def say(session, text, kind=Event.Kind.USER_MESSAGE):
    services.events_append(session_id=session.pk, items=[{"kind": kind, "content": text}])


def aged(session, **delta):
    """As if the chat's last activity were that long ago (its list order and its day)."""
    Session.objects.filter(pk=session.pk).update(updated_at=timezone.now() - timedelta(**delta))


# --- the panel --------------------------------------------------------------------------------


@SIZES
def test_every_chat_is_listed_by_day_with_its_agent_and_open_tabs_marked(
    sized, owner, width, height
):
    version = agents.latest_version(agent_create("writer", name="Writer", colour="#aa3366"))
    for n in range(33):
        aged(SessionFactory(owner=owner, title=f"Old chat {n}"), days=40, minutes=n)
    aged(SessionFactory(owner=owner, title="Yesterday's chat"), days=1)
    SessionFactory(owner=owner, title="Writer's chat", agent_version=version)
    page = sized(width, height)

    open_history(page)

    panel = history_panel(page)
    headings = panel.locator("h3")
    expect(headings.first).to_have_text("Today")
    expect(headings.nth(1)).to_have_text("Yesterday")
    first = rows(page).first
    expect(first).to_contain_text("Writer's chat")
    expect(first).to_contain_text("Writer")
    expect(rows(page)).to_have_count(30)  # a page, then "Load more"
    panel.get_by_role("button", name="Load more").click()
    expect(rows(page)).to_have_count(35)
    expect(panel.get_by_role("button", name="Load more")).to_be_hidden()
    screenshot(page, f"history-panel-{width}x{height}")

    # Opening a chat puts it in a tab; the panel marks it as open there.
    first.locator(".ahentic-history-open").click()
    expect(history_panel(page)).to_be_hidden()
    expect(page.locator(".ahentic-tab.is-active")).to_contain_text("Writer's chat")
    open_history(page)
    expect(rows(page).first).to_contain_text("Open in a tab")
    expect(rows(page).nth(1)).not_to_contain_text("Open in a tab")


@SIZES
def test_search_finds_a_chat_by_a_message_the_browser_never_loaded(sized, owner, width, height):
    hidden = SessionFactory(owner=owner, title="Planning")
    for n in range(80):
        say(hidden, f"filler message {n}")
    say(hidden, "the pelican budget is 40 euros", kind=Event.Kind.AGENT_MESSAGE)
    for n in range(80):
        say(hidden, f"later message {n}")
    SessionFactory(owner=owner, title="Unrelated")
    page = sized(width, height)
    open_history(page)
    expect(rows(page)).to_have_count(2)

    page.get_by_label("Search chats").fill("PELICAN")

    expect(rows(page)).to_have_count(1)
    expect(rows(page).first).to_contain_text("Planning")
    expect(rows(page).first.locator(".ahentic-history-match")).to_contain_text(
        "the pelican budget is 40 euros"
    )
    page.get_by_label("Search chats").fill("nothing like this")
    expect(history_panel(page).locator('[role="status"]')).to_have_text(
        "No chat matches your search."
    )


def test_a_chat_is_renamed_in_place(page, owner):
    chat = SessionFactory(owner=owner, title="Untitled")
    open_home(page)
    open_history(page)

    rows(page).first.get_by_role("button", name="Rename Untitled").click()
    box = rows(page).first.get_by_role("textbox")
    box.fill("Trip to Rome")
    box.press("Enter")

    expect(rows(page).first).to_contain_text("Trip to Rome")
    expect(rows(page).first.locator(".ahentic-history-open")).to_be_focused()
    chat.refresh_from_db()
    assert chat.title == "Trip to Rome"

    # Escape cancels a rename without closing the panel.
    rows(page).first.get_by_role("button", name="Rename Trip to Rome").click()
    rows(page).first.get_by_role("textbox").fill("Something else")
    rows(page).first.get_by_role("textbox").press("Escape")
    expect(history_panel(page)).to_be_visible()
    expect(rows(page).first).to_contain_text("Trip to Rome")
    chat.refresh_from_db()
    assert chat.title == "Trip to Rome"


@SIZES
def test_a_deleted_chat_closes_its_tab_and_undo_brings_it_back(sized, owner, llm, width, height):
    llm.enqueue(text_reply("Noted."))
    page = sized(width, height)
    new_chat(page)
    send(page, "Remember the pelican")
    expect(assistant_messages(page)).to_have_text(["Noted."])
    SessionFactory(owner=owner, title="Other chat")
    open_history(page)
    expect(rows(page)).to_have_count(2)
    doomed = rows(page).filter(has_text="Open in a tab")
    title = doomed.locator(".ahentic-history-title").inner_text()

    doomed.get_by_role("button", name=f"Delete {title}").click()

    expect(rows(page)).to_have_count(1)
    toast = page.locator('[data-role="toast"]')
    expect(toast).to_contain_text(f"Deleted “{title}”.")
    expect(page.locator(".ahentic-tab")).to_have_count(0)
    assert Session.objects.filter(deleted_at__isnull=False).count() == 1
    screenshot(page, f"history-deleted-{width}x{height}")

    toast.get_by_role("button", name="Undo").click()

    expect(toast).to_contain_text(f"Restored “{title}”.")
    expect(rows(page)).to_have_count(2)
    assert not Session.objects.filter(deleted_at__isnull=False).exists()
    rows(page).filter(has_text=title).locator(".ahentic-history-open").click()
    expect(assistant_messages(page)).to_have_text(["Noted."])


def test_the_panel_works_from_the_keyboard(page, owner):
    for n, hours in enumerate((1, 2, 3)):
        aged(SessionFactory(owner=owner, title=f"Chat {n}"), hours=hours)
    open_home(page)
    history_button(page).focus()
    page.keyboard.press("Enter")
    search = page.get_by_label("Search chats")
    expect(search).to_be_focused()
    expect(rows(page)).to_have_count(3)

    page.keyboard.press("ArrowDown")
    expect(rows(page).nth(0).locator(".ahentic-history-open")).to_be_focused()
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowDown")  # stays on the last
    expect(rows(page).nth(2).locator(".ahentic-history-open")).to_be_focused()
    page.keyboard.press("Home")
    expect(rows(page).nth(0).locator(".ahentic-history-open")).to_be_focused()
    page.keyboard.press("ArrowUp")  # back to the search box
    expect(search).to_be_focused()

    # Escape closes and gives focus back to the History button.
    page.keyboard.press("Escape")
    expect(history_panel(page)).to_be_hidden()
    expect(history_button(page)).to_be_focused()

    # Enter on a chat opens it.
    page.keyboard.press("Enter")
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Enter")
    expect(history_panel(page)).to_be_hidden()
    expect(page.locator(".ahentic-tab.is-active")).to_contain_text("Chat 1")


# --- tables, code, images ---------------------------------------------------------------------

WIDE_TABLE = (
    "| Name | Description | Quantity | Supplier | Warehouse | Notes |\n"
    "|---|---|---|---|---|---|\n"
    "| Extraordinarily | Incomprehensibilities of procurement | 12345678 | "
    "Internationalisation Ltd | Northwestern | Counterrevolutionaries |\n"
)
LONG_CODE = (
    "```python\n" + "\n".join(f"line_{n} = {n}  # " + "x" * 120 for n in range(60)) + "\n```"
)

TABLE_JS = """(root) => {
  const box = root.querySelector('.ahentic-md-table');
  const bubble = box.closest('.ahentic-msg-text');
  const transcript = root.closest('.ahentic-transcript');
  const cells = Array.from(box.querySelectorAll('th, td'));
  // A cell whose one word was broken is taller than one line.
  const lineHeight = parseFloat(getComputedStyle(cells[0]).lineHeight);
  return {
    scrolls: box.scrollWidth > box.clientWidth,
    bubbleInside: bubble.getBoundingClientRect().right
      <= transcript.getBoundingClientRect().right + 1,
    oneWordCellsOnOneLine: cells
      .filter((c) => !c.textContent.trim().includes(' '))
      .every((c) => c.clientHeight < lineHeight * 2 + 8),
  };
}"""


@SIZES
def test_a_wide_table_scrolls_sideways_and_long_code_scrolls(sized, llm, width, height):
    llm.enqueue(text_reply(WIDE_TABLE + "\n\n" + LONG_CODE))
    page = sized(width, height)
    new_chat(page)
    send(page, "Show me")
    reply = assistant_messages(page).last
    expect(reply.locator("table")).to_be_visible()

    table = reply.evaluate(TABLE_JS)
    code = reply.locator(".ahentic-md-code pre").evaluate(
        "(pre) => ({down: pre.scrollHeight > pre.clientHeight, "
        "side: pre.scrollWidth > pre.clientWidth, "
        "bubble: pre.closest('.ahentic-msg-text').getBoundingClientRect().height})"
    )

    assert table == {"scrolls": True, "bubbleInside": True, "oneWordCellsOnOneLine": True}
    assert code["down"] and code["side"]
    assert code["bubble"] < height  # the code scrolls inside instead of growing the bubble
    box = reply.locator(".ahentic-md-table")
    box.evaluate("(box) => { box.scrollLeft = box.scrollWidth; }")
    assert box.evaluate("(box) => box.scrollLeft") > 0
    screenshot(page, f"table-and-code-{width}x{height}")


@SIZES
def test_an_image_opens_larger_and_escape_closes_it(sized, owner, llm, width, height):
    from django.core.files.uploadedfile import SimpleUploadedFile
    from django.test import Client

    llm.enqueue(text_reply("A square."))
    chat = SessionFactory(owner=owner, title="Picture")
    client = Client()
    client.force_login(owner)
    upload = client.post(
        f"/ahentic/v1/sessions/{chat.pk}/attachments",
        {"file": SimpleUploadedFile("square.png", png(400, 400), "image/png")},
    )
    assert upload.status_code == 201, upload.content
    [item] = upload.json()["attachments"]
    posted = client.post(
        f"/ahentic/v1/sessions/{chat.pk}/messages",
        {"content": "What is this?", "attachments": [item["id"]]},
        content_type="application/json",
    )
    assert posted.status_code in (200, 202), posted.content
    page = sized(width, height)
    open_history(page)
    rows(page).first.locator(".ahentic-history-open").click()
    thumbnail = page.locator(".ahentic-transcript .ahentic-attachment.is-image").first
    expect(thumbnail).to_be_visible()

    thumbnail.click()

    dialog = page.get_by_role("dialog")
    expect(dialog).to_be_visible()
    image = dialog.locator("img")
    expect(image).to_have_attribute("alt", "square.png")
    big = image.evaluate("(img) => img.getBoundingClientRect().width")
    small = thumbnail.evaluate("(a) => a.getBoundingClientRect().width")
    assert big > small
    expect(dialog.get_by_role("button", name="Close")).to_be_focused()
    screenshot(page, f"lightbox-{width}x{height}")

    page.keyboard.press("Escape")

    expect(dialog).to_be_hidden()
    expect(thumbnail).to_be_focused()
    assert page.url.endswith("/")  # the page never left for the file


# --- keyboard -------------------------------------------------------------------------------


@SIZES
def test_the_shortcut_opens_the_sidebar_at_the_message_box(sized, width, height):
    page = sized(width, height)
    page.get_by_role("button", name="Collapse the agent panel").click()
    launcher = page.get_by_role("button", name="Open the agent panel")
    expect(launcher).to_be_visible()
    expect(launcher).to_have_attribute("aria-keyshortcuts", "/ Alt+Shift+A")
    assert "/" in launcher.get_attribute("title")

    page.locator("body").press("/")

    box = page.get_by_label("Message the agent")
    expect(page.locator("#ahentic-panel")).to_be_visible()
    expect(box).to_be_focused()
    expect(box).to_have_value("")  # the "/" opened the panel, it was not typed

    # In a text field "/" is a character; Alt+Shift+A opens from there.
    page.get_by_role("button", name="Collapse the agent panel").click()
    field = page.locator("main input[type=text], main textarea").first
    field.click()
    field.press("/")
    expect(page.locator("#ahentic-panel")).to_be_hidden()
    field.press("Alt+Shift+A")
    expect(box).to_be_focused()


FOCUS_JS = """() => {
  const node = document.activeElement;
  const style = getComputedStyle(node);
  return {
    inSidebar: !!node.closest('#ahentic-sidebar'),
    ring: style.outlineStyle !== 'none' && parseFloat(style.outlineWidth) >= 2,
    name: node.getAttribute('aria-label')
      || (node.labels && node.labels.length ? node.labels[0].textContent.trim() : '')
      || node.textContent.trim().slice(0, 30) || node.tagName,
  };
}"""


@SIZES
def test_every_control_is_reachable_by_tab_with_a_focus_ring(sized, owner, llm, width, height):
    SessionFactory(owner=owner, title="Earlier chat")
    llm.enqueue(text_reply("Hello there."))
    page = sized(width, height)
    new_chat(page)
    send(page, "Hi")
    expect(assistant_messages(page)).to_have_text(["Hello there."])
    page.locator("#ahentic-panel .ahentic-header").click(position={"x": 2, "y": 2})

    seen = []
    for _ in range(40):
        page.keyboard.press("Tab")
        focused = page.evaluate(FOCUS_JS)
        if not focused["inSidebar"]:
            continue
        seen.append(focused["name"])
        assert focused["ring"], f"no focus ring on {focused['name']}"
    for control in ("History", "New chat", "Message the agent", "Collapse the agent panel"):
        assert any(control in name for name in seen), (control, seen)

    open_history(page)
    page.keyboard.press("Tab")  # from the search box into the list
    for _ in range(4):
        focused = page.evaluate(FOCUS_JS)
        assert focused["inSidebar"] and focused["ring"], focused
        page.keyboard.press("Tab")
