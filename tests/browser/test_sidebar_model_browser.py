"""The sidebar shows what a reply carries besides its text: its thinking and its cited sources.

In a real browser (Playwright + Debian's chromium) against the live server and the local
Messages API server; the fixtures and the skip rule are those of ``test_sidebar_browser``.
"""

import re

import pytest

from tests.support.browser import (
    assistant_messages,
    expect,
    make_staff,
    new_chat,
    open_home,
    screenshot,
    send,
    set_view_mode,
    status_is,
)

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("llm_strict"),
]

DOCS = "https://docs.example.com/hours"


def test_a_reply_shows_its_thinking_collapsed_and_its_citations_as_numbered_links(
    page,  # noqa: F811
    llm,
    settings,
    owner,
):
    make_staff(owner)  # the debug view at the end
    from orchestrator_app.testing.localapi import (
        cited_text,
        reply,
        web_search_blocks,
        with_thinking,
    )

    settings.AHENTIC = {
        **settings.AHENTIC,
        "THINKING": "adaptive",
        "WEB_SEARCH": {"max_uses": 2},
    }
    found = web_search_blocks(
        "shop hours",
        [{"url": DOCS, "title": "Opening hours"}, {"url": "javascript:alert(1)", "title": "Bad"}],
    )
    llm.enqueue(
        with_thinking(
            reply(
                [
                    *found,
                    {"type": "text", "text": "The shop "},
                    cited_text("opens at nine", DOCS, "Opening hours", "We open at 9:00."),
                    {"type": "text", "text": " and "},
                    cited_text("closes late", "javascript:alert(1)", "Bad", "x"),
                    {"type": "text", "text": "."},
                ]
            ),
            "The user asks for the hours: search the shop's page.",
        )
    )
    open_home(page)
    new_chat(page)

    send(page, "When does the shop open?")

    status_is(page, "idle")
    reply_text = assistant_messages(page)
    expect(reply_text).to_have_text(["The shop opens at nine[1] and closes late."])
    thinking = page.locator(".ahentic-assistant .ahentic-thinking")
    expect(thinking.locator("summary")).to_have_text(re.compile(r"^Thought for \d+ s$"))
    summary_text = thinking.locator(".ahentic-thinking-text")
    expect(summary_text).to_be_hidden()  # collapsed until asked for
    thinking.locator("summary").click()
    expect(summary_text).to_have_text("The user asks for the hours: search the shop's page.")

    link = page.locator(".ahentic-assistant a.ahentic-cite")
    expect(link).to_have_count(1)
    expect(link).to_have_text("[1]")
    expect(link).to_have_attribute("href", DOCS)
    expect(link).to_have_attribute("target", "_blank")
    expect(link).to_have_attribute("rel", "noopener noreferrer")
    sources = page.locator(".ahentic-assistant .ahentic-sources a")
    expect(sources).to_have_text(["Opening hours"])
    expect(page.locator('#ahentic-sidebar a[href^="javascript"]')).to_have_count(0)
    # The thinking never appears as the reply's text.
    expect(reply_text).not_to_contain_text("search the shop's page")
    screenshot(page, "sidebar-thinking-citations")
    # The debug view shows the thinking whole: open, with the blocks as the model sent them.
    set_view_mode(page, "debug")
    blocks = page.locator(".ahentic-assistant .ahentic-thinking[open] .ahentic-thinking-blocks")
    expect(blocks).to_contain_text('"signature"')
    expect(blocks).to_contain_text("search the shop's page")


def test_a_reply_that_thought_before_each_step_shows_one_thinking_fold(page, llm, settings):  # noqa: F811
    from orchestrator_app.testing.localapi import text_reply, tool_call, tool_reply, with_thinking

    settings.AHENTIC = {**settings.AHENTIC, "THINKING": "adaptive"}
    steps = [  # a valid first plan: a failed call would show between the two steps' texts
        {"id": "grind", "content": "Grind the beans", "status": "in_progress"},
        {"id": "brew", "content": "Brew the coffee", "status": "pending"},
        {"id": "pour", "content": "Pour it", "status": "pending"},
    ]
    llm.enqueue(
        with_thinking(
            tool_reply(
                tool_call("update_plan", {"title": "Coffee", "steps": steps}), text="Planning."
            ),
            "Plan first.",
        ),
        with_thinking(text_reply("Planned."), "Then answer."),
    )
    open_home(page)
    new_chat(page)

    send(page, "Plan my coffee")

    status_is(page, "idle")
    bubble = page.locator(".ahentic-assistant").last
    expect(bubble.locator(".ahentic-msg-part")).to_have_count(2)  # one reply, two steps
    folds = bubble.locator(".ahentic-thinking")
    expect(folds).to_have_count(1)
    expect(folds.locator("summary")).to_have_text(re.compile(r"^Thought for \d+ s$"))
    folds.locator("summary").click()
    expect(folds.locator(".ahentic-thinking-text")).to_have_text(["Plan first.", "Then answer."])
