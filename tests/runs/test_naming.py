"""Session titles: the provisional title from the first message, then names from the brain.

The brain (``BRAIN_MODEL``) names a session in a background task enqueued when a run ends; the
synchronous worker runs it before the request returns. Test settings turn naming off
(``NAME_REFRESH_INTERVAL: 0``) so it cannot take scripted answers; the tests here turn it on.
"""

from unittest import mock

import pytest

from orchestrator_app.control import brain
from orchestrator_app.models import UsageRecord
from orchestrator_app.testing.localapi import error_reply, text_reply
from sessions_app.conf import ahentic_settings
from tests.support.api import API, payload_of, session_url
from tests.support.model import model_requests

pytestmark = pytest.mark.usefixtures("llm_strict")


@pytest.fixture
def naming(model_script, settings):
    """Naming on, every 4 conversation messages; the brain answers with numbered titles."""
    settings.AHENTIC = {**settings.AHENTIC, "NAME_REFRESH_INTERVAL": 4}
    titles = iter(["Paris Trip Planning", "Paris And Lyon Trip", "A Third Title"])
    model_script.brain = lambda body: text_reply(next(titles))
    return model_script


def chat(client, run_tasks, session, content: str, reply: str = "Sure.", script=None) -> dict:
    if script is not None:
        script.main.append(text_reply(reply))
    response = run_tasks(
        client.post, session_url(session, "messages"), {"content": content}, format="json"
    )
    assert response.status_code == 202, response.content
    return payload_of(client, session)


def brain_requests(llm) -> list[dict]:
    return [entry["json"] for entry in model_requests(llm, ahentic_settings.BRAIN_MODEL)]


# --- the provisional title ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "title"),
    [
        ("Plan a trip to Paris", "Plan a trip to Paris"),
        ("x" * 60, "x" * 60),
        ("y" * 61, "y" * 57 + "…"),
        # Cut by characters, never inside a multibyte character.
        ("é" * 70, "é" * 57 + "…"),
        ("Plan  a\n\ntrip   to Paris", "Plan a trip to Paris"),
    ],
)
def test_the_first_message_gives_a_provisional_title(owner_client, session, llm, content, title):
    response = owner_client.post(
        session_url(session, "messages"), {"content": content}, format="json"
    )

    assert response.status_code == 202
    assert response.json()["title"] == title
    assert response.json()["autoTitle"] is True


def test_a_later_message_keeps_the_provisional_title(owner_client, session, llm, run_tasks):
    chat(owner_client, run_tasks, session, "Plan a trip to Paris")
    body = chat(owner_client, run_tasks, session, "Now think about Lyon instead")

    assert body["title"] == "Plan a trip to Paris"


def test_a_title_given_at_creation_is_not_replaced_by_the_first_message(
    owner_client, llm, run_tasks
):
    created = owner_client.post(f"{API}/sessions", {"title": "Holiday"}, format="json").json()
    assert created["autoTitle"] is False

    response = run_tasks(
        owner_client.post,
        f"{API}/sessions/{created['id']}/messages",
        {"content": "Plan a trip to Paris"},
        format="json",
    )

    assert response.json()["title"] == "Holiday"


# --- names from the brain -------------------------------------------------------------------------


def test_the_brain_names_the_session_after_the_first_exchange(
    owner_client, session, llm, run_tasks, naming
):
    body = chat(owner_client, run_tasks, session, "Plan a trip to Paris", "Happy to.", naming)

    assert body["title"] == "Paris Trip Planning"
    assert body["autoTitle"] is True
    [request] = brain_requests(llm)
    transcript = request["messages"][0]["content"][0]["text"]
    assert "Plan a trip to Paris" in transcript and "Happy to." in transcript
    # The brain's tokens are in the ledger and on the session.
    [record] = UsageRecord.objects.filter(session=session, purpose="brain")
    assert record.model == ahentic_settings.BRAIN_MODEL
    assert body["tokensUsed"] == sum(
        r.input_tokens + r.output_tokens + r.cache_read_tokens + r.cache_write_tokens
        for r in UsageRecord.objects.filter(session=session)
    )


def test_the_brain_renames_every_interval_of_conversation_messages(
    owner_client, session, llm, run_tasks, naming
):
    titles = [
        chat(owner_client, run_tasks, session, content, "Noted.", naming)["title"]
        for content in ("Plan a trip to Paris", "Add two days in Lyon", "Book the trains")
    ]

    # Named at 2 conversation messages, not again at 4, renamed at 6 (interval 4).
    assert titles == ["Paris Trip Planning", "Paris Trip Planning", "Paris And Lyon Trip"]
    assert len(brain_requests(llm)) == 2


def test_the_brain_title_is_cleaned_and_cut_to_sixty_characters(
    owner_client, session, llm, run_tasks, naming
):
    naming.brain = lambda body: text_reply('  "' + "Long " * 20 + '"  ')

    body = chat(owner_client, run_tasks, session, "Plan a trip to Paris", "Sure.", naming)

    assert body["title"] == ("Long " * 12)[:59] + "…"


def test_a_title_the_user_set_is_never_replaced(owner_client, session, llm, run_tasks, naming):
    owner_client.patch(session_url(session), {"title": "My trip"}, format="json")

    for content in ("Plan a trip to Paris", "Add Lyon", "Book the trains"):
        body = chat(owner_client, run_tasks, session, content, "Noted.", naming)

    assert body["title"] == "My trip"
    assert body["autoTitle"] is False
    assert brain_requests(llm) == []


def test_a_title_the_user_sets_while_the_brain_thinks_wins(
    owner_client, session, llm, run_tasks, naming
):
    ask = brain.ask_brain

    def user_renames_meanwhile(*args, **kwargs):
        answer = ask(*args, **kwargs)
        owner_client.patch(session_url(session), {"title": "My trip"}, format="json")
        return answer

    with mock.patch.object(brain, "ask_brain", user_renames_meanwhile):
        body = chat(owner_client, run_tasks, session, "Plan a trip to Paris", "Sure.", naming)

    assert len(brain_requests(llm)) == 1
    assert body["title"] == "My trip"
    assert body["autoTitle"] is False


def test_without_the_brain_the_provisional_title_stays_and_the_run_is_unaffected(
    owner_client, session, llm, run_tasks, naming
):
    naming.brain = lambda body: error_reply(500, "api_error", "Brain down.", retry_after_ms=10)

    body = chat(owner_client, run_tasks, session, "Plan a trip to Paris", "Happy to.", naming)

    assert brain_requests(llm)  # asked (and retried), failed
    assert body["title"] == "Plan a trip to Paris"
    assert body["status"] == "idle"
    assert body["lastErrorCode"] == ""
    assert body["messages"][-1]["content"] == "Happy to."
    assert not UsageRecord.objects.filter(session=session, purpose="brain").exists()


def test_naming_is_tried_again_after_the_brain_was_unavailable(
    owner_client, session, llm, run_tasks, naming
):
    answers = iter([error_reply(400, "invalid_request_error", "Brain down."), text_reply("Paris")])
    naming.brain = lambda body: next(answers)

    first = chat(owner_client, run_tasks, session, "Plan a trip to Paris", "Sure.", naming)
    second = chat(owner_client, run_tasks, session, "Add Lyon", "Sure.", naming)

    assert first["title"] == "Plan a trip to Paris"
    assert second["title"] == "Paris"


def test_naming_is_off_when_the_interval_is_zero(owner_client, session, llm, run_tasks):
    body = chat(owner_client, run_tasks, session, "Plan a trip to Paris")

    assert body["title"] == "Plan a trip to Paris"
    assert brain_requests(llm) == []
