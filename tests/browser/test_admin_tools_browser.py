"""The demo's admin tools tour in a real browser: a flat page written through an approval card.

The offline demo model (orchestrator_app.testing.offline) answers, as in ``make demo``; the browser,
live server and login come from the sidebar's browser tests, and like them this module is
skipped without playwright or chromium unless AHENTIC_REQUIRE_BROWSER=1 (.ci/browser-leg).
"""

import re

import pytest
from django.conf import settings as django_settings
from django.contrib.admin.models import ADDITION, LogEntry
from django.contrib.flatpages.models import FlatPage
from django.contrib.sites.models import Site

from orchestrator_app.testing.offline import demo_responder
from tests.support.browser import (
    assistant_messages,
    expect,
    hitl_card,
    new_chat,
    open_home,
    screenshot,
    send,
    status_is,
)
from tests.support.factories import UserFactory

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("llm_strict"),
]


@pytest.fixture
def owner(db):
    """The demo login: a superuser (the ``context`` fixture logs this user in)."""
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


def test_the_demo_tour_writes_a_flat_page_through_an_approval_card(page, demo, owner):  # noqa: F811
    open_home(page)
    expect(page.locator("#try-heading")).to_be_visible()  # the home page says what to type
    new_chat(page)

    send(page, "Write a page about coffee")

    card = hitl_card(page)
    expect(card).to_be_visible()
    # The card's headline, then one diff row per field (related objects by name, not by key).
    expect(card.locator(".ahentic-hitl-summary")).to_have_text("Create flat page")
    diff = card.locator(".ahentic-hitl-diff")
    for field in ("url", "title", "sites", "content"):
        expect(diff.locator("dt", has_text=field)).to_have_count(1)
    expect(diff).to_contain_text("“/coffee/”")
    expect(diff).to_contain_text("“example.com” (#1)")
    expect(diff).to_contain_text("from artifact coffee")
    expect(card).not_to_contain_text("sites [1]")
    # The tool by its label; its registry name only in Verbose and Debug.
    expect(card).to_contain_text("Save a record in the admin")
    expect(card).not_to_contain_text("admin_save")
    status_is(page, "awaiting_human")
    screenshot(page, "admin-tools-approval")
    assert not FlatPage.objects.exists()

    card.get_by_role("button", name=re.compile("^Allow once:")).click()

    expect(assistant_messages(page).last).to_contain_text(
        "Done: the page “/coffee/ -- Coffee” is live at /coffee/."
    )
    status_is(page, "idle")
    created = FlatPage.objects.get(url="/coffee/")
    entry = LogEntry.objects.get(object_id=str(created.pk))
    assert (entry.action_flag, entry.user_id, entry.object_repr) == (
        ADDITION,
        owner.pk,
        "/coffee/ -- Coffee",
    )

    send(page, "List the pages")
    # The reply's Markdown list renders as a list.
    expect(assistant_messages(page).last.get_by_role("listitem")).to_have_text("Coffee (/coffee/)")

    page.goto("/coffee/")
    expect(page.locator("h1")).to_have_text("Coffee")
    expect(page.locator("main")).to_contain_text("This page is about coffee.")
