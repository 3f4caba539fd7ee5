"""Retry and Edit: a new attempt at the user's last message, through the HTTP API.

The earlier attempt stays in the transcript (``meta.supersededBy``) and never reaches the
model again: the retried run's first request is the history up to and including the user's
message, byte for byte as the first attempt sent it. Stop keeps what the user saw.
"""

import time

import pytest

from orchestrator_app.testing.localapi import text_reply, tool_call, tool_reply
from sessions_app.conf import ahentic_settings
from sessions_app.models import Event, LiveText
from tests.support.api import payload_of, post, post_message, session_url, transcript_of
from tests.support.factories import SessionFactory
from tests.support.model import model_requests, without_cache_control
from tests.support.runs import (
    live_text,
    start_run_in_committed_db,
    start_run_without_steps,
    step_in_background,
)

pytestmark = pytest.mark.usefixtures("llm_strict")


def main_requests(llm) -> list[dict]:
    return [entry["json"] for entry in model_requests(llm, ahentic_settings.MODEL)]


def retry(client, session, run_tasks) -> dict:
    response = run_tasks(post, client, session, "retry")
    assert response.status_code == 202, response.content
    return payload_of(client, session)


def edit(client, session, seq, content: str):
    return post(client, session, f"messages/{seq}/edit", {"content": content})


def texts(request: dict) -> list[str]:
    """Every text, tool_use and tool_result of a model request, as text."""
    found = []
    for message in request["messages"]:
        for block in message["content"]:
            found.append(str(block.get("text") or block.get("input") or block.get("content")))
    return found


def last_user_seq(client, session) -> int:
    return [m for m in transcript_of(client, session) if m["kind"] == "user_message"][-1]["seq"]


# --- Retry -------------------------------------------------------------------------------------


def test_retry_after_a_text_reply_sends_the_same_history_without_the_earlier_reply(
    owner_client, session, model_script, llm, run_tasks
):
    model_script.main.extend([text_reply("Earlier answer."), text_reply("Green.")])
    post_message(owner_client, session, run_tasks, "Earlier question")
    post_message(owner_client, session, run_tasks, "Name a colour")
    first = main_requests(llm)[-1]
    model_script.main.append(text_reply("Red."))
    before = len(main_requests(llm))

    payload = retry(owner_client, session, run_tasks)

    assert payload["status"] == "idle"
    [again] = main_requests(llm)[before:]
    # The cached prefix holds: the same system, tools and messages, byte for byte.
    assert again["system"] == first["system"]
    assert again["tools"] == first["tools"]
    assert without_cache_control(again["messages"]) == without_cache_control(first["messages"])
    assert "Green." not in texts(again)
    shown = [(m["role"], m["content"], m["meta"].get("supersededBy")) for m in payload["messages"]]
    assert shown[-3:] == [
        ("user", "Name a colour", None),
        ("assistant", "Green.", payload["runSeq"]),  # the earlier attempt, kept and marked
        ("assistant", "Red.", None),
    ]


def test_retry_after_a_turn_with_tool_calls_sends_well_formed_pairs_only_of_the_new_attempt(
    owner_client, session, model_script, llm, run_tasks, tool_calls
):
    model_script.main.extend(
        [tool_reply(tool_call("echo", {"text": "first"}), text="Let me check."), text_reply("A.")]
    )
    post_message(owner_client, session, run_tasks, "Check it")
    first = main_requests(llm)[0]
    model_script.main.extend(
        [tool_reply(tool_call("echo", {"text": "second"})), text_reply("B, after a new check.")]
    )
    before = len(main_requests(llm))

    payload = retry(owner_client, session, run_tasks)

    assert payload["status"] == "idle"
    again, after_tool = main_requests(llm)[before:]
    assert without_cache_control(again["messages"]) == without_cache_control(first["messages"])
    # The second request holds the new attempt's pair and nothing of the earlier one (the
    # strict local API refuses a tool_use without its tool_result: llm_strict).
    sent = texts(after_tool)
    assert "Let me check." not in sent and "A." not in sent
    assert not any("first" in text for text in sent)
    uses = [b for m in after_tool["messages"] for b in m["content"] if b["type"] == "tool_use"]
    results = [
        b for m in after_tool["messages"] for b in m["content"] if b["type"] == "tool_result"
    ]
    assert [u["input"] for u in uses] == [{"text": "second"}]
    assert [r["tool_use_id"] for r in results] == [u["id"] for u in uses]
    assert [c["input"]["text"] for c in tool_calls] == ["first", "second"]
    earlier = [m for m in transcript_of(owner_client, session) if m["meta"].get("supersededBy")]
    assert [m["kind"] for m in earlier] == [
        "agent_message",
        "tool_call",
        "tool_response",
        "agent_message",
    ]


def test_a_second_retry_marks_each_earlier_attempt_with_its_own_run(
    owner_client, session, model_script, run_tasks
):
    model_script.main.extend([text_reply("One."), text_reply("Two."), text_reply("Three.")])
    post_message(owner_client, session, run_tasks, "Count")
    second = retry(owner_client, session, run_tasks)
    third = retry(owner_client, session, run_tasks)

    replies = [
        (m["content"], m["meta"].get("supersededBy"))
        for m in third["messages"]
        if m["role"] == "assistant"
    ]
    assert replies == [("One.", second["runSeq"]), ("Two.", third["runSeq"]), ("Three.", None)]


# --- Edit --------------------------------------------------------------------------------------


def test_edit_of_the_last_message_resends_the_new_text_and_keeps_the_earlier_attempt(
    owner_client, session, model_script, llm, run_tasks
):
    model_script.main.extend([text_reply("Paris is in France."), text_reply("Rome.")])
    post_message(owner_client, session, run_tasks, "Capital of France?")
    seq = last_user_seq(owner_client, session)
    before = len(main_requests(llm))

    response = run_tasks(edit, owner_client, session, seq, "  Capital of Italy?  ")

    assert response.status_code == 202, response.content
    [again] = main_requests(llm)[before:]
    assert [m["role"] for m in again["messages"]] == ["user"]
    assert "Capital of Italy?" in texts(again)
    assert "Capital of France?" not in texts(again)
    shown = [
        (m["role"], m["content"], bool(m["meta"].get("supersededBy")))
        for m in payload_of(owner_client, session)["messages"]
    ]
    assert shown == [
        ("user", "Capital of France?", True),
        ("assistant", "Paris is in France.", True),
        ("user", "Capital of Italy?", False),
        ("assistant", "Rome.", False),
    ]


# --- refusals: stable codes, nothing written ---------------------------------------------------


def unchanged(client, session, before: dict) -> None:
    after = payload_of(client, session)
    assert after["version"] == before["version"]
    assert after["messages"] == before["messages"]


def test_retry_and_edit_are_refused_while_the_chat_waits_for_approval(
    owner_client, session, model_script, run_tasks
):
    model_script.main.extend([tool_reply(tool_call("notes_create", {"title": "x"}))])
    payload = post_message(owner_client, session, run_tasks, "Make a note")
    assert payload["status"] == "awaiting_human"
    seq = last_user_seq(owner_client, session)

    retried = post(owner_client, session, "retry")
    edited = edit(owner_client, session, seq, "Another note")

    assert (retried.status_code, retried.json()["code"]) == (409, "ahentic_session_busy")
    assert (edited.status_code, edited.json()["code"]) == (409, "ahentic_session_busy")
    unchanged(owner_client, session, payload)


def test_retry_is_refused_while_the_chat_runs(owner_client, session, llm):
    start_run_without_steps(owner_client, session)
    before = payload_of(owner_client, session)

    response = post(owner_client, session, "retry")

    assert (response.status_code, response.json()["code"]) == (409, "ahentic_session_busy")
    unchanged(owner_client, session, before)


def test_edit_of_an_earlier_message_keeps_the_later_turns_as_an_earlier_attempt(
    owner_client, session, model_script, llm, run_tasks
):
    model_script.main.extend(
        [text_reply("Paris."), text_reply("About 2 million."), text_reply("Rome.")]
    )
    post_message(owner_client, session, run_tasks, "Capital of France?")
    post_message(owner_client, session, run_tasks, "How many people live there?")
    first = [m for m in transcript_of(owner_client, session) if m["kind"] == "user_message"][0]
    before = len(main_requests(llm))

    response = run_tasks(edit, owner_client, session, first["seq"], "Capital of Italy?")

    assert response.status_code == 202, response.content
    # The model hears the conversation up to the edited message only, with the new text.
    [again] = main_requests(llm)[before:]
    assert [m["role"] for m in again["messages"]] == ["user"]
    assert "Capital of Italy?" in texts(again)
    assert not {"Capital of France?", "Paris.", "How many people live there?"} & set(texts(again))
    messages = payload_of(owner_client, session)["messages"]
    shown = [(m["content"], m["meta"].get("supersededBy")) for m in messages]
    run = messages[0]["meta"]["supersededBy"]
    assert run and shown == [
        ("Capital of France?", run),
        ("Paris.", run),
        ("How many people live there?", run),
        ("About 2 million.", run),
        ("Capital of Italy?", None),
        ("Rome.", None),
    ]
    # The new message names the one it replaces: the client offers both versions ("2 of 2").
    assert messages[4]["meta"]["editOf"] == first["seq"]


def test_an_edit_of_an_edited_message_chains_the_versions(
    owner_client, session, model_script, run_tasks
):
    model_script.main.extend([text_reply("A."), text_reply("B."), text_reply("C.")])
    post_message(owner_client, session, run_tasks, "One")
    first = last_user_seq(owner_client, session)
    run_tasks(edit, owner_client, session, first, "Two")
    second = last_user_seq(owner_client, session)

    response = run_tasks(edit, owner_client, session, second, "Three")

    assert response.status_code == 202, response.content
    users = [m for m in transcript_of(owner_client, session) if m["kind"] == "user_message"]
    assert [(m["content"], m["meta"].get("editOf")) for m in users] == [
        ("One", None),
        ("Two", first),
        ("Three", second),
    ]


def test_edit_is_refused_for_anything_but_a_current_message_of_the_user(
    owner_client, session, model_script, run_tasks
):
    model_script.main.extend([text_reply("First."), text_reply("Second."), text_reply("Third.")])
    post_message(owner_client, session, run_tasks, "One")
    set_aside = last_user_seq(owner_client, session)
    run_tasks(edit, owner_client, session, set_aside, "One, again")
    post_message(owner_client, session, run_tasks, "Two")
    transcript = transcript_of(owner_client, session)
    reply = [m for m in transcript if m["kind"] == "agent_message"][-1]["seq"]
    before = payload_of(owner_client, session)

    answers = [
        edit(owner_client, session, set_aside, "Changed"),  # an earlier attempt's message
        edit(owner_client, session, reply, "Changed"),
        edit(owner_client, session, 999, "Changed"),
        edit(owner_client, session, "x1", "Changed"),
    ]

    assert [(r.status_code, r.json()["code"]) for r in answers] == [
        (409, "ahentic_message_not_editable"),
        (409, "ahentic_message_not_editable"),
        (404, "ahentic_message_not_found"),
        (404, "ahentic_message_not_found"),
    ]
    unchanged(owner_client, session, before)


def test_an_edit_to_nothing_or_past_the_limit_is_refused(
    owner_client, session, model_script, run_tasks, settings
):
    post_message(owner_client, session, run_tasks, "Hello")
    seq = last_user_seq(owner_client, session)
    settings.AHENTIC = {**settings.AHENTIC, "MAX_MESSAGE_CHARS": 10}
    before = payload_of(owner_client, session)

    empty = edit(owner_client, session, seq, "   ")
    long = edit(owner_client, session, seq, "x" * 11)
    missing = post(owner_client, session, f"messages/{seq}/edit", {})

    assert (empty.status_code, empty.json()["code"]) == (400, "ahentic_empty_message")
    assert (long.status_code, long.json()["code"]) == (400, "ahentic_message_too_long")
    assert (missing.status_code, missing.json()["code"]) == (400, "ahentic_invalid_input")
    unchanged(owner_client, session, before)


def test_a_chat_without_a_message_has_nothing_to_retry(owner_client, session, llm):
    before = payload_of(owner_client, session)

    response = post(owner_client, session, "retry")

    assert (response.status_code, response.json()["code"]) == (409, "ahentic_nothing_to_retry")
    unchanged(owner_client, session, before)


def test_a_sub_agents_chat_is_read_only(owner_client, owner, session, llm):
    child = SessionFactory(owner=owner, parent=session)
    Event.objects.create(session=child, seq=1, kind=Event.Kind.USER_MESSAGE, content="Task")

    retried = post(owner_client, child, "retry")
    edited = edit(owner_client, child, 1, "Other task")

    assert (retried.status_code, retried.json()["code"]) == (409, "ahentic_read_only_chat")
    assert (edited.status_code, edited.json()["code"]) == (409, "ahentic_read_only_chat")
    assert payload_of(owner_client, child)["status"] == "idle"


def test_another_users_chat_is_not_found(
    other_client, owner_client, session, model_script, run_tasks
):
    post_message(owner_client, session, run_tasks, "Mine")
    seq = last_user_seq(owner_client, session)

    retried = post(other_client, session, "retry")
    edited = edit(other_client, session, seq, "Theirs")

    assert (retried.status_code, retried.json()["code"]) == (404, "ahentic_session_not_found")
    assert (edited.status_code, edited.json()["code"]) == (404, "ahentic_session_not_found")
    assert payload_of(owner_client, session)["runSeq"] == 1


def test_retry_and_edit_count_against_the_message_throttle(
    owner_client, session, model_script, run_tasks, settings
):
    settings.AHENTIC = {**settings.AHENTIC, "THROTTLE_MESSAGES": "3/min"}
    post_message(owner_client, session, run_tasks, "One")
    retry(owner_client, session, run_tasks)
    seq = last_user_seq(owner_client, session)
    assert run_tasks(edit, owner_client, session, seq, "Two").status_code == 202
    before = payload_of(owner_client, session)

    retried = post(owner_client, session, "retry")
    edited = edit(owner_client, session, seq, "Three")

    assert (retried.status_code, retried.json()["code"]) == (429, "ahentic_throttled")
    assert (edited.status_code, edited.json()["code"]) == (429, "ahentic_throttled")
    unchanged(owner_client, session, before)


def test_the_routes_are_in_the_schema(owner_client, session):
    paths = owner_client.get("/ahentic/v1/schema").content.decode()
    assert "/sessions/{session_id}/retry" in paths
    assert "/sessions/{session_id}/messages/{seq}/edit" in paths
    assert session_url(session)  # the schema is served to a user of the agent


# --- Stop keeps what was shown -------------------------------------------------------------------

STREAMED = " ".join(f"Sentence {n} of the streamed reply." for n in range(1, 31))


@pytest.mark.django_db(transaction=True)
def test_stop_keeps_exactly_the_text_the_user_saw(owner_client, session, llm, run_tasks):
    llm.enqueue(text_reply(STREAMED, chunk_delay_s=0.1))
    run_seq = start_run_in_committed_db(owner_client, session, "Tell me everything")

    with step_in_background(session, run_seq, release=lambda: None):
        deadline = time.monotonic() + 20
        while len(live_text(owner_client, session)) < 40:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        shown = live_text(owner_client, session)
        # The model streams on after the client's last read, before the Stop arrives.
        while len(live_text(owner_client, session)) <= len(shown) + 10:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        response = post(owner_client, session, "cancel", {"shown": shown})
        assert response.status_code == 200, response.content

    [stopped] = [m for m in transcript_of(owner_client, session) if m["kind"] == "agent_message"]
    assert stopped["content"] == shown.rstrip()
    assert stopped["meta"] == {"stopped": True}
    # Retry of a stopped reply: the model gets the question again, without the cut reply.
    llm.enqueue(text_reply("The whole reply."))
    payload = retry(owner_client, session, run_tasks)
    assert payload["messages"][-1]["content"] == "The whole reply."
    assert shown.rstrip() not in texts(llm.message_requests()[-1])


@pytest.mark.django_db(transaction=True)
def test_a_shown_text_that_was_never_streamed_keeps_nothing(owner_client, session, llm):
    run_seq = start_run_in_committed_db(owner_client, session)
    LiveText.objects.create(
        session_id=session.pk, run=run_seq, text="Streamed words", updated_at=session.created_at
    )

    response = post(owner_client, session, "cancel", {"shown": "Other words"})

    assert response.status_code == 200
    assert "agent_message" not in [m["kind"] for m in transcript_of(owner_client, session)]
