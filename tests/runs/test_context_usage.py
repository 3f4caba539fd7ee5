"""``contextUsage`` on the session payload: the fill of the next model request, by bucket.

It predicts what a message typed now would send, so after each step it is compared with the
request the following step sends and with the tokens the local Messages API server counted for
it. Steps are run one at a time (``tasks.run_step``; a step's own enqueue of the next one is
dropped by the test transaction).
"""

import pytest

from orchestrator_app import tasks
from orchestrator_app.loop import context
from orchestrator_app.testing.localapi import text_reply, tool_call, tool_reply
from sessions_app.conf import ahentic_settings
from tests.support.api import payload_of, session_url
from tests.support.model import model_requests

pytestmark = pytest.mark.usefixtures("llm_strict")

BUCKETS = {
    "systemPrompt",
    "tools",
    "history",
    "toolResults",
    "memory",
    "pageContext",
    "planArtifacts",
}
PLAN = {
    "steps": [
        {"id": "a", "content": "Read the page", "status": "in_progress"},
        {"id": "b", "content": "Draft the summary", "status": "pending"},
        {"id": "c", "content": "Report", "status": "pending"},
    ]
}


def start_run(client, session, **extra) -> int:
    """Post a message; the run's first step is not executed yet. Returns the run_seq."""
    response = client.post(
        session_url(session, "messages"), {"content": "Summarize this page", **extra}, format="json"
    )
    assert response.status_code == 202, response.content
    return response.json()["runSeq"]


def step(client, session, run_seq) -> dict:
    """Run one step and return the payload after it."""
    tasks.run_step(str(session.pk), run_seq)
    return payload_of(client, session)


def last_request(llm) -> tuple[dict, int]:
    """The newest main-model request and what the server counted for it (all input tokens)."""
    entry = model_requests(llm, ahentic_settings.MODEL)[-1]
    usage = entry["response"]["usage"]
    counted = (
        usage["input_tokens"]
        + usage["cache_read_input_tokens"]
        + usage["cache_creation_input_tokens"]
    )
    return entry["json"], counted


def test_a_new_session_reports_an_empty_context_with_every_bucket(owner_client, session):
    usage = payload_of(owner_client, session)["contextUsage"]

    assert usage["budgetTokens"] == 190000
    assert usage["usedTokens"] == 0
    assert usage["percent"] == 0
    assert set(usage["buckets"]) == BUCKETS
    assert set(usage["buckets"].values()) == {0}


def test_used_tokens_predict_what_the_server_counts_for_the_next_request(
    owner_client, session, llm, settings
):
    settings.AHENTIC = {**settings.AHENTIC, "CONTEXT_BUDGET_TOKENS": 50000}
    llm.enqueue(
        tool_reply(tool_call("echo", {"text": "first lookup " * 40})),
        tool_reply(tool_call("echo", {"text": "second lookup " * 80})),
        text_reply("Summary: two lookups."),
        text_reply("And a follow-up answer."),
    )
    run_seq = start_run(owner_client, session)

    predictions = [step(owner_client, session, run_seq)["contextUsage"] for _ in range(3)]
    assert payload_of(owner_client, session)["status"] == "idle"
    # The user types a follow-up: its request is what the last prediction foresaw.
    next_run = start_run(owner_client, session)
    step(owner_client, session, next_run)

    counted = counted_requests(llm)[1:]
    assert len(counted) == len(predictions) == 3
    for usage, tokens in zip(predictions, counted, strict=True):
        # Off by the words of the message (the prediction imagines a one-token message).
        assert abs(usage["usedTokens"] - tokens) <= 10
        assert usage["budgetTokens"] == 50000
        assert usage["percent"] == pytest.approx(100 * usage["usedTokens"] / 50000, abs=0.1)
        assert set(usage["buckets"]) == BUCKETS
        # The buckets split the same total (each rounded on its own).
        assert abs(sum(usage["buckets"].values()) - usage["usedTokens"]) <= len(BUCKETS)
    # It grows with what each step added (a tool result, then the reply).
    assert predictions[0]["usedTokens"] < predictions[1]["usedTokens"]


def counted_requests(llm) -> list[int]:
    """What the server counted (all input tokens) for each main-model request, in order."""
    return [
        usage["input_tokens"]
        + usage["cache_read_input_tokens"]
        + usage["cache_creation_input_tokens"]
        for usage in (
            entry["response"]["usage"] for entry in model_requests(llm, ahentic_settings.MODEL)
        )
    ]


def test_the_buckets_split_tools_system_history_and_tool_results(owner_client, session, llm):
    llm.enqueue(tool_reply(tool_call("echo", {"text": "a lookup " * 50})), text_reply("Done."))
    run_seq = start_run(owner_client, session)

    # After the first step, the next request holds the echo call and its result.
    after_call = step(owner_client, session, run_seq)["contextUsage"]["buckets"]
    after_reply = step(owner_client, session, run_seq)["contextUsage"]["buckets"]

    body, _ = last_request(llm)  # the second request: what the first prediction described
    assert after_call["tools"] == context.estimate({"tools": body["tools"]})
    assert after_call["systemPrompt"] == context.estimate({"system": body["system"]})
    assert after_call["toolResults"] > 0
    assert after_call["memory"] == 0
    assert after_reply["history"] > after_call["history"]  # the final reply
    assert after_reply["toolResults"] == after_call["toolResults"]
    assert after_reply["tools"] == after_call["tools"]


def test_a_page_context_posted_with_the_message_has_its_own_bucket(owner_client, session, llm):
    page = {"url": "https://example.com/pricing", "title": "Pricing", "excerpt": "Plans " * 60}

    run_seq = start_run(owner_client, session, pageContext=page)
    buckets = step(owner_client, session, run_seq)["contextUsage"]["buckets"]

    body, _ = last_request(llm)
    assert "https://example.com/pricing" in body["messages"][0]["content"][-1]["text"]
    assert buckets["pageContext"] > 0
    assert buckets["planArtifacts"] == 0


def test_a_plan_and_staged_artifacts_fill_the_plan_artifacts_bucket(owner_client, session, llm):
    llm.enqueue(
        tool_reply(tool_call("update_plan", PLAN)),
        tool_reply(
            tool_call(
                "stage_artifact",
                {"key": "summary", "kind": "markdown", "payload": {"content": "# Summary"}},
            )
        ),
        text_reply("Planned and drafted."),
    )
    run_seq = start_run(owner_client, session)

    before = payload_of(owner_client, session)["contextUsage"]["buckets"]
    with_plan = step(owner_client, session, run_seq)["contextUsage"]["buckets"]
    with_artifact = step(owner_client, session, run_seq)["contextUsage"]["buckets"]
    step(owner_client, session, run_seq)

    assert before["planArtifacts"] == 0
    assert with_plan["pageContext"] == 0
    assert with_plan["planArtifacts"] > 0
    assert with_artifact["planArtifacts"] > with_plan["planArtifacts"]
    body, _ = last_request(llm)
    assert "- summary: ready · markdown" in body["messages"][-1]["content"][-1]["text"]


def test_each_step_of_a_run_predicts_the_next_request_by_bucket(owner_client, session, llm):
    """Mid-run predictions (built from the request the step sent plus what it added) and the
    final one (the whole request assembled again) agree with the request that follows,
    bucket by bucket, while the plan, the artifacts and several tool results change it. The
    last one foresees that a new message starts its run without the finished run's plan."""
    page = {"url": "https://example.com/docs", "title": "Docs", "excerpt": "Setup " * 40}
    llm.enqueue(
        tool_reply(tool_call("update_plan", PLAN)),
        tool_reply(
            tool_call("echo", {"text": "one " * 30}),
            tool_call("echo", {"text": "two " * 60}),
        ),
        tool_reply(
            tool_call(
                "stage_artifact",
                {"key": "notes", "kind": "markdown", "payload": {"content": "# Notes " * 20}},
            )
        ),
        text_reply("Planned, looked up and drafted."),
        text_reply("A follow-up answer."),
    )
    run_seq = start_run(owner_client, session, pageContext=page)
    predictions = [step(owner_client, session, run_seq)["contextUsage"] for _ in range(4)]
    assert payload_of(owner_client, session)["status"] == "idle"
    step(owner_client, session, start_run(owner_client, session))

    bodies = [entry["json"] for entry in model_requests(llm, ahentic_settings.MODEL)][1:]
    counted = counted_requests(llm)[1:]
    assert len(bodies) == len(predictions) == 4
    for usage, body, tokens in zip(predictions, bodies, counted, strict=True):
        assert abs(usage["usedTokens"] - tokens) <= 10
        expected = context.buckets(body)
        calibration = usage["calibration"]
        for bucket in ("tools", "toolResults", "pageContext", "planArtifacts"):
            assert abs(usage["buckets"][bucket] - expected[bucket] * calibration) <= 2, bucket
    assert predictions[1]["buckets"]["toolResults"] > predictions[0]["buckets"]["toolResults"]
    assert predictions[2]["buckets"]["planArtifacts"] > predictions[1]["buckets"]["planArtifacts"]


def test_predictions_hold_when_the_next_request_moves_the_window(
    owner_client, session, llm, settings
):
    """In a budget a few tool results fill, some steps leave a session whose next request
    moves the window start first: the prediction then foresees the smaller request."""
    from tests.support.window import fixed_tokens

    # An eviction keeps about 700 tokens of window beside the fixed parts (whatever tools the
    # test run registered), a few tool pairs.
    budget = int((fixed_tokens(session) + 700) / 0.66)
    settings.AHENTIC = {
        **settings.AHENTIC,
        "CONTEXT_BUDGET_TOKENS": budget,
        "CONTEXT_EVICT_TO": 0.66,
        "MAX_STEPS_PER_RUN": 20,
    }
    steps = 12
    llm.enqueue(
        *[tool_reply(tool_call("echo", {"text": f"Finding {i}. " * 60})) for i in range(steps)]
    )
    run_seq = start_run(owner_client, session)

    predictions = [step(owner_client, session, run_seq)["contextUsage"] for _ in range(steps)]

    counted = counted_requests(llm)[1:]
    assert len(counted) == steps - 1
    used = [usage["usedTokens"] for usage in predictions[: steps - 1]]
    # The window moved at least once: some request is smaller than the one before it.
    assert any(later < earlier for earlier, later in zip(counted, counted[1:], strict=False))
    for prediction, tokens in zip(used, counted, strict=True):
        assert abs(prediction - tokens) <= 10, (used, counted)
