"""Content work: a run that stages a long body gets the raised step cap and output budget.

The rule (docs/concepts/decisions.md): a run is content work once it stages an artifact larger than
``AUTO_STAGE_BYTES``, with ``stage_artifact`` (appended chunks count together) or by
auto-staging a long inline body given to a tool's artifact field. It lasts until the run ends.
"""

import pytest

from orchestrator_app.testing.localapi import text_reply, tool_call, tool_reply
from sessions_app.conf import ahentic_settings
from tests.support import tools_for_artifacts  # noqa: F401  (registers publish_note with an artifact field)
from tests.support.api import post_message
from tests.support.model import model_requests

pytestmark = pytest.mark.usefixtures("llm_strict")

CAPS = {
    "AUTO_STAGE_BYTES": 300,
    "MAX_STEPS_PER_RUN": 3,
    "MAX_STEPS_PER_RUN_CONTENT_WORK": 6,
    "MAX_OUTPUT_TOKENS": 1000,
    "MAX_OUTPUT_TOKENS_CONTENT_WORK": 2000,
}


def stage(key: str, words: int, **extra) -> dict:
    body = {"key": key, "kind": "markdown", "payload": {"content": "word " * words}}
    return tool_call("stage_artifact", {**body, **extra})


def max_tokens_sent(llm) -> list[int]:
    return [e["json"]["max_tokens"] for e in model_requests(llm, ahentic_settings.MODEL)]


@pytest.fixture
def caps(settings, llm):
    settings.AHENTIC = {**settings.AHENTIC, **CAPS}


def test_a_short_draft_keeps_the_ordinary_caps(owner_client, session, llm, run_tasks, caps):
    llm.enqueue(
        tool_reply(stage("note", 20)),
        tool_reply(tool_call("echo", {"text": "one"})),
        tool_reply(tool_call("echo", {"text": "two"})),
        text_reply("Never reached."),
    )

    body = post_message(owner_client, session, run_tasks, "Write a short note")

    assert body["contentWork"] is False
    assert body["lastErrorCode"] == "ahentic_max_steps"
    assert max_tokens_sent(llm) == [1000, 1000, 1000]


def test_staging_a_long_draft_raises_the_step_cap_and_the_output_budget(
    owner_client, session, llm, run_tasks, caps
):
    llm.enqueue(
        tool_reply(stage("article", 100)),  # 500+ bytes: over AUTO_STAGE_BYTES
        tool_reply(tool_call("echo", {"text": "one"})),
        tool_reply(tool_call("echo", {"text": "two"})),
        tool_reply(tool_call("echo", {"text": "three"})),
        text_reply("Article drafted."),
    )

    body = post_message(owner_client, session, run_tasks, "Write the article")

    assert body["status"] == "idle", body["lastError"]
    assert body["contentWork"] is True
    assert body["messages"][-1]["content"] == "Article drafted."
    assert max_tokens_sent(llm) == [1000, 2000, 2000, 2000, 2000]

    # The next run starts with the ordinary caps again.
    llm.enqueue(text_reply("Hello."))
    body = post_message(owner_client, session, run_tasks, "Say hello")
    assert body["contentWork"] is False
    assert max_tokens_sent(llm)[-1] == 1000


def test_chunks_appended_to_a_draft_count_together(owner_client, session, llm, run_tasks, caps):
    llm.enqueue(
        tool_reply(stage("article", 40, mode="append", complete=False)),  # 200+ bytes
        tool_reply(stage("article", 40, mode="append", complete=True)),  # now 400+ bytes
        text_reply("Done."),
    )

    body = post_message(owner_client, session, run_tasks, "Write the article in parts")

    assert body["contentWork"] is True
    assert max_tokens_sent(llm) == [1000, 1000, 2000]


def test_a_long_inline_body_for_an_artifact_field_is_content_work(
    owner_client, session, llm, run_tasks, caps
):
    llm.enqueue(
        tool_reply(tool_call("publish_note", {"title": "Long", "body": "text " * 100})),
    )

    body = post_message(owner_client, session, run_tasks, "Publish a long note")

    assert body["status"] == "awaiting_human"  # publish_note asks first; staged already
    assert body["contentWork"] is True
