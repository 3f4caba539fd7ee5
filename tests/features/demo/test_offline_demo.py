import pytest
from django.contrib.admin.models import ADDITION, LogEntry
from django.contrib.flatpages.models import FlatPage
from django.test import Client
from rest_framework.test import APIClient

from orchestrator_app.schedules import tasks as schedule_tasks
from orchestrator_app.testing.offline import demo_responder
from tests.support.api import API
from tests.support.factories import SessionFactory, UserFactory


def test_the_offline_model_shows_a_plan_then_answers(owner_client, session, llm, run_tasks):
    llm.responder = demo_responder
    url = f"{API}/sessions/{session.pk}"
    r = run_tasks(owner_client.post, f"{url}/messages", {"content": "Hello there"}, format="json")
    assert r.status_code == 202
    body = owner_client.get(url).json()
    assert body["status"] == "idle"
    assert [s["status"] for s in body["plan"]["steps"]] == ["completed"] * 3
    assert "You said: “Hello there”" in body["messages"][-1]["content"]


def test_the_offline_model_names_the_session_from_the_first_message(
    owner_client, session, llm, run_tasks, settings
):
    settings.AHENTIC = {**settings.AHENTIC, "NAME_REFRESH_INTERVAL": 30}
    llm.responder = demo_responder
    url = f"{API}/sessions/{session.pk}"
    run_tasks(
        owner_client.post, f"{url}/messages", {"content": "plan my garden party"}, format="json"
    )
    body = owner_client.get(url).json()
    assert body["title"] == "Plan my garden party"
    assert body["autoTitle"] is True


def test_the_offline_models_title_keeps_the_case_the_user_wrote(
    owner_client, session, llm, run_tasks, settings
):
    settings.AHENTIC = {**settings.AHENTIC, "NAME_REFRESH_INTERVAL": 30}
    llm.responder = demo_responder
    url = f"{API}/sessions/{session.pk}"
    run_tasks(
        owner_client.post,
        f"{url}/messages",
        {"content": "deploy Django on AWS with HTMX"},
        format="json",
    )
    assert owner_client.get(url).json()["title"] == "Deploy Django on AWS with HTMX"


def test_the_offline_model_reads_the_page_in_the_browser(owner_client, session, llm, run_tasks):
    llm.responder = demo_responder
    url = f"{API}/sessions/{session.pk}"
    run_tasks(
        owner_client.post, f"{url}/messages", {"content": "What is on this page?"}, format="json"
    )
    paused = owner_client.get(url).json()
    assert paused["status"] == "awaiting_browser"
    assert paused["pendingTool"]["name"] == "page_read"

    run_tasks(
        owner_client.post,
        f"{url}/browser-results",
        {"callId": paused["pendingTool"]["callId"], "result": {"title": "Ahentic demo"}},
        format="json",
    )

    body = owner_client.get(url).json()
    assert body["status"] == "idle"
    assert (
        body["messages"][-1]["content"]
        == "(Offline demo model) Your page is titled “Ahentic demo”."
    )


@pytest.fixture
def demo_admin(settings, db):
    """The demo's setup: admin tools on flat pages and groups, a superuser at the keyboard."""
    from ahentic_site.settings import AHENTIC as DEMO

    settings.AHENTIC = {**settings.AHENTIC, "ADMIN_TOOLS": DEMO["ADMIN_TOOLS"]}
    return UserFactory(username="demo", is_staff=True, is_superuser=True, agent_permission=True)


def test_the_offline_model_writes_a_flat_page_after_approval(demo_admin, llm, run_tasks):
    llm.responder = demo_responder
    client = APIClient()
    client.force_login(demo_admin)
    session = SessionFactory(owner=demo_admin)
    url = f"{API}/sessions/{session.pk}"

    run_tasks(
        client.post, f"{url}/messages", {"content": "Write a page about coffee"}, format="json"
    )

    paused = client.get(url).json()
    assert paused["status"] == "awaiting_human"
    assert paused["pendingTool"]["name"] == "admin_save"
    assert paused["pendingTool"]["input"]["from_memory"] == "coffee"
    assert paused["pendingTool"]["summary"].startswith(
        "Create flat page: url “/coffee/”, title “Coffee”, sites [1], content from artifact coffee"
    )
    assert not FlatPage.objects.exists()

    run_tasks(client.post, f"{url}/approvals", {"decision": "allow_once"}, format="json")

    page = FlatPage.objects.get(url="/coffee/")
    assert "This page is about coffee." in page.content
    entry = LogEntry.objects.get(object_id=str(page.pk))
    assert (entry.action_flag, entry.user_id) == (ADDITION, demo_admin.pk)
    body = client.get(url).json()
    assert body["status"] == "idle"
    assert body["messages"][-1]["content"].startswith(
        "(Offline demo model) Done: the page “/coffee/ -- Coffee” is live at /coffee/."
    )
    assert Client().get("/coffee/").status_code == 200  # the flat page is served

    run_tasks(client.post, f"{url}/messages", {"content": "List the pages"}, format="json")

    assert client.get(url).json()["messages"][-1]["content"] == (
        "(Offline demo model) 1 flat page(s):\n- Coffee (/coffee/)"
    )


def test_the_offline_model_remembers_a_preference_and_recalls_it_in_a_new_chat(
    owner, owner_client, llm, run_tasks
):
    """The demo's memory tour: Helper (an agent that keeps memory) writes "remember that..."
    to the user's memory in one chat (a second wish goes on top of the notes) and says it back
    in a sentence in another, never as the memory tool's numbered lines."""
    from sessions_app import agents
    from sessions_app.models import Agent

    llm.responder = demo_responder
    helper = Agent.objects.create(slug="helper", name="Helper")
    agents.version_save(helper, config={"MEMORY": "user"})
    version = agents.latest_version(helper)
    first = SessionFactory(owner=owner, agent_version=version)
    second = SessionFactory(owner=owner, agent_version=version)

    for chat, text in (
        (first, "Remember that I like oat milk"),
        (second, "What do you remember?"),
        (first, "Remember that my cat is called Mocha"),
        (second, "What do you remember?"),
    ):
        url = f"{API}/sessions/{chat.pk}"
        response = run_tasks(owner_client.post, f"{url}/messages", {"content": text}, format="json")
        assert response.status_code == 202

    replies = [
        m["content"]
        for m in owner_client.get(f"{API}/sessions/{second.pk}").json()["messages"]
        if m["role"] == "assistant"
    ]
    assert "(Offline demo model) You told me you like oat milk." in replies
    assert replies[-1] == (
        "(Offline demo model) You told me your cat is called Mocha and you like oat milk."
    )


def test_the_offline_model_writes_the_demo_schedules_site_digest(owner, llm, run_tasks):
    from datetime import UTC, datetime, timedelta

    from orchestrator_app.models import Schedule
    from tests.support.factories import agent_create, schedule_create

    llm.responder = demo_responder
    start = datetime(2026, 5, 4, 9, 0, tzinfo=UTC)
    schedule_create(
        owner,
        agent_create("helper"),
        now=start,
        first_message="Write a short digest of what happened on the site since the last one.",
        chat_mode=Schedule.ChatMode.CONTINUE,
    )

    run_tasks(schedule_tasks.schedule_tick, (start + timedelta(minutes=5, seconds=10)).isoformat())

    client = APIClient()
    client.force_login(owner)
    [chat] = client.get(f"{API}/sessions").json()["sessions"]
    assert chat["title"] == "Site digest"
    body = client.get(f"{API}/sessions/{chat['id']}").json()
    assert body["status"] == "idle"
    reply = body["messages"][-1]["content"]
    assert reply.startswith("(Offline demo model) Site digest:") and len(reply) < 300
