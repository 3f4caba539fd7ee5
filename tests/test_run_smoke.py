from orchestrator_app.localapi import text_reply, tool_call, tool_reply

from . import tools_for_tests
from .conftest import API


def test_a_message_runs_a_tool_and_replies(owner_client, session, llm, run_tasks):
    tools_for_tests.CALLS.clear()
    llm.enqueue(tool_reply(tool_call("echo", {"text": "hi"})), text_reply("All done."))
    r = run_tasks(
        owner_client.post,
        f"{API}/sessions/{session.pk}/messages",
        {"content": "Say hi"},
        format="json",
    )
    assert r.status_code == 202, r.content
    body = owner_client.get(f"{API}/sessions/{session.pk}?view=debug").json()
    print(body["trace"])
    assert body["status"] == "idle", body
    kinds = [
        m["kind"]
        for m in owner_client.get(f"{API}/sessions/{session.pk}/messages?view=debug").json()[
            "messages"
        ]
    ]
    assert kinds == ["user_message", "tool_call", "tool_response", "agent_message"]
    assert tools_for_tests.CALLS == [{"tool": "echo", "input": {"text": "hi"}}]
    assert len(llm.message_requests()) == 2
