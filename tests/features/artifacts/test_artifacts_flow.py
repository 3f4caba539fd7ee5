"""Draft then apply: the agent stages a body once and applies it later with ``from_memory``.

End to end through the HTTP API, the synchronous worker and the local Messages API server. The
central promise: after staging, the body never travels to the model again (no tool_result, no
pointer, no pending tool), yet the tool that applies it receives it whole.
"""

import json

import pytest

from artifacts_app import store
from artifacts_app.models import Artifact
from orchestrator_app.models import ToolGrant
from orchestrator_app.testing.localapi import text_reply, tool_call, tool_reply
from sessions_app.models import Session
from tests.support import tools_for_artifacts  # noqa: F401  (registers publish_note, editor_insert...)
from tests.support.api import (
    decide,
    payload_of,
    post_message,
    result_of,
    session_url,
    transcript_of,
)

REQUEST = "Write the coffee article and publish it"

pytestmark = pytest.mark.usefixtures("llm_strict")

CHUNK_ONE = "## Beans\nBuy whole beans from a local roaster and grind them just before brewing."
CHUNK_TWO = "## Water\nUse filtered water just off the boil, at about ninety-four degrees."
ARTICLE = f"{CHUNK_ONE}\n\n{CHUNK_TWO}"


def stage_call(content=None, *, key="article_draft", kind="markdown", id=None, **options):
    tool_input = {"key": key, "kind": kind, **options}
    if content is not None:
        tool_input["payload"] = content if kind == "json" else {"content": content}
    return tool_call("stage_artifact", tool_input, id=id)


def publish_call(key="article_draft", id="toolu_publish", title="Coffee at home", **extra):
    return tool_call("publish_note", {"title": title, "from_memory": key, **extra}, id=id)


def draft_replies():
    """The model drafts article_draft in two chunks, then finalizes it without a payload."""
    return [
        tool_reply(
            stage_call(CHUNK_ONE, mode="append", complete=False, title="Coffee", id="toolu_chunk1")
        ),
        tool_reply(stage_call(CHUNK_TWO, mode="append", complete=False, id="toolu_chunk2")),
        tool_reply(stage_call(mode="append", complete=True, id="toolu_finalize")),
    ]


def strings_in(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from strings_in(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings_in(item)


def places_of(needle: str, request: dict) -> list[str]:
    """Every place ``needle`` occurs in a model request, e.g. ``tool_use:toolu_chunk1``."""
    places = []
    if any(needle in s for s in strings_in(request.get("system"))):
        places.append("system")
    if any(needle in s for s in strings_in(request.get("tools"))):
        places.append("tools")
    for message in request["messages"]:
        for block in message["content"]:
            if not any(needle in s for s in strings_in(block)):
                continue
            if block["type"] == "tool_use":
                places.append(f"tool_use:{block['id']}")
            elif block["type"] == "tool_result":
                places.append(f"tool_result:{block['tool_use_id']}")
            else:
                places.append(f"{message['role']}_{block['type']}")
    return places


def user_texts(request: dict) -> list[str]:
    return [
        block["text"]
        for message in request["messages"]
        if message["role"] == "user"
        for block in message["content"]
        if block["type"] == "text"
    ]


def tool_result_meta(client, session, call_id: str) -> dict:
    [message] = [
        m
        for m in transcript_of(client, session)
        if m["kind"] == "tool_response" and m["meta"]["callId"] == call_id
    ]
    return message


def artifact_of(client, session, key="article_draft") -> dict:
    response = client.get(session_url(session, f"artifacts/{key}"))
    assert response.status_code == 200, response.content
    return response.json()


def grant(user, tool_name="publish_note"):
    ToolGrant.objects.create(user=user, tool_name=tool_name)


# --- draft then apply ---------------------------------------------------------------------------


@pytest.mark.parametrize("approval", ["allow_once", "preallowed"])
def test_a_staged_draft_is_applied_by_key_and_its_body_never_reaches_the_model_again(
    owner_client, owner, session, llm, run_tasks, artifact_calls, approval
):
    if approval == "preallowed":
        grant(owner)
    llm.enqueue(*draft_replies(), tool_reply(publish_call()), text_reply("Published."))

    body = post_message(owner_client, session, run_tasks, REQUEST)

    if approval == "allow_once":
        assert body["status"] == "awaiting_human"
        pending = body["pendingTool"]
        assert pending["name"] == "publish_note"
        assert pending["input"] == {"title": "Coffee at home", "from_memory": "article_draft"}
        assert pending["artifactKey"] == "article_draft"
        assert pending["memory"]["key"] == "article_draft"
        assert pending["memory"]["status"] == "ready"
        # The approval card shows a short excerpt (at most 160 characters), never the body.
        assert len(pending["memory"]["excerpt"]) <= 160
        assert pending["memory"]["excerpt"].startswith("## Beans")
        assert json.dumps(ARTICLE)[1:-1] not in json.dumps(pending)
        stored = Session.objects.get(pk=session.pk).pending_tool
        assert stored["input"] == {"title": "Coffee at home", "from_memory": "article_draft"}
        assert "Beans" not in json.dumps(stored) and "Water" not in json.dumps(stored)
        assert artifact_calls == []
        body = decide(owner_client, session, run_tasks)

    assert body["status"] == "idle"
    assert body["messages"][-1]["content"] == "Published."
    assert artifact_calls == [
        {"tool": "publish_note", "input": {"title": "Coffee at home", "body": ARTICLE}}
    ]
    listed = owner_client.get(session_url(session, "artifacts")).json()["artifacts"]
    assert [(a["key"], a["status"], a["kind"]) for a in listed] == [
        ("article_draft", "applied", "markdown")
    ]
    assert artifact_of(owner_client, session)["payload"] == {"content": ARTICLE}
    result = tool_result_meta(owner_client, session, "toolu_publish")
    assert result["meta"]["ok"] is True
    assert result["meta"]["artifactKey"] == "article_draft"
    assert result["meta"]["approved"] == approval

    requests = llm.message_requests()
    assert len(requests) == 5
    # The body only ever travels inside the model's own stage_artifact calls.
    for request in requests[1:]:
        assert places_of(ARTICLE, request) == []
        assert set(places_of(CHUNK_ONE, request)) == {"tool_use:toolu_chunk1"}
        assert set(places_of(CHUNK_TWO, request)) <= {"tool_use:toolu_chunk2"}
        assert set(places_of("ninety-four", request)) <= {"tool_use:toolu_chunk2"}
    assert places_of(CHUNK_TWO, requests[2]) == ["tool_use:toolu_chunk2"]
    publish_use = [
        b for m in requests[4]["messages"] for b in m["content"] if b.get("id") == "toolu_publish"
    ]
    assert publish_use[0]["input"] == {"title": "Coffee at home", "from_memory": "article_draft"}
    # Pointers ride in a text block of a user turn.
    assert any("- article_draft: drafting · markdown" in t for t in user_texts(requests[1]))
    assert any("- article_draft: ready · markdown" in t for t in user_texts(requests[3]))


def test_the_prompt_after_an_apply_points_to_the_artifact_as_applied(
    owner_client, owner, session, llm, run_tasks, artifact_calls
):
    grant(owner)
    llm.enqueue(*draft_replies(), tool_reply(publish_call()), text_reply("Published."))

    post_message(owner_client, session, run_tasks, REQUEST)

    after_apply = llm.message_requests()[4]
    newest_user_turn = after_apply["messages"][-1]
    assert newest_user_turn["content"][0]["tool_use_id"] == "toolu_publish"
    assert any(
        "- article_draft: applied · markdown" in b.get("text", "")
        for b in newest_user_turn["content"]
    )


def test_stage_results_tell_the_model_what_to_do_next_without_the_body(
    owner_client, session, llm, run_tasks
):
    llm.enqueue(*draft_replies(), text_reply("Drafted."))

    post_message(owner_client, session, run_tasks, REQUEST)

    requests = llm.message_requests()
    chunk = json.loads(result_of(requests[1], "toolu_chunk1")["content"])
    assert chunk["status"] == "drafting"
    assert "complete=true" in chunk["message"]
    final = json.loads(result_of(requests[3], "toolu_finalize")["content"])
    assert final["status"] == "ready"
    assert final["bytes"] == len(json.dumps({"content": ARTICLE}, separators=(",", ":")))
    assert '{"from_memory": "article_draft"}' in final["message"]
    artifact = artifact_of(owner_client, session)
    assert (artifact["status"], artifact["title"], artifact["source"]) == (
        "ready",
        "Coffee",
        "stage_artifact",
    )


def test_a_draft_survives_a_new_goal_and_a_revision_replaces_it(
    owner_client, owner, session, llm, run_tasks, artifact_calls
):
    grant(owner)
    llm.enqueue(tool_reply(stage_call("First version of the article.")), text_reply("Drafted."))
    post_message(owner_client, session, run_tasks, "Draft the article")
    llm.enqueue(tool_reply(stage_call("Second, better version.")), text_reply("Revised."))

    post_message(owner_client, session, run_tasks, "Make it better")

    revised = artifact_of(owner_client, session)
    assert (revised["status"], revised["payload"]) == (
        "ready",
        {"content": "Second, better version."},
    )
    llm.enqueue(tool_reply(publish_call()), text_reply("Published the revision."))

    body = post_message(owner_client, session, run_tasks, "Now publish that draft")

    assert body["status"] == "idle"
    assert [c["input"]["body"] for c in artifact_calls] == ["Second, better version."]
    assert artifact_of(owner_client, session)["status"] == "applied"


def test_from_memory_wins_over_an_inline_body(
    owner_client, owner, session, llm, run_tasks, artifact_calls
):
    grant(owner)
    llm.enqueue(
        tool_reply(stage_call(ARTICLE)),
        tool_reply(publish_call(body="a short inline summary")),
        text_reply("Published."),
    )

    post_message(owner_client, session, run_tasks, REQUEST)

    assert artifact_calls == [
        {"tool": "publish_note", "input": {"title": "Coffee at home", "body": ARTICLE}}
    ]


def test_an_applied_draft_cannot_be_applied_again_until_restaged(
    owner_client, owner, session, llm, run_tasks, artifact_calls
):
    grant(owner)
    llm.enqueue(
        tool_reply(stage_call(ARTICLE)),
        tool_reply(publish_call(id="toolu_first")),
        tool_reply(publish_call(id="toolu_again")),
        text_reply("It was already published."),
    )

    body = post_message(owner_client, session, run_tasks, REQUEST)

    assert body["status"] == "idle"
    assert len(artifact_calls) == 1
    again = json.loads(result_of(llm.message_requests()[3], "toolu_again")["content"])
    assert (again["error"], again["status"]) == ("artifact_not_ready", "applied")


def test_an_artifact_marked_stale_during_the_approval_is_refused_and_the_card_cleared(
    owner_client, session, llm, run_tasks, artifact_calls
):
    llm.enqueue(tool_reply(stage_call(ARTICLE)), tool_reply(publish_call()), text_reply("Stale."))
    assert post_message(owner_client, session, run_tasks, REQUEST)["status"] == "awaiting_human"
    store.set_status(session.pk, "article_draft", "stale")  # e.g. staff, in the admin

    body = decide(owner_client, session, run_tasks)

    assert artifact_calls == []
    result = json.loads(result_of(llm.message_requests()[2], "toolu_publish")["content"])
    assert (result["error"], result["status"]) == ("artifact_not_ready", "stale")
    assert body["status"] == "idle"
    assert body["pendingTool"] is None


# --- every artifact error is a tool result, and the run goes on ----------------------------------

ERRORS = [
    pytest.param(
        [],
        publish_call("no_such_draft", id="toolu_fail"),
        {"error": "artifact_missing"},
        {},
        id="missing-key",
    ),
    pytest.param(
        [tool_reply(stage_call(CHUNK_ONE, mode="append", complete=False))],
        publish_call(id="toolu_fail"),
        {"error": "artifact_not_ready", "status": "drafting"},
        {},
        id="drafting",
    ),
    pytest.param(
        [tool_reply(stage_call({"rows": [1, 2]}, kind="json"))],
        publish_call(id="toolu_fail"),
        {"error": "artifact_kind_mismatch"},
        {},
        id="wrong-kind",
    ),
    pytest.param(
        [],
        stage_call("x" * 300, id="toolu_fail"),
        {"error": "artifact_too_large"},
        {"ARTIFACT_MAX_BYTES": 200},
        id="too-large",
    ),
    pytest.param(
        [tool_reply(*(stage_call(f"Part {n}", key=f"part_{n}") for n in range(5)))],
        tool_call(
            "stage_artifact",
            {"key": "part_10", "kind": "markdown", "payload": {"content": "Part 10"}},
            id="toolu_fail",
        ),
        {"error": "artifact_limit"},
        {"ARTIFACT_MAX_ITEMS": 5},
        id="item-limit",
    ),
    pytest.param(
        [],
        stage_call("[full article]", id="toolu_fail"),
        {"error": "artifact_placeholder_content"},
        {},
        id="placeholder",
    ),
    pytest.param(
        [],
        stage_call("Anything", key="!!!", id="toolu_fail"),
        {"error": "artifact_invalid_key"},
        {},
        id="invalid-key",
    ),
]


@pytest.mark.parametrize("setup, failing, expected, limits", ERRORS)
def test_an_artifact_error_is_a_tool_result_and_the_run_continues(
    owner_client,
    owner,
    session,
    llm,
    run_tasks,
    settings,
    artifact_calls,
    setup,
    failing,
    expected,
    limits,
):
    settings.AHENTIC = {**settings.AHENTIC, **limits}
    grant(owner)  # an approval card must not hide the error: it comes first
    llm.enqueue(*setup, tool_reply(failing), text_reply("That did not work; here is why."))

    body = post_message(owner_client, session, run_tasks, REQUEST)

    assert body["status"] == "idle"
    assert body["messages"][-1]["content"] == "That did not work; here is why."
    assert artifact_calls == []
    block = result_of(llm.message_requests()[-1], "toolu_fail")
    assert block["is_error"] is True
    result = json.loads(block["content"])
    assert {k: result[k] for k in expected} == expected
    assert result["ok"] is False and result["message"]
    assert (
        tool_result_meta(owner_client, session, "toolu_fail")["meta"]["error"] == expected["error"]
    )


def test_the_item_cap_refuses_the_eleventh_key_with_the_default_limit(
    owner_client, session, llm, run_tasks
):
    llm.enqueue(
        tool_reply(*(stage_call(f"Part {n}", key=f"part_{n}") for n in range(6))),
        tool_reply(
            *(stage_call(f"Part {n}", key=f"part_{n}", id=f"toolu_{n}") for n in range(6, 11))
        ),
        text_reply("Ten parts staged; the eleventh did not fit."),
    )

    body = post_message(owner_client, session, run_tasks, REQUEST)

    assert body["status"] == "idle"
    assert len(body["artifacts"]) == 10
    results = {
        n: json.loads(result_of(llm.message_requests()[2], f"toolu_{n}")["content"])
        for n in range(6, 11)
    }
    assert [results[n]["ok"] for n in range(6, 10)] == [True] * 4
    assert results[10]["error"] == "artifact_limit"


def test_a_drafting_artifact_is_refused_with_a_hint_to_finish_it(
    owner_client, session, llm, run_tasks, artifact_calls
):
    llm.enqueue(
        tool_reply(stage_call(CHUNK_ONE, mode="append", complete=False)),
        tool_reply(publish_call()),
        text_reply("The draft is not finished yet."),
    )

    body = post_message(owner_client, session, run_tasks, REQUEST)

    assert body["status"] == "idle"
    assert body["pendingTool"] is None  # refused before any approval card
    result = json.loads(result_of(llm.message_requests()[2], "toolu_publish")["content"])
    assert "drafting" in result["message"]
    assert "complete=true" in result["hint"]
    assert artifact_of(owner_client, session)["status"] == "drafting"


def test_an_apply_call_with_neither_a_body_nor_a_key_is_invalid_input(
    owner_client, owner, session, llm, run_tasks, artifact_calls
):
    grant(owner)
    llm.enqueue(
        tool_reply(tool_call("publish_note", {"title": "Empty"}, id="toolu_empty")),
        text_reply("I forgot the body."),
    )

    post_message(owner_client, session, run_tasks, REQUEST)

    result = json.loads(result_of(llm.message_requests()[1], "toolu_empty")["content"])
    assert result["error"] == "invalid_input"
    assert artifact_calls == []


# --- auto-stage -----------------------------------------------------------------------------------


def test_an_oversized_inline_body_is_auto_staged_and_the_pending_call_holds_only_the_key(
    owner_client, session, llm, run_tasks, settings, artifact_calls
):
    settings.AHENTIC = {**settings.AHENTIC, "AUTO_STAGE_BYTES": 200}
    long_body = "\n\n".join(f"Paragraph {n}: grind, bloom, pour and wait." for n in range(20))
    llm.enqueue(
        tool_reply(
            tool_call("publish_note", {"title": "Long", "body": long_body}, id="toolu_long")
        ),
        text_reply("Published the long note."),
    )

    body = post_message(owner_client, session, run_tasks, REQUEST)

    assert body["status"] == "awaiting_human"
    pending = body["pendingTool"]
    key = pending["artifactKey"]
    assert key.startswith("auto_")
    assert pending["input"] == {"title": "Long", "from_memory": key}
    stored = Session.objects.get(pk=session.pk).pending_tool
    assert stored["input"] == {"title": "Long", "from_memory": key}
    assert "Paragraph 3" not in json.dumps(stored)
    staged = artifact_of(owner_client, session, key)
    assert (staged["kind"], staged["status"], staged["source"]) == (
        "markdown",
        "ready",
        "auto_stage",
    )

    body = decide(owner_client, session, run_tasks)

    assert body["status"] == "idle"
    assert artifact_calls == [
        {"tool": "publish_note", "input": {"title": "Long", "body": long_body}}
    ]
    assert artifact_of(owner_client, session, key)["status"] == "applied"
    assert Artifact.objects.filter(session=session).count() == 1


def test_approving_an_auto_staged_call_does_not_stage_it_again(
    owner_client, session, llm, run_tasks, settings, artifact_calls
):
    settings.AHENTIC = {**settings.AHENTIC, "AUTO_STAGE_BYTES": 200}
    long_body = "Grind, bloom, pour and wait. " * 20
    llm.enqueue(
        tool_reply(tool_call("publish_note", {"title": "Long", "body": long_body})),
        text_reply("Published."),
    )
    post_message(owner_client, session, run_tasks, REQUEST)

    decide(owner_client, session, run_tasks)

    notes = [
        m["content"]
        for m in transcript_of(owner_client, session)
        if m["kind"] == "system_message" and "staged" in m["content"]
    ]
    assert len(notes) == 1


def test_an_inline_body_under_the_threshold_is_used_as_is(
    owner_client, owner, session, llm, run_tasks, artifact_calls
):
    grant(owner)
    llm.enqueue(
        tool_reply(tool_call("publish_note", {"title": "Short", "body": "Just a line."})),
        text_reply("Published."),
    )

    body = post_message(owner_client, session, run_tasks, REQUEST)

    assert body["artifacts"] == []
    assert artifact_calls == [
        {"tool": "publish_note", "input": {"title": "Short", "body": "Just a line."}}
    ]


# --- the other artifact tools ---------------------------------------------------------------------


def test_list_and_delete_artifacts_work_on_pointers(owner_client, session, llm, run_tasks):
    llm.enqueue(
        tool_reply(stage_call(ARTICLE, title="Coffee", id="toolu_stage")),
        tool_reply(tool_call("list_artifacts", {}, id="toolu_list")),
        tool_reply(tool_call("delete_artifact", {"key": "article_draft"}, id="toolu_delete")),
        tool_reply(tool_call("delete_artifact", {"key": "article_draft"}, id="toolu_again")),
        text_reply("Cleaned up."),
    )

    body = post_message(owner_client, session, run_tasks, REQUEST)

    assert body["status"] == "idle"
    assert body["artifacts"] == []
    requests = llm.message_requests()
    listed = json.loads(result_of(requests[2], "toolu_list")["content"])
    assert listed["count"] == 1
    assert listed["artifacts"][0]["key"] == "article_draft"
    assert "payload" not in listed["artifacts"][0]
    assert places_of("Beans", requests[2]) == ["tool_use:toolu_stage"]
    assert json.loads(result_of(requests[3], "toolu_delete")["content"]) == {
        "ok": True,
        "deleted": "article_draft",
    }
    assert (
        json.loads(result_of(requests[4], "toolu_again")["content"])["error"] == "artifact_missing"
    )


def test_a_body_sent_beside_the_payload_is_still_staged(owner_client, session, llm, run_tasks):
    llm.enqueue(
        tool_reply(
            tool_call("stage_artifact", {"key": "intro", "kind": "markdown", "content": CHUNK_ONE}),
            tool_call(
                "stage_artifact",
                {"key": "layout", "kind": "blocks", "blocks": [{"name": "core/quote"}]},
            ),
        ),
        text_reply("Staged both."),
    )

    post_message(owner_client, session, run_tasks, REQUEST)

    assert artifact_of(owner_client, session, "intro")["payload"] == {"content": CHUNK_ONE}
    assert artifact_of(owner_client, session, "layout")["payload"] == {
        "blocks": [{"name": "core/quote"}]
    }


def test_ask_mode_may_stage_drafts_but_not_apply_them(
    owner_client, session, llm, run_tasks, artifact_calls
):
    llm.enqueue(
        tool_reply(stage_call(ARTICLE)),
        tool_reply(publish_call()),
        text_reply("Drafted; switch to Agent mode to publish."),
    )
    response = run_tasks(
        owner_client.post,
        session_url(session, "messages"),
        {"content": "Draft it", "mode": "ask"},
        format="json",
    )
    assert response.status_code == 202

    body = payload_of(owner_client, session)

    assert body["status"] == "idle"
    assert artifact_of(owner_client, session)["status"] == "ready"
    assert tool_result_meta(owner_client, session, "toolu_publish")["meta"]["error"] == (
        "ability_ask_readonly"
    )
    assert artifact_calls == []
