"""The public signals (``orchestrator_app.signals``): each sent once per occurrence, after commit.

Through the HTTP API, the synchronous worker (``run_tasks``) and the local Messages API. The
receivers below record every call with the session's status as the database holds it when the
signal arrives, which proves the write that recorded the occurrence had committed.
"""

from datetime import timedelta

import pytest
from django.utils import timezone

from orchestrator_app import signals, tasks
from orchestrator_app.testing.localapi import error_reply, text_reply, tool_call, tool_reply
from sessions_app.models import Session
from tests.support.api import decide, post, post_message

pytestmark = pytest.mark.usefixtures("llm_strict")

NAMES = ("run_started", "run_finished", "approval_requested", "tool_executed", "run_failed")


@pytest.fixture
def received():
    """Every public signal's calls, in order: (name, kwargs, status read when received)."""
    calls: list[tuple[str, dict, str]] = []
    receivers = []
    for name in NAMES:

        def record(sender, name=name, **kwargs):
            assert sender is Session
            session = kwargs["session"]
            committed = Session.objects.get(pk=session.pk).status
            calls.append((name, kwargs, committed))

        getattr(signals, name).connect(record, weak=False)
        receivers.append((name, record))
    yield calls
    for name, record in receivers:
        getattr(signals, name).disconnect(record)


def sent(calls, name=None):
    """The calls as (name, kwargs without the session), optionally of one signal."""
    return [
        (n, {k: v for k, v in kw.items() if k not in ("session", "signal")})
        for n, kw, _ in calls
        if name is None or n == name
    ]


def test_a_run_sends_run_started_then_run_finished_once(
    owner_client, session, llm, run_tasks, received
):
    llm.enqueue(text_reply("Hello."))
    post_message(owner_client, session, run_tasks, "Hi")
    assert sent(received) == [
        ("run_started", {"run": 1}),
        ("run_finished", {"run": 1, "outcome": "idle", "error_code": ""}),
    ]
    # The receivers got the session itself, and read the state its transition committed.
    assert all(kw["session"].pk == session.pk for _, kw, _ in received)
    assert [status for _, _, status in received] == ["running", "idle"]


def test_nothing_is_sent_before_the_transaction_commits(
    owner_client, session, llm, received, django_capture_on_commit_callbacks
):
    llm.enqueue(text_reply("Hello."))
    with django_capture_on_commit_callbacks() as callbacks:
        response = post(owner_client, session, "messages", {"content": "Hi"})
    assert response.status_code == 202
    assert received == []  # recorded, not committed: nothing sent yet
    with django_capture_on_commit_callbacks(execute=True):
        for callback in callbacks:
            callback()
    assert [name for name, _ in sent(received)] == ["run_started", "run_finished"]


def test_an_approval_wait_sends_approval_requested_and_does_not_end_the_run(
    owner_client, session, llm, run_tasks, received, tool_calls
):
    llm.enqueue(
        tool_reply(tool_call("notes_create", {"title": "Groceries"}, id="toolu_note")),
        text_reply("Created."),
    )
    body = post_message(owner_client, session, run_tasks, "Make a note")
    assert body["status"] == "awaiting_human"
    assert sent(received) == [
        ("run_started", {"run": 1}),
        ("approval_requested", {"run": 1, "tool": "notes_create", "tool_use_id": "toolu_note"}),
    ]
    assert received[-1][2] == "awaiting_human"

    decide(owner_client, session, run_tasks, "allow_once")
    assert sent(received)[2:] == [
        (
            "tool_executed",
            {"run": 1, "tool": "notes_create", "tool_use_id": "toolu_note", "is_error": False},
        ),
        ("run_finished", {"run": 1, "outcome": "idle", "error_code": ""}),
    ]
    # A second decision loses the race: nothing more is sent.
    assert post(owner_client, session, "approvals", {"decision": "allow_once"}).status_code == 409
    assert len(received) == 4


def test_tool_executed_reports_each_call_that_ran_with_its_error_flag(
    owner_client, session, llm, run_tasks, received, tool_calls
):
    llm.enqueue(
        tool_reply(
            tool_call("echo", {"text": "hi"}, id="toolu_echo"),
            tool_call("fails", {}, id="toolu_fails"),
            tool_call("no_such_tool", {}, id="toolu_unknown"),  # refused: it never ran
        ),
        text_reply("Done."),
    )
    post_message(owner_client, session, run_tasks, "Try the tools")
    assert sent(received, "tool_executed") == [
        (
            "tool_executed",
            {"run": 1, "tool": "echo", "tool_use_id": "toolu_echo", "is_error": False},
        ),
        (
            "tool_executed",
            {"run": 1, "tool": "fails", "tool_use_id": "toolu_fails", "is_error": True},
        ),
    ]


def test_a_browser_tool_result_is_reported_once_it_arrives(
    owner_client, session, llm, run_tasks, received
):
    llm.enqueue(tool_reply(tool_call("page_read", {}, id="toolu_read")), text_reply("Read it."))
    body = post_message(owner_client, session, run_tasks, "Look at this page")
    assert body["status"] == "awaiting_browser"
    assert sent(received, "tool_executed") == []  # a browser wait is no approval and no result
    assert sent(received, "approval_requested") == []
    page = {"url": "https://example.com/", "title": "Home", "headings": []}
    data = {"callId": "toolu_read", "result": page}
    assert run_tasks(post, owner_client, session, "browser-results", data).status_code == 200
    assert sent(received, "tool_executed") == [
        (
            "tool_executed",
            {"run": 1, "tool": "page_read", "tool_use_id": "toolu_read", "is_error": False},
        )
    ]
    assert [name for name, _ in sent(received)] == [
        "run_started",
        "tool_executed",
        "run_finished",
    ]


def test_a_failed_run_sends_run_failed_then_run_finished_with_the_error(
    owner_client, session, llm, run_tasks, received
):
    llm.enqueue(error_reply(400, "invalid_request_error", "Bad request."))
    body = post_message(owner_client, session, run_tasks, "Hi")
    assert body["status"] == "error"
    row = Session.objects.get(pk=session.pk)
    assert row.last_error_code
    assert sent(received)[1:] == [
        (
            "run_failed",
            {
                "run": 1,
                "error_code": row.last_error_code,
                "message": row.last_error,
                "resumable": row.job_resumable,
            },
        ),
        ("run_finished", {"run": 1, "outcome": "error", "error_code": row.last_error_code}),
    ]
    assert [status for _, _, status in received[1:]] == ["error", "error"]


def test_a_cancel_while_waiting_for_approval_finishes_the_run_cancelled(
    owner_client, session, llm, run_tasks, received
):
    llm.enqueue(tool_reply(tool_call("notes_create", {"title": "A"}, id="toolu_note")))
    post_message(owner_client, session, run_tasks, "Make a note")
    assert run_tasks(post, owner_client, session, "cancel").status_code == 200
    assert sent(received)[-1] == (
        "run_finished",
        {"run": 1, "outcome": "cancelled", "error_code": ""},
    )
    # Cancelling again (nothing live) ends nothing.
    assert run_tasks(post, owner_client, session, "cancel").status_code == 200
    assert [name for name, _ in sent(received)].count("run_finished") == 1


def test_a_message_instead_of_a_decision_ends_the_run_and_starts_the_next(
    owner_client, session, llm, run_tasks, received
):
    llm.enqueue(
        tool_reply(tool_call("notes_create", {"title": "A"}, id="toolu_note")),
        text_reply("Fine, no note."),
    )
    post_message(owner_client, session, run_tasks, "Make a note")
    post_message(owner_client, session, run_tasks, "Never mind")
    assert [(name, kw.get("run"), kw.get("outcome")) for name, kw in sent(received)] == [
        ("run_started", 1, None),
        ("approval_requested", 1, None),
        ("run_finished", 1, "idle"),
        ("run_started", 2, None),
        ("run_finished", 2, "idle"),
    ]


def test_continue_on_a_resumable_failure_starts_the_same_run_again(
    owner_client, session, llm, run_tasks, received
):
    # Overloaded past the SDK's retries: a resumable failure.
    llm.enqueue(*[error_reply(529, "overloaded_error", retry_after_ms=1)] * 3)
    body = post_message(owner_client, session, run_tasks, "Hi")
    assert body["status"] == "error"
    assert Session.objects.get(pk=session.pk).job_resumable
    llm.enqueue(text_reply("Back."))
    assert run_tasks(post, owner_client, session, "continue").status_code == 200
    assert [(name, kw.get("run"), kw.get("outcome")) for name, kw in sent(received)] == [
        ("run_started", 1, None),
        ("run_failed", 1, None),
        ("run_finished", 1, "error"),
        ("run_started", 1, None),
        ("run_finished", 1, "idle"),
    ]


def test_a_duplicate_step_task_sends_nothing(owner_client, session, llm, run_tasks, received):
    llm.enqueue(text_reply("Hello."))
    post_message(owner_client, session, run_tasks, "Hi")
    before = len(received)
    run_tasks(tasks.run_step, str(session.pk), 1)  # redelivered: the run is over
    assert len(received) == before


def test_a_receiver_that_raises_does_not_break_the_run(
    owner_client, session, llm, run_tasks, received
):
    def broken(sender, **kwargs):
        raise RuntimeError("host bug")

    signals.run_started.connect(broken, weak=False)
    signals.run_finished.connect(broken, weak=False)
    try:
        llm.enqueue(text_reply("Hello."))
        body = post_message(owner_client, session, run_tasks, "Hi")
    finally:
        signals.run_started.disconnect(broken)
        signals.run_finished.disconnect(broken)
    assert body["status"] == "idle"
    assert [name for name, _ in sent(received)] == ["run_started", "run_finished"]


def test_a_browser_call_that_timed_out_is_reported_as_an_error(
    owner_client, session, llm, run_tasks, received
):
    llm.enqueue(tool_reply(tool_call("page_read", {}, id="toolu_read")), text_reply("No page."))
    post_message(owner_client, session, run_tasks, "Look at this page")
    Session.objects.filter(pk=session.pk).update(
        browser_paused_at=timezone.now() - timedelta(seconds=46)
    )
    assert run_tasks(post, owner_client, session, "continue").status_code == 200
    assert sent(received, "tool_executed") == [
        (
            "tool_executed",
            {"run": 1, "tool": "page_read", "tool_use_id": "toolu_read", "is_error": True},
        )
    ]
    assert [name for name, _ in sent(received)] == ["run_started", "tool_executed", "run_finished"]


def test_a_suggested_action_starts_a_run_and_reports_its_tool(
    owner_client, session, llm, run_tasks, received, tool_calls
):
    llm.enqueue(text_reply("Echoed."))
    data = {"name": "echo", "input": {"text": "hi"}}
    assert run_tasks(post, owner_client, session, "actions", data).status_code == 202
    [started, executed, finished] = sent(received)
    assert started == ("run_started", {"run": 1})
    assert executed[0] == "tool_executed"
    assert (executed[1]["tool"], executed[1]["is_error"]) == ("echo", False)
    assert executed[1]["tool_use_id"].startswith("toolu_action_")
    assert finished == ("run_finished", {"run": 1, "outcome": "idle", "error_code": ""})
