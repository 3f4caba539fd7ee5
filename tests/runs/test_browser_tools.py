"""Browser tools: the run pauses, the sidebar runs the tool in the page and posts the result.

``page_read`` and ``page_fill_fields`` are built in; ``editor_insert`` (tests/tools_for_artifacts)
is a browser tool that takes a staged artifact with ``from_memory``.
"""

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from artifacts_app import store
from orchestrator_app.testing.localapi import text_reply, tool_call, tool_reply
from sessions_app.models import Session
from tests.support import tools_for_artifacts  # noqa: F401  (registers editor_insert, publish_note...)
from tests.support.api import payload_of, post, post_message, result_of, trace_types, transcript_of

REQUEST = "Look at this page"

pytestmark = pytest.mark.usefixtures("llm_strict")

PAGE = {"url": "https://example.com/contact", "title": "Contact", "headings": ["Contact us"]}
ARTICLE = "## Beans\nGrind just before brewing.\n\n## Water\nJust off the boil."


def send_result(client, session, run_tasks, **data):
    response = run_tasks(post, client, session, "browser-results", data)
    assert response.status_code == 200, response.content
    return payload_of(client, session)


def tool_message(client, session, call_id: str) -> dict:
    [message] = [
        m
        for m in transcript_of(client, session)
        if m["kind"] == "tool_response" and m["meta"]["callId"] == call_id
    ]
    return message


def pause_on_page_read(client, session, llm, run_tasks, *more_replies):
    llm.enqueue(tool_reply(tool_call("page_read", {}, id="toolu_read")), *more_replies)
    return post_message(client, session, run_tasks, REQUEST)


# --- the pause and the result ----------------------------------------------------------------------


def test_a_browser_tool_pauses_for_the_browser_without_asking_for_approval(
    owner_client, session, llm, run_tasks
):
    before = timezone.now()

    body = pause_on_page_read(owner_client, session, llm, run_tasks)

    assert body["status"] == "awaiting_browser"
    pending = body["pendingTool"]
    assert (pending["name"], pending["runtime"], pending["callId"]) == (
        "page_read",
        "browser",
        "toolu_read",
    )
    assert pending["input"] == {}
    assert pending["approved"] is None
    assert body["browserPausedAt"] is not None
    assert Session.objects.get(pk=session.pk).browser_paused_at >= before
    assert body["progress"]["label"] == "Running in your browser: Read the page"
    types = trace_types(owner_client, session)
    assert "browser_pause" in types and "hitl_pause" not in types


def test_the_browser_result_becomes_the_tool_result_and_the_run_finishes(
    owner_client, session, llm, run_tasks
):
    pause_on_page_read(owner_client, session, llm, run_tasks, text_reply("It is the contact page."))

    body = send_result(owner_client, session, run_tasks, callId="toolu_read", result=PAGE)

    assert body["status"] == "idle"
    assert body["pendingTool"] is None
    assert body["browserPausedAt"] is None
    assert body["messages"][-1]["content"] == "It is the contact page."
    message = tool_message(owner_client, session, "toolu_read")
    assert message["meta"]["browser"] is True
    assert message["meta"]["ok"] is True
    assert json.loads(message["content"]) == PAGE
    block = result_of(llm.message_requests()[1], "toolu_read")
    assert json.loads(block["content"]) == PAGE
    assert "is_error" not in block


def test_the_call_id_alias_is_accepted(owner_client, session, llm, run_tasks):
    pause_on_page_read(owner_client, session, llm, run_tasks, text_reply("Read it."))

    body = send_result(owner_client, session, run_tasks, call_id="toolu_read", result=PAGE)

    assert body["status"] == "idle"
    assert tool_message(owner_client, session, "toolu_read")["meta"]["browser"] is True


def test_a_result_for_another_call_is_a_409_and_changes_nothing(
    owner_client, session, llm, run_tasks
):
    pause_on_page_read(owner_client, session, llm, run_tasks)

    response = post(
        owner_client, session, "browser-results", {"callId": "toolu_other", "result": PAGE}
    )

    assert response.status_code == 409
    assert response.json()["code"] == "ahentic_call_mismatch"
    body = payload_of(owner_client, session)
    assert (body["status"], body["pendingTool"]["callId"]) == ("awaiting_browser", "toolu_read")
    assert len(llm.message_requests()) == 1


def test_a_browser_error_becomes_a_failed_tool_result(owner_client, session, llm, run_tasks):
    pause_on_page_read(
        owner_client, session, llm, run_tasks, text_reply("The page could not be read.")
    )

    body = send_result(
        owner_client, session, run_tasks, callId="toolu_read", error="Selector matched nothing"
    )

    assert body["status"] == "idle"
    message = tool_message(owner_client, session, "toolu_read")
    assert (message["meta"]["ok"], message["meta"]["error"], message["meta"]["browser"]) == (
        False,
        "browser_error",
        True,
    )
    block = result_of(llm.message_requests()[1], "toolu_read")
    assert block["is_error"] is True
    result = json.loads(block["content"])
    assert (result["ok"], result["error"], result["message"]) == (
        False,
        "browser_error",
        "Selector matched nothing",
    )


def test_a_result_when_nothing_waits_for_the_browser_is_refused(
    owner_client, session, llm, run_tasks
):
    pause_on_page_read(owner_client, session, llm, run_tasks, text_reply("Read it."))
    send_result(owner_client, session, run_tasks, callId="toolu_read", result=PAGE)

    response = post(
        owner_client, session, "browser-results", {"callId": "toolu_read", "result": PAGE}
    )

    assert response.status_code == 409
    assert response.json()["code"] == "ahentic_no_pending"
    assert (
        len([m for m in transcript_of(owner_client, session) if m["kind"] == "tool_response"]) == 1
    )


def test_an_approval_pending_is_not_a_browser_pause(owner_client, session, llm, run_tasks):
    llm.enqueue(tool_reply(tool_call("publish_note", {"title": "T", "body": "B"}, id="toolu_pub")))
    post_message(owner_client, session, run_tasks, REQUEST)

    response = post(owner_client, session, "browser-results", {"callId": "toolu_pub", "result": {}})

    assert response.status_code == 409
    assert response.json()["code"] == "ahentic_not_awaiting"
    assert payload_of(owner_client, session)["status"] == "awaiting_human"


def test_the_calls_after_a_browser_call_run_in_order_once_its_result_arrives(
    owner_client, session, llm, run_tasks, artifact_calls
):
    llm.enqueue(
        tool_reply(
            tool_call("page_read", {"selector": "main"}, id="toolu_read"),
            tool_call("site_stats", {"page": "/contact"}, id="toolu_stats"),
        ),
        text_reply("Read the page and its stats."),
    )
    body = post_message(owner_client, session, run_tasks, REQUEST)
    assert body["status"] == "awaiting_browser"
    assert artifact_calls == []

    body = send_result(owner_client, session, run_tasks, callId="toolu_read", result=PAGE)

    assert body["status"] == "idle"
    assert artifact_calls == [{"tool": "site_stats", "input": {"page": "/contact"}}]
    newest = llm.message_requests()[1]["messages"][-1]["content"]
    assert [b["tool_use_id"] for b in newest if b["type"] == "tool_result"] == [
        "toolu_read",
        "toolu_stats",
    ]


# --- from_memory in the browser ------------------------------------------------------------------


def stage_article(session):
    store.stage(
        session_id=session.pk, key="article_draft", kind="markdown", payload=ARTICLE, title="Coffee"
    )


def test_a_browser_call_with_from_memory_shows_the_body_to_the_sidebar_but_stores_only_the_key(
    owner_client, session, llm, run_tasks
):
    stage_article(session)
    llm.enqueue(
        tool_reply(
            tool_call(
                "editor_insert", {"from_memory": "article_draft", "position": "end"}, id="toolu_ins"
            )
        )
    )

    body = post_message(owner_client, session, run_tasks, "Put the draft in the editor")

    assert body["status"] == "awaiting_browser"
    pending = body["pendingTool"]
    assert pending["input"] == {"position": "end", "content": ARTICLE}
    assert pending["artifactKey"] == "article_draft"
    assert (pending["memory"]["key"], pending["memory"]["title"]) == ("article_draft", "Coffee")
    stored = Session.objects.get(pk=session.pk).pending_tool
    assert stored["input"] == {"from_memory": "article_draft", "position": "end"}
    assert "Beans" not in json.dumps(stored)


def test_a_browser_result_for_a_from_memory_call_marks_the_artifact_applied(
    owner_client, session, llm, run_tasks
):
    stage_article(session)
    llm.enqueue(
        tool_reply(tool_call("editor_insert", {"from_memory": "article_draft"}, id="toolu_ins")),
        text_reply("The draft is in the editor."),
    )
    post_message(owner_client, session, run_tasks, "Put the draft in the editor")

    body = send_result(owner_client, session, run_tasks, callId="toolu_ins", result={"ok": True})

    assert body["status"] == "idle"
    assert [(a["key"], a["status"]) for a in body["artifacts"]] == [("article_draft", "applied")]
    meta = tool_message(owner_client, session, "toolu_ins")["meta"]
    assert (meta["browser"], meta["artifactKey"]) == (True, "article_draft")
    for request in llm.message_requests():
        assert "Grind just before brewing" not in json.dumps(request)


def test_an_oversized_inline_body_for_a_browser_tool_is_auto_staged(
    owner_client, session, llm, run_tasks, settings
):
    settings.AHENTIC = {**settings.AHENTIC, "AUTO_STAGE_BYTES": 100}
    long_body = "A paragraph about coffee. " * 20
    llm.enqueue(
        tool_reply(tool_call("editor_insert", {"content": long_body}, id="toolu_ins")),
        text_reply("Inserted."),
    )

    body = post_message(owner_client, session, run_tasks, "Insert it")

    assert body["status"] == "awaiting_browser"
    key = body["pendingTool"]["artifactKey"]
    assert key.startswith("auto_")
    assert body["pendingTool"]["input"] == {"content": long_body}
    assert Session.objects.get(pk=session.pk).pending_tool["input"] == {"from_memory": key}
    body = send_result(owner_client, session, run_tasks, callId="toolu_ins", result={"ok": True})
    assert [(a["key"], a["status"]) for a in body["artifacts"]] == [(key, "applied")]


def test_a_failed_browser_apply_leaves_the_artifact_ready(owner_client, session, llm, run_tasks):
    stage_article(session)
    llm.enqueue(
        tool_reply(tool_call("editor_insert", {"from_memory": "article_draft"}, id="toolu_ins")),
        text_reply("The editor refused the content."),
    )
    post_message(owner_client, session, run_tasks, "Put the draft in the editor")

    body = send_result(
        owner_client,
        session,
        run_tasks,
        callId="toolu_ins",
        result={"ok": False, "error": "locked"},
    )

    assert body["status"] == "idle"
    assert body["artifacts"][0]["status"] == "ready"
    assert tool_message(owner_client, session, "toolu_ins")["meta"]["ok"] is False


def test_a_browser_call_with_a_missing_artifact_fails_before_pausing(
    owner_client, session, llm, run_tasks
):
    llm.enqueue(
        tool_reply(tool_call("editor_insert", {"from_memory": "nothing_here"}, id="toolu_ins")),
        text_reply("There is no such draft."),
    )

    body = post_message(owner_client, session, run_tasks, "Put the draft in the editor")

    assert body["status"] == "idle"
    assert "browser_pause" not in trace_types(owner_client, session)
    assert tool_message(owner_client, session, "toolu_ins")["meta"]["error"] == "artifact_missing"


# --- timeouts ------------------------------------------------------------------------------------


def age_browser_pause(session, seconds):
    Session.objects.filter(pk=session.pk).update(
        browser_paused_at=timezone.now() - timedelta(seconds=seconds)
    )


def test_continue_recovers_a_stale_browser_pause_and_the_run_goes_on(
    owner_client, session, llm, run_tasks, artifact_calls
):
    llm.enqueue(
        tool_reply(
            tool_call("page_read", {}, id="toolu_read"),
            tool_call("site_stats", {"page": "/"}, id="toolu_stats"),
        ),
        text_reply("The page did not answer; the stats say 42."),
    )
    post_message(owner_client, session, run_tasks, REQUEST)
    age_browser_pause(session, 46)

    response = run_tasks(post, owner_client, session, "continue")

    assert response.status_code == 200
    body = payload_of(owner_client, session)
    assert body["status"] == "idle"
    assert body["pendingTool"] is None
    assert body["browserPausedAt"] is None
    assert body["messages"][-1]["content"] == "The page did not answer; the stats say 42."
    assert tool_message(owner_client, session, "toolu_read")["meta"]["error"] == (
        "ahentic_browser_timeout"
    )
    block = result_of(llm.message_requests()[1], "toolu_read")
    assert block["is_error"] is True
    assert json.loads(block["content"])["error"] == "ahentic_browser_timeout"
    assert artifact_calls == [{"tool": "site_stats", "input": {"page": "/"}}]
    assert "browser_timeout_fallback" in trace_types(owner_client, session)

    late = post(owner_client, session, "browser-results", {"callId": "toolu_read", "result": PAGE})
    assert late.status_code == 409
    assert late.json()["code"] == "ahentic_no_pending"


def test_continue_leaves_a_fresh_browser_pause_alone(owner_client, session, llm, run_tasks):
    pause_on_page_read(owner_client, session, llm, run_tasks)
    age_browser_pause(session, 30)
    version = payload_of(owner_client, session)["version"]

    response = run_tasks(post, owner_client, session, "continue")

    assert response.status_code == 200
    body = response.json()
    assert (body["status"], body["pendingTool"]["callId"]) == ("awaiting_browser", "toolu_read")
    assert body["version"] == version
    assert len(llm.message_requests()) == 1
    assert not [m for m in transcript_of(owner_client, session) if m["kind"] == "tool_response"]


# --- page_fill_fields: approval only for sensitive fields ---------------------------------------


def test_filling_a_password_field_asks_for_approval_then_pauses_for_the_browser(
    owner_client, session, llm, run_tasks
):
    fields = {"username": "ada", "password": "hunter2"}
    llm.enqueue(
        tool_reply(tool_call("page_fill_fields", {"fields": fields}, id="toolu_fill")),
        text_reply("The login form is filled in."),
    )

    body = post_message(owner_client, session, run_tasks, "Fill in the login form")

    assert body["status"] == "awaiting_human"
    assert body["pendingTool"]["runtime"] == "browser"
    assert body["pendingTool"]["summary"] == "Fill password, username"
    assert body["browserPausedAt"] is None

    response = run_tasks(post, owner_client, session, "approvals", {"decision": "allow_once"})
    assert response.status_code == 200
    body = payload_of(owner_client, session)

    assert body["status"] == "awaiting_browser"
    assert body["pendingTool"]["callId"] == "toolu_fill"
    assert body["pendingTool"]["approved"] == "allow_once"
    assert body["pendingTool"]["input"] == {"fields": fields}
    assert body["browserPausedAt"] is not None

    body = send_result(owner_client, session, run_tasks, callId="toolu_fill", result={"filled": 2})

    assert body["status"] == "idle"
    meta = tool_message(owner_client, session, "toolu_fill")["meta"]
    assert (meta["browser"], meta["approved"], meta["ok"]) == (True, "allow_once", True)


def test_a_denied_password_fill_never_reaches_the_browser(owner_client, session, llm, run_tasks):
    llm.enqueue(
        tool_reply(tool_call("page_fill_fields", {"fields": {"password": "x"}}, id="toolu_fill")),
        text_reply("I will leave the password to you."),
    )
    post_message(owner_client, session, run_tasks, "Fill in the login form")

    response = run_tasks(post, owner_client, session, "approvals", {"decision": "deny"})

    assert response.status_code == 200
    body = payload_of(owner_client, session)
    assert body["status"] == "idle"
    assert "browser_pause" not in trace_types(owner_client, session)
    assert tool_message(owner_client, session, "toolu_fill")["meta"]["error"] == "user_denied"


def test_filling_ordinary_fields_pauses_for_the_browser_directly(
    owner_client, session, llm, run_tasks
):
    llm.enqueue(
        tool_reply(
            tool_call("page_fill_fields", {"fields": {"name": "Ada", "age": 36}}, id="toolu_fill")
        ),
        text_reply("Filled."),
    )

    body = post_message(owner_client, session, run_tasks, "Fill in the form")

    assert body["status"] == "awaiting_browser"
    assert body["pendingTool"]["approved"] is None
    assert "hitl_pause" not in trace_types(owner_client, session)
    body = send_result(owner_client, session, run_tasks, callId="toolu_fill", result={"filled": 2})
    assert body["status"] == "idle"


# --- Ask mode ------------------------------------------------------------------------------------


def test_ask_mode_refuses_filling_fields_and_mutating_tools_without_any_card(
    owner_client, session, llm, run_tasks, artifact_calls
):
    llm.enqueue(
        tool_reply(
            tool_call("page_fill_fields", {"fields": {"password": "x"}}, id="toolu_fill"),
            tool_call("publish_note", {"title": "T", "body": "B"}, id="toolu_pub"),
            tool_call("editor_insert", {"content": "Hello"}, id="toolu_ins"),
        ),
        text_reply("This chat is read-only, so I only describe the changes."),
    )

    body = post_message(owner_client, session, run_tasks, "Fill and publish", mode="ask")

    assert body["status"] == "idle"
    assert body["pendingTool"] is None
    assert artifact_calls == []
    for call_id in ("toolu_fill", "toolu_pub", "toolu_ins"):
        assert (
            tool_message(owner_client, session, call_id)["meta"]["error"] == "ability_ask_readonly"
        )
    types = trace_types(owner_client, session)
    assert "hitl_pause" not in types and "browser_pause" not in types


def test_ask_mode_still_reads_the_page(owner_client, session, llm, run_tasks):
    llm.enqueue(tool_reply(tool_call("page_read", {}, id="toolu_read")), text_reply("Read."))

    body = post_message(owner_client, session, run_tasks, REQUEST, mode="ask")

    assert body["status"] == "awaiting_browser"
    assert (
        send_result(owner_client, session, run_tasks, callId="toolu_read", result=PAGE)["status"]
        == "idle"
    )


def test_a_successful_page_read_refreshes_the_page_context_the_next_step_sees(
    owner_client, session, llm, run_tasks
):
    llm.enqueue(tool_reply(tool_call("page_read", {}, id="toolu_read")), text_reply("Read it."))
    post_message(
        owner_client,
        session,
        run_tasks,
        REQUEST,
        pageContext={"url": "https://example.com/", "title": "Home"},
    )

    send_result(owner_client, session, run_tasks, callId="toolu_read", result=PAGE)

    stored = Session.objects.get(pk=session.pk)
    assert stored.page_context == {"url": "https://example.com/contact", "title": "Contact"}
    # The step after the read carries the new page in its context, on the read's result turn.
    after = llm.message_requests()[1]["messages"][-1]["content"]
    assert after[0]["type"] == "tool_result"
    assert '"url": "https://example.com/contact"' in after[-1]["text"]


def test_a_failed_page_read_leaves_the_page_context_alone(owner_client, session, llm, run_tasks):
    llm.enqueue(tool_reply(tool_call("page_read", {}, id="toolu_read")), text_reply("Hm."))
    home = {"url": "https://example.com/", "title": "Home"}
    post_message(owner_client, session, run_tasks, REQUEST, pageContext=home)

    send_result(owner_client, session, run_tasks, callId="toolu_read", error="Page not reachable")

    assert Session.objects.get(pk=session.pk).page_context == home
