"""Thinking: settings, history, approvals, cancel, the strict local API's refusals, the payload.

Through the HTTP API and the task entry points, with the real SDK against the local Messages API
server, which verifies every thinking block's signature and refuses a tool loop whose turn lost
its thinking (``llm_strict`` fails the test on any refused request).
"""

import os

import pytest
from django.core.checks import run_checks

from orchestrator_app import llm as llm_seam
from orchestrator_app.testing.localapi import (
    redacted_thinking_block,
    reply,
    text_reply,
    thinking_block,
    tool_call,
    tool_reply,
    with_thinking,
)
from sessions_app.models import Event
from tests.support.api import decide, payload_of, post, post_message, session_url, transcript_of
from tests.support.model import without_cache_control

pytestmark = pytest.mark.usefixtures("llm_strict")

NOTE = {"title": "Opening hours", "body": "We open at nine."}


@pytest.fixture
def thinking_on(llm, settings):
    settings.AHENTIC = {**settings.AHENTIC, "THINKING": 2048, "THINKING_DISPLAY": "summarized"}
    return llm


def assistant_turns(body):
    return [m for m in body["messages"] if m["role"] == "assistant"]


def history_is_a_prefix(earlier, later):
    """The earlier request's messages, but for the newest, are sent again byte for byte."""
    before = without_cache_control(earlier["messages"][:-1])
    after = without_cache_control(later["messages"][: len(before)])
    return before == after


def test_thinking_across_a_run_with_an_approval_pause(
    owner_client, session, thinking_on, run_tasks, artifact_calls, tool_calls
):
    first = thinking_block("The user wants hours published; echo the note first.")
    second = thinking_block("Echo done. Now publish: it needs approval.")
    llm = thinking_on
    llm.enqueue(
        reply([first, tool_call("echo", {"text": "hi"}, id="toolu_echo")], "tool_use"),
        reply([second, tool_call("publish_note", NOTE, id="toolu_pub")], "tool_use"),
    )

    body = post_message(owner_client, session, run_tasks, "Publish the opening hours")

    assert body["status"] == "awaiting_human"
    llm.enqueue(with_thinking(text_reply("Published."), "Both done; report."))
    body = decide(owner_client, session, run_tasks, "allow_once")
    assert body["status"] == "idle"
    assert [c["tool"] for c in artifact_calls] == ["publish_note"]

    requests = llm.message_requests()
    assert len(requests) == 3
    for request in requests:
        assert request["thinking"] == {
            "type": "enabled",
            "budget_tokens": 2048,
            "display": "summarized",
        }
    # Each tool-use turn opens with its thinking block, as the model sent it (signature and all).
    turns = assistant_turns(requests[2])
    assert without_cache_control(turns[0]["content"][0]) == first
    assert without_cache_control(turns[1]["content"][0]) == second
    # Every request repeats the previous one's history unchanged: the cached prefix holds.
    assert history_is_a_prefix(requests[0], requests[1])
    assert history_is_a_prefix(requests[1], requests[2])

    # The basic view shows the thinking with its turn; the debug view has the blocks whole.
    messages = owner_client.get(session_url(session, "messages")).json()["messages"]
    thoughts = [m["meta"]["thinking"]["text"] for m in messages if "thinking" in m["meta"]]
    assert thoughts == [first["thinking"], second["thinking"], "Both done; report."]
    assert all("blocks" not in m["meta"] for m in messages)
    debug = [m for m in transcript_of(owner_client, session) if "blocks" in m["meta"]]
    assert debug[0]["meta"]["blocks"] == [first]
    assert "Published." in [m["content"] for m in messages]


def test_thinking_then_cancel_then_a_new_message_is_accepted(
    owner_client, session, thinking_on, run_tasks, artifact_calls
):
    llm = thinking_on
    thought = thinking_block("Publishing needs the user's approval.")
    llm.enqueue(reply([thought, tool_call("publish_note", NOTE, id="toolu_pub")], "tool_use"))
    post_message(owner_client, session, run_tasks, "Publish the opening hours")

    response = run_tasks(post, owner_client, session, "cancel")
    assert response.status_code in (200, 202), response.content
    llm.enqueue(with_thinking(text_reply("Fine, I left it."), "The user cancelled."))
    body = post_message(owner_client, session, run_tasks, "Never mind.")

    assert body["status"] == "idle"
    assert artifact_calls == []
    last = llm.message_requests()[-1]
    assert "thinking" in last  # the cancelled turn kept its thinking, so thinking stays on
    turn = assistant_turns(last)[0]
    assert without_cache_control(turn["content"][0]) == thought
    assert turn["content"][1]["type"] == "tool_use"


def test_redacted_thinking_goes_back_unchanged(owner_client, session, thinking_on, run_tasks):
    llm = thinking_on
    redacted = redacted_thinking_block("withheld reasoning")
    thought = thinking_block("And some visible reasoning.")
    llm.enqueue(
        reply([redacted, thought, tool_call("echo", {"text": "x"}, id="toolu_e")], "tool_use"),
        text_reply("Echoed."),
    )

    post_message(owner_client, session, run_tasks, "Echo x")

    sent = assistant_turns(llm.message_requests()[1])[0]["content"]
    assert without_cache_control(sent[:2]) == [redacted, thought]
    messages = owner_client.get(session_url(session, "messages")).json()["messages"]
    [meta] = [m["meta"] for m in messages if "thinking" in m["meta"]]
    assert meta["thinking"] == {"text": "And some visible reasoning.", "redacted": 1}


def test_thinking_switched_on_mid_run_waits_for_the_next_turn(
    owner_client, session, llm, settings, run_tasks
):
    # A tool loop started without thinking cannot think half-way: the API refuses a
    # continued tool-use turn that does not open with a thinking block.
    def switch_on(body):
        settings.AHENTIC = {**settings.AHENTIC, "THINKING": "adaptive"}
        return text_reply("Echoed.")

    llm.enqueue(tool_reply(tool_call("echo", {"text": "x"}, id="toolu_e")))
    llm.responder = switch_on
    post_message(owner_client, session, run_tasks, "Echo x")
    llm.responder = None
    llm.enqueue(with_thinking(text_reply("Hello."), "A greeting."))
    post_message(owner_client, session, run_tasks, "Hi")

    requests = llm.message_requests()
    assert "thinking" not in requests[0]
    assert "thinking" not in requests[1]  # the loop's continuation
    assert requests[2]["thinking"] == {"type": "adaptive"}


def test_an_altered_thinking_block_is_refused_by_the_local_api(thinking_on, settings):
    llm = thinking_on
    thought = thinking_block("The real reasoning.")
    turn = [thought, tool_call("echo", {"text": "x"}, id="toolu_e")]
    result = {"type": "tool_result", "tool_use_id": "toolu_e", "content": "x"}

    def call(assistant):
        return llm_seam.call_model(
            model="claude-test",
            system=[{"type": "text", "text": "You help."}],
            messages=[
                {"role": "user", "content": [{"type": "text", "text": "Echo x"}]},
                {"role": "assistant", "content": assistant},
                {"role": "user", "content": [result]},
            ],
            max_tokens=4096,
            thinking={"type": "enabled", "budget_tokens": 2048},
        )

    assert call(turn).text == "Done."  # sent back as received: accepted
    altered = [{**thought, "thinking": "Other reasoning."}, turn[1]]
    unsigned = [{"type": "thinking", "thinking": "The real reasoning."}, turn[1]]
    for assistant, words in (
        (altered, "Invalid `signature` in `thinking` block"),
        (unsigned, "signature: Field required"),
        (turn[1:], "a final `assistant` message must start with a thinking block"),
    ):
        with pytest.raises(llm_seam.LLMError) as refused:
            call(assistant)
        assert refused.value.status == 400
        assert words in refused.value.detail
    # Refused requests are the point of this test, not a product defect.
    llm.reset()


def test_budget_tokens_must_stay_below_max_tokens(llm):
    with pytest.raises(llm_seam.LLMError) as refused:
        llm_seam.call_model(
            model="claude-test",
            system=[{"type": "text", "text": "You help."}],
            messages=[{"role": "user", "content": "Hi"}],
            max_tokens=2000,
            thinking={"type": "enabled", "budget_tokens": 2000},
        )
    assert refused.value.status == 400
    assert "`max_tokens` must be greater than `thinking.budget_tokens`" in refused.value.detail
    llm.reset()


@pytest.mark.parametrize(
    ("thinking", "ok"),
    [
        ("off", True),
        ("adaptive", True),
        (1024, True),
        ({"agent": 4096, "ask": "off"}, True),
        (1000, False),
        (8000, False),  # MAX_OUTPUT_TOKENS is 8000: the budget must stay below it
        ("always", False),
        ({"agent": 512}, False),
    ],
)
def test_the_thinking_setting_is_checked(db, settings, thinking, ok):
    settings.AHENTIC = {**settings.AHENTIC, "THINKING": thinking, "MAX_OUTPUT_TOKENS": 8000}
    ids = [e.id for e in run_checks(databases=["default"])]
    assert ("ahentic.E020" not in ids) is ok


def test_thinking_and_effort_may_differ_per_mode(owner_client, session, llm, settings, run_tasks):
    settings.AHENTIC = {
        **settings.AHENTIC,
        "THINKING": {"agent": "adaptive", "ask": "off"},
        "EFFORT": {"agent": "high", "ask": "low"},
    }
    llm.enqueue(with_thinking(text_reply("Agent."), "Plan."), text_reply("Ask."))
    post_message(owner_client, session, run_tasks, "One")
    post_message(owner_client, session, run_tasks, "Two", mode="ask")

    agent, ask = llm.message_requests()
    assert (agent["thinking"], agent["output_config"]) == ({"type": "adaptive"}, {"effort": "high"})
    assert "thinking" not in ask and ask["output_config"] == {"effort": "low"}


def test_live_text_never_shows_thinking(llm, monkeypatch):
    monkeypatch.setattr(llm_seam, "LIVE_INTERVAL_S", 0.0)
    monkeypatch.setattr(llm_seam, "PROGRESS_INTERVAL_S", 0.0)
    seen: list[str] = []
    llm.enqueue(with_thinking(text_reply("The visible answer."), "SECRET-THOUGHT " * 8))

    result = llm_seam.call_model(
        model="claude-test",
        system=[{"type": "text", "text": "You help."}],
        messages=[{"role": "user", "content": "Hi"}],
        max_tokens=4096,
        thinking={"type": "adaptive"},
        on_progress=lambda text: seen.append(text) or True,
    )

    assert result.text == "The visible answer."
    assert result.content[0]["type"] == "thinking"
    assert seen and seen[-1] == "The visible answer."
    assert not any("SECRET" in text for text in seen)


def test_context_usage_counts_the_thinking_sent_back(owner_client, session, thinking_on, run_tasks):
    llm = thinking_on
    long_thought = thinking_block("Careful reasoning. " * 400)
    llm.enqueue(
        reply([long_thought, tool_call("echo", {"text": "x"}, id="toolu_e")], "tool_use"),
        text_reply("Echoed."),
    )
    body = post_message(owner_client, session, run_tasks, "Echo x")

    event = Event.objects.get(session=session, kind=Event.Kind.AGENT_MESSAGE, content="")
    assert event.payload["blocks"] == [long_thought]
    # The thinking (about 1,900 tokens) is history the next request carries.
    assert body["contextUsage"]["buckets"]["history"] > 1800
    assert payload_of(owner_client, session)["contextUsage"] == body["contextUsage"]


def test_context_usage_predicts_the_next_request_with_thinking_and_a_search(
    owner_client, session, thinking_on, settings
):
    from orchestrator_app import tasks
    from orchestrator_app.testing.localapi import cited_text, web_search_blocks

    settings.AHENTIC = {**settings.AHENTIC, "WEB_SEARCH": {"max_uses": 2}}
    llm = thinking_on
    url = "https://docs.example.com/a"
    llm.enqueue(
        reply([thinking_block("Look it up. " * 50), tool_call("echo", {"text": "x"})], "tool_use"),
        with_thinking(
            reply(
                [
                    *web_search_blocks("a", [{"url": url, "title": "A"}]),
                    cited_text("It is A.", url, "A", "A is A."),
                ]
            ),
            "Search, then answer. " * 40,
        ),
        text_reply("Follow-up."),
    )

    def start(text):
        response = post(owner_client, session, "messages", {"content": text})
        assert response.status_code == 202, response.content
        return response.json()["runSeq"]

    run_seq = start("Find A")
    predictions = []
    for _ in range(2):
        tasks.run_step(str(session.pk), run_seq)
        predictions.append(payload_of(owner_client, session)["contextUsage"])
    tasks.run_step(str(session.pk), start("And?"))

    counted = [
        e["response"]["usage"]["input_tokens"]
        + e["response"]["usage"]["cache_read_input_tokens"]
        + e["response"]["usage"]["cache_creation_input_tokens"]
        for e in llm.requests
        if e["accepted"]
    ][1:]
    assert len(counted) == 2
    for usage, tokens in zip(predictions, counted, strict=True):
        # Off by the words of the message (the prediction imagines a one-token message).
        assert abs(usage["usedTokens"] - tokens) <= 10


def test_thinking_cut_off_by_max_tokens_is_not_sent_back(
    owner_client, session, thinking_on, run_tasks
):
    llm = thinking_on
    cut = {"type": "thinking", "thinking": "Half a thou", "signature": ""}
    llm.enqueue(
        reply([cut], "max_tokens"),
        with_thinking(text_reply("A shorter answer."), "Keep it short."),
    )

    body = post_message(owner_client, session, run_tasks, "Explain everything")

    assert body["status"] == "idle"
    _, second = llm.message_requests()
    sent = [b["type"] for m in second["messages"] for b in m["content"]]
    assert "thinking" not in sent  # the unsigned block stayed out; the strict API accepted


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("  \n\tLeading and trailing space, tabs\tand é ü 中 stay.\n\n  ", id="space"),
        pytest.param(
            "Reasoning with a NUL\x00 in it.",
            id="nul",
            marks=pytest.mark.skipif(
                os.environ.get("AHENTIC_TEST_DB") in ("postgres", "mysql"),
                reason="PostgreSQL's jsonb and MariaDB cannot store a NUL character",
            ),
        ),
    ],
)
def test_a_thinking_block_goes_back_byte_for_byte(
    owner_client, session, thinking_on, run_tasks, text
):
    """The request body the API receives carries the thinking text and its signature exactly as
    they came (no NUL dropped, no whitespace trimmed): the API verifies the signature."""
    llm = thinking_on
    thought = thinking_block(text)
    llm.enqueue(
        reply([thought, tool_call("echo", {"text": "x"}, id="toolu_e")], "tool_use"),
        text_reply("Echoed."),
    )

    body = post_message(owner_client, session, run_tasks, "Echo x")

    assert body["status"] == "idle", body
    [_, second] = llm.message_requests()
    [sent] = [b for b in assistant_turns(second)[0]["content"] if b["type"] == "thinking"]
    assert sent["thinking"] == text
    assert sent["signature"] == thought["signature"]
    raw = [e for e in llm.requests if e["path"] == "/v1/messages"][1]
    assert raw["accepted"] is True
