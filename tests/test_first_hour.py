"""The first hour on a real site (issue 21): safety of writes, host tools, stale admin forms,
the install docs and the demo.

Through the public surfaces: the HTTP API with the local Messages API server, the admin with
the test client, system checks, the management commands and the demo's pages.
"""

import json

import pytest
from django.contrib.flatpages.models import FlatPage
from django.contrib.sites.models import Site

from orchestrator_app.models import ToolGrant
from orchestrator_app.testing.localapi import text_reply, tool_call, tool_reply
from sessions_app.models import Session

from .conftest import payload_of, transcript_of
from .test_admin_tools import Agent, staff

pytestmark = pytest.mark.usefixtures("llm_strict")

PAGES = "flatpages.flatpage"


@pytest.fixture
def enabled(settings):
    settings.AHENTIC = {**settings.AHENTIC, "ADMIN_TOOLS": [PAGES, "auth.group"]}


@pytest.fixture
def editor(db, enabled):
    return staff("editor", "view_flatpage", "add_flatpage", "change_flatpage", "delete_flatpage")


@pytest.fixture
def agent_for(llm, run_tasks):
    from rest_framework.test import APIClient

    def make(user):
        client = APIClient()
        client.force_login(user)
        return Agent(user, client, llm, run_tasks)

    return make


@pytest.fixture
def page(db):
    page = FlatPage.objects.create(url="/about/", title="About", content="<p>Hello.</p>")
    page.sites.add(Site.objects.get_current())
    return page


def tool_responses(agent) -> list[dict]:
    return [m for m in transcript_of(agent.client, agent.session) if m["kind"] == "tool_response"]


# --- 1. a write from POST actions waits for the user's decision ------------------------------------


def test_an_admin_delete_action_shows_the_card_and_deletes_only_once_allowed(
    agent_for, editor, page
):
    agent = agent_for(editor)

    response = agent.post(
        "actions", {"name": "admin_delete", "input": {"model": PAGES, "id": page.pk}}
    )

    assert response.status_code == 202, response.content
    body = payload_of(agent.client, agent.session)
    assert body["status"] == "awaiting_human"
    card = body["pendingTool"]
    assert (card["name"], card["nonPreallowable"], card["approved"]) == (
        "admin_delete",
        True,
        None,
    )
    assert "/about/" in card["summary"]
    assert FlatPage.objects.filter(pk=page.pk).exists()
    assert tool_responses(agent) == []

    for decision in ("allow_session", "always_allow"):
        refused = agent.post("approvals", {"decision": decision})
        assert refused.status_code == 400
        assert refused.json()["code"] == "ahentic_hitl_not_preallowable"
    assert FlatPage.objects.filter(pk=page.pk).exists()

    agent.llm.enqueue(text_reply("Deleted."))
    assert agent.post("approvals", {"decision": "allow_once"}).status_code == 200

    assert not FlatPage.objects.filter(pk=page.pk).exists()
    [result] = tool_responses(agent)
    assert result["meta"]["approved"] == "allow_once"
    assert json.loads(result["content"])["deleted"] is True
    assert payload_of(agent.client, agent.session)["status"] == "idle"


def test_an_admin_action_asks_every_time_even_with_a_grant_or_a_chat_allow(agent_for, editor, page):
    agent = agent_for(editor)
    # Grants named after the tool (as an older release or a hand-made row might hold) never
    # pre-allow a non-preallowable tool.
    ToolGrant.objects.create(user=editor, tool_name="admin_action")
    Session.objects.filter(pk=agent.session.pk).update(hitl_allows=["admin_action"])
    action = {"model": PAGES, "action": "delete_selected", "ids": [page.pk]}

    response = agent.post("actions", {"name": "admin_action", "input": action})

    assert response.status_code == 202, response.content
    body = payload_of(agent.client, agent.session)
    assert body["status"] == "awaiting_human"
    assert body["pendingTool"]["name"] == "admin_action"
    assert FlatPage.objects.filter(pk=page.pk).exists()

    agent.llm.enqueue(text_reply("Left it alone."))
    assert agent.post("approvals", {"decision": "deny", "reason": "no"}).status_code == 200

    assert FlatPage.objects.filter(pk=page.pk).exists()
    [result] = tool_responses(agent)
    assert json.loads(result["content"])["error"] == "user_denied"


def test_a_grant_covers_an_action_of_a_preallowable_tool_as_it_covers_a_model_call(
    agent_for, editor, page
):
    agent = agent_for(editor)
    # "Always allow" on a model-made admin_save of flat pages, through the card.
    result = agent.call(
        "admin_save",
        {"model": PAGES, "id": page.pk, "values": {"title": "About us"}},
        "always_allow",
    )
    assert result["ok"] is True
    assert ToolGrant.objects.filter(user=editor, tool_name=f"admin_save:{PAGES}").exists()

    agent.llm.enqueue(text_reply("Renamed."))
    response = agent.post(
        "actions",
        {"name": "admin_save", "input": {"model": PAGES, "id": page.pk, "values": {"title": "Hi"}}},
    )

    assert response.status_code == 202
    assert payload_of(agent.client, agent.session)["status"] == "idle"
    page.refresh_from_db()
    assert page.title == "Hi"
    assert tool_responses(agent)[-1]["meta"]["approved"] == "preallowed"


def test_a_readonly_action_runs_at_once(agent_for, editor, page):
    agent = agent_for(editor)
    agent.llm.enqueue(text_reply("Read it."))

    response = agent.post(
        "actions", {"name": "admin_get", "input": {"model": PAGES, "id": page.pk}}
    )

    assert response.status_code == 202
    assert payload_of(agent.client, agent.session)["status"] == "idle"
    [result] = tool_responses(agent)
    answer = json.loads(result["content"])
    assert (answer["ok"], answer["repr"]) == (True, str(page))
