"""What the sidebar's first hour needs from the API: Stop keeps the reply streamed so far, and
the payload says whether a worker claimed the run (``claimed`` and ``X-Ahentic-Claimed``)."""

import time

import pytest

from orchestrator_app.testing.localapi import text_reply
from sessions_app import runstate
from sessions_app.models import LiveText
from tests.support.api import payload_of, post, post_message, session_url, transcript_of
from tests.support.runs import (
    live_text,
    start_run_in_committed_db,
    start_run_without_steps,
    step_in_background,
)

pytestmark = pytest.mark.usefixtures("llm_strict")

STREAMED = " ".join(f"Sentence {n} of the streamed reply." for n in range(1, 31))


@pytest.mark.django_db(transaction=True)
def test_stop_keeps_the_streamed_text_as_a_stopped_reply_the_model_reads_back(
    owner_client, session, llm, run_tasks
):
    llm.enqueue(text_reply(STREAMED, chunk_delay_s=0.1))  # about 3 s of deltas
    run_seq = start_run_in_committed_db(owner_client, session, "Tell me everything")

    with step_in_background(session, run_seq, release=lambda: None):
        deadline = time.monotonic() + 20
        while len(live_text(owner_client, session)) < 40:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert post(owner_client, session, "cancel").status_code == 200

    transcript = transcript_of(owner_client, session)
    [stopped] = [m for m in transcript if m["kind"] == "agent_message"]
    assert stopped["meta"] == {"stopped": True}
    assert stopped["role"] == "assistant"
    assert len(stopped["content"]) >= 40
    assert STREAMED.startswith(stopped["content"])
    assert stopped["content"] == stopped["content"].rstrip()
    # The stopped text comes before the cancel notice and stays after a reload (the payload).
    kinds = [m["kind"] for m in transcript]
    assert kinds == ["user_message", "agent_message", "system_message"]
    assert [m["content"] for m in payload_of(owner_client, session)["messages"]][1:] == [
        stopped["content"],
        "Run cancelled.",
    ]
    assert not LiveText.objects.filter(session_id=session.pk).exists()

    # The next turn is a valid request for the strict local API: the stopped text is the
    # model's own (assistant) turn between the two user messages.
    llm.enqueue(text_reply("Picking up where I stopped."))
    payload = post_message(owner_client, session, run_tasks, "Go on")
    assert payload["status"] == "idle"
    request = llm.message_requests()[-1]
    assert [m["role"] for m in request["messages"]] == ["user", "assistant", "user"]
    assert request["messages"][1]["content"][0]["text"] == stopped["content"]


@pytest.mark.django_db(transaction=True)
def test_stop_before_any_text_streamed_adds_no_reply(owner_client, session, llm):
    start_run_in_committed_db(owner_client, session)  # the step never runs: nothing streamed

    assert post(owner_client, session, "cancel").status_code == 200

    assert [m["kind"] for m in transcript_of(owner_client, session)] == [
        "user_message",
        "system_message",
    ]


@pytest.mark.django_db(transaction=True)
def test_stop_ignores_live_text_of_an_earlier_run(owner_client, session, llm):
    run_seq = start_run_in_committed_db(owner_client, session)
    LiveText.objects.create(
        session_id=session.pk, run=run_seq - 1, text="Old words.", updated_at=session.created_at
    )

    assert post(owner_client, session, "cancel").status_code == 200

    assert "agent_message" not in [m["kind"] for m in transcript_of(owner_client, session)]


def test_the_payload_says_whether_a_worker_claimed_the_run(owner_client, session, llm):
    assert payload_of(owner_client, session)["claimed"] is False  # idle: nobody holds it
    run_seq = start_run_without_steps(owner_client, session)  # enqueued, no worker took it

    first = owner_client.get(session_url(session))
    assert first.json()["status"] == "running"
    assert first.json()["claimed"] is False
    assert first["X-Ahentic-Claimed"] == "0"

    # A worker claims the step: bookkeeping, so the version does not move, and the poll's
    # 304 carries the claim in its header.
    assert runstate.run_claim(session_id=session.pk, run_seq=run_seq) is not None
    again = owner_client.get(session_url(session), HTTP_IF_NONE_MATCH=first["ETag"])
    assert again.status_code == 304
    assert again["X-Ahentic-Claimed"] == "1"
    assert owner_client.get(session_url(session))["X-Ahentic-Claimed"] == "1"


def test_the_openapi_schema_documents_claimed_and_the_pending_calls_changes(owner_client):
    response = owner_client.get("/ahentic/v1/schema/", HTTP_ACCEPT="application/json")
    assert response.status_code == 200, response.content
    schemas = response.json()["components"]["schemas"]
    assert schemas["SessionPayload"]["properties"]["claimed"]["type"] == "boolean"
    pending = schemas["SessionPayload"]["properties"]["pendingTool"]
    assert "PendingTool" in str(pending)
    assert set(schemas["Change"]["properties"]) == {"field", "label", "before", "after", "hidden"}
