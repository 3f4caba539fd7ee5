"""Reply actions in a real browser (issue 31, section 2), at 1366x900 and 390x844: Copy, Retry
and Edit on the replies (Up in an empty box edits the last message) with the earlier attempt
folded in the transcript, Stop keeping exactly the text on screen, and the approval card
scrolling the request and the lead-in into view while the reader's own scrolling is kept.

Fixtures and helpers come from ``test_sidebar_browser`` (live server, local Messages API,
chromium); like it, this module is skipped without playwright or chromium unless
AHENTIC_REQUIRE_BROWSER=1 (.ci/browser-leg).
"""

# The fixtures imported from test_sidebar_browser are parameters of the tests: F811 by design.
# ruff: noqa: F811

import re

import pytest

from orchestrator_app.testing.localapi import text_reply, tool_call, tool_reply
from sessions_app import services
from sessions_app.models import Agent, Event, Session
from tests.support import tools_for_sidebar  # noqa: F401  (registers the sidebar_* tools)
from tests.support.browser import (
    CHROMIUM,
    assert_reachable,
    assistant_messages,
    expect,
    hitl_card,
    new_chat,
    open_at,
    screenshot,
    send,
    status_is,
    transcript,
)
from tests.support.factories import SessionFactory, agent_create

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("llm_strict"),
]

assert CHROMIUM  # the module's skip (or failure) without a browser comes with that import

VIEWPORTS = [(1366, 900), (390, 844)]


@pytest.fixture(params=VIEWPORTS, ids=[f"{w}x{h}" for w, h in VIEWPORTS])
def sized(request, browser, live_server, owner, page_errors):
    """A logged-in page at each viewport size with the panel open; JavaScript errors fail."""
    width, height = request.param
    context, page = open_at(browser, live_server, owner, width, height, page_errors)
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_server.url)
    page.phone = width < 720
    yield page
    context.close()
    assert not page_errors, f"JavaScript errors on the page: {page_errors}"


def reply_bubbles(page):
    return transcript(page).locator(":scope > .ahentic-assistant")


def action(page, bubble, name: str):
    """An action button of ``bubble``: hovered into view first where a pointer hovers."""
    if not page.phone:
        bubble.hover()
    return bubble.get_by_role("button", name=re.compile(name))


def opacity(locator) -> float:
    return float(locator.evaluate("(node) => getComputedStyle(node.parentElement).opacity"))


# --- Copy, Retry, Edit ---------------------------------------------------------------------------


def test_copy_retry_and_edit_work_on_the_replies(sized, llm):
    page = sized
    llm.enqueue(text_reply("Use **fresh** beans."))
    new_chat(page)
    send(page, "How do I brew coffee?")
    expect(assistant_messages(page)).to_have_text(["Use fresh beans."])
    reply = reply_bubbles(page).last

    # Copy: the reply as Markdown, as the model wrote it.
    copy = reply.get_by_role("button", name="Copy the reply as Markdown")
    if page.phone:
        assert opacity(copy) == 1  # a phone has no hover: the actions always show
    else:
        page.mouse.move(0, 0)
        page.wait_for_timeout(300)
        assert opacity(copy) == 0  # shown on hover and on focus only
    action(page, reply, "Copy the reply").click()
    expect(copy).to_have_text("Copied")
    assert page.evaluate("navigator.clipboard.readText()") == "Use **fresh** beans."

    # Retry: the question runs again; the first answer stays, folded as an earlier attempt.
    llm.enqueue(text_reply("Grind them just before brewing."))
    action(page, reply, "^Retry").click()
    expect(reply_bubbles(page).locator(".ahentic-msg-text")).to_have_text(
        ["Grind them just before brewing."]
    )
    earlier = transcript(page).locator(".ahentic-attempt")
    expect(earlier).to_have_count(1)
    expect(earlier.locator("summary")).to_have_text("Earlier attempt")
    expect(earlier.locator(".ahentic-msg-text")).to_be_hidden()
    earlier.locator("summary").click()
    expect(earlier.locator(".ahentic-msg-text")).to_have_text(["Use fresh beans."])
    status_is(page, "idle")
    screenshot(page, f"actions-retry-{page.viewport_size['width']}")

    # Up in the empty box edits the last message; Send resends it.
    box = page.get_by_label("Message the agent")
    box.focus()
    box.press("ArrowUp")
    expect(box).to_have_value("How do I brew coffee?")
    expect(page.locator(".ahentic-editing")).to_be_visible()
    assert_reachable(page.get_by_role("button", name="Cancel editing"), "Cancel editing")
    llm.enqueue(text_reply("Steep it for four minutes."))
    box.fill("How do I brew tea?")
    box.press("Enter")
    expect(reply_bubbles(page).locator(".ahentic-msg-text")).to_have_text(
        ["Steep it for four minutes."]
    )
    expect(page.locator(".ahentic-editing")).to_have_count(0)
    current_user = transcript(page).locator(":scope > .ahentic-user .ahentic-msg-text")
    expect(current_user).to_have_text(["How do I brew tea?"])
    # The edited exchange is the message's earlier version, behind its pager; the retried
    # reply stays folded inside it.
    pager = page.get_by_role("group", name="Versions of your message")
    expect(pager).to_have_text(re.compile("2 of 2"))
    expect(transcript(page).locator(":scope > .ahentic-attempt")).to_have_count(0)
    pager.get_by_role("button", name="Previous version").click()
    expect(pager).to_have_text(re.compile("1 of 2"))
    expect(transcript(page).locator(":scope > .ahentic-msg .ahentic-msg-text")).to_have_text(
        ["How do I brew coffee?", "Grind them just before brewing."]
    )
    folded = transcript(page).locator(":scope > .ahentic-attempt")
    expect(folded.locator("summary")).to_have_text("Earlier attempt")
    folded.locator("summary").click()
    expect(folded.locator(".ahentic-msg-text")).to_have_text(["Use fresh beans."])
    pager.get_by_role("button", name="Next version").click()
    expect(current_user).to_have_text(["How do I brew tea?"])
    assert [
        (e.content, e.superseded_by is not None)
        for e in Event.objects.filter(kind=Event.Kind.USER_MESSAGE).order_by("seq")
    ] == [("How do I brew coffee?", True), ("How do I brew tea?", False)]
    assert llm.message_requests()[-1]["messages"][0]["content"][0]["text"] == ("How do I brew tea?")

    # Edit on the last message, from its button; Escape gives the box back untouched.
    mine = transcript(page).locator(":scope > .ahentic-user").last
    action(page, mine, "Edit and resend").click()
    expect(box).to_have_value("How do I brew tea?")
    box.press("Escape")
    expect(box).to_have_value("")
    expect(page.locator(".ahentic-editing")).to_have_count(0)


def test_retry_and_edit_hide_while_the_chat_runs(sized, llm, gate):
    page = sized
    llm.enqueue(text_reply("First."), text_reply("Held back.", gate=gate))
    new_chat(page)
    send(page, "One")
    expect(assistant_messages(page)).to_have_text(["First."])
    reply = reply_bubbles(page).last
    expect(action(page, reply, "^Retry")).to_be_visible()

    send(page, "Two")
    status_is(page, "running")
    first_reply = reply_bubbles(page).first
    expect(action(page, first_reply, "^Retry")).to_be_hidden()
    expect(action(page, first_reply, "Copy the reply")).to_be_visible()
    gate.set()
    expect(assistant_messages(page)).to_have_text(["First.", "Held back."])
    # Only the last reply offers Retry; each message of the user's offers Edit.
    expect(transcript(page).get_by_role("button", name=re.compile("^Retry"))).to_have_count(1)
    expect(
        transcript(page).get_by_role("button", name="Edit and resend your message")
    ).to_have_count(2)


# --- Stop keeps exactly what was on screen -------------------------------------------------------

STREAMED = " ".join(f"Part {n} of a long answer." for n in range(1, 61))

STOP_WHAT_IS_SHOWN = """() => {
  const live = document.querySelector(".ahentic-live .ahentic-msg-text");
  const shown = live ? live.innerText : null;
  document.querySelector('[aria-label="Stop the run"]').click();
  return shown;
}"""


def test_stop_keeps_exactly_the_text_on_screen(sized, llm):
    page = sized
    llm.enqueue(text_reply(STREAMED, chunk_delay_s=0.12))  # about 7 s of deltas
    new_chat(page)
    send(page, "Tell me a long story")
    expect(page.locator(".ahentic-live .ahentic-msg-text")).to_contain_text("Part 3 ")
    # A slow network: the page's reads of the growing text stop arriving while the model
    # streams on, so the server has more text than the screen when Stop is pressed.
    page.route(re.compile(r".*/live/?$"), lambda route: route.abort())
    page.wait_for_timeout(1200)

    shown = page.evaluate(STOP_WHAT_IS_SHOWN)  # read and pressed in one go

    status_is(page, "cancelled")
    stopped = page.locator(".ahentic-assistant.is-stopped .ahentic-msg-text")
    expect(stopped).to_have_count(1)
    assert stopped.inner_text().strip() == shown.strip()
    page.wait_for_timeout(800)  # the model streamed on meanwhile: nothing more appears
    assert stopped.inner_text().strip() == shown.strip()
    [event] = Event.objects.filter(kind=Event.Kind.AGENT_MESSAGE)
    assert event.content == shown.strip()
    assert len(event.content) < len(STREAMED)


def test_edit_of_an_earlier_message_keeps_the_later_turns_as_its_earlier_version(sized, llm):
    page = sized
    llm.enqueue(text_reply("Paris."), text_reply("About two million."))
    new_chat(page)
    send(page, "Capital of France?")
    expect(reply_bubbles(page).locator(".ahentic-msg-text")).to_have_text(["Paris."])
    status_is(page, "idle")
    send(page, "How many people live there?")
    replies = reply_bubbles(page).locator(".ahentic-msg-text")
    expect(replies).to_have_text(["Paris.", "About two million."])
    status_is(page, "idle")
    box = page.get_by_label("Message the agent")

    # Edit on the first message, not only on the last one.
    first = transcript(page).locator(":scope > .ahentic-user").first
    action(page, first, "Edit and resend").click()
    expect(box).to_have_value("Capital of France?")
    expect(page.locator(".ahentic-editing")).to_contain_text("Editing an earlier message")
    llm.enqueue(text_reply("Rome."))
    box.fill("Capital of Italy?")
    box.press("Enter")

    shown = transcript(page).locator(":scope > .ahentic-msg .ahentic-msg-text")
    expect(shown).to_have_text(["Capital of Italy?", "Rome."])
    status_is(page, "idle")
    # The model heard the edited message alone: the later turns are not the conversation now.
    assert [m["role"] for m in llm.message_requests()[-1]["messages"]] == ["user"]
    pager = page.get_by_role("group", name="Versions of your message")
    expect(pager).to_have_text(re.compile("2 of 2"))
    screenshot(page, f"actions-versions-{page.viewport_size['width']}")

    # "1 of 2": the conversation as it was, read-only; focus stays on the pager.
    pager.get_by_role("button", name="Previous version").click()
    expect(pager).to_have_text(re.compile("1 of 2"))
    expect(shown).to_have_text(
        ["Capital of France?", "Paris.", "How many people live there?", "About two million."]
    )
    expect(pager.get_by_role("button", name="Next version")).to_be_focused()
    for name in ("^Retry", "Edit and resend"):
        expect(transcript(page).get_by_role("button", name=re.compile(name))).to_have_count(0)

    pager.get_by_role("button", name="Next version").click()
    expect(shown).to_have_text(["Capital of Italy?", "Rome."])
    expect(pager).to_have_text(re.compile("2 of 2"))
    # The versions come from the server: a reload shows the same.
    page.reload()
    launcher = page.get_by_role("button", name="Open the agent panel")
    if launcher.is_visible():
        launcher.click()
    expect(shown).to_have_text(["Capital of Italy?", "Rome."])
    expect(page.get_by_role("group", name="Versions of your message")).to_have_text(
        re.compile("2 of 2")
    )


# --- the approval card scrolls the request and the lead-in into view -----------------------------

IN_VIEW = """(node) => {
  const box = node.closest('[data-role="transcript"]');
  const r = node.getBoundingClientRect(), b = box.getBoundingClientRect();
  return r.top >= b.top - 1 && r.bottom <= b.bottom + 1;
}"""


def long_chat(owner) -> Session:
    """A chat with a long history, so the transcript scrolls at every size."""
    session = SessionFactory(owner=owner, title="Long chat")
    items = []
    for n in range(1, 13):
        items.append({"kind": Event.Kind.USER_MESSAGE, "content": f"Question {n}"})
        items.append(
            {"kind": Event.Kind.AGENT_MESSAGE, "content": f"Answer {n}. " + "More words. " * 30}
        )
    services.events_append(session_id=session.pk, items=items)
    return session


def open_chat(page, session: Session) -> None:
    page.goto(f"/?ahentic_session={session.pk}")
    launcher = page.get_by_role("button", name="Open the agent panel")
    if launcher.is_visible():
        launcher.click()
    expect(transcript(page)).to_contain_text("Answer 12.")


def test_an_approval_card_brings_the_request_and_the_lead_in_into_view(sized, llm, owner):
    page = sized
    session = long_chat(owner)
    open_chat(page, session)
    lead_in = "I will publish the note now. " + "Here is why. " * 12
    llm.enqueue(
        tool_reply(tool_call("sidebar_publish_note", {"title": "Beans"}), text=lead_in),
        text_reply("Published."),
    )

    send(page, "Publish a note about beans")

    card = hitl_card(page)
    expect(card).to_be_visible()
    request = transcript(page).locator(".ahentic-user", has_text="Publish a note about beans")
    said = transcript(page).locator(".ahentic-assistant", has_text="I will publish the note now.")
    expect(said).to_have_count(1)
    page.wait_for_timeout(300)  # the card's layout settles
    assert request.evaluate(IN_VIEW), "the user's request is scrolled out of view"
    assert said.locator(".ahentic-msg-text").evaluate(
        "(node) => { const r = node.getBoundingClientRect(), "
        "b = node.closest('[data-role=\"transcript\"]').getBoundingClientRect(); "
        "return r.top >= b.top - 1 && r.top < b.bottom; }"
    ), "the lead-in does not start in view"
    assert_reachable(card.get_by_role("button", name=re.compile("^Allow once:")), "Allow once")
    screenshot(page, f"actions-approval-{page.viewport_size['width']}")


def test_the_readers_own_scroll_position_is_kept_while_a_reply_arrives(sized, llm, owner, gate):
    page = sized
    session = long_chat(owner)
    open_chat(page, session)
    llm.enqueue(text_reply("A late answer.", gate=gate))
    send(page, "One more question")
    status_is(page, "running")

    transcript(page).evaluate("(node) => { node.scrollTop = 0; }")
    page.wait_for_timeout(200)
    gate.set()

    expect(assistant_messages(page).last).to_have_text("A late answer.")
    page.wait_for_timeout(300)
    assert transcript(page).evaluate("(node) => node.scrollTop") < 5
    first = transcript(page).locator(".ahentic-user", has_text="Question 1").first
    assert first.evaluate(IN_VIEW)


# --- Escape, "?" and the new-chat shortcut -------------------------------------------------------


def test_question_mark_lists_the_shortcuts_and_escape_closes_the_innermost_open_thing(sized):
    page = sized
    panel = page.locator("#ahentic-panel")
    box = page.get_by_label("Message the agent")
    transcript(page).focus()

    # "?" outside a text field: the list, focus on its Close; Escape gives the focus back.
    page.keyboard.press("?")
    shortcuts = page.get_by_role("dialog", name="Keyboard shortcuts")
    expect(shortcuts).to_be_visible()
    expect(shortcuts).to_contain_text("Alt+Shift+N")
    expect(shortcuts.get_by_role("button", name="Close the shortcut list")).to_be_focused()
    page.keyboard.press("Escape")
    expect(shortcuts).to_be_hidden()
    expect(panel).to_be_visible()
    expect(transcript(page)).to_be_focused()
    # In the message box "?" is a character.
    box.press("?")
    expect(box).to_have_value("?")
    expect(shortcuts).to_be_hidden()
    box.fill("")

    # A panel opened from the More menu: Escape closes it (not the sidebar), More has focus.
    more = page.get_by_role("button", name="More", exact=True)
    more.click()
    page.get_by_role("menu", name="More").get_by_role("menuitemcheckbox", name="MCP access").click()
    tokens = page.get_by_label("Token name")
    expect(tokens).to_be_visible()
    transcript(page).focus()
    page.keyboard.press("Escape")
    expect(tokens).to_be_hidden()
    expect(panel).to_be_visible()
    expect(more).to_be_focused()

    # The list is in the More menu too.
    more.click()
    page.get_by_role("menu", name="More").get_by_role("menuitem", name="Keyboard shortcuts").click()
    expect(shortcuts).to_be_visible()
    shortcuts.get_by_role("button", name="Close the shortcut list").click()
    expect(more).to_be_focused()

    # Alt+Shift+N: a new chat, from anywhere, the message box included.
    box.focus()
    page.keyboard.press("Alt+Shift+N")
    expect(page.locator(".ahentic-tab.is-active")).to_contain_text("New Agent")
    expect(page.locator(".ahentic-tab")).to_have_count(1)

    # Nothing open: Escape folds the sidebar, focus on the launcher.
    transcript(page).focus()
    page.keyboard.press("Escape")
    expect(panel).to_be_hidden()
    expect(page.get_by_role("button", name="Open the agent panel")).to_be_focused()
    # "?" opens the sidebar at the list.
    page.keyboard.press("?")
    expect(shortcuts).to_be_visible()
    screenshot(page, f"shortcuts-{page.viewport_size['width']}")


NO_OVERLAP_JS = """(menu) => [...menu.querySelectorAll('[role^="menuitem"]')]
  .filter((item) => item.getClientRects().length)
  .map((item) => {
    // What the icon draws (its text may be wider than its box), then where the label starts.
    const range = document.createRange();
    range.selectNodeContents(item.querySelector('.ahentic-menu-icon'));
    const drawn = range.getBoundingClientRect();
    const label = item.querySelector('.ahentic-menu-label').getBoundingClientRect();
    return [item.getAttribute('aria-label'), drawn.right <= label.left + 0.5];
  })"""


def test_the_more_menus_icons_never_overlap_their_labels(sized):
    page = sized
    page.get_by_role("button", name="More", exact=True).click()
    menu = page.get_by_role("menu", name="More")
    expect(menu).to_be_visible()

    placed = menu.evaluate(NO_OVERLAP_JS)

    assert len(placed) >= 3, placed
    assert all(clear for _, clear in placed), placed


# --- the header: the agent's name has the room, the view mode is in the menu ---------------------

CUT_OFF_JS = "(node) => node.scrollWidth > node.clientWidth + 1"


def test_the_view_mode_is_in_the_menu_for_staff_only_and_the_agents_name_is_never_cut(
    sized, owner, llm
):
    page = sized
    if not Agent.objects.filter(is_default=True).exists():  # a flushed database has none
        agent_create("default", name="Assistant", is_default=True)
    llm.enqueue(text_reply("Hello."))
    new_chat(page)
    send(page, "Hi")
    status_is(page, "idle")
    brand = page.locator('[data-role="brand"]')
    expect(brand).not_to_have_text("Agent")  # the chat's agent's name
    assert not brand.evaluate(CUT_OFF_JS), brand.inner_text()
    more = page.get_by_role("button", name="More", exact=True)
    more.click()
    menu = page.get_by_role("menu", name="More")
    expect(menu).to_be_visible()
    # Not staff: Basic alone is no choice, so no view mode at all.
    expect(menu.get_by_role("menuitemradio")).to_have_count(0)
    page.keyboard.press("Escape")

    owner.is_staff = True
    owner.save(update_fields=["is_staff"])
    page.reload()
    launcher = page.get_by_role("button", name="Open the agent panel")
    if launcher.is_visible():
        launcher.click()
    expect(page.locator(".ahentic-assistant .ahentic-msg-text")).to_have_text(["Hello."])
    assert not brand.evaluate(CUT_OFF_JS), brand.inner_text()
    more.click()
    group = menu.get_by_role("group", name="View mode")
    expect(group.get_by_role("menuitemradio")).to_have_text(["Basic", "Verbose", "Debug"])
    expect(group.get_by_role("menuitemradio", name="Basic")).to_have_attribute(
        "aria-checked", "true"
    )
    group.get_by_role("menuitemradio", name="Verbose").click()
    expect(menu).to_be_hidden()
    expect(page.locator('[role="menuitemradio"][data-view-mode="verbose"]')).to_have_attribute(
        "aria-checked", "true"
    )
    expect(page.locator(".ahentic-tool-result, .ahentic-msg")).not_to_have_count(0)
    assert Session.objects.get().view_mode == "verbose"
