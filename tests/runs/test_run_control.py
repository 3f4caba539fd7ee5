"""Run control through the API: cancel, pending messages, continue/resume, actions, approvals.

A run stays "running" between steps deterministically because on_commit callbacks outside
``run_tasks`` are dropped by the test transaction: posting a message without ``run_tasks``
starts a run whose first step never executes, and ``tasks.run_step`` called directly runs one
step without the next.
"""

import json
import threading
import time
from datetime import timedelta
from unittest import mock

import pytest
from django.db import connection
from django.utils import timezone

from orchestrator_app import tasks
from orchestrator_app.models import ToolGrant, UsageRecord
from orchestrator_app.testing.localapi import error_reply, text_reply, tool_call, tool_reply
from sessions_app.models import LiveText, Session
from tests.support import tools_for_tests
from tests.support.api import decide, payload_of, post, session_url, trace_types, transcript_of
from tests.support.factories import SessionFactory
from tests.support.runs import (
    live_text,
    start_run_in_committed_db,
    start_run_without_steps,
    step_in_background,
)
from tests.support.tools_for_tests import SlowWriteGate

pytestmark = pytest.mark.usefixtures("llm_strict")


def tool_results(transcript) -> list[dict]:
    return [m for m in transcript if m["kind"] == "tool_response"]


def unanswered_calls(transcript) -> list[str]:
    answered = {m["meta"]["callId"] for m in transcript if m["kind"] == "tool_response"}
    return [
        m["meta"]["callId"]
        for m in transcript
        if m["kind"] == "tool_call" and m["meta"]["callId"] not in answered
    ]


def user_texts(request_body) -> list[str]:
    return [
        b["text"]
        for m in request_body["messages"]
        if m["role"] == "user"
        for b in m["content"]
        if b["type"] == "text"
    ]


# --- work in flight: a step running in another thread ---------------------------------------------
# These tests need committed data (a thread has its own database connection), hence
# transaction=True. There on_commit callbacks run at once, and django-q2's sync mode would run
# the step inline in the request, so the run is started with async_task patched out and its
# step is run in a thread.


@pytest.mark.django_db(transaction=True)
def test_cancel_during_the_model_call_records_its_usage_and_starts_nothing(
    owner_client, session, llm, tool_calls
):
    gate = threading.Event()
    llm.enqueue(tool_reply(tool_call("echo", {"text": "too late"}), gate=gate))
    run_seq = start_run_in_committed_db(owner_client, session)

    with step_in_background(session, run_seq, release=gate.set):
        assert llm.wait_for_requests(1)
        response = post(owner_client, session, "cancel")

    assert response.status_code == 200
    body = payload_of(owner_client, session)
    assert body["status"] == "cancelled"
    assert body["jobResumable"] is False
    assert tool_calls == []
    transcript = transcript_of(owner_client, session)
    assert unanswered_calls(transcript) == []
    assert [(m["kind"], m["content"]) for m in transcript][-1] == (
        "system_message",
        "Run cancelled.",
    )
    assert not [m for m in transcript if m["kind"] in ("agent_message", "tool_response")]
    assert UsageRecord.objects.filter(session_id=session.pk).count() == 1
    usage = llm.requests[0]["response"]["usage"]
    assert body["tokensOut"] == usage["output_tokens"]
    assert body["tokensIn"] == (
        usage["input_tokens"]
        + usage["cache_read_input_tokens"]
        + usage["cache_creation_input_tokens"]
    )

    # The cancelled session takes the next message as a new run (the step runs inline here).
    llm.enqueue(text_reply("Hello again."))
    response = post(owner_client, session, "messages", {"content": "Start over"})
    assert response.status_code == 202
    body = payload_of(owner_client, session)
    assert body["status"] == "idle"
    assert body["runSeq"] == run_seq + 1
    assert body["messages"][-1]["content"] == "Hello again."


@pytest.mark.django_db(transaction=True)
def test_a_tool_that_finishes_after_a_cancel_has_its_real_result_recorded(
    owner_client, session, llm, tool_calls
):
    SlowWriteGate.reset()
    llm.enqueue(
        tool_reply(
            tool_call("slow_write", {"row": 1}, id="toolu_slow"),
            tool_call("echo", {"text": "never"}, id="toolu_next"),
        )
    )
    run_seq = start_run_in_committed_db(owner_client, session)

    with step_in_background(session, run_seq, release=SlowWriteGate.release.set):
        assert SlowWriteGate.started.wait(10)
        body = post(owner_client, session, "cancel").json()
        assert body["status"] == "cancelled"

    assert [c["tool"] for c in tool_calls] == ["slow_write"]  # nothing new started
    results = {r["meta"]["callId"]: r for r in tool_results(transcript_of(owner_client, session))}
    assert results["toolu_next"]["meta"]["error"] == "cancelled"
    # The write happened: the model must not be told it was cancelled.
    assert results["toolu_slow"]["meta"]["ok"] is True
    assert json.loads(results["toolu_slow"]["content"]) == {"ok": True, "written": True}


@pytest.mark.django_db(transaction=True)
def test_a_message_queued_during_the_final_model_call_is_answered(
    owner_client, session, llm, tool_calls
):
    gate = threading.Event()
    llm.enqueue(text_reply("Here is the answer.", gate=gate), text_reply("And about cats: yes."))
    run_seq = start_run_in_committed_db(owner_client, session)

    with step_in_background(session, run_seq, release=gate.set):
        assert llm.wait_for_requests(1)
        response = post(owner_client, session, "messages", {"content": "Also, cats?"})
        assert response.status_code == 200
        assert response.json()["pendingMessage"]["content"] == "Also, cats?"

    # The run went on for the queued message (the next step ran inline in the step's thread:
    # on_commit fires at once here and django-q2 is in sync mode).
    body = payload_of(owner_client, session)
    assert body["status"] == "idle"
    assert body["pendingMessages"] == []
    assert body["runSeq"] == run_seq
    assert "Also, cats?" in user_texts(llm.message_requests()[1])
    contents = [m["content"] for m in transcript_of(owner_client, session)]
    assert contents[-3:] == ["Here is the answer.", "Also, cats?", "And about cats: yes."]


def test_cancel_answers_the_open_tool_calls_of_a_paused_run(
    owner_client, session, llm, run_tasks, tool_calls
):
    llm.enqueue(
        tool_reply(
            tool_call("notes_create", {"title": "A"}, id="toolu_note"),
            tool_call("echo", {"text": "B"}, id="toolu_echo"),
        )
    )
    run_tasks(post, owner_client, session, "messages", {"content": "Note it"})
    assert payload_of(owner_client, session)["status"] == "awaiting_human"

    body = post(owner_client, session, "cancel").json()

    assert body["status"] == "cancelled"
    assert body["pendingTool"] is None
    transcript = transcript_of(owner_client, session)
    assert unanswered_calls(transcript) == []
    assert {r["meta"]["error"] for r in tool_results(transcript)} == {"cancelled"}
    assert tool_calls == []


# --- messages while busy -------------------------------------------------------------------------


def test_a_message_while_running_is_queued_and_reaches_the_model_at_the_next_step(
    owner_client, session, llm, run_tasks
):
    llm.enqueue(
        tool_reply(tool_call("echo", {"text": "one"}, id="toolu_one")),
        text_reply("Done, and noted your extra request."),
    )
    run_seq = start_run_without_steps(owner_client, session, "Start the job")
    tasks.run_step(str(session.pk), run_seq)  # step 1: the model calls echo, echo runs

    response = post(owner_client, session, "messages", {"content": "Also mention cats"})

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["status"] == "running"
    assert body["pendingMessage"]["content"] == "Also mention cats"
    assert body["pendingMessage"]["sourceType"] == "user"
    assert [p["content"] for p in body["pendingMessages"]] == ["Also mention cats"]
    assert "Also mention cats" not in user_texts(llm.message_requests()[0])

    run_tasks(tasks.run_step, str(session.pk), run_seq)

    body = payload_of(owner_client, session)
    assert body["status"] == "idle"
    assert body["pendingMessages"] == []
    assert body["runSeq"] == run_seq
    newest_user_turn = llm.message_requests()[1]["messages"][-1]
    assert newest_user_turn["role"] == "user"
    assert [b["type"] for b in newest_user_turn["content"]] == ["tool_result", "text"]
    assert newest_user_turn["content"][0]["tool_use_id"] == "toolu_one"
    assert newest_user_turn["content"][1]["text"] == "Also mention cats"
    kinds = [(m["kind"], m["content"]) for m in transcript_of(owner_client, session)]
    assert kinds[3] == ("user_message", "Also mention cats")


def test_a_message_while_running_with_if_busy_reject_is_refused(owner_client, session, llm):
    start_run_without_steps(owner_client, session)

    response = post(owner_client, session, "messages", {"content": "Hurry", "ifBusy": "reject"})

    assert response.status_code == 409
    assert response.json()["code"] == "ahentic_session_busy"
    assert payload_of(owner_client, session)["pendingMessages"] == []


def test_the_reject_busy_policy_refuses_messages_while_running(
    owner_client, session, llm, settings
):
    settings.AHENTIC = {**settings.AHENTIC, "BUSY_POLICY": "reject"}
    start_run_without_steps(owner_client, session)

    response = post(owner_client, session, "messages", {"content": "Hurry"})

    assert response.status_code == 409
    assert response.json()["code"] == "ahentic_session_busy"
    assert payload_of(owner_client, session)["pendingMessages"] == []


def test_a_recalled_pending_message_never_reaches_the_model(owner_client, session, llm, run_tasks):
    run_seq = start_run_without_steps(owner_client, session, "Start the job")
    pending = post(owner_client, session, "messages", {"content": "Forget it"}).json()
    pid = pending["pendingMessage"]["id"]

    response = owner_client.delete(session_url(session, f"pending-messages/{pid}"))

    assert response.status_code == 204
    assert payload_of(owner_client, session)["pendingMessages"] == []
    again = owner_client.delete(session_url(session, f"pending-messages/{pid}"))
    assert again.status_code == 404
    assert again.json()["code"] == "ahentic_pending_not_found"

    llm.enqueue(text_reply("Done."))
    run_tasks(tasks.run_step, str(session.pk), run_seq)
    assert payload_of(owner_client, session)["status"] == "idle"
    assert "Forget it" not in json.dumps(llm.message_requests())
    assert "Forget it" not in [m["content"] for m in transcript_of(owner_client, session)]


def test_a_promoted_pending_message_can_no_longer_be_recalled(
    owner_client, session, llm, run_tasks
):
    run_seq = start_run_without_steps(owner_client, session)
    pid = post(owner_client, session, "messages", {"content": "Also this"}).json()[
        "pendingMessage"
    ]["id"]
    run_tasks(tasks.run_step, str(session.pk), run_seq)

    response = owner_client.delete(session_url(session, f"pending-messages/{pid}"))

    assert response.status_code == 404
    assert "Also this" in user_texts(llm.message_requests()[0])


def test_another_users_pending_message_cannot_be_recalled(owner_client, other_client, session, llm):
    start_run_without_steps(owner_client, session)
    pid = post(owner_client, session, "messages", {"content": "Mine"}).json()["pendingMessage"][
        "id"
    ]

    response = other_client.delete(session_url(session, f"pending-messages/{pid}"))

    assert response.status_code == 404
    assert response.json()["code"] == "ahentic_session_not_found"
    assert [p["id"] for p in payload_of(owner_client, session)["pendingMessages"]] == [pid]


# --- resume, new goal, continue ------------------------------------------------------------------

PLAN = [
    {"id": "1", "content": "Research", "status": "in_progress"},
    {"id": "2", "content": "Draft"},
    {"id": "3", "content": "Publish"},
]


def fail_with_overload(client, session, llm, run_tasks):
    """A run that makes a plan, then fails resumably because the model is overloaded."""
    llm.enqueue(
        tool_reply(tool_call("update_plan", {"steps": PLAN})),
        *(error_reply(529, retry_after_ms=10) for _ in range(3)),
    )
    run_tasks(post, client, session, "messages", {"content": "Write the article"})
    body = payload_of(client, session)
    assert (body["status"], body["lastErrorCode"], body["jobResumable"]) == (
        "error",
        "ahentic_llm_overloaded",
        True,
    )
    return body


@pytest.mark.parametrize("cue", ["continue", "Keep going!", "try again."])
def test_a_resume_cue_while_resumable_resumes_the_same_run(
    owner_client, session, llm, run_tasks, cue
):
    failed = fail_with_overload(owner_client, session, llm, run_tasks)
    llm.enqueue(text_reply("Picked up where I left off."))

    response = run_tasks(post, owner_client, session, "messages", {"content": cue})

    assert response.status_code == 202
    body = payload_of(owner_client, session)
    assert body["status"] == "idle"
    assert body["runSeq"] == failed["runSeq"]
    assert body["plan"] is not None
    assert [s["id"] for s in body["plan"]["steps"]] == ["1", "2", "3"]
    assert "run_resume" in trace_types(owner_client, session)
    assert body["messages"][-1]["content"] == "Picked up where I left off."
    assert body["goals"] == []  # goals are the model's: neither a message nor a cue sets one


def test_a_normal_message_after_a_failure_starts_a_new_run(owner_client, session, llm, run_tasks):
    failed = fail_with_overload(owner_client, session, llm, run_tasks)
    before = trace_types(owner_client, session).count("run_start")

    response = post(owner_client, session, "messages", {"content": "Write a poem instead"})

    assert response.status_code == 202
    body = response.json()
    assert body["status"] == "running"
    assert body["runSeq"] == failed["runSeq"] + 1
    assert body["plan"] is None
    assert body["lastErrorCode"] == ""
    assert body["jobResumable"] is False
    assert trace_types(owner_client, session).count("run_start") == before + 1
    assert "run_resume" not in trace_types(owner_client, session)


def test_continue_re_enqueues_a_running_session_whose_lease_expired(
    owner_client, session, llm, run_tasks
):
    run_seq = start_run_without_steps(owner_client, session)
    Session.objects.filter(pk=session.pk).update(
        lease_token="gone-worker", lease_expires_at=timezone.now() - timedelta(seconds=5)
    )
    llm.enqueue(text_reply("Recovered."))

    response = run_tasks(post, owner_client, session, "continue")

    assert response.status_code == 200
    body = payload_of(owner_client, session)
    assert body["status"] == "idle"
    assert body["runSeq"] == run_seq
    assert body["messages"][-1]["content"] == "Recovered."
    assert "run_requeue" in trace_types(owner_client, session)


def test_continue_leaves_a_running_session_with_a_live_lease_alone(
    owner_client, session, llm, run_tasks
):
    start_run_without_steps(owner_client, session)
    Session.objects.filter(pk=session.pk).update(
        lease_token="busy-worker", lease_expires_at=timezone.now() + timedelta(seconds=60)
    )

    response = run_tasks(post, owner_client, session, "continue")

    assert response.status_code == 200
    assert response.json()["status"] == "running"
    assert "run_requeue" not in trace_types(owner_client, session)
    assert llm.message_requests() == []


def test_continue_with_nothing_to_resume_is_a_no_op(owner_client, session, llm, run_tasks):
    llm.enqueue(text_reply("Hi."))
    run_tasks(post, owner_client, session, "messages", {"content": "Hello"})
    before = payload_of(owner_client, session)

    response = run_tasks(post, owner_client, session, "continue")

    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "idle"
    assert (body["runSeq"], body["traceCount"], body["version"]) == (
        before["runSeq"],
        before["traceCount"],
        before["version"],
    )
    assert len(llm.message_requests()) == 1


# --- suggested actions ---------------------------------------------------------------------------


def test_an_action_runs_one_tool_on_an_idle_session_and_the_model_follows_up(
    owner_client, session, llm, run_tasks, tool_calls
):
    llm.enqueue(text_reply("The echo said hi."))

    response = run_tasks(
        post, owner_client, session, "actions", {"name": "echo", "input": {"text": "hi"}}
    )

    assert response.status_code == 202, response.content
    assert tool_calls == [{"tool": "echo", "input": {"text": "hi"}}]
    body = payload_of(owner_client, session)
    assert body["status"] == "idle"
    assert body["runSeq"] == 1
    kinds = [m["kind"] for m in transcript_of(owner_client, session)]
    assert kinds == ["user_message", "tool_call", "tool_response", "agent_message"]
    [request] = llm.message_requests()
    assert request["messages"][-1]["content"][0]["type"] == "tool_result"


def test_an_action_of_a_mutating_tool_waits_for_approval_like_a_model_call(
    owner_client, session, llm, run_tasks, tool_calls
):
    response = run_tasks(
        post, owner_client, session, "actions", {"name": "notes_create", "input": {"title": "X"}}
    )

    assert response.status_code == 202
    assert tool_calls == []
    body = payload_of(owner_client, session)
    assert body["status"] == "awaiting_human"
    assert body["pendingTool"]["name"] == "notes_create"
    assert body["pendingTool"]["approved"] is None

    llm.enqueue(text_reply("Noted."))
    body = decide(owner_client, session, run_tasks, "allow_once")

    assert body["status"] == "idle"
    assert [c["tool"] for c in tool_calls] == ["notes_create"]
    [result] = tool_results(transcript_of(owner_client, session))
    assert result["meta"]["approved"] == "allow_once"


def test_an_action_on_a_busy_session_is_refused(owner_client, session, llm, tool_calls):
    start_run_without_steps(owner_client, session)

    response = post(owner_client, session, "actions", {"name": "echo", "input": {"text": "hi"}})

    assert response.status_code == 409
    assert response.json()["code"] == "ahentic_session_busy"
    assert tool_calls == []


@pytest.mark.parametrize(
    "body, code",
    [
        ({"name": "teleport", "input": {}}, "ahentic_unknown_action"),
        ({"name": "staff_report", "input": {}}, "ahentic_unknown_action"),
        ({"name": "echo", "input": {}}, "ahentic_invalid_input"),
    ],
)
def test_an_action_that_cannot_run_is_a_400(owner_client, session, llm, tool_calls, body, code):
    response = post(owner_client, session, "actions", body)

    assert response.status_code == 400
    assert response.json()["code"] == code
    assert payload_of(owner_client, session)["status"] == "idle"
    assert tool_calls == []


# --- approvals (HITL) ----------------------------------------------------------------------------


def pause_for_approval(client, session, llm, run_tasks, *more_replies, title="Groceries"):
    llm.enqueue(
        tool_reply(tool_call("notes_create", {"title": title}, id="toolu_note")), *more_replies
    )
    run_tasks(post, client, session, "messages", {"content": "Make a note"})
    return payload_of(client, session)


def test_a_mutating_tool_pauses_for_approval(owner_client, session, llm, run_tasks, tool_calls):
    body = pause_for_approval(owner_client, session, llm, run_tasks)

    assert body["status"] == "awaiting_human"
    pending = body["pendingTool"]
    assert {k: pending[k] for k in ("name", "input", "summary", "callId")} == {
        "name": "notes_create",
        "input": {"title": "Groceries"},
        "summary": "Create note 'Groceries'",
        "callId": "toolu_note",
    }
    assert body["progress"]["label"] == "Waiting for your approval: Create note 'Groceries'"
    assert tool_calls == []
    assert len(llm.message_requests()) == 1


def test_deny_with_a_reason_tells_the_model_and_runs_nothing(
    owner_client, session, llm, run_tasks, tool_calls
):
    pause_for_approval(owner_client, session, llm, run_tasks, text_reply("Understood."))

    response = run_tasks(
        post, owner_client, session, "approvals", {"decision": "deny", "reason": "Not today"}
    )

    assert response.status_code == 200
    assert tool_calls == []
    body = payload_of(owner_client, session)
    assert body["status"] == "idle"
    assert body["pendingTool"] is None
    [block] = [
        b
        for b in llm.message_requests()[1]["messages"][-1]["content"]
        if b["type"] == "tool_result"
    ]
    assert block["is_error"] is True
    result = json.loads(block["content"])
    assert (result["error"], result["reason"]) == ("user_denied", "Not today")


def test_an_approval_runs_the_tool_in_the_worker_not_in_the_request(
    owner_client, session, llm, run_tasks, tool_calls
):
    body = pause_for_approval(owner_client, session, llm, run_tasks, text_reply("Created."))

    response = post(owner_client, session, "approvals", {"decision": "allow_once"})

    assert response.status_code == 200
    assert response.json()["status"] == "running"
    assert response.json()["pendingTool"]["approved"] == "allow_once"
    assert tool_calls == []
    run_tasks(tasks.run_step, str(session.pk), body["runSeq"])
    assert [c["tool"] for c in tool_calls] == ["notes_create"]
    assert payload_of(owner_client, session)["status"] == "idle"


def test_allow_once_runs_the_tool_once_and_asks_again_next_time(
    owner_client, session, llm, run_tasks, tool_calls
):
    pause_for_approval(
        owner_client,
        session,
        llm,
        run_tasks,
        tool_reply(tool_call("notes_create", {"title": "Second"}, id="toolu_second")),
    )

    run_tasks(post, owner_client, session, "approvals", {"decision": "allow_once"})

    assert tool_calls == [{"tool": "notes_create", "input": {"title": "Groceries"}}]
    body = payload_of(owner_client, session)
    assert body["status"] == "awaiting_human"
    assert body["pendingTool"]["callId"] == "toolu_second"
    first = tool_results(transcript_of(owner_client, session))[0]
    assert (first["meta"]["ok"], first["meta"]["approved"]) == (True, "allow_once")


def test_allow_session_stops_asking_for_that_tool_in_this_session(
    owner_client, session, llm, run_tasks, tool_calls
):
    pause_for_approval(
        owner_client,
        session,
        llm,
        run_tasks,
        tool_reply(tool_call("notes_create", {"title": "Second"})),
        text_reply("Two notes created."),
    )

    run_tasks(post, owner_client, session, "approvals", {"decision": "allow_session"})

    assert [c["input"]["title"] for c in tool_calls] == ["Groceries", "Second"]
    assert payload_of(owner_client, session)["status"] == "idle"
    approvals = [
        r["meta"].get("approved") for r in tool_results(transcript_of(owner_client, session))
    ]
    assert approvals == ["allow_session", "preallowed"]

    # Another session of the same user still asks.
    other_session = SessionFactory(owner=session.owner)
    body = pause_for_approval(owner_client, other_session, llm, run_tasks)
    assert body["status"] == "awaiting_human"


def test_always_allow_stops_asking_in_every_session_of_the_owner(
    owner_client, session, llm, run_tasks, tool_calls
):
    pause_for_approval(owner_client, session, llm, run_tasks, text_reply("Created."))

    run_tasks(post, owner_client, session, "approvals", {"decision": "always_allow"})

    assert ToolGrant.objects.filter(user=session.owner, tool_name="notes_create").exists()
    other_session = SessionFactory(owner=session.owner)
    llm.enqueue(tool_reply(tool_call("notes_create", {"title": "Again"})), text_reply("Done."))
    run_tasks(post, owner_client, other_session, "messages", {"content": "Another note"})
    assert payload_of(owner_client, other_session)["status"] == "idle"
    assert [c["input"]["title"] for c in tool_calls] == ["Groceries", "Again"]


def test_a_message_while_awaiting_approval_denies_the_call_and_skips_the_rest_of_the_turn(
    owner_client, session, llm, run_tasks, tool_calls
):
    llm.enqueue(
        tool_reply(
            tool_call("notes_create", {"title": "A"}, id="toolu_note"),
            tool_call("echo", {"text": "B"}, id="toolu_echo"),
        ),
        text_reply("Switching to the new request."),
    )
    run_tasks(post, owner_client, session, "messages", {"content": "Note it"})
    assert payload_of(owner_client, session)["status"] == "awaiting_human"

    response = run_tasks(post, owner_client, session, "messages", {"content": "No, do X instead"})

    assert response.status_code == 202
    assert tool_calls == []
    results = {r["meta"]["callId"]: r for r in tool_results(transcript_of(owner_client, session))}
    assert (results["toolu_note"]["meta"]["error"], results["toolu_note"]["meta"]["reason"]) == (
        "user_denied",
        "user_redirect",
    )
    assert results["toolu_echo"]["meta"]["error"] == "skipped"
    body = payload_of(owner_client, session)
    assert body["status"] == "idle"
    assert body["pendingTool"] is None
    newest_user_turn = llm.message_requests()[1]["messages"][-1]["content"]
    assert [b["type"] for b in newest_user_turn] == ["tool_result", "tool_result", "text"]
    assert newest_user_turn[-1]["text"] == "No, do X instead"


def test_allow_once_with_edited_input_runs_the_tool_with_the_edit(
    owner_client, session, llm, run_tasks, tool_calls
):
    pause_for_approval(owner_client, session, llm, run_tasks, text_reply("Created."))

    response = run_tasks(
        post,
        owner_client,
        session,
        "approvals",
        {"decision": "allow_once", "input": {"title": "Vegetables"}},
    )

    assert response.status_code == 200, response.content
    assert tool_calls == [{"tool": "notes_create", "input": {"title": "Vegetables"}}]
    assert payload_of(owner_client, session)["status"] == "idle"


def test_an_approval_with_invalid_edited_input_is_a_400(
    owner_client, session, llm, run_tasks, tool_calls
):
    pause_for_approval(owner_client, session, llm, run_tasks)

    response = post(
        owner_client, session, "approvals", {"decision": "allow_once", "input": {"title": 7}}
    )

    assert response.status_code == 400
    assert response.json()["code"] == "ahentic_invalid_input"
    assert payload_of(owner_client, session)["status"] == "awaiting_human"
    assert tool_calls == []


@pytest.mark.parametrize("decision", ["allow_session", "always_allow"])
def test_a_non_preallowable_tool_can_only_be_allowed_once(
    owner_client, session, llm, run_tasks, tool_calls, decision
):
    llm.enqueue(tool_reply(tool_call("payment_send", {"amount": 5})))
    run_tasks(post, owner_client, session, "messages", {"content": "Pay"})
    body = payload_of(owner_client, session)
    assert body["pendingTool"]["nonPreallowable"] is True

    response = post(owner_client, session, "approvals", {"decision": decision})

    assert response.status_code == 400
    assert response.json()["code"] == "ahentic_hitl_not_preallowable"
    assert payload_of(owner_client, session)["status"] == "awaiting_human"
    assert not ToolGrant.objects.filter(tool_name="payment_send").exists()
    assert tool_calls == []


def test_an_approval_without_a_pending_call_is_a_400(owner_client, session, llm):
    response = post(owner_client, session, "approvals", {"decision": "allow_once"})

    assert response.status_code == 409
    assert response.json()["code"] == "ahentic_no_pending"


def test_an_approval_while_the_session_is_not_awaiting_is_a_409(owner_client, session, llm):
    # A suggested action sets the pending call while the run is still running.
    post(owner_client, session, "actions", {"name": "notes_create", "input": {"title": "X"}})
    assert payload_of(owner_client, session)["status"] == "running"

    response = post(owner_client, session, "approvals", {"decision": "allow_once"})

    assert response.status_code == 409
    assert response.json()["code"] == "ahentic_not_awaiting"


def test_an_unknown_decision_is_a_400(owner_client, session, llm, run_tasks, tool_calls):
    pause_for_approval(owner_client, session, llm, run_tasks)

    response = post(owner_client, session, "approvals", {"decision": "maybe"})

    assert response.status_code == 400
    assert response.json()["code"] == "ahentic_bad_decision"
    assert payload_of(owner_client, session)["status"] == "awaiting_human"
    assert tool_calls == []


def test_a_second_decision_on_the_same_call_is_refused(
    owner_client, session, llm, run_tasks, tool_calls
):
    pause_for_approval(owner_client, session, llm, run_tasks, text_reply("Done."))
    run_tasks(post, owner_client, session, "approvals", {"decision": "allow_once"})

    response = post(owner_client, session, "approvals", {"decision": "allow_once"})

    assert response.status_code == 409
    assert response.json()["code"] == "ahentic_no_pending"
    assert len(tool_calls) == 1


# --- ownership and permission, per endpoint ------------------------------------------------------

RUN_CONTROL = [
    ("post", "messages", {"content": "hi"}),
    ("delete", "pending-messages/1", None),
    ("post", "approvals", {"decision": "deny"}),
    ("post", "browser-results", {"callId": "toolu_x", "result": {"ok": True}}),
    ("post", "cancel", None),
    ("post", "continue", None),
    ("post", "actions", {"name": "echo", "input": {"text": "hi"}}),
    ("get", "messages", None),
    ("get", "diagnostics", None),
]


def call(client, method, url, data):
    if method == "get":
        return client.get(url)
    return getattr(client, method)(url, data, format="json")


@pytest.mark.parametrize("method, path, data", RUN_CONTROL)
def test_another_users_session_is_not_found(
    owner_client, other_client, session, llm, tool_calls, method, path, data
):
    start_run_without_steps(owner_client, session)
    before = payload_of(owner_client, session)

    response = call(other_client, method, session_url(session, path), data)

    assert response.status_code == 404
    assert response.json()["code"] == "ahentic_session_not_found"
    after = payload_of(owner_client, session)
    assert (after["status"], after["version"]) == (before["status"], before["version"])
    assert tool_calls == []


@pytest.mark.parametrize("method, path, data", RUN_CONTROL)
def test_a_user_without_the_agent_permission_is_forbidden(
    noperm_client, noperm, llm, tool_calls, method, path, data
):
    own_session = SessionFactory(owner=noperm)

    response = call(noperm_client, method, session_url(own_session, path), data)

    assert response.status_code == 403
    assert Session.objects.get(pk=own_session.pk).status == "idle"
    assert tool_calls == []


@pytest.mark.parametrize("method, path, data", RUN_CONTROL)
def test_an_anonymous_client_is_refused(anon_client, session, llm, method, path, data):
    response = call(anon_client, method, session_url(session, path), data)

    assert response.status_code in (401, 403)
    assert Session.objects.get(pk=session.pk).status == "idle"


def test_posting_messages_is_throttled_per_user(
    owner_client, other_client, owner, other, llm, settings
):
    from django.core.cache import cache

    from tests.support.factories import SessionFactory

    cache.clear()
    settings.AHENTIC = {**settings.AHENTIC, "THROTTLE_MESSAGES": "2/min", "BUSY_POLICY": "enqueue"}
    mine, theirs = SessionFactory(owner=owner), SessionFactory(owner=other)
    with mock.patch("orchestrator_app.control.queue.async_task"):  # no step runs: stay running
        codes = [
            owner_client.post(
                f"/ahentic/v1/sessions/{mine.pk}/messages", {"content": f"m{i}"}, format="json"
            )
            for i in range(3)
        ]
        other_user = other_client.post(
            f"/ahentic/v1/sessions/{theirs.pk}/messages", {"content": "hi"}, format="json"
        )
    assert [r.status_code for r in codes] == [202, 200, 429]
    assert codes[2].json()["code"] == "ahentic_throttled"
    assert "Retry-After" in codes[2]
    assert other_user.status_code == 202  # the rate is per user
    cache.clear()


@pytest.mark.parametrize(
    ("content", "code"),
    [("   \n  ", "ahentic_empty_message"), ("x" * 32001, "ahentic_message_too_long")],
)
def test_a_message_outside_the_content_limits_is_refused_and_nothing_starts(
    owner_client, session, llm, content, code
):
    response = owner_client.post(
        f"/ahentic/v1/sessions/{session.pk}/messages", {"content": content}, format="json"
    )

    assert (response.status_code, response.json()["code"]) == (400, code)
    body = payload_of(owner_client, session)
    assert body["status"] == "idle" and body["messages"] == [] and body["runSeq"] == 0


def test_an_action_that_writes_is_refused_in_ask_mode(owner_client, session, llm, tool_calls):
    owner_client.patch(f"/ahentic/v1/sessions/{session.pk}", {"mode": "ask"}, format="json")

    response = owner_client.post(
        f"/ahentic/v1/sessions/{session.pk}/actions",
        {"name": "notes_create", "input": {"title": "x"}},
        format="json",
    )

    assert (response.status_code, response.json()["code"]) == (400, "ahentic_ask_readonly")
    assert payload_of(owner_client, session)["status"] == "idle"
    assert tools_for_tests.CALLS == []


# --- live text: the reply while it streams ----------------------------------------------------

STREAMED = " ".join(f"Sentence {n} of the streamed reply." for n in range(1, 25))


@pytest.mark.django_db(transaction=True)
def test_the_live_text_grows_while_the_reply_streams_then_gives_way_to_its_event(
    owner_client, session, llm
):
    llm.enqueue(text_reply(STREAMED, chunk_delay_s=0.05))  # about 2 s of deltas
    run_seq = start_run_in_committed_db(owner_client, session)
    etag = owner_client.get(session_url(session))["ETag"]
    seen: list[str] = []
    polls_unchanged = 0

    with step_in_background(session, run_seq, release=lambda: None):
        deadline = time.monotonic() + 20
        while payload_of(owner_client, session)["status"] == "running":
            assert time.monotonic() < deadline
            text = live_text(owner_client, session)
            if text and (not seen or text != seen[-1]):
                seen.append(text)
            poll = owner_client.get(session_url(session), HTTP_IF_NONE_MATCH=etag)
            polls_unchanged += poll.status_code == 304
            time.sleep(0.1)

    assert len(seen) >= 3, seen  # it grew several times, at least every 0.5 s
    assert all(STREAMED.startswith(text) for text in seen)
    assert [len(t) for t in seen] == sorted(len(t) for t in seen)
    assert polls_unchanged >= 3  # the session poll stays a 304 while only the text grows
    assert live_text(owner_client, session) == ""
    assert transcript_of(owner_client, session)[-1]["content"] == STREAMED


@pytest.mark.django_db(transaction=True)
def test_a_cancelled_stream_leaves_no_live_text(owner_client, session, llm):
    llm.enqueue(text_reply(STREAMED, chunk_delay_s=0.1))
    run_seq = start_run_in_committed_db(owner_client, session)

    with step_in_background(session, run_seq, release=lambda: None):
        deadline = time.monotonic() + 20
        while not live_text(owner_client, session):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert post(owner_client, session, "cancel").status_code == 200
        assert live_text(owner_client, session) == ""

    assert live_text(owner_client, session) == ""
    assert payload_of(owner_client, session)["status"] == "cancelled"
    # What was streamed stays as a stopped reply (tests/api/test_sidebar_first_hour_api.py).
    [stopped] = [m for m in transcript_of(owner_client, session) if m["kind"] == "agent_message"]
    assert stopped["meta"] == {"stopped": True}
    assert not LiveText.objects.filter(session_id=session.pk).exists()


@pytest.mark.django_db(transaction=True)
def test_idle_polls_after_a_streamed_reply_are_all_304s(owner_client, session, llm):
    """Live text costs an idle chat nothing: its polls keep answering 304."""
    llm.enqueue(text_reply(STREAMED, chunk_delay_s=0.01))
    run_seq = start_run_in_committed_db(owner_client, session)
    with step_in_background(session, run_seq, release=lambda: None):
        pass
    etag = owner_client.get(session_url(session))["ETag"]

    statuses = [
        owner_client.get(session_url(session), HTTP_IF_NONE_MATCH=etag).status_code
        for _ in range(10)
    ]

    assert payload_of(owner_client, session)["status"] == "idle"
    assert statuses == [304] * 10


def test_the_lease_watch_resumes_a_run_whose_worker_is_gone_once_per_lease(
    owner_client, session, llm, run_tasks
):
    from django.core.cache import cache

    from orchestrator_app.control import recovery

    cache.delete(recovery.SWEEP_KEY)
    run_seq = start_run_without_steps(owner_client, session)
    Session.objects.filter(pk=session.pk).update(
        lease_token="dead-worker", lease_expires_at=timezone.now() - timedelta(seconds=1)
    )
    llm.enqueue(text_reply("Recovered by the watch."))

    with mock.patch("orchestrator_app.control.queue.db.on_commit") as enqueued:
        assert recovery.sweep() == 1
        cache.delete(recovery.SWEEP_KEY)
        assert recovery.sweep() == 0  # already re-enqueued for this lease
    assert enqueued.call_count == 1
    assert run_tasks(tasks.recover) == 0  # the schedule's sweep agrees

    cache.delete(f"ahentic:requeued:{session.pk}:{run_seq}:dead-worker")
    cache.delete(recovery.SWEEP_KEY)
    assert run_tasks(recovery.sweep) == 1
    body = payload_of(owner_client, session)
    assert body["status"] == "idle"
    assert body["runSeq"] == run_seq
    assert body["messages"][-1]["content"] == "Recovered by the watch."
    assert trace_types(owner_client, session).count("run_requeue") == 2
    # Steps run inline here (django-q2's sync mode sends post_spawn too): no watch started.
    assert "ahentic-lease-watch" not in [t.name for t in threading.enumerate()]


@pytest.mark.django_db(transaction=True)
def test_a_stalled_steps_late_failure_changes_nothing_while_the_run_goes_on_under_a_new_lease(
    owner_client, session, llm, tool_calls
):
    """Step A stalls in its model call; its lease runs out and Continue hands the run to step
    B (a new lease). A's call then fails: ending the run is a lease-guarded write, so A's
    end writes nothing and B finishes the run."""
    gate = threading.Event()
    llm.enqueue(error_reply(401, "authentication_error", gate=gate))  # A's call: no retry
    run_seq = start_run_in_committed_db(owner_client, session)
    SlowWriteGate.reset()

    def step():
        try:
            tasks.run_step(str(session.pk), run_seq)
        finally:
            connection.close()

    step_a, step_b = threading.Thread(target=step), threading.Thread(target=step)
    step_a.start()
    try:
        assert llm.wait_for_requests(1)
        Session.objects.filter(pk=session.pk).update(
            lease_expires_at=timezone.now() - timedelta(seconds=1)
        )
        llm.enqueue(
            tool_reply(tool_call("slow_write", {"row": 1}, id="toolu_b")),
            text_reply("Finished by the new step."),
        )
        with mock.patch("orchestrator_app.control.queue.async_task") as enqueued:
            assert post(owner_client, session, "continue").status_code == 200
        assert enqueued.call_count == 1
        step_b.start()  # the re-enqueued step: a new lease
        assert SlowWriteGate.started.wait(10)
        gate.set()  # A's call fails now, while B holds the run
        step_a.join(timeout=30)
        assert not step_a.is_alive()

        during = payload_of(owner_client, session)
        assert during["status"] == "running", during
        assert during["lastErrorCode"] == ""
    finally:
        gate.set()
        SlowWriteGate.release.set()
        step_a.join(timeout=30)
        if step_b.is_alive() or step_b.ident:
            step_b.join(timeout=30)
    assert not step_b.is_alive()

    body = payload_of(owner_client, session)
    assert body["status"] == "idle", body
    assert body["lastErrorCode"] == ""
    assert body["messages"][-1]["content"] == "Finished by the new step."
    transcript = transcript_of(owner_client, session)
    assert not [m for m in transcript if (m.get("meta") or {}).get("error") is True]
    assert [c["tool"] for c in tool_calls] == ["slow_write"]
