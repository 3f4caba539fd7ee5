"""Agents in the sidebar, in a real browser: the new-chat button offers the agents the user may
use that show on this page (one agent: no picker), by mouse and by keyboard; a chat shows its
agent in the header and in the history; a chat on an older version offers the latest, says
what changes and moves.

Fixtures and helpers come from ``test_sidebar_browser`` (live server, local Messages API,
chromium); like it, this module is skipped without playwright or chromium unless
AHENTIC_REQUIRE_BROWSER=1 (.ci/browser-leg).
"""

# The fixtures imported from test_sidebar_browser are parameters of the tests: F811 by design.
# ruff: noqa: F811

import re

import pytest
from django.contrib.auth.models import Group

from sessions_app import agents
from sessions_app.models import Agent, Session
from tests.support.browser import CHROMIUM, expect, open_history, open_home, screenshot
from tests.support.factories import UserFactory

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("llm_strict"),
]

assert CHROMIUM  # the module's skip (or failure) without a browser comes with that import


@pytest.fixture
def owner(db):
    """A member: the agent permission, not staff."""
    return UserFactory(username="member", agent_permission=True)


def make_agent(slug, name, **fields):
    groups = fields.pop("groups", ())
    agent = Agent.objects.create(slug=slug, name=name, **fields)
    agent.groups.set(groups)
    agents.version_save(agent, config={})
    return agent


@pytest.fixture
def roster(db):
    """Two agents the member may use on site pages, and one each they may not see here: shown
    in the admin only, another permission, another group."""
    Agent.objects.all().delete()  # the migration's default agent, when a test left it
    return {
        "helper": make_agent(
            "helper", "Helper", shows_on=Agent.Place.SITE, is_default=True, description="Reads"
        ),
        "writer": make_agent("writer", "Writer", colour="#aa3377", description="Drafts"),
        "backstage": make_agent("backstage", "Backstage", shows_on=Agent.Place.ADMIN),
        "ops": make_agent("ops", "Ops", permission="sessions_app.control_runs"),
        "editor": make_agent("editor", "Editor", groups=[Group.objects.create(name="editors")]),
    }


def new_chat_button(page):
    return page.get_by_role("button", name="New chat")


def menu(page):
    return page.get_by_role("menu", name="Start a chat with")


def brand(page):
    return page.locator('[data-role="brand"]')


def test_the_picker_offers_only_the_agents_the_user_may_use_here(page, roster):
    open_home(page)

    new_chat_button(page).click()

    expect(menu(page)).to_be_visible()
    expect(menu(page).get_by_role("menuitem")).to_have_count(2)
    names = menu(page).locator(".ahentic-agent-choice-name").all_inner_texts()
    assert names == ["Helper", "Writer"]  # the default first
    expect(new_chat_button(page)).to_have_attribute("aria-expanded", "true")
    screenshot(page, "agents-picker")


def test_a_chat_started_with_the_second_agent_shows_it_in_the_header_and_history(page, roster):
    open_home(page)
    new_chat_button(page).click()

    menu(page).get_by_role("menuitem", name=re.compile("^Writer")).click()

    expect(menu(page)).to_be_hidden()
    expect(page.locator(".ahentic-tab.is-active")).to_contain_text("New Agent")
    expect(brand(page)).to_contain_text("Writer")
    expect(brand(page)).to_contain_text("v1")
    session = Session.objects.get()
    assert session.agent_version.agent.slug == "writer"

    page.locator(".ahentic-tab.is-active .ahentic-tab-close").click()
    open_history(page)
    rows = page.locator(".ahentic-history-item")
    expect(rows).to_have_count(1)
    expect(rows.first.locator(".ahentic-history-title")).to_have_text("New Agent")
    expect(rows.first.locator(".ahentic-history-meta")).to_contain_text("Writer · ")


def test_the_picker_works_from_the_keyboard(page, roster):
    open_home(page)
    button = new_chat_button(page)
    button.focus()

    page.keyboard.press("Enter")
    expect(menu(page).get_by_role("menuitem", name=re.compile("^Helper"))).to_be_focused()
    page.keyboard.press("Escape")
    expect(menu(page)).to_be_hidden()
    expect(button).to_be_focused()
    expect(page.locator("#ahentic-panel")).to_be_visible()  # that Escape closed only the menu

    page.keyboard.press("Enter")
    page.keyboard.press("ArrowDown")
    expect(menu(page).get_by_role("menuitem", name=re.compile("^Writer"))).to_be_focused()
    page.keyboard.press("Enter")

    expect(brand(page)).to_contain_text("Writer")
    assert Session.objects.get().agent_version.agent.slug == "writer"


def test_with_one_agent_here_the_button_starts_a_chat_at_once(page, roster):
    Agent.objects.filter(slug="writer").update(shows_on=Agent.Place.ADMIN)
    open_home(page)

    new_chat_button(page).click()

    expect(page.locator(".ahentic-tab.is-active")).to_contain_text("New Agent")
    expect(menu(page)).to_be_hidden()
    expect(new_chat_button(page)).not_to_have_attribute("aria-haspopup", "menu")
    expect(brand(page)).to_contain_text("Helper")


def test_a_chat_on_an_older_version_moves_to_the_latest_and_says_what_changed(page, roster):
    open_home(page)
    new_chat_button(page).click()
    menu(page).get_by_role("menuitem", name=re.compile("^Writer")).click()
    expect(brand(page)).to_contain_text("v1")
    update = page.get_by_role("region", name="This chat's agent version")
    expect(update).to_be_hidden()

    agents.version_save(roster["writer"], config={"MODEL": "claude-haiku-4-5"})
    open_history(page)  # reads the agents again
    page.keyboard.press("Escape")

    expect(update).to_contain_text("v2 is available")
    update.get_by_text("What changes").click()
    expect(update.locator(".ahentic-agent-changes")).to_contain_text("MODEL")
    expect(update.locator(".ahentic-agent-changes")).to_contain_text("claude-haiku-4-5")
    screenshot(page, "agents-move-to-latest")
    update.get_by_role("button", name="Move this chat to v2").click()

    expect(brand(page)).to_contain_text("v2")
    expect(update).to_contain_text("now uses Writer v2")
    assert Session.objects.get().agent_version.number == 2
