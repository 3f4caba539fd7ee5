"""Words, not internals (issue 31, section 1) in a real browser, at 1366x900 and 390x844: the
Basic view's approval card, decision lines, artifact lines and error line speak words; the
status line does not repeat the card; the token count is never cut off beside Stop; thinking
reads apart from the reply; the header keeps its secondary buttons behind "More" and offers the
view modes as a small keyboard-friendly switch. Skipped without playwright or chromium like
``test_sidebar_browser``."""

import re

import pytest

from orchestrator_app.testing.localapi import text_reply, tool_call, tool_reply, with_thinking
from sessions_app.models import Session
from tests.support.attachment_files import SVG
from tests.support.browser import (
    assistant_messages,
    expect,
    hitl_card,
    make_staff,
    menu_item,
    new_chat,
    open_at,
    screenshot,
    send,
    set_view_mode,
    status_is,
)

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("llm_strict"),
]

VIEWPORTS = [(1366, 900), (390, 844)]


@pytest.fixture(params=VIEWPORTS, ids=[f"{w}x{h}" for w, h in VIEWPORTS])
def page(request, browser, live_server, owner):  # noqa: F811
    """A logged-in page at each of the issue's two viewport sizes; no JavaScript errors. The
    owner is staff: the module switches to Verbose and Debug, offered to staff only."""
    make_staff(owner)
    width, height = request.param
    errors: list[str] = []
    context, page = open_at(browser, live_server, owner, width, height, errors)
    page.viewport_name = f"{width}x{height}"
    yield page
    context.close()
    assert not errors, f"JavaScript errors on the page: {errors}"


def not_cut(locator) -> bool:
    """Whether the element shows all of its text (nothing clipped or ellipsized)."""
    return locator.evaluate("(node) => node.scrollWidth <= node.clientWidth + 1")


def test_the_basic_view_speaks_words_and_verbose_keeps_the_detail(page, llm, sidebar_calls):
    llm.enqueue(
        tool_reply(tool_call("sidebar_publish_note", {"title": "Beans"}, id="toolu_one")),
        tool_reply(tool_call("sidebar_publish_note", {"title": "Milk"}, id="toolu_two")),
        text_reply("Published one of them."),
    )
    new_chat(page)
    send(page, "Publish two notes")

    card = hitl_card(page)
    expect(card.locator(".ahentic-hitl-tool")).to_have_text("Publish a note")
    expect(card).not_to_contain_text("sidebar_publish_note")
    expect(card.locator("details.ahentic-hitl-input")).to_have_count(0)
    allow = card.get_by_role("button", name="Allow once: Publish a note")
    expect(allow).to_be_visible()
    # The status line does not repeat the card.
    expect(page.locator('[data-role="progress"]')).to_have_text("")
    screenshot(page, f"words-card-{page.viewport_name}")

    allow.click()
    expect(card).to_contain_text("Publish the note 'Milk'")
    expect(page.locator('[data-role="progress"]')).to_have_text("")
    card.get_by_label("Reason for denying").fill("No milk today")
    card.get_by_role("button", name="Deny: Publish a note").click()
    expect(assistant_messages(page)).to_have_text(["Published one of them."])

    decisions = page.locator(".ahentic-decision")
    expect(decisions).to_have_text(["Allowed once", "Denied: No milk today"])
    expect(page.locator("#ahentic-sidebar")).not_to_contain_text("sidebar_publish_note")

    set_view_mode(page, "verbose")
    expect(decisions).to_have_text(
        ["Allowed once (sidebar_publish_note)", "Denied: No milk today (sidebar_publish_note)"]
    )
    assert sidebar_calls == [{"tool": "sidebar_publish_note", "input": {"title": "Beans"}}]


@pytest.fixture
def sidebar_calls():
    from tests.support import tools_for_sidebar

    tools_for_sidebar.CALLS.clear()
    yield tools_for_sidebar.CALLS
    tools_for_sidebar.CALLS.clear()


def test_artifact_lines_read_as_sentences(page, llm):
    body = "<p>" + "x" * 200 + "</p>"
    llm.enqueue(
        tool_reply(
            tool_call(
                "stage_artifact",
                {"key": "coffee", "kind": "html", "title": "Coffee", "payload": {"content": body}},
            )
        ),
        text_reply("Drafted."),
    )
    new_chat(page)
    send(page, "Draft a page about coffee")
    expect(assistant_messages(page)).to_have_text(["Drafted."])

    expect(page.locator(".ahentic-event")).to_have_text(["Drafted “Coffee” (221 bytes)"])
    page.locator('[data-role="artifacts-box"] > summary').click()
    expect(page.locator(".ahentic-artifact-line")).to_have_text(["Drafted “Coffee” (221 bytes)"])

    set_view_mode(page, "verbose")
    expect(page.locator(".ahentic-event").first).to_contain_text("Artifact coffee staged")
    expect(page.locator(".ahentic-artifact code")).to_have_text(["coffee"])


def test_an_error_says_what_to_do_and_shows_its_code_only_in_debug(page, llm):
    new_chat(page)
    page.locator('[data-role="attach-input"]').set_input_files(
        [{"name": "logo.png", "mimeType": "image/png", "buffer": SVG}]
    )

    error = page.locator('[data-role="error"]')
    expect(error).to_contain_text("Attach PNG, JPEG, GIF, WebP images and PDF documents.")
    expect(error.locator(".ahentic-error-code")).to_have_count(0)
    set_view_mode(page, "debug")
    expect(error.locator(".ahentic-error-code")).to_have_text("ahentic_attachment_type")


def test_the_token_count_is_never_cut_off_when_stop_appears(page, llm, owner, gate):  # noqa: F811
    llm.enqueue(text_reply("Done at last.", gate=gate))
    new_chat(page)
    send(page, "Take your time")
    status_is(page, "running")
    expect(page.get_by_role("button", name="Stop the run")).to_be_visible()
    # A long chat's count, with its cost: the longest the line gets.
    Session.objects.filter(owner=owner).update(
        tokens_in=1_234_567, tokens_out=98_765, cost_usd="12.3456", version=999
    )

    tokens = page.locator('[data-role="tokens"]')
    expect(tokens).to_contain_text("tokens this chat")
    expect(tokens).to_contain_text("$12.35")
    assert not_cut(tokens)
    stop = page.get_by_role("button", name="Stop the run").bounding_box()
    box = tokens.bounding_box()
    # Beside Stop or above it, never under it.
    assert box["x"] + box["width"] <= stop["x"] + 0.5 or box["y"] + box["height"] <= stop["y"]
    screenshot(page, f"words-tokens-{page.viewport_name}")
    gate.set()
    expect(assistant_messages(page)).to_have_text(["Done at last."])


def test_thinking_reads_apart_from_the_reply_in_the_same_place(page, llm, settings):
    settings.AHENTIC = {**settings.AHENTIC, "THINKING": "adaptive"}
    llm.enqueue(
        with_thinking(text_reply("The first answer."), "Weigh the first question."),
        with_thinking(text_reply("The second answer."), "Weigh the second question."),
    )
    new_chat(page)
    send(page, "First question")
    expect(assistant_messages(page)).to_have_text(["The first answer."])
    send(page, "Second question")
    expect(assistant_messages(page)).to_have_text(["The first answer.", "The second answer."])

    bubbles = page.locator(".ahentic-assistant")
    for index in range(2):
        bubble = bubbles.nth(index)
        bubble.locator(".ahentic-thinking > summary").click()
        thought = bubble.locator(".ahentic-thinking-text")
        expect(thought).to_be_visible()
        looks = bubble.evaluate(
            """(node) => {
                const think = node.querySelector(".ahentic-thinking");
                const text = node.querySelector(".ahentic-msg-text");
                const a = getComputedStyle(think), b = getComputedStyle(text);
                const top = node.getBoundingClientRect().top;
                return {
                    smaller: parseFloat(a.fontSize) < parseFloat(b.fontSize),
                    muted: a.color !== b.color,
                    rule: parseFloat(a.borderLeftWidth) >= 2,
                    before: !!(think.compareDocumentPosition(text)
                        & Node.DOCUMENT_POSITION_FOLLOWING),
                    offset: Math.round(think.getBoundingClientRect().top - top),
                };
            }"""
        )
        assert looks["smaller"] and looks["muted"] and looks["rule"] and looks["before"], looks
        if index == 0:
            first_offset = looks["offset"]
        else:
            assert looks["offset"] == first_offset  # the same place on every reply
    screenshot(page, f"words-thinking-{page.viewport_name}")


def test_the_header_keeps_its_secondary_buttons_behind_more(page, llm):
    llm.enqueue(text_reply("Hello."))
    new_chat(page)
    send(page, "Hi")
    expect(assistant_messages(page)).to_have_text(["Hello."])

    # The title has room: nothing of it is cut.
    assert not_cut(page.locator('[data-role="brand"]'))
    header = page.locator(".ahentic-header")
    expect(header.get_by_role("button", name="Show the debugger")).to_be_hidden()

    more = page.get_by_role("button", name="More", exact=True)
    expect(more).to_have_attribute("aria-haspopup", "menu")
    more.focus()
    page.keyboard.press("ArrowDown")
    menu = page.get_by_role("menu", name="More")
    expect(menu).to_be_visible()
    expect(more).to_have_attribute("aria-expanded", "true")
    items = menu.locator('[role^="menuitem"]:visible')
    expect(items.first).to_be_focused()
    count = items.count()
    assert count >= 2  # the debugger, Settings, MCP access (and Dock on a wide screen)
    page.keyboard.press("ArrowDown")
    expect(items.nth(1)).to_be_focused()
    page.keyboard.press("End")
    expect(items.nth(count - 1)).to_be_focused()
    screenshot(page, f"words-more-{page.viewport_name}")
    page.keyboard.press("Escape")
    expect(menu).to_be_hidden()
    expect(more).to_be_focused()
    expect(page.locator("#ahentic-panel")).to_be_visible()  # Escape closed the menu only

    debugger = menu_item(page, "Show the debugger")
    expect(debugger).to_have_attribute("role", "menuitemcheckbox")
    expect(debugger).to_have_attribute("aria-checked", "false")
    debugger.click()
    expect(menu).to_be_hidden()
    expect(page.locator('[data-role="debugger"]')).to_be_visible()
    expect(menu_item(page, "Hide the debugger")).to_have_attribute("aria-checked", "true")


def test_the_view_mode_is_a_labelled_group_of_the_more_menu_the_keyboard_works(page, llm):
    llm.enqueue(
        tool_reply(tool_call("sidebar_read_status", {}, id="toolu_status")),
        text_reply("All is well."),
    )
    new_chat(page)
    send(page, "How is the site?")
    expect(assistant_messages(page)).to_have_text(["All is well."])
    expect(page.locator(".ahentic-tool-call")).to_have_count(0)

    more = page.get_by_role("button", name="More", exact=True)
    more.focus()
    page.keyboard.press("ArrowDown")
    group = page.get_by_role("group", name="View mode")
    basic = group.get_by_role("menuitemradio", name="Basic")
    expect(basic).to_have_attribute("aria-checked", "true")
    expect(basic).to_be_focused()  # the view mode comes first
    page.keyboard.press("ArrowDown")
    verbose = group.get_by_role("menuitemradio", name="Verbose")
    expect(verbose).to_be_focused()
    page.keyboard.press("Enter")

    expect(page.get_by_role("menu", name="More")).to_be_hidden()
    expect(more).to_be_focused()  # focus back where the menu was opened
    expect(page.locator('[data-view-mode="verbose"]')).to_have_attribute("aria-checked", "true")
    expect(page.locator(".ahentic-tool-call")).to_have_count(1)
    assert Session.objects.get().view_mode == "verbose"
    set_view_mode(page, "basic")
    expect(page.locator(".ahentic-tool-call")).to_have_count(0)
    assert re.search("basic", Session.objects.get().view_mode)
