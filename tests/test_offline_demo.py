from orchestrator_app.testing.offline import demo_responder

from .conftest import API


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
