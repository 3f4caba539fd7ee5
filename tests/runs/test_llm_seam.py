"""The LLM seam: the real anthropic SDK against the local server, retries and error codes."""

import re
import threading
from unittest.mock import patch

import pytest

from orchestrator_app.models import UsageRecord
from orchestrator_app.testing.localapi import error_reply, text_reply, tool_call, tool_reply
from tests.support.api import (
    payload_of,
    post_message,
    result_of,
    session_url,
    trace_types,
    transcript_of,
)
from tests.support.paths import ROOT

REQUEST = "Do the job"

pytestmark = pytest.mark.usefixtures("llm_strict")


def test_the_sdk_streams_a_well_formed_request_with_the_api_key(
    owner_client, session, llm, run_tasks
):
    llm.enqueue(text_reply("Hello."))

    post_message(owner_client, session, run_tasks, "Hi there")

    [entry] = llm.requests
    assert entry["path"] == "/v1/messages"
    assert entry["headers"]["authorization"] == "Bearer test-key"
    assert entry["headers"]["anthropic-version"]
    body = entry["json"]
    assert body["stream"] is True
    assert body["model"] == "claude-sonnet-5-5"
    assert body["max_tokens"] == 8000
    assert body["messages"][0]["content"][0]["text"] == "Hi there"
    assert body["system"][-1]["cache_control"] == {"type": "ephemeral"}
    assert body["tools"][-1]["cache_control"] == {"type": "ephemeral"}


def test_overloaded_answers_within_the_retries_are_invisible(owner_client, session, llm, run_tasks):
    llm.enqueue(
        error_reply(529, retry_after_ms=10), error_reply(529, retry_after_ms=10), text_reply("Ok.")
    )

    body = post_message(owner_client, session, run_tasks, REQUEST)

    assert body["status"] == "idle"
    assert body["lastErrorCode"] == ""
    assert [e["status"] for e in llm.requests] == [529, 529, 200]
    assert UsageRecord.objects.filter(session_id=session.pk).count() == 1
    assert body["messages"][-1]["content"] == "Ok."


@pytest.mark.parametrize(
    "status, error_type, code, attempts",
    [
        (529, "overloaded_error", "ahentic_llm_overloaded", 3),
        (429, "rate_limit_error", "ahentic_llm_rate_limited", 3),
        (500, "api_error", "ahentic_llm_error", 3),
        (401, "authentication_error", "ahentic_llm_auth", 1),  # never retried
    ],
)
def test_a_model_failure_after_the_retries_fails_the_run_resumably_and_continue_finishes_it(
    owner_client, session, llm, run_tasks, status, error_type, code, attempts
):
    llm.enqueue(*(error_reply(status, error_type, retry_after_ms=10) for _ in range(attempts)))

    body = post_message(owner_client, session, run_tasks, REQUEST)

    assert body["status"] == "error"
    assert body["lastErrorCode"] == code
    assert body["lastError"]
    assert body["jobResumable"] is True
    assert [e["status"] for e in llm.requests] == [status] * attempts
    failure = body["messages"][-1]
    assert failure["role"] == "assistant"
    assert failure["meta"] == {"error": True, "code": code}
    assert UsageRecord.objects.filter(session_id=session.pk).count() == 0
    assert "llm_error" in trace_types(owner_client, session)

    llm.enqueue(text_reply("Recovered and done."))
    response = run_tasks(owner_client.post, session_url(session, "continue"))

    assert response.status_code == 200
    body = payload_of(owner_client, session)
    assert body["status"] == "idle"
    assert body["lastErrorCode"] == ""
    assert body["jobResumable"] is False
    assert body["runSeq"] == 1
    assert body["messages"][-1]["content"] == "Recovered and done."
    assert "run_resume" in trace_types(owner_client, session)
    # The failure copy is for the user: it is never sent back to the model.
    resumed = llm.message_requests()[-1]
    assert all(m["role"] == "user" for m in resumed["messages"])


def test_a_failure_mid_run_keeps_the_work_done_and_resumes_after_it(
    owner_client, session, llm, run_tasks, tool_calls
):
    llm.enqueue(
        tool_reply(tool_call("echo", {"text": "step one"}, id="toolu_one")),
        *(error_reply(529, retry_after_ms=10) for _ in range(3)),
    )
    post_message(owner_client, session, run_tasks, REQUEST)
    llm.enqueue(text_reply("Finished."))

    run_tasks(owner_client.post, session_url(session, "continue"))

    assert payload_of(owner_client, session)["status"] == "idle"
    assert len(tool_calls) == 1  # the finished tool is not run again
    resumed = llm.message_requests()[-1]["messages"]
    assert resumed[-1]["content"][0]["tool_use_id"] == "toolu_one"


def test_a_model_that_does_not_answer_in_time_fails_with_the_timeout_code(
    owner_client, session, llm, run_tasks, settings
):
    settings.AHENTIC = {**settings.AHENTIC, "LLM_TIMEOUT_S": 0.3, "LLM_MAX_RETRIES": 0}
    never = threading.Event()
    # An error answer is held before its headers are sent: the request itself times out.
    llm.enqueue(error_reply(529, gate=never))
    try:
        body = post_message(owner_client, session, run_tasks, REQUEST)
    finally:
        never.set()

    assert body["status"] == "error"
    assert body["lastErrorCode"] == "ahentic_llm_timeout"
    assert body["jobResumable"] is True


def test_a_model_that_stalls_mid_stream_fails_with_the_timeout_code(
    owner_client, session, llm, run_tasks, settings
):
    settings.AHENTIC = {**settings.AHENTIC, "LLM_TIMEOUT_S": 0.3, "LLM_MAX_RETRIES": 0}
    never = threading.Event()
    llm.enqueue(text_reply("Too late.", gate=never))
    try:
        body = post_message(owner_client, session, run_tasks, REQUEST)
    finally:
        never.set()

    assert body["status"] == "error"
    assert body["lastErrorCode"] == "ahentic_llm_timeout"
    assert body["jobResumable"] is True


def test_without_an_api_key_or_base_url_a_message_is_refused_as_unavailable(
    owner_client, session, llm, run_tasks, settings
):
    settings.AHENTIC = {**settings.AHENTIC, "API_KEY": "", "BASE_URL": ""}

    response = run_tasks(
        owner_client.post,
        f"/ahentic/v1/sessions/{session.pk}/messages",
        {"content": "Hello?"},
        format="json",
    )

    assert response.status_code == 503
    assert response.json()["code"] == "ahentic_ai_unavailable"
    assert payload_of(owner_client, session)["status"] == "idle"
    assert transcript_of(owner_client, session) == []
    assert llm.requests == []


def test_a_run_whose_model_goes_away_mid_run_fails_as_unavailable(
    owner_client, session, llm, run_tasks, settings
):
    from orchestrator_app import tasks

    start = owner_client.post  # the run starts while a model is configured...
    with patch("orchestrator_app.control.queue.async_task"):
        assert (
            start(
                f"/ahentic/v1/sessions/{session.pk}/messages", {"content": "Hi"}, format="json"
            ).status_code
            == 202
        )
    settings.AHENTIC = {**settings.AHENTIC, "API_KEY": "", "BASE_URL": ""}
    session.refresh_from_db()

    run_tasks(tasks.run_step, str(session.pk), session.run_seq)  # ...and is gone at the step

    body = payload_of(owner_client, session)
    assert body["status"] == "error"
    assert body["lastErrorCode"] == "ahentic_ai_unavailable"
    assert body["jobResumable"] is False
    assert llm.requests == []


def test_only_the_llm_module_imports_anthropic():
    importer = re.compile(r"^\s*(import anthropic|from anthropic\b)", re.MULTILINE)
    offenders = [
        str(path.relative_to(ROOT))
        for app in ("sessions_app", "artifacts_app", "orchestrator_app")
        for path in (ROOT / app).rglob("*.py")
        if importer.search(path.read_text(encoding="utf-8"))
    ]
    assert offenders == ["orchestrator_app/llm.py"]


def nested(levels: int) -> dict:
    value: dict = {"leaf": "x"}
    for _ in range(levels - 1):
        value = {"a": value}
    return value


def test_a_tool_input_nested_beyond_the_sdks_parser_is_answered_as_invalid_and_the_run_goes_on(
    owner_client, session, llm, run_tasks, tool_calls
):
    """The SDK parses a streamed tool input with a JSON parser that refuses about 200 levels:
    that call is answered as an invalid input, the run goes on, and the call's usage is in the
    ledger (input and cache tokens as the API reported them)."""
    llm.enqueue(
        tool_reply(
            tool_call("echo", {"text": "flat"}, id="toolu_flat_first"),
            tool_call("echo", nested(300), id="toolu_deep"),
            text="Trying a deep input.",
        ),
        text_reply("A flatter input next time."),
    )

    body = post_message(owner_client, session, run_tasks, REQUEST)

    assert body["status"] == "idle", body
    assert body["lastErrorCode"] == ""
    transcript = transcript_of(owner_client, session)
    kinds = [m["kind"] for m in transcript]
    assert kinds == [
        "user_message",
        "agent_message",
        "tool_call",
        "tool_call",
        "tool_response",
        "tool_response",
        "agent_message",
    ]
    assert transcript[3]["meta"]["callId"] == "toolu_deep"
    assert transcript[3]["meta"]["input"] == {}
    # The readable call ran; the unreadable one never did.
    assert [c["input"] for c in tool_calls] == [{"text": "flat"}]
    second = llm.message_requests()[1]
    deep_result = result_of(second, "toolu_deep")
    assert deep_result["is_error"] is True
    assert "invalid_input" in str(deep_result["content"])
    assert "200 levels" in str(deep_result["content"])
    assert result_of(second, "toolu_flat_first").get("is_error") is not True
    # The ledger holds both calls: the cut one with the API's input count.
    usages = [entry["response"]["usage"] for entry in llm.requests]
    records = list(UsageRecord.objects.filter(session_id=session.pk).order_by("id"))
    assert len(records) == 2
    assert [r.input_tokens for r in records] == [u["input_tokens"] for u in usages]
    assert records[0].output_tokens > 0
    assert body["tokensIn"] == sum(
        u["input_tokens"] + u["cache_read_input_tokens"] + u["cache_creation_input_tokens"]
        for u in usages
    )


def test_the_step_sends_the_bytes_and_headers_of_the_sdks_own_stream_helper(
    owner_client, session, llm, run_tasks, tool_calls
):
    """The step encodes its request itself (the SDK would copy the body first): what reaches
    the API is byte for byte what the SDK's ``messages.stream`` sends for the same request,
    non-ASCII text, tool results and the tools' cache breakpoint included."""
    import anthropic

    llm.enqueue(
        tool_reply(tool_call("echo", {"text": "Grüße, 東京 🌧"}, id="toolu_accents")),
        text_reply("Erledigt."),
    )

    post_message(owner_client, session, run_tasks, "Bitte prüfen: «Größe» ✓")

    assert len(tool_calls) == 1
    sent = [e for e in llm.requests if e["path"] == "/v1/messages"]
    assert len(sent) == 2
    step = sent[-1]  # the one after the tool ran: it holds a tool_use and its result
    body = dict(step["json"])
    assert body.pop("stream") is True
    llm.enqueue(text_reply("Erledigt."))
    client = anthropic.Anthropic(api_key="test-key", base_url=llm.url, max_retries=0)
    with client.messages.stream(**body) as stream:
        stream.get_final_message()
    helper = llm.requests[-1]
    assert "東京".encode() in step["raw"]  # UTF-8, not \\u escapes
    assert step["raw"] == helper["raw"]
    volatile = {"x-stainless-read-timeout", "x-stainless-timeout"}
    assert {k: v for k, v in step["headers"].items() if k not in volatile} == {
        k: v for k, v in helper["headers"].items() if k not in volatile
    }
