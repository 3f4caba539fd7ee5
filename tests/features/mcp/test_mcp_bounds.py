"""MCP tools at their extremes, against the real test MCP server: a result of 5,000,000
characters is stored as the model's cut, with a note and the full size; a tool whose name is
300 characters long is listed, offered and called without a column too short for it (run on
PostgreSQL too, which enforces the lengths)."""

from __future__ import annotations

import json

from orchestrator_app.loop.prompt import RESULT_CHARS
from orchestrator_app.mcp.tools import tool_name
from orchestrator_app.models import McpServer, McpTool
from orchestrator_app.testing.localapi import text_reply, tool_call, tool_reply
from sessions_app.models import Event
from tests.support.api import post_message, result_of, session_url
from tests.support.mcp import llm_model, tool_result_event
from tests.support.mcp_servers import LONG_NAME
from tests.support.model import model_requests

HUGE = "mcp__tickets__huge_result"


def test_a_huge_result_is_stored_as_the_models_cut_with_a_note_and_its_size(
    owner_client,
    session,
    llm,
    run_tasks,
    tickets,  # noqa: F811
):
    tickets.state["extras"] = True
    McpServer.objects.filter(slug="tickets").update(readonly_default_allow=True)
    llm.enqueue(tool_reply(tool_call(HUGE, {}, id="toolu_h1")), text_reply("Big."))

    payload = post_message(owner_client, session, run_tasks, "the big one")

    assert payload["status"] == "idle"
    assert ("huge_result", {"chars": 5_000_000}) in tickets.state["calls"]
    stored = Event.objects.get(session=session, kind="tool_response", tool_use_id="toolu_h1")
    assert len(stored.content) <= RESULT_CHARS
    result = json.loads(stored.content)
    assert result["fullChars"] == 5_000_000
    assert result["text"].startswith("0123456789" * 100)
    assert "5,000,000 characters" in result["text"]  # the note says it was cut, and how much
    # The model saw what is stored, no more.
    seen = result_of(model_requests(llm, llm_model())[-1]["json"], "toolu_h1")
    seen_text = seen["content"] if isinstance(seen["content"], str) else seen["content"][0]["text"]
    assert seen_text == stored.content
    # The debug view stays small.
    response = owner_client.get(session_url(session, "messages") + "?view=debug&limit=100")
    assert response.status_code == 200
    assert len(response.content) < 5 * RESULT_CHARS
    assert tool_result_event(owner_client, session, "toolu_h1")["meta"]["ok"] is True


def test_a_small_result_is_stored_whole_without_a_note(
    owner_client,
    session,
    llm,
    run_tasks,
    tickets,  # noqa: F811
):
    tickets.state["extras"] = True
    McpServer.objects.filter(slug="tickets").update(readonly_default_allow=True)
    llm.enqueue(tool_reply(tool_call(HUGE, {"chars": 500}, id="toolu_h2")), text_reply("Small."))

    post_message(owner_client, session, run_tasks, "a small one")

    stored = Event.objects.get(session=session, kind="tool_response", tool_use_id="toolu_h2")
    assert json.loads(stored.content) == {"text": ("0123456789" * 50)}


def test_a_300_character_tool_name_is_refreshed_offered_and_called(
    owner_client,
    session,
    llm,
    run_tasks,
    tickets,  # noqa: F811
    admin_client,
):
    tickets.state["extras"] = True
    server = McpServer.objects.get(slug="tickets")
    McpServer.objects.filter(pk=server.pk).update(readonly_default_allow=True)

    response = admin_client.post(
        "/admin/orchestrator_app/mcpserver/",
        {"action": "refresh_tools", "_selected_action": [server.pk]},
        follow=True,
    )

    assert response.status_code == 200
    assert "6 tools listed" in response.content.decode()
    limit = McpTool._meta.get_field("name").max_length
    names = list(McpTool.objects.filter(server=server).values_list("name", flat=True))
    assert len(names) == 6 and all(len(name) <= limit for name in names)
    [long_row] = [name for name in names if name.startswith("find_tickets_by")]
    assert long_row != LONG_NAME and long_row.startswith(LONG_NAME[:64])
    # The admin's inline shows the row and staff's policy on it applies.
    page = admin_client.get(f"/admin/orchestrator_app/mcpserver/{server.pk}/change/")
    assert page.status_code == 200 and long_row in page.content.decode()

    offered = tool_name("tickets", LONG_NAME)
    assert len(offered) <= 64
    llm.enqueue(tool_reply(tool_call(offered, {}, id="toolu_l1")), text_reply("Found."))
    payload = post_message(owner_client, session, run_tasks, "find by the long name")
    assert payload["status"] == "idle"
    assert (LONG_NAME, {"status": "open"}) in tickets.state["calls"]
    result = tool_result_event(owner_client, session, "toolu_l1")
    assert result["meta"]["ok"] is True
    assert "found by the long name" in result["content"]

    McpTool.objects.filter(server=server, name=long_row).update(policy="always_ask")
    llm.enqueue(tool_reply(tool_call(offered, {}, id="toolu_l2")), text_reply("Asked."))
    payload = post_message(owner_client, session, run_tasks, "again")
    assert payload["status"] == "awaiting_human"
    assert payload["pendingTool"]["name"] == offered
