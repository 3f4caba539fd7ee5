"""The walk of one tool step through the apps' modules stays short (issue 38's targets, as
``bench/step_walk.py`` counts them): the modules of the three apps it enters (rooms) and the
distinct module-to-module calls between them (climbs), and no feature the site does not use
is entered: no webhook endpoint, no admin model for the admin tools, no MCP server, no memory,
no attached file."""

import pytest

from orchestrator_app.testing.localapi import text_reply, tool_call, tool_reply
from sessions_app import services as session_services
from tests.support.api import payload_of
from tests.support.runs import post_unqueued, step_next
from tests.support.walk import walk


@pytest.mark.django_db(transaction=True)
def test_a_tool_step_within_a_run_enters_at_most_25_modules_by_55_climbs(
    owner_client, session, llm, tool_calls
):
    session_services.events_append(
        session_id=session.pk,
        items=[
            {"kind": kind, "content": f"Turn {i}: the topic of the day."}
            for i in range(20)
            for kind in ("user_message", "agent_message")
        ],
    )
    llm.enqueue(
        tool_reply(tool_call("echo", {"text": "one"})),
        tool_reply(tool_call("echo", {"text": "two"})),
        text_reply("Done."),
    )
    post_unqueued(owner_client, session, "Echo twice")
    walks = [step_next(session, walk) for _ in range(3)]
    assert payload_of(owner_client, session)["status"] == "idle"

    rooms, climbs = walks[1]  # the run's second step: a tool call, then the hand-over
    assert "orchestrator_app.tools" in rooms and "orchestrator_app.loop.pipeline" in rooms
    assert len(rooms) <= 25, sorted(rooms)
    assert len(climbs) <= 55, sorted(climbs)
    unused = {
        "orchestrator_app.webhooks.delivery",  # no endpoint: answered by the receiver
        "orchestrator_app.tools.admin_tools.bridge",  # ADMIN_TOOLS enables no model
        "orchestrator_app.mcp.tools",  # the agent lists no MCP server
        "orchestrator_app.tools.memory",  # the agent keeps no memory
        "orchestrator_app.loop.files",  # no attachment in the window
        "sessions_app.errors",  # every tool offered: no refusal built
    }
    assert not unused & set(rooms), sorted(unused & set(rooms))
