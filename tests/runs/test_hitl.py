"""Human in the loop: approval cards, decisions, grants, redirects and several calls per turn.

Through the HTTP API with the synchronous worker and the local Messages API server; the server
refuses any request that leaves a tool_use unanswered, so every path below also proves that.
"""

import json
import threading
from unittest import mock

import pytest
from django.db import connection
from rest_framework.test import APIClient

from orchestrator_app.loop import decisions
from orchestrator_app.models import ToolGrant
from orchestrator_app.testing.localapi import text_reply, tool_call, tool_reply
from sessions_app.models import Session
from tests.support import tools_for_artifacts  # noqa: F401  (registers publish_note, wipe_site...)
from tests.support.api import (
    decide,
    payload_of,
    post,
    post_message,
    result_of,
    session_url,
    trace_types,
    transcript_of,
)
from tests.support.factories import SessionFactory

REQUEST = "Publish the opening hours"

pytestmark = pytest.mark.usefixtures("llm_strict")

NOTE = {"title": "Opening hours", "body": "We open at nine."}


def publish(id="toolu_publish", **input):
    return tool_call("publish_note", {**NOTE, **input}, id=id)


def results_in_newest_turn(request: dict) -> list[str]:
    return [
        b["tool_use_id"] for b in request["messages"][-1]["content"] if b["type"] == "tool_result"
    ]


def tool_messages(client, session) -> dict[str, dict]:
    return {
        m["meta"]["callId"]: m
        for m in transcript_of(client, session)
        if m["kind"] == "tool_response"
    }


def ran(artifact_calls, tool="publish_note") -> list[dict]:
    return [c["input"] for c in artifact_calls if c["tool"] == tool]


# --- the approval card ----------------------------------------------------------------------------


def test_a_mutating_tool_pauses_with_an_approval_card(
    owner_client, session, llm, run_tasks, artifact_calls
):
    llm.enqueue(tool_reply(publish()))

    body = post_message(owner_client, session, run_tasks, REQUEST)

    assert body["status"] == "awaiting_human"
    assert body["pendingTool"] == {
        "name": "publish_note",
        "label": "Publish note",  # the tool gives no label: its name in words
        "input": NOTE,
        "summary": "Publish note 'Opening hours'",
        "callId": "toolu_publish",
        "runtime": "server",
        "approved": None,
        "nonPreallowable": False,
        "artifactKey": None,
        "memory": None,
        "changes": None,  # only a preview that computes a diff fills it (admin_save)
    }
    assert body["progress"]["label"] == "Waiting for your approval: Publish note 'Opening hours'"
    assert "hitl_pause" in trace_types(owner_client, session)
    assert artifact_calls == []
    assert len(llm.message_requests()) == 1


def test_a_read_only_tool_runs_without_asking(
    owner_client, session, llm, run_tasks, artifact_calls
):
    llm.enqueue(tool_reply(tool_call("site_stats", {"page": "/"})), text_reply("42 visits."))

    body = post_message(owner_client, session, run_tasks, REQUEST)

    assert body["status"] == "idle"
    assert ran(artifact_calls, "site_stats") == [{"page": "/"}]
    assert "hitl_pause" not in trace_types(owner_client, session)


# --- decisions ------------------------------------------------------------------------------------


def test_deny_with_a_reason_runs_nothing_and_the_model_reads_the_reason(
    owner_client, session, llm, run_tasks, artifact_calls
):
    llm.enqueue(tool_reply(publish()), text_reply("Understood, I will not publish it."))
    post_message(owner_client, session, run_tasks, REQUEST)

    body = decide(owner_client, session, run_tasks, "deny", reason="Wrong hours")

    assert body["status"] == "idle"
    assert body["pendingTool"] is None
    assert body["messages"][-1]["content"] == "Understood, I will not publish it."
    assert artifact_calls == []
    block = result_of(llm.message_requests()[1], "toolu_publish")
    assert block["is_error"] is True
    result = json.loads(block["content"])
    assert (result["ok"], result["error"], result["reason"]) == (
        False,
        "user_denied",
        "Wrong hours",
    )
    meta = tool_messages(owner_client, session)["toolu_publish"]["meta"]
    assert (meta["denied"], meta["reason"], meta["error"]) == (True, "Wrong hours", "user_denied")
    assert "hitl_denied" in trace_types(owner_client, session)


def test_allow_once_runs_the_tool_exactly_once_and_the_next_call_asks_again(
    owner_client, session, llm, run_tasks, artifact_calls
):
    llm.enqueue(
        tool_reply(publish()),
        tool_reply(publish(id="toolu_second", title="Closing hours")),
    )
    post_message(owner_client, session, run_tasks, REQUEST)

    body = decide(owner_client, session, run_tasks, "allow_once")

    assert ran(artifact_calls) == [NOTE]
    assert body["status"] == "awaiting_human"
    assert body["pendingTool"]["callId"] == "toolu_second"
    meta = tool_messages(owner_client, session)["toolu_publish"]["meta"]
    assert (meta["ok"], meta["approved"]) == (True, "allow_once")

    llm.enqueue(text_reply("One published, one skipped."))
    decide(owner_client, session, run_tasks, "deny")
    assert ran(artifact_calls) == [NOTE]


def test_the_basic_view_shows_each_decision_without_the_tool_traffic(
    owner_client, session, llm, run_tasks, artifact_calls
):
    llm.enqueue(
        tool_reply(publish(), tool_call("echo", {"text": "read-only"}, id="toolu_echo")),
        tool_reply(publish(id="toolu_second", title="Closing hours")),
        text_reply("One published, one not."),
    )
    post_message(owner_client, session, run_tasks, REQUEST)
    decide(owner_client, session, run_tasks, "allow_once")

    body = decide(owner_client, session, run_tasks, "deny", reason="Not the closing hours")

    assert body["viewMode"] == "basic"
    shown = [(m["kind"], m["content"], m["meta"]) for m in body["messages"][:-1]]
    assert shown == [
        ("user_message", "Publish the opening hours", {}),
        (
            "tool_response",
            "",
            {
                "tool": "publish_note",
                "label": "Publish note",
                "callId": "toolu_publish",
                "ok": True,
                "approved": "allow_once",
            },
        ),
        (
            "tool_response",
            "",
            {
                "tool": "publish_note",
                "label": "Publish note",
                "callId": "toolu_second",
                "ok": False,
                "error": "user_denied",
                "denied": True,
                "reason": "Not the closing hours",
            },
        ),
    ]
    assert body["messages"][-1]["content"] == "One published, one not."
    # The read-only echo call needed no decision: it stays out of the basic view.
    verbose = owner_client.get(session_url(session, "messages") + "?view=verbose").json()
    assert "toolu_echo" in [m["meta"].get("callId") for m in verbose["messages"]]


def test_allow_session_stops_asking_for_that_tool_in_this_session_only(
    owner_client, session, llm, run_tasks, artifact_calls
):
    llm.enqueue(
        tool_reply(publish()),
        tool_reply(publish(id="toolu_second", title="Closing hours")),
        text_reply("Both published."),
    )
    post_message(owner_client, session, run_tasks, REQUEST)

    body = decide(owner_client, session, run_tasks, "allow_session")

    assert body["status"] == "idle"
    assert [c["title"] for c in ran(artifact_calls)] == ["Opening hours", "Closing hours"]
    messages = tool_messages(owner_client, session)
    assert messages["toolu_second"]["meta"]["approved"] == "preallowed"
    assert Session.objects.get(pk=session.pk).hitl_allows == ["publish_note"]
    assert not ToolGrant.objects.exists()

    another = SessionFactory(owner=session.owner)
    llm.enqueue(tool_reply(publish(id="toolu_elsewhere")))
    assert post_message(owner_client, another, run_tasks, REQUEST)["status"] == "awaiting_human"


def test_always_allow_stops_asking_in_a_new_session_of_the_same_user_only(
    owner_client, other_client, other, session, llm, run_tasks, artifact_calls
):
    llm.enqueue(tool_reply(publish()), text_reply("Published."))
    post_message(owner_client, session, run_tasks, REQUEST)

    decide(owner_client, session, run_tasks, "always_allow")

    assert ToolGrant.objects.filter(user=session.owner, tool_name="publish_note").count() == 1
    fresh = SessionFactory(owner=session.owner)
    llm.enqueue(tool_reply(publish(id="toolu_fresh")), text_reply("Published again."))
    body = post_message(owner_client, fresh, run_tasks, REQUEST)
    assert body["status"] == "idle"
    assert tool_messages(owner_client, fresh)["toolu_fresh"]["meta"]["approved"] == "preallowed"
    assert len(ran(artifact_calls)) == 2

    others = SessionFactory(owner=other)
    llm.enqueue(tool_reply(publish(id="toolu_other")))
    body = post_message(other_client, others, run_tasks, REQUEST)
    assert body["status"] == "awaiting_human"
    assert len(ran(artifact_calls)) == 2


def test_allow_once_with_edited_input_runs_the_tool_with_the_edit(
    owner_client, session, llm, run_tasks, artifact_calls
):
    llm.enqueue(tool_reply(publish()), text_reply("Published your version."))
    post_message(owner_client, session, run_tasks, REQUEST)
    edited = {"title": "Opening hours", "body": "We open at ten on Sundays."}

    body = decide(owner_client, session, run_tasks, "allow_once", input=edited)

    assert body["status"] == "idle"
    assert ran(artifact_calls) == [edited]


@pytest.mark.parametrize(
    "edited, missing",
    [
        ({"body": "No title"}, "title"),
        ({"title": "No body"}, "body"),
        ({"title": 7, "body": "x"}, "7"),
    ],
)
def test_edited_input_that_fails_the_schema_is_refused_and_the_card_stays(
    owner_client, session, llm, run_tasks, artifact_calls, edited, missing
):
    llm.enqueue(tool_reply(publish()))
    post_message(owner_client, session, run_tasks, REQUEST)

    response = post(
        owner_client,
        session,
        "approvals",
        {"decision": "allow_once", "input": edited},
    )

    assert response.status_code == 400
    assert response.json()["code"] == "ahentic_invalid_input"
    assert missing in response.json()["detail"]
    body = payload_of(owner_client, session)
    assert body["status"] == "awaiting_human"
    assert body["pendingTool"]["input"] == NOTE
    assert artifact_calls == []


def test_an_approved_call_refused_on_resume_clears_the_approval_card(
    owner_client, session, llm, run_tasks, artifact_calls
):
    llm.enqueue(tool_reply(publish()), text_reply("Ask mode now, so I did not publish."))
    post_message(owner_client, session, run_tasks, REQUEST)
    response = owner_client.patch(session_url(session), {"mode": "ask"}, format="json")
    assert response.status_code == 200

    body = decide(owner_client, session, run_tasks, "allow_once")

    assert artifact_calls == []
    assert tool_messages(owner_client, session)["toolu_publish"]["meta"]["error"] == (
        "ability_ask_readonly"
    )
    assert body["status"] == "idle"
    assert body["pendingTool"] is None


# --- non-preallowable tools ----------------------------------------------------------------------


@pytest.mark.parametrize("decision", ["allow_session", "always_allow"])
def test_a_non_preallowable_tool_refuses_standing_grants(
    owner_client, session, llm, run_tasks, artifact_calls, decision
):
    llm.enqueue(tool_reply(tool_call("wipe_site", {"confirm": "yes"})))
    body = post_message(owner_client, session, run_tasks, "Wipe the site")
    assert body["pendingTool"]["nonPreallowable"] is True

    response = post(owner_client, session, "approvals", {"decision": decision})

    assert response.status_code == 400
    assert response.json()["code"] == "ahentic_hitl_not_preallowable"
    stored = Session.objects.get(pk=session.pk)
    assert (stored.status, stored.hitl_allows) == ("awaiting_human", [])
    assert not ToolGrant.objects.exists()
    assert artifact_calls == []


def test_a_non_preallowable_tool_asks_every_time_even_after_a_grant(
    owner_client, session, llm, run_tasks, artifact_calls
):
    # Grants that slipped in some other way (admin, data migration) are ignored as well.
    ToolGrant.objects.create(user=session.owner, tool_name="wipe_site")
    Session.objects.filter(pk=session.pk).update(hitl_allows=["wipe_site"])
    llm.enqueue(
        tool_reply(tool_call("wipe_site", {}, id="toolu_wipe1")),
        tool_reply(tool_call("wipe_site", {}, id="toolu_wipe2")),
        text_reply("Wiped once; you declined the second time."),
    )

    body = post_message(owner_client, session, run_tasks, "Wipe the site")
    assert body["status"] == "awaiting_human"
    assert body["pendingTool"]["callId"] == "toolu_wipe1"

    body = decide(owner_client, session, run_tasks, "allow_once")
    assert len(ran(artifact_calls, "wipe_site")) == 1
    assert body["status"] == "awaiting_human"
    assert body["pendingTool"]["callId"] == "toolu_wipe2"

    body = decide(owner_client, session, run_tasks, "deny")
    assert body["status"] == "idle"
    assert len(ran(artifact_calls, "wipe_site")) == 1


# --- decisions in the wrong state ------------------------------------------------------------------


def test_an_approval_without_a_pending_call_is_a_400(owner_client, session, llm):
    response = post(owner_client, session, "approvals", {"decision": "allow_once"})

    assert response.status_code == 409
    assert response.json()["code"] == "ahentic_no_pending"


def test_an_approval_while_awaiting_the_browser_is_a_409(owner_client, session, llm, run_tasks):
    llm.enqueue(tool_reply(tool_call("editor_insert", {"content": "Hello"}, id="toolu_insert")))
    assert post_message(owner_client, session, run_tasks, REQUEST)["status"] == "awaiting_browser"

    response = post(owner_client, session, "approvals", {"decision": "allow_once"})

    assert response.status_code == 409
    assert response.json()["code"] == "ahentic_not_awaiting"
    body = payload_of(owner_client, session)
    assert (body["status"], body["pendingTool"]["callId"]) == ("awaiting_browser", "toolu_insert")


@pytest.mark.parametrize("decision", ["maybe", "ALLOW_ONCE", ""])
def test_an_unknown_decision_is_a_400(
    owner_client, session, llm, run_tasks, artifact_calls, decision
):
    llm.enqueue(tool_reply(publish()))
    post_message(owner_client, session, run_tasks, REQUEST)

    response = post(owner_client, session, "approvals", {"decision": decision})

    assert response.status_code == 400
    assert response.json()["code"] in (
        ("ahentic_bad_decision",) if decision else ("ahentic_bad_decision", "ahentic_invalid_input")
    )
    assert payload_of(owner_client, session)["status"] == "awaiting_human"
    assert artifact_calls == []


@pytest.mark.django_db(transaction=True)
def test_two_simultaneous_approvals_run_the_tool_once_and_one_of_them_wins(
    owner, session, llm, artifact_calls
):
    # transaction=True: each thread has its own connection and sees committed rows; on_commit
    # runs at once, so django-q2's sync mode runs the steps inline in the requests.
    first, second = APIClient(), APIClient()
    first.force_login(owner)
    second.force_login(owner)
    llm.enqueue(tool_reply(publish()), text_reply("Published."))
    assert post(first, session, "messages", {"content": "Publish"}).status_code == 202
    assert payload_of(first, session)["status"] == "awaiting_human"

    # Both requests read the pending card before either records its decision.
    both_read = threading.Barrier(2, timeout=10)
    require_pending = decisions._require_pending

    def read_then_wait(*args, **kwargs):
        pending = require_pending(*args, **kwargs)
        both_read.wait()
        return pending

    answers = []

    def approve(client):
        try:
            response = post(client, session, "approvals", {"decision": "allow_once"})
            answers.append((response.status_code, response.json().get("code")))
        finally:
            connection.close()

    with mock.patch.object(decisions, "_require_pending", side_effect=read_then_wait):
        threads = [threading.Thread(target=approve, args=(c,)) for c in (first, second)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)

    assert sorted(answers, key=lambda a: a[0]) == [(200, None), (409, "ahentic_not_awaiting")]
    assert ran(artifact_calls) == [NOTE]
    body = payload_of(first, session)
    assert body["status"] == "idle"
    assert body["messages"][-1]["content"] == "Published."
    assert len(llm.message_requests()) == 2


# --- a message while awaiting approval ---------------------------------------------------------------


def test_a_message_while_awaiting_approval_denies_the_call_skips_the_rest_and_starts_a_run(
    owner_client, session, llm, run_tasks, artifact_calls
):
    llm.enqueue(
        tool_reply(
            tool_call("site_stats", {"page": "/"}, id="toolu_stats"),
            publish(),
            tool_call("site_stats", {"page": "/hours"}, id="toolu_later"),
        ),
        text_reply("Sure, let us talk about prices instead."),
    )
    body = post_message(owner_client, session, run_tasks, REQUEST)
    assert (body["status"], body["pendingTool"]["callId"]) == ("awaiting_human", "toolu_publish")
    run_seq = body["runSeq"]

    body = post_message(owner_client, session, run_tasks, "Forget that, what about prices?")

    assert body["status"] == "idle"
    assert body["runSeq"] == run_seq + 1
    assert body["pendingTool"] is None
    assert ran(artifact_calls) == []
    assert ran(artifact_calls, "site_stats") == [{"page": "/"}]
    messages = tool_messages(owner_client, session)
    assert messages["toolu_stats"]["meta"]["ok"] is True
    denied = json.loads(messages["toolu_publish"]["content"])
    assert (denied["error"], denied["reason"]) == ("user_denied", "user_redirect")
    assert messages["toolu_later"]["meta"]["error"] == "skipped"
    second = llm.message_requests()[1]
    newest = second["messages"][-1]["content"]
    assert results_in_newest_turn(second) == ["toolu_stats", "toolu_publish", "toolu_later"]
    assert newest[-1] == {
        "type": "text",
        "text": "Forget that, what about prices?",
        "cache_control": {"type": "ephemeral"},
    }


# --- several tool calls in one turn ----------------------------------------------------------------


def test_calls_of_one_turn_run_in_order_and_a_pause_keeps_the_rest_for_after_the_decision(
    owner_client, session, llm, run_tasks, artifact_calls
):
    llm.enqueue(
        tool_reply(
            tool_call("site_stats", {"page": "/"}, id="toolu_a"),
            publish(id="toolu_b"),
            tool_call("site_stats", {"page": "/hours"}, id="toolu_c"),
        ),
        text_reply("Checked, published and checked again."),
    )

    body = post_message(owner_client, session, run_tasks, REQUEST)

    assert (body["status"], body["pendingTool"]["callId"]) == ("awaiting_human", "toolu_b")
    assert [c["tool"] for c in artifact_calls] == ["site_stats"]
    assert set(tool_messages(owner_client, session)) == {"toolu_a"}

    body = decide(owner_client, session, run_tasks, "allow_once")

    assert body["status"] == "idle"
    assert [(c["tool"], c["input"].get("page")) for c in artifact_calls] == [
        ("site_stats", "/"),
        ("publish_note", None),
        ("site_stats", "/hours"),
    ]
    requests = llm.message_requests()
    assert len(requests) == 2
    assert results_in_newest_turn(requests[1]) == ["toolu_a", "toolu_b", "toolu_c"]
    assert all(
        "is_error" not in result_of(requests[1], i) for i in ("toolu_a", "toolu_b", "toolu_c")
    )


def test_two_calls_needing_approval_in_one_turn_pause_one_after_the_other(
    owner_client, session, llm, run_tasks, artifact_calls
):
    llm.enqueue(
        tool_reply(publish(id="toolu_one"), publish(id="toolu_two", title="Closing hours")),
        text_reply("First published, second declined."),
    )
    post_message(owner_client, session, run_tasks, REQUEST)

    body = decide(owner_client, session, run_tasks, "allow_once")
    assert (body["status"], body["pendingTool"]["callId"]) == ("awaiting_human", "toolu_two")
    assert len(llm.message_requests()) == 1  # the model waits until the turn is answered

    body = decide(owner_client, session, run_tasks, "deny", reason="Not yet")

    assert body["status"] == "idle"
    assert [c["title"] for c in ran(artifact_calls)] == ["Opening hours"]
    second = llm.message_requests()[1]
    assert results_in_newest_turn(second) == ["toolu_one", "toolu_two"]
    assert json.loads(result_of(second, "toolu_two")["content"])["reason"] == "Not yet"
