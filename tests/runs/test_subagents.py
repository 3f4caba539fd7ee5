"""Sub-agents: spawn_subagent starts a child session whose report reaches the parent."""

import json
from unittest import mock

from orchestrator_app import tasks
from orchestrator_app.testing.localapi import text_reply, tool_call, tool_reply
from sessions_app.models import Event, Session
from tests.support.api import API, payload_of, post_message, transcript_of
from tests.support.runs import SPAWN, DeferChildSteps

REQUEST = "Research tea for me"


def child_of(session) -> Session:
    return Session.objects.get(parent=session)


def tool_result_blocks(request: dict) -> list[dict]:
    return [
        block
        for message in request["messages"]
        if message["role"] == "user"
        for block in message["content"]
        if block["type"] == "tool_result"
    ]


def test_a_sub_agent_runs_its_task_and_reports_back_as_a_synthetic_tool_pair(
    owner_client, session, llm_strict, run_tasks
):
    llm_strict.enqueue(
        tool_reply(tool_call("spawn_subagent", SPAWN)),  # parent, step 1
        text_reply("Tea: green, black, oolong."),  # the child's whole run
        text_reply("My researcher found three kinds of tea."),  # parent, step 2
    )

    post_message(owner_client, session, run_tasks, REQUEST)

    child = child_of(session)
    assert (child.title, child.prompt, child.granted_tools) == (
        "researcher",
        SPAWN["task"],
        ["echo"],
    )
    assert child.status == "idle" and child.owner_id == session.owner_id
    assert child.fork_event_id is not None
    parent_request, child_request, parent_followup = llm_strict.message_requests()
    # The child sees its task (and its parent's conversation before the fork)...
    child_texts = json.dumps(child_request["messages"])
    assert SPAWN["task"] in child_texts and "Research tea for me" in child_texts
    assert [t["name"] for t in child_request["tools"]] == ["echo"]
    # ...and the parent reads the report as the answer to a subagent_message call.
    uses = [
        block
        for message in parent_followup["messages"]
        if message["role"] == "assistant"
        for block in message["content"]
        if block["type"] == "tool_use"
    ]
    assert [u["name"] for u in uses] == ["spawn_subagent", "subagent_message"]
    assert uses[-1]["input"] == {"name": "researcher"}
    report = tool_result_blocks(parent_followup)[-1]
    assert report["tool_use_id"] == uses[-1]["id"]
    assert report["content"] == "Tea: green, black, oolong."
    body = payload_of(owner_client, session)
    assert body["status"] == "idle"
    assert body["children"] == [
        {
            "id": str(child.pk),
            "title": "researcher",
            "status": "idle",
            "tokensUsed": child.tokens_used,
        }
    ]
    assert body["messages"][-1]["content"] == "My researcher found three kinds of tea."
    listed = owner_client.get(f"{API}/sessions").json()["sessions"]
    assert [s["id"] for s in listed] == [str(session.pk)]  # children are not top-level sessions


def test_a_sub_agent_cannot_start_sub_agents_of_its_own(
    owner_client, session, llm_strict, run_tasks
):
    llm_strict.enqueue(
        tool_reply(tool_call("spawn_subagent", {"name": "helper", "task": "Help."})),
        tool_reply(tool_call("spawn_subagent", {"name": "grandchild", "task": "Deeper."})),
        text_reply("I could not delegate further."),
        text_reply("Done."),
    )

    post_message(owner_client, session, run_tasks, REQUEST)

    child = child_of(session)
    assert not Session.objects.filter(parent=child).exists()
    [refusal] = Event.objects.filter(session=child, kind=Event.Kind.TOOL_RESPONSE)
    assert json.loads(refusal.content)["error"] == "subagent_depth"


def test_an_unknown_tool_for_a_sub_agent_is_refused_and_nothing_is_created(
    owner_client, session, llm_strict, run_tasks
):
    llm_strict.enqueue(
        tool_reply(tool_call("spawn_subagent", {**SPAWN, "tools": ["echo", "teleport"]})),
        text_reply("No such tool."),
    )

    post_message(owner_client, session, run_tasks, REQUEST)

    assert not Session.objects.filter(parent=session).exists()
    result = [m for m in transcript_of(owner_client, session) if m["kind"] == "tool_response"][0]
    assert result["meta"]["error"] == "unknown_tool"
    assert "teleport" in result["content"]


def test_an_idle_parent_wakes_up_when_its_sub_agent_reports_later(
    owner_client, session, llm_strict, run_tasks
):
    defer = DeferChildSteps(session)
    llm_strict.enqueue(
        tool_reply(tool_call("spawn_subagent", SPAWN)),
        text_reply("I asked a researcher; I will tell you when it reports."),
    )
    with mock.patch("orchestrator_app.control.queue.async_task", side_effect=defer):
        post_message(owner_client, session, run_tasks, REQUEST)
        assert payload_of(owner_client, session)["status"] == "idle"
        assert child_of(session).status == "running"

        llm_strict.enqueue(text_reply("Tea: green."), text_reply("The researcher says: green tea."))
        [(child_id, run_seq)] = defer.held
        run_tasks(tasks.run_step, child_id, run_seq)

    body = payload_of(owner_client, session)
    assert body["status"] == "idle"
    assert body["runSeq"] == 2  # the report started a new run of the parent
    assert body["messages"][-1]["content"] == "The researcher says: green tea."
    assert body["pendingMessages"] == []


def test_cancelling_the_parent_cancels_its_running_sub_agent(
    owner_client, session, llm_strict, run_tasks
):
    defer = DeferChildSteps(session)
    llm_strict.enqueue(tool_reply(tool_call("spawn_subagent", SPAWN)), text_reply("Waiting."))
    with mock.patch("orchestrator_app.control.queue.async_task", side_effect=defer):
        post_message(owner_client, session, run_tasks, REQUEST)
    # The parent is idle, its child still runs; a new parent run is busy with something else.
    child = child_of(session)
    Session.objects.filter(pk=session.pk).update(status="running")

    response = owner_client.post(f"{API}/sessions/{session.pk}/cancel")

    assert response.json()["status"] == "cancelled"
    child.refresh_from_db()
    assert child.status == "cancelled"


def test_a_depth_of_zero_turns_sub_agents_off(
    owner_client, session, llm_strict, run_tasks, settings
):
    settings.AHENTIC = {**settings.AHENTIC, "SUBAGENT_MAX_DEPTH": 0}
    llm_strict.enqueue(tool_reply(tool_call("spawn_subagent", SPAWN)), text_reply("Alone, then."))

    post_message(owner_client, session, run_tasks, REQUEST)

    assert not Session.objects.filter(parent=session).exists()
    result = [m for m in transcript_of(owner_client, session) if m["kind"] == "tool_response"][0]
    assert result["meta"]["error"] == "subagent_depth"


def test_a_failed_sub_agent_reports_its_error_to_the_parent(
    owner_client, session, llm_strict, run_tasks
):
    from orchestrator_app.testing.localapi import error_reply

    llm_strict.enqueue(
        tool_reply(tool_call("spawn_subagent", SPAWN)),
        error_reply(400, message="Child request refused."),
        text_reply("The researcher failed; I will do it myself."),
    )

    post_message(owner_client, session, run_tasks, REQUEST)

    child = child_of(session)
    assert child.status == "error"
    parent_followup = llm_strict.message_requests()[-1]
    report = tool_result_blocks(parent_followup)[-1]
    assert report["content"].startswith("Sub-agent stopped with an error (ahentic_llm_error)")


def test_a_child_pausing_for_approval_changes_the_parents_etag(owner_client, session, llm):
    from orchestrator_app.control import runs
    from sessions_app import services as session_services

    child = session_services.session_create(owner=session.owner, title="helper", parent=session)
    with mock.patch("orchestrator_app.control.queue.async_task"):  # the step runs below, by hand
        runs.message_post(session=child, content="Write the note")
    child.refresh_from_db()
    before = owner_client.get(f"{API}/sessions/{session.pk}")
    assert before.json()["children"][0]["status"] == "running"
    llm.enqueue(tool_reply(tool_call("notes_create", {"title": "From the child"})))

    tasks.run_step(str(child.pk), child.run_seq)

    after = owner_client.get(f"{API}/sessions/{session.pk}", HTTP_IF_NONE_MATCH=before["ETag"])
    assert after.status_code == 200
    assert after["ETag"] != before["ETag"]
    assert after.json()["children"][0]["status"] == "awaiting_human"
