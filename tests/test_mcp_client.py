"""The agent uses remote MCP servers: a real MCP server (``tests/mcp_servers.py``) on a local
port, used by runs through the API; approvals and grants, timeouts and errors, a stable tool
list, credentials (bearer, OAuth with refresh, revoked), and secrets kept out of everything a
user, the model, the trace or the logs see."""

from __future__ import annotations

import logging
from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

import httpx2
import pytest
from cryptography.fernet import Fernet
from django.core.management import call_command
from django.utils import timezone

from orchestrator_app import vault
from orchestrator_app.models import McpCredential, McpServer, McpTool
from orchestrator_app.testing.localapi import text_reply, tool_call, tool_reply

from .conftest import API, decide, model_requests, payload_of, post_message, session_url
from .mcp_servers import TicketServer

LIST = "mcp__tickets__list_tickets"
CREATE = "mcp__tickets__create_ticket"
SITE_TOKEN = "site-token-0123456789-SECRET"
USER_TOKEN = "user-token-9876543210-SECRET"
KEY = Fernet.generate_key().decode()


@pytest.fixture(scope="module")
def tickets_server():
    server = TicketServer()
    yield server
    server.stop()


@pytest.fixture
def tickets(tickets_server, llm, settings, db):
    """The ticket server, reset, registered as ``tickets`` (no auth), used by the site's
    default agent; tool settings rows from a first listing."""
    tickets_server.reset()
    settings.AHENTIC = {
        **settings.AHENTIC,
        "MCP_SERVERS": ["tickets"],
        "MCP_ALLOW_INSECURE_LOCAL": True,
        "VAULT_KEYS": [KEY],
    }
    server = McpServer.objects.create(slug="tickets", name="Tickets", url=tickets_server.url)
    tickets_server.server_row = server
    return tickets_server


def calls_of(tickets, name: str) -> list[dict]:
    return [args for tool, args in tickets.state["calls"] if tool == name]


def tool_result_event(client, session, call_id: str) -> dict:
    response = client.get(session_url(session, "messages") + "?view=debug&limit=100")
    [found] = [
        m
        for m in response.json()["messages"]
        if m["kind"] == "tool_response" and m["meta"]["callId"] == call_id
    ]
    return found


def test_a_write_tool_asks_first_names_the_server_and_runs_once_when_allowed(
    owner_client, session, llm, run_tasks, tickets
):
    llm.enqueue(
        tool_reply(tool_call(CREATE, {"title": "Printer", "body": "on fire"}, id="toolu_c1")),
        text_reply("Created."),
    )
    payload = post_message(owner_client, session, run_tasks, "open a ticket")
    assert payload["status"] == "awaiting_human"
    card = payload["pendingTool"]
    assert card["name"] == CREATE
    assert card["summary"] == "Tickets · create_ticket"
    assert card["changes"] == [
        {"field": "body", "before": None, "after": "on fire"},
        {"field": "title", "before": None, "after": "Printer"},
    ]
    assert calls_of(tickets, "create_ticket") == []

    payload = decide(owner_client, session, run_tasks, "allow_once")
    assert payload["status"] == "idle"
    assert calls_of(tickets, "create_ticket") == [{"title": "Printer", "body": "on fire"}]
    result = tool_result_event(owner_client, session, "toolu_c1")
    assert result["meta"]["ok"] is True
    assert "Created ticket #3: Printer" in result["content"]
