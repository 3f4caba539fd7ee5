"""The Quickstart, verbatim, in a real browser (issue 39, section 1): on a fresh database seeded
as ``manage.py ahentic_demo`` seeds it, with the offline model the demo runs without an API key,
the ``demo`` login types each prompt of docs/quickstart.md and the home page's "Things to type"
into the chat it gets first, and every promised result is there: the page read, the draft and
its approval card, the page at /coffee/, an update each time it is asked, the reason of a failed
save, and the memory said back in a sentence in a new chat.

Fixtures and helpers come from ``test_sidebar_browser`` (live server, local Messages API,
chromium); like it, this module is skipped without playwright or chromium unless
AHENTIC_REQUIRE_BROWSER=1 (.ci/browser-leg). Screenshots go to AHENTIC_SCREENSHOT_DIR when set.
"""

# The fixtures imported from test_sidebar_browser are parameters of the tests: F811 by design.
# ruff: noqa: F811

import re

import pytest
from django.contrib.auth import get_user_model
from django.contrib.flatpages.models import FlatPage

from orchestrator_app.management.commands.ahentic_demo import Command as Demo
from orchestrator_app.testing import offline
from sessions_app.models import Session
from tests.support.browser import (
    CHROMIUM,
    assistant_messages,
    expect,
    hitl_card,
    menu_item,
    open_home,
    screenshot,
    send,
    sidebar,
    status_is,
    transcript,
)

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("llm_strict"),
]

assert CHROMIUM  # the module's skip (or failure) without a browser comes with that import


@pytest.fixture
def owner(db, settings, llm, monkeypatch):
    """The demo's ``demo`` login on a database seeded as ``ahentic_demo`` seeds it (its logins
    and agents), the demo's admin tools, the offline model at full speed."""
    from ahentic_site.settings import AHENTIC as DEMO

    settings.AHENTIC = {**settings.AHENTIC, "ADMIN_TOOLS": DEMO["ADMIN_TOOLS"]}
    monkeypatch.setattr(offline, "HUMAN_PACE_S", 0.0)
    llm.responder = offline.demo_model
    # A fresh demo database has the migration's default agent (sessions_app 0010); a
    # transactional test before this one may have flushed it.
    from sessions_app import agents
    from sessions_app.models import Agent

    if not Agent.objects.filter(slug="default").exists():
        assistant = Agent.objects.create(slug="default", name="Assistant", is_default=True)
        agents.version_save(assistant, config={}, note="Created from settings")
    demo = Demo()
    demo._ensure_logins()
    demo._ensure_agents()
    return get_user_model().objects.get(username="demo")


def reply_is(page, text: str):
    """The newest reply reads ``text`` and the run is over (idle)."""
    expect(assistant_messages(page).last).to_contain_text(text)
    status_is(page, "idle")


def allow_once(page):
    card = hitl_card(page)
    expect(card).to_be_visible()
    card.get_by_role("button", name="Allow once").click()
    expect(card).to_be_hidden()


def test_the_quickstart_works_verbatim_in_the_first_chat(page, live_server):
    open_home(page)

    # 2. "What is on this page?": a browser tool reads the page.
    send(page, "What is on this page?")
    reply_is(page, "Your page is titled “Ahentic demo”.")
    [chat] = Session.objects.all()
    assert chat.agent_version.agent.slug == "helper"  # the chat a user gets first

    # 3. "Write a page about coffee": a draft, then the approval card of the save.
    send(page, "Write a page about coffee")
    expect(transcript(page)).to_contain_text("Drafted “coffee”")
    card = hitl_card(page)
    expect(card).to_be_visible()
    expect(card).to_contain_text("coffee")
    screenshot(page, "quickstart-approval")
    allow_once(page)
    reply_is(page, "Done: the page “/coffee/ -- Coffee” is live at /coffee/.")
    assert FlatPage.objects.get().title == "Coffee"

    # "Update the page" works every time, each through its own card.
    for title in ("Coffee (updated)", "Coffee (updated 2)"):
        send(page, "Update the page")
        allow_once(page)
        reply_is(page, f"Updated “/coffee/ -- {title}” (title)")
        assert FlatPage.objects.get().title == title

    # A failed save (the page exists) gives its reason in the reply and in the transcript.
    send(page, "Write a page about coffee")
    reason = "Flatpage with url /coffee/ already exists for site example.com"
    reply_is(page, f"but it failed: The admin form refused the values: {reason}.")
    failed = page.locator('[data-role-kind="decision"]').last
    expect(failed).to_have_text(
        f"“Save a record in the admin” failed: The admin form refused the values: {reason}"
    )
    screenshot(page, "quickstart-failed-save")

    # "Remember that I like oat milk", then a new chat, "What do you remember?".
    send(page, "Remember that I like oat milk")
    reply_is(page, "Noted: I will remember that in new chats too.")
    page.get_by_role("button", name="New chat").click()
    page.get_by_role("menu", name="Start a chat with").get_by_role(
        "menuitem", name=re.compile("Helper")
    ).click()
    expect(page.locator(".ahentic-tab")).to_have_count(2)
    send(page, "What do you remember?")
    reply_is(page, "You told me you like oat milk.")
    expect(assistant_messages(page).last).not_to_contain_text("line numbers")

    # 4. The page is at /coffee/.
    page.goto("/coffee/")
    expect(page.locator("body")).to_contain_text("This page is about coffee.")
    assert page.title().startswith("Coffee (updated 2)")


def test_asked_for_tickets_the_first_chat_names_the_agent_that_has_them(page, live_server):
    """A "Things to type" item the first chat's agent has no tool for: it says so and names,
    in a line of its own, the agent to pick (Editor, the demo's ticket tracker's agent)."""
    open_home(page)

    send(page, "List the tickets")

    reply_is(page, "I cannot read the ticket tracker in this chat: none of my tools does that.")
    expect(assistant_messages(page).last.locator("p").last).to_have_text(
        "Pick Editor (in the admin) for that: start a new chat with it (the + button) and ask "
        "again."
    )
    expect(sidebar(page)).not_to_contain_text("You said:")


def test_the_mcp_access_panel_gives_the_endpoint_the_tools_and_the_lines_to_paste(
    page, live_server
):
    """For the chosen agent: the endpoint (?agent= for another than the default), how many
    tools, the Claude Code command and a client's JSON config, a new token filled into both;
    an agent whose tools all need the sidebar says so and why."""
    from sessions_app import agents
    from sessions_app.models import Agent

    reader = Agent.objects.create(slug="reader", name="Reader", shows_on=Agent.Place.BOTH)
    agents.version_save(reader, config={"TOOLS": ["page_read", "update_plan"]})
    endpoint = f"{live_server.url}/ahentic/v1/mcp"
    open_home(page)

    menu_item(page, "MCP access").click()

    panel = page.locator('[data-role="mcp-panel"]')
    expect(panel.locator('[data-role="mcp-endpoint"]')).to_have_text(endpoint)
    # The tests register tools of their own besides the demo's: a count, and the admin's.
    tools = panel.locator('[data-role="mcp-tool-count"]')
    expect(tools).to_have_text(re.compile(r"^\d+ tools: admin_action, .*admin_save"))
    expect(tools).not_to_contain_text("page_read")
    claude = panel.locator('[data-role="mcp-claude-code"]')
    expect(claude).to_have_text(
        f"claude mcp add --transport http ahentic {endpoint} "
        '--header "Authorization: Bearer <your token>"'
    )
    panel.locator('[data-role="mcp-name"]').fill("Laptop")
    panel.locator('[data-role="mcp-create"]').click()
    secret = panel.locator('[data-role="mcp-secret"]')
    expect(secret).to_have_text(re.compile(r"^ahmcp_"))
    token = secret.text_content()
    expect(claude).to_contain_text(f'"Authorization: Bearer {token}"')
    config = panel.locator('[data-role="mcp-client-config"]')
    expect(config).to_contain_text(f'"url": "{endpoint}"')
    expect(config).to_contain_text(f'"Authorization": "Bearer {token}"')
    screenshot(page, "quickstart-mcp-access")

    panel.locator('[data-role="mcp-agent"]').select_option("reader")

    expect(panel.locator('[data-role="mcp-endpoint"]')).to_have_text(f"{endpoint}?agent=reader")
    expect(panel.locator('[data-role="mcp-reason"]')).to_contain_text(
        "No tools for an MCP client. Reader's tools all need the sidebar"
    )
    expect(panel.locator('[data-role="mcp-snippets"]')).to_be_hidden()
    expect(panel.locator('[data-role="mcp-tool-count"]')).to_be_hidden()
