"""The offline demo model tells the truth (issue 31, section 5): its replies are read against
the tool results they follow, through the API, with ``demo_model`` as the local Messages API
server's responder (as ``make demo`` runs it without an API key)."""

import pytest
from django.contrib.flatpages.models import FlatPage
from django.contrib.sites.models import Site
from rest_framework.test import APIClient

from orchestrator_app.testing import offline
from tests.support.api import decide, post_message
from tests.support.factories import SessionFactory, UserFactory

pytestmark = pytest.mark.usefixtures("llm_strict")


@pytest.fixture
def demo(db, settings, llm, monkeypatch):
    """The demo's admin tools, a superuser's chat, the offline model at full speed."""
    from ahentic_site.settings import AHENTIC as DEMO

    settings.AHENTIC = {**settings.AHENTIC, "ADMIN_TOOLS": DEMO["ADMIN_TOOLS"]}
    monkeypatch.setattr(offline, "HUMAN_PACE_S", 0.0)
    llm.responder = offline.demo_model
    user = UserFactory(username="demo", is_staff=True, is_superuser=True, agent_permission=True)
    client = APIClient()
    client.force_login(user)
    return client, SessionFactory(owner=user)


def page(url: str, title: str) -> FlatPage:
    created = FlatPage.objects.create(url=url, title=title, content="<p>Hi.</p>")
    created.sites.add(Site.objects.get_current())
    return created


def last_reply(body: dict) -> str:
    return [m for m in body["messages"] if m["role"] == "assistant"][-1]["content"]


def test_after_a_denial_it_says_it_made_no_change_and_quotes_the_reason(demo, run_tasks):
    client, session = demo
    paused = post_message(client, session, run_tasks, "Write a page about coffee")
    assert paused["pendingTool"]["name"] == "admin_save"

    body = decide(client, session, run_tasks, "deny", reason="Not before Friday")

    assert body["status"] == "idle"
    assert last_reply(body) == (
        "(Offline demo model) I did not make the change: you denied “save a record in the "
        "admin” and said: “Not before Friday”. Tell me what to do differently, or ask for "
        "something else."
    )
    assert not FlatPage.objects.exists()


def test_after_a_denial_without_a_reason_it_says_so_plainly(demo, run_tasks):
    client, session = demo
    post_message(client, session, run_tasks, "Write a page about coffee")

    body = decide(client, session, run_tasks, "deny")

    assert last_reply(body).startswith(
        "(Offline demo model) I did not make the change: you denied “save a record in the "
        "admin”. Tell me"
    )


def test_after_an_error_it_says_what_failed_and_why(demo, run_tasks):
    """The page exists already: the reply gives the form's reason, and the transcript shows
    the failed save with it in the basic view too (the sidebar draws it as a line)."""
    client, session = demo
    page("/coffee/", "Coffee")  # the URL the new page would take

    body = post_message(client, session, run_tasks, "Write a page about coffee")

    assert body["status"] == "idle"  # refused before any card: the form is invalid
    reason = "Flatpage with url /coffee/ already exists for site example.com"
    assert last_reply(body) == (
        "(Offline demo model) I tried to save a record in the admin, but it failed: The admin "
        f"form refused the values: {reason}. Nothing was changed by that step."
    )
    basic = client.get(f"/ahentic/v1/sessions/{session.pk}/messages?view=basic").json()
    [failed] = [m for m in basic["messages"] if m["kind"] == "tool_response"]
    assert failed["meta"]["ok"] is False and failed["content"] == ""
    assert failed["meta"]["failure"] == f"The admin form refused the values: {reason}"
    assert FlatPage.objects.count() == 1


def test_updating_the_page_edits_the_one_this_chat_created(demo, run_tasks):
    client, session = demo
    about = page("/about/", "About")  # listed first: the tour used to take the first page
    post_message(client, session, run_tasks, "Write a page about coffee")
    decide(client, session, run_tasks)
    coffee = FlatPage.objects.get(url="/coffee/")

    paused = post_message(client, session, run_tasks, "Update the page")

    assert paused["pendingTool"]["input"]["id"] == coffee.pk
    body = decide(client, session, run_tasks)
    coffee.refresh_from_db()
    about.refresh_from_db()
    assert (coffee.title, about.title) == ("Coffee (updated)", "About")
    assert last_reply(body) == (
        "(Offline demo model) Updated “/coffee/ -- Coffee (updated)” (title); the admin's "
        "history has the change."
    )

    # Every "update the page" changes it again, through a card of its own.
    for number in (2, 3):
        again = post_message(client, session, run_tasks, "Update the page")

        assert again["pendingTool"]["input"] == {
            "model": "flatpages.flatpage",
            "id": coffee.pk,
            "values": {"title": f"Coffee (updated {number})"},
        }
        body = decide(client, session, run_tasks)
        coffee.refresh_from_db()
        assert coffee.title == f"Coffee (updated {number})"
        assert last_reply(body).startswith(
            f"(Offline demo model) Updated “/coffee/ -- Coffee (updated {number})” (title)"
        )


def test_asked_for_what_no_tool_of_its_agent_does_it_says_so_and_names_the_agent_that_can(
    demo, llm, run_tasks
):
    """A chat with an agent that cannot write pages: the system prompt lists the other agents
    the user may pick and the rule to name one; the offline model follows it, naming in a line
    of its own the agent whose description says it can."""
    from sessions_app import agents
    from sessions_app.models import Agent

    client, session = demo
    reader = Agent.objects.create(slug="reader", name="Reader", description="Reads pages aloud.")
    agents.version_save(reader, config={"TOOLS": ["update_plan"]})
    Agent.objects.create(slug="editor", name="Editor", description="Writes the site's pages.")
    agents.version_save(Agent.objects.get(slug="editor"), config={})
    chat = SessionFactory(owner=session.owner, agent_version=agents.latest_version(reader))

    body = post_message(client, chat, run_tasks, "Write a page about coffee")

    assert body["status"] == "idle" and body["pendingTool"] is None
    assert last_reply(body) == (
        "(Offline demo model) I cannot write pages in this chat: none of my tools does that."
        "\n\nPick **Editor (everywhere)** for that: start a new chat with it (the + button) and "
        "ask again."
    )
    [request] = llm.message_requests()
    system = "\n".join(block["text"] for block in request["system"])
    others = system.split("Other agents the user can start a chat with (the new-chat button):\n")[1]
    assert "- Editor (everywhere): Writes the site's pages.\n" in others
    assert "- Reader" not in system  # the chat's own agent
    assert "name the agent above whose description says it can" in system
    assert not FlatPage.objects.exists()
