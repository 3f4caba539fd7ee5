"""The offline demo model's wider surface: it thinks, cites a web page, answers with Markdown,
streams at a human pace and shows an update's change on the approval card (``demo_model``)."""

import pytest
from django.contrib.flatpages.models import FlatPage
from django.contrib.sites.models import Site
from rest_framework.test import APIClient

from orchestrator_app.testing import offline
from orchestrator_app.testing.offline import demo_model
from tests.support.api import API
from tests.support.factories import SessionFactory, UserFactory

pytestmark = pytest.mark.usefixtures("llm_strict")


@pytest.fixture
def demo(db, settings, llm):
    from ahentic_site.settings import AHENTIC as DEMO

    settings.AHENTIC = {
        **settings.AHENTIC,
        "ADMIN_TOOLS": DEMO["ADMIN_TOOLS"],
        "THINKING": "adaptive",
        "WEB_SEARCH": {"max_uses": 3},
    }
    llm.responder = demo_model
    user = UserFactory(username="demo", is_staff=True, is_superuser=True, agent_permission=True)
    client = APIClient()
    client.force_login(user)
    session = SessionFactory(owner=user)
    return client, f"{API}/sessions/{session.pk}"


def say(client, url, run_tasks, text):
    response = run_tasks(client.post, f"{url}/messages", {"content": text}, format="json")
    assert response.status_code == 202, response.content
    return client.get(url).json()


def test_the_demo_model_thinks_and_cites_a_page(demo, llm, run_tasks, monkeypatch):
    monkeypatch.setattr(offline, "HUMAN_PACE_S", 0.0)
    client, url = demo

    body = say(client, url, run_tasks, "Search what Django flat pages are")

    [answer] = [m for m in body["messages"] if m["role"] == "assistant"]
    assert answer["meta"]["thinking"]["text"].startswith("The user wrote “Search what")
    assert answer["meta"]["citations"][0]["url"] == offline.DEMO_SOURCE["url"]
    assert "[1]" in answer["content"]
    assert llm.message_requests()[0]["thinking"] == {"type": "adaptive"}


def test_the_demo_model_answers_with_a_table_and_a_code_block(demo, run_tasks, monkeypatch):
    monkeypatch.setattr(offline, "HUMAN_PACE_S", 0.0)
    client, url = demo

    body = say(client, url, run_tasks, "Show me a table")

    reply = body["messages"][-1]["content"]
    assert "| Setting | Default | What it does |" in reply
    assert "```python" in reply


def test_the_demo_model_streams_at_a_human_pace():
    body = {
        "tools": [{"name": "echo"}],
        "messages": [{"role": "user", "content": "Hello"}],
    }
    assert demo_model(body).chunk_delay_s == offline.HUMAN_PACE_S > 0


def test_the_demo_tour_shows_an_update_before_and_after(settings, demo, run_tasks, monkeypatch):
    monkeypatch.setattr(offline, "HUMAN_PACE_S", 0.0)
    client, url = demo
    site, _ = Site.objects.get_or_create(
        pk=settings.SITE_ID, defaults={"domain": "example.com", "name": "example.com"}
    )
    page = FlatPage.objects.create(url="/coffee/", title="Coffee", content="<p>Beans.</p>")
    page.sites.add(site)

    body = say(client, url, run_tasks, "Update the page")

    assert body["status"] == "awaiting_human"
    assert body["pendingTool"]["summary"] == (
        f"Update flat page “/coffee/ -- Coffee” (#{page.pk}): title “Coffee” → “Coffee (updated)”"
    )
    run_tasks(client.post, f"{url}/approvals", {"decision": "allow_once"}, format="json")
    page.refresh_from_db()
    assert page.title == "Coffee (updated)"
    assert (
        client.get(url).json()["messages"][-1]["content"].startswith("(Offline demo model) Updated")
    )
