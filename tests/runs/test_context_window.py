"""The context window: prompt caching across steps, and a viewport that evicts in batches.

Driven through the HTTP API with the synchronous worker; the model is the local Messages API
server, whose cache accounting mirrors the real API's (breakpoints plus a 20-block look-back)
and whose token count is the rule ``orchestrator_app.loop.context.estimate`` reproduces.
"""

import pytest

from orchestrator_app.loop import context
from orchestrator_app.testing.localapi import (
    count_request_tokens,
    text_reply,
    tool_call,
    tool_reply,
)
from sessions_app.conf import ahentic_settings
from sessions_app.models import Goal, Session
from tests.support.api import post_message, session_url
from tests.support.model import model_requests
from tests.support.window import assert_tool_pairs_intact, fixed_tokens, read_share, starts_with

pytestmark = pytest.mark.usefixtures("llm_strict")

PLAN = {
    "title": "Research",
    "steps": [
        {"id": "look", "content": "Look the topics up", "status": "in_progress"},
        {"id": "compare", "content": "Compare the findings", "status": "pending"},
        {"id": "report", "content": "Report back", "status": "pending"},
    ],
}
NOTES = {
    "key": "notes",
    "kind": "markdown",
    "title": "Research notes",
    "payload": {"content": "# Notes\nWhat the lookups found."},
}
CONTEXT_HEADER = "[Context for this step"


def main_requests(llm) -> list[dict]:
    return [entry["json"] for entry in model_requests(llm, ahentic_settings.MODEL)]


def usages(llm) -> list[dict]:
    return [entry["response"]["usage"] for entry in model_requests(llm, ahentic_settings.MODEL)]


def cache_markers(body: dict) -> list[str]:
    """Where a request's ``cache_control`` markers sit, as readable paths."""
    found = []
    for i, tool in enumerate(body.get("tools") or []):
        if "cache_control" in tool:
            found.append(f"tools[{i}]")
    for i, block in enumerate(body.get("system") or []):
        if "cache_control" in block:
            found.append(f"system[{i}]")
    for i, message in enumerate(body["messages"]):
        for j, block in enumerate(message["content"]):
            if "cache_control" in block:
                found.append(f"messages[{i}][{j}]")
            for k, inner in enumerate(
                block.get("content") if isinstance(block.get("content"), list) else []
            ):
                if "cache_control" in inner:
                    found.append(f"messages[{i}][{j}].content[{k}]")
    if "cache_control" in body:
        found.append("top-level")
    return found


def context_blocks(body: dict) -> list[tuple[int, str]]:
    """(message index, text) of every step-context block in a request."""
    return [
        (i, block["text"])
        for i, message in enumerate(body["messages"])
        for block in message["content"]
        if block["type"] == "text" and block["text"].startswith(CONTEXT_HEADER)
    ]


# --- prompt caching in a 20-step run -------------------------------------------------------------


def run_twenty_steps(client, run_tasks, session, llm) -> dict:
    """19 lookups (short input, a few hundred characters back each) and a final answer."""
    for i in range(19):
        llm.enqueue(tool_reply(tool_call("echo", {"text": f"Topic {i:02d}: " + "finding " * 12})))
    llm.enqueue(text_reply("Here is what the twenty lookups found."))
    body = post_message(client, session, run_tasks, "Research twenty topics, one lookup each.")
    assert body["status"] == "idle", body["lastError"]
    assert len(main_requests(llm)) == 20
    return body


def test_each_step_reads_everything_but_its_newest_turn_from_the_prompt_cache(
    owner_client, session, llm, run_tasks
):
    run_twenty_steps(owner_client, run_tasks, session, llm)

    requests, usage = main_requests(llm), usages(llm)
    for n in range(1, 20):
        # The whole previous request is the cached prefix of this one; only the new turn
        # (the previous step's tool_use and its tool_result) is written.
        assert usage[n]["cache_read_input_tokens"] == count_request_tokens(requests[n - 1])
        assert usage[n]["input_tokens"] == 0
    assert read_share(usage[1:]) >= 0.95


def test_every_request_has_three_breakpoints_last_tool_system_and_newest_block(
    owner_client, session, llm, run_tasks
):
    run_twenty_steps(owner_client, run_tasks, session, llm)

    for body in main_requests(llm):
        last_message = len(body["messages"]) - 1
        last_block = len(body["messages"][-1]["content"]) - 1
        assert cache_markers(body) == [
            f"tools[{len(body['tools']) - 1}]",
            f"system[{len(body['system']) - 1}]",
            f"messages[{last_message}][{last_block}]",
        ]


def test_each_request_starts_with_the_exact_bytes_of_the_previous_one(
    owner_client, session, llm, run_tasks
):
    run_twenty_steps(owner_client, run_tasks, session, llm)

    requests = main_requests(llm)
    for previous, current in zip(requests, requests[1:], strict=False):
        assert current["tools"] == previous["tools"]
        assert current["system"] == previous["system"]
        assert len(current["messages"]) == len(previous["messages"]) + 2
        assert starts_with(current["messages"], previous["messages"])


def test_the_step_context_is_stored_with_the_turn_that_first_carried_it(
    owner_client, session, llm, run_tasks
):
    llm.enqueue(
        tool_reply(tool_call("update_plan", PLAN)),
        tool_reply(tool_call("stage_artifact", NOTES)),
        tool_reply(tool_call("echo", {"text": "one more lookup"})),
        text_reply("Plan made, notes staged."),
    )
    page = {"url": "https://example.com/about", "title": "About us"}

    post_message(owner_client, session, run_tasks, "Plan the research", pageContext=page)

    first, after_plan, after_stage, after_echo = requests = main_requests(llm)
    # Step 1: the page context rides on the user message itself.
    assert [i for i, _ in context_blocks(first)] == [0]
    assert "https://example.com/about" in context_blocks(first)[0][1]
    # Step 2: the plan is new, so the tool_result turn of update_plan carries a fresh block.
    assert [i for i, _ in context_blocks(after_plan)] == [0, 2]
    assert "Look the topics up" in context_blocks(after_plan)[1][1]
    # Step 3: the artifact pointer is new: another block, on stage_artifact's result turn.
    assert [i for i, _ in context_blocks(after_stage)] == [0, 2, 4]
    assert "- notes: ready · markdown" in context_blocks(after_stage)[2][1]
    # Step 4: nothing changed, nothing is repeated.
    assert len(context_blocks(after_echo)) == 3
    # Earlier turns never change: every request starts with the previous one's bytes.
    for previous, current in zip(requests, requests[1:], strict=False):
        assert current["system"] == previous["system"]
        assert starts_with(current["messages"], previous["messages"])


def test_a_new_run_keeps_the_earlier_turns_byte_for_byte(owner_client, session, llm, run_tasks):
    llm.enqueue(
        tool_reply(tool_call("update_plan", PLAN)),
        text_reply("Planned."),
        text_reply("Second answer."),
    )
    post_message(owner_client, session, run_tasks, "Plan the research")
    post_message(owner_client, session, run_tasks, "And now the second question")

    last_of_first_run, second_run = main_requests(llm)[1], main_requests(llm)[2]
    # The new run appends the final reply and the new user turn (with its own, changed step
    # context: the plan was cleared for the new goal); nothing before them moves.
    assert starts_with(second_run["messages"], last_of_first_run["messages"])
    new_turn = second_run["messages"][-1]["content"]
    assert new_turn[0]["text"] == "And now the second question"
    assert second_run["messages"][-2] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "Planned."}],
    }


# --- a session longer than its budget -------------------------------------------------------------


def eviction_flags(client, session) -> list[bool]:
    """For each main-model request in order: did its step move the window start first?"""
    response = client.get(session_url(session, "diagnostics"))
    flags, moved = [], False
    for row in response.json()["trace"]:
        if row["type"] == "context_compact":
            moved = True
        elif row["type"] == "llm_request":
            flags.append(moved)
            moved = False
    return flags


def run_long_session(client, run_tasks, session, model_script, settings, lookups=22) -> int:
    """A run of ``lookups`` sizeable tool results in a small budget; returns the budget.

    The budget leaves about 2,500 tokens of window beside the tools and the system prompt
    (which depend on the tools the test run registered), so each eviction drops about half.
    """
    budget = (fixed_tokens(session) + 2500) // 100 * 100
    settings.AHENTIC = {
        **settings.AHENTIC,
        "CONTEXT_BUDGET_TOKENS": budget,
        "CONTEXT_EVICT_TO": 0.66,
        "MAX_STEPS_PER_RUN": lookups + 5,
        "TRACE_CAP": 5000,
    }
    model_script.main.append(
        tool_reply(
            tool_call("set_goal", {"description": "Research the topics one by one"}),
            tool_call("update_plan", PLAN),
            tool_call("stage_artifact", NOTES),
        )
    )
    for i in range(lookups):
        model_script.main.append(
            tool_reply(tool_call("echo", {"text": f"Topic {i:02d} finding. " * 50}))
        )
    model_script.main.append(text_reply("All topics researched."))
    body = post_message(client, session, run_tasks, "Research the topics one by one")
    assert body["status"] == "idle", body["lastError"]
    return budget


def test_a_long_session_stays_under_the_budget_and_evicts_in_batches(
    owner_client, session, llm, model_script, run_tasks, settings
):
    budget = run_long_session(owner_client, run_tasks, session, model_script, settings)

    requests = main_requests(llm)
    flags = eviction_flags(owner_client, session)
    assert len(flags) == len(requests) == 24
    for body in requests:
        assert context.estimate(body) <= budget
        assert count_request_tokens(body) <= budget
        assert_tool_pairs_intact(body)
    # The window start moves in batches: several evictions, each far below the budget, and
    # between two of them each request extends the previous one.
    assert sum(flags) >= 4
    for n in range(1, len(requests)):
        if flags[n]:
            assert count_request_tokens(requests[n]) <= 0.66 * budget
            assert not starts_with(requests[n]["messages"], requests[n - 1]["messages"])
        else:
            assert starts_with(requests[n]["messages"], requests[n - 1]["messages"])
    # Tools never change; the system prompt only when a memory snapshot arrives, which is
    # taken after an eviction and shows from the following step on.
    for n in range(1, len(requests)):
        assert requests[n]["tools"] == requests[n - 1]["tools"]
        if requests[n]["system"] != requests[n - 1]["system"]:
            assert flags[n - 1] or flags[n]
    # Each eviction is one recorded window move, and the session keeps the last start.
    response = owner_client.get(session_url(session, "diagnostics"))
    moves = [row["data"] for row in response.json()["trace"] if row["type"] == "context_compact"]
    assert len(moves) == sum(flags)
    starts = [move["to_event_id"] for move in moves]
    assert starts == sorted(set(starts))
    assert Session.objects.get(pk=session.pk).viewport_start_event_id == starts[-1]


def test_a_budget_smaller_than_one_tool_pair_still_sends_the_newest_pair(
    owner_client, session, llm, model_script, run_tasks, settings
):
    """An eviction that has room for less than one tool pair keeps the newest pair whole: a
    window of the answer alone would send no message at all."""
    settings.AHENTIC = {
        **settings.AHENTIC,
        # An eviction keeps about 100 tokens beside the fixed parts; a pair is about 350.
        "CONTEXT_BUDGET_TOKENS": int((fixed_tokens(session) + 100) / 0.66),
        "CONTEXT_EVICT_TO": 0.66,
        "MAX_STEPS_PER_RUN": 20,
    }
    for i in range(6):
        model_script.main.append(tool_reply(tool_call("echo", {"text": f"Finding {i}. " * 60})))
    model_script.main.append(text_reply("Done."))

    body = post_message(owner_client, session, run_tasks, "Look six things up")

    assert body["status"] == "idle", body["lastError"]
    assert sum(eviction_flags(owner_client, session)) >= 1
    requests = main_requests(llm)
    assert len(requests) == 7
    for request in requests:
        assert request["messages"]
        assert_tool_pairs_intact(request)


def test_the_goal_the_plan_and_the_artifact_pointers_survive_evictions(
    owner_client, session, llm, model_script, run_tasks, settings
):
    run_long_session(owner_client, run_tasks, session, model_script, settings)

    goal = Goal.objects.get(session=session)
    requests = main_requests(llm)
    assert sum(eviction_flags(owner_client, session)) >= 4
    for n, body in enumerate(requests[1:], start=1):
        # The goal, the plan and the pointers ride in a step-context block the window still
        # holds (from the step after set_goal, update_plan and stage_artifact ran).
        texts = [text for _, text in context_blocks(body)]
        assert any(f"#{goal.pk} Research the topics one by one" in t for t in texts), (
            f"request {n} lost the goal"
        )
        assert any("Look the topics up" in t for t in texts), f"request {n} lost the plan"
        assert any("- notes: ready" in t for t in texts), f"request {n} lost the pointers"
