"""The agent uses remote MCP servers: a real MCP server (``tests/support/mcp_servers.py``) on a local
port, used by runs through the API; approvals and grants, timeouts and errors, a stable tool
list, credentials (bearer, OAuth with refresh, revoked), and secrets kept out of everything a
user, the model, the trace or the logs see."""

from __future__ import annotations

import logging
from datetime import timedelta
from urllib.parse import urlsplit

import httpx2
import pytest
from cryptography.fernet import Fernet
from django.core.management import call_command
from django.utils import timezone

from orchestrator_app import vault
from orchestrator_app.models import McpCredential, McpServer, McpTool
from orchestrator_app.testing.localapi import text_reply, tool_call, tool_reply
from tests.support.api import API, decide, post_message, result_of, session_url
from tests.support.mcp import KEY, llm_model, tool_result_event
from tests.support.mcp_servers import TicketServer
from tests.support.model import model_requests

LIST = "mcp__tickets__list_tickets"
CREATE = "mcp__tickets__create_ticket"
SITE_TOKEN = "site-token-0123456789-SECRET"
USER_TOKEN = "user-token-9876543210-SECRET"


def calls_of(tickets, name: str) -> list[dict]:
    return [args for tool, args in tickets.state["calls"] if tool == name]


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


def test_allow_for_this_chat_lets_the_next_call_of_that_tool_run_unasked(
    owner_client, session, llm, run_tasks, tickets
):
    llm.enqueue(
        tool_reply(tool_call(CREATE, {"title": "One"}, id="toolu_g1")),
        text_reply("One."),
        tool_reply(tool_call(CREATE, {"title": "Two"}, id="toolu_g2")),
        text_reply("Two."),
    )
    post_message(owner_client, session, run_tasks, "open one")
    payload = decide(owner_client, session, run_tasks, "allow_session")
    assert payload["status"] == "idle"
    payload = post_message(owner_client, session, run_tasks, "and another")
    assert payload["status"] == "idle"
    assert payload["pendingTool"] is None
    assert [c["title"] for c in calls_of(tickets, "create_ticket")] == ["One", "Two"]
    # The grant names the server and the tool: the read tool of the same server still asks
    # when staff set it to always_ask.
    McpTool.objects.filter(name="list_tickets").update(policy="always_ask")
    llm.enqueue(tool_reply(tool_call(LIST, {}, id="toolu_g3")), text_reply("Listed."))
    payload = post_message(owner_client, session, run_tasks, "list them")
    assert payload["status"] == "awaiting_human"
    assert payload["pendingTool"]["name"] == LIST


def test_a_read_only_tool_runs_unasked_when_the_server_allows_read_only_tools(
    owner_client, session, llm, run_tasks, tickets
):
    McpServer.objects.filter(slug="tickets").update(readonly_default_allow=True)
    llm.enqueue(tool_reply(tool_call(LIST, {"status": "open"}, id="toolu_r1")), text_reply("Two."))
    payload = post_message(owner_client, session, run_tasks, "list the tickets")
    assert payload["status"] == "idle"
    assert calls_of(tickets, "list_tickets") == [{"status": "open"}]
    assert McpTool.objects.get(name="list_tickets").policy == "always_allow"
    assert McpTool.objects.get(name="create_ticket").policy == "always_ask"
    result = tool_result_event(owner_client, session, "toolu_r1")
    assert "#1 Printer on fire (open)" in result["content"]


def test_a_tool_set_to_never_or_disabled_is_not_offered_and_a_call_to_it_is_refused(
    owner_client, session, llm, run_tasks, tickets
):
    llm.enqueue(text_reply("Hello."))
    post_message(owner_client, session, run_tasks, "hi")
    first = model_requests(llm, llm_model())[-1]["json"]
    assert {LIST, CREATE} <= {t["name"] for t in first["tools"]}
    McpTool.objects.filter(name="create_ticket").update(policy="never")
    McpTool.objects.filter(name="list_tickets").update(enabled=False)
    llm.enqueue(tool_reply(tool_call(CREATE, {"title": "x"}, id="toolu_n1")), text_reply("No."))
    payload = post_message(owner_client, session, run_tasks, "open one")
    assert payload["status"] == "idle"
    request = model_requests(llm, llm_model())[-2]["json"]
    assert not {LIST, CREATE} & {t["name"] for t in request["tools"]}
    assert tool_result_event(owner_client, session, "toolu_n1")["meta"]["error"] == (
        "ability_unavailable"
    )
    assert calls_of(tickets, "create_ticket") == []


def test_a_server_the_agent_does_not_list_is_neither_offered_nor_callable(
    owner_client, session, llm, run_tasks, tickets, settings
):
    settings.AHENTIC = {**settings.AHENTIC, "MCP_SERVERS": []}
    llm.enqueue(tool_reply(tool_call(LIST, {}, id="toolu_x1")), text_reply("No."))
    post_message(owner_client, session, run_tasks, "list")
    request = model_requests(llm, llm_model())[0]["json"]
    assert not any(t["name"].startswith("mcp__") for t in request["tools"])
    assert tool_result_event(owner_client, session, "toolu_x1")["meta"]["error"] == (
        "ability_unavailable"
    )
    assert tickets.state["calls"] == []


def test_a_call_that_times_out_is_a_tool_error_and_the_run_goes_on(
    owner_client, session, llm, run_tasks, tickets
):
    McpServer.objects.filter(slug="tickets").update(timeout_s=1, readonly_default_allow=True)
    llm.enqueue(text_reply("Ready."))
    post_message(owner_client, session, run_tasks, "hi")  # lists the tools (no hang)
    tickets.state["hang_s"] = 3
    llm.enqueue(tool_reply(tool_call(LIST, {}, id="toolu_t1")), text_reply("It timed out."))
    payload = post_message(owner_client, session, run_tasks, "list the tickets")
    assert payload["status"] == "idle"
    assert payload["lastErrorCode"] in (None, "")
    result = tool_result_event(owner_client, session, "toolu_t1")
    assert result["meta"]["ok"] is False
    assert result["meta"]["error"] == "ahentic_mcp_timeout"
    assert payload["messages"][-1]["content"] == "It timed out."


def test_server_errors_and_error_results_are_tool_errors_with_stable_codes(
    owner_client, session, llm, run_tasks, tickets
):
    McpServer.objects.filter(slug="tickets").update(readonly_default_allow=True)
    llm.enqueue(text_reply("Ready."))
    post_message(owner_client, session, run_tasks, "hi")  # lists the tools
    McpTool.objects.update(policy="always_allow")
    tickets.state["http_error"] = True
    llm.enqueue(tool_reply(tool_call(LIST, {}, id="toolu_e1")), text_reply("Down."))
    payload = post_message(owner_client, session, run_tasks, "list")
    assert payload["status"] == "idle"
    failed = tool_result_event(owner_client, session, "toolu_e1")["meta"]
    assert (failed["ok"], failed["error"]) == (False, "ahentic_mcp_unavailable")

    tickets.state["http_error"] = False
    tickets.state["garbage"] = True
    llm.enqueue(tool_reply(tool_call(LIST, {}, id="toolu_e3")), text_reply("Garbled."))
    payload = post_message(owner_client, session, run_tasks, "list again")
    assert payload["status"] == "idle"
    garbled = tool_result_event(owner_client, session, "toolu_e3")["meta"]
    assert (garbled["ok"], garbled["error"]) == (False, "ahentic_mcp_bad_result")
    assert ("garbage", {}) in tickets.state["calls"]

    tickets.state["garbage"] = False
    llm.enqueue(tool_reply(tool_call(CREATE, {"title": "fail"}, id="toolu_e2")), text_reply("No."))
    payload = post_message(owner_client, session, run_tasks, "open a failing one")
    assert payload["status"] == "idle"
    refused = tool_result_event(owner_client, session, "toolu_e2")
    assert refused["meta"]["error"] == "ahentic_mcp_tool_error"
    assert "Titles may not be 'fail'" in refused["content"]


def test_a_reordered_tool_list_leaves_the_requests_tools_unchanged(
    owner_client, session, llm, run_tasks, tickets, settings
):
    settings.AHENTIC = {**settings.AHENTIC, "MCP_TOOLS_TTL_S": 0}
    llm.enqueue(text_reply("One."))
    post_message(owner_client, session, run_tasks, "first")
    tickets.state["reverse"] = True
    llm.enqueue(text_reply("Two."))
    post_message(owner_client, session, run_tasks, "second")
    first, second = [e["json"]["tools"] for e in model_requests(llm, llm_model())]
    assert first == second
    names = [t["name"] for t in first if t["name"].startswith("mcp__")]
    assert names == [CREATE, LIST, "mcp__tickets__ticket_report", "mcp__tickets__ticket_stats"]
    # The server's listings really differ in order.
    from orchestrator_app.mcp import client as mcp_client

    reversed_names = [t["name"] for t in mcp_client.list_tools(tickets.url)]
    tickets.state["reverse"] = False
    assert [t["name"] for t in mcp_client.list_tools(tickets.url)] == reversed_names[::-1]


def site_token_server(tickets, admin_client) -> McpServer:
    """The ticket server behind a bearer token, set through the admin form."""
    tickets.state["tokens"] = {SITE_TOKEN}
    server = McpServer.objects.get(slug="tickets")
    response = admin_client.post(
        f"/admin/orchestrator_app/mcpserver/{server.pk}/change/",
        {
            "name": "Tickets",
            "slug": "tickets",
            "url": tickets.url,
            "active": "on",
            "auth": "site",
            "site_token": SITE_TOKEN,
            "timeout_s": "",
            "oauth_client_id": "",
            "tool_settings-TOTAL_FORMS": "0",
            "tool_settings-INITIAL_FORMS": "0",
        },
    )
    assert response.status_code == 302, response.content.decode()[:3000]
    return server


def test_staff_set_a_site_token_in_the_admin_and_calls_send_it(
    owner_client, session, llm, run_tasks, tickets, admin_client
):
    server = site_token_server(tickets, admin_client)
    response = admin_client.post(
        "/admin/orchestrator_app/mcpserver/",
        {"action": "refresh_tools", "_selected_action": [server.pk]},
    )
    assert response.status_code == 302
    assert McpTool.objects.filter(server=server).count() == 4
    McpTool.objects.update(policy="always_allow")
    llm.enqueue(tool_reply(tool_call(LIST, {}, id="toolu_s1")), text_reply("Listed."))
    payload = post_message(owner_client, session, run_tasks, "list")
    assert payload["status"] == "idle"
    assert tool_result_event(owner_client, session, "toolu_s1")["meta"]["ok"] is True
    assert f"Bearer {SITE_TOKEN}" in tickets.state["auth_seen"]
    credential = McpCredential.objects.get(server=server, user=None)
    assert SITE_TOKEN not in credential.access_token  # sealed
    assert vault.unseal(credential.access_token) == SITE_TOKEN
    assert credential.last_used_at is not None
    page = admin_client.get(f"/admin/orchestrator_app/mcpserver/{server.pk}/change/")
    html = page.content.decode()
    assert page.status_code == 200
    assert SITE_TOKEN not in html and credential.access_token not in html
    assert credential.hint in html and credential.hint.endswith(SITE_TOKEN[-4:])


def per_user_server(tickets) -> McpServer:
    tickets.state["tokens"] = {USER_TOKEN}
    McpServer.objects.filter(slug="tickets").update(auth="user")
    return McpServer.objects.get(slug="tickets")


def seed_tools(server: McpServer, policy: str = "always_allow") -> None:
    """Tool rows as staff would have them after a listing (a per-user server cannot be listed
    without a user's token)."""
    listed = [
        {
            "name": "create_ticket",
            "description": "Create a ticket.",
            "readOnly": False,
            "inputSchema": {
                "type": "object",
                "properties": {"title": {"type": "string"}},
                "required": ["title"],
            },
        },
        {
            "name": "list_tickets",
            "description": "List tickets.",
            "readOnly": True,
            "inputSchema": {"type": "object", "properties": {"status": {"type": "string"}}},
        },
    ]
    McpServer.objects.filter(pk=server.pk).update(tool_list=listed, tools_fetched_at=timezone.now())
    for item in listed:
        McpTool.objects.update_or_create(
            server=server, name=item["name"], defaults={"policy": policy}
        )


def test_a_user_without_a_connection_is_told_how_to_connect_and_sees_no_card(
    owner_client, session, llm, run_tasks, tickets
):
    server = per_user_server(tickets)
    seed_tools(server, policy="always_ask")
    llm.enqueue(tool_reply(tool_call(CREATE, {"title": "x"}, id="toolu_u1")), text_reply("Ok."))
    payload = post_message(owner_client, session, run_tasks, "open one")
    assert payload["status"] == "idle"
    result = tool_result_event(owner_client, session, "toolu_u1")
    assert result["meta"]["error"] == "ahentic_mcp_auth_required"
    assert "Connect Tickets in the sidebar's Connections" in result["content"]
    assert tickets.state["calls"] == []


def test_a_user_connects_with_a_personal_token_and_revokes_it(
    owner_client, other_client, session, llm, run_tasks, tickets
):
    server = per_user_server(tickets)
    seed_tools(server)
    listed = owner_client.get(f"{API}/mcp-servers").json()["servers"]
    assert listed == [
        {
            "slug": "tickets",
            "name": "Tickets",
            "auth": "user",
            "connected": False,
            "kind": None,
            "hint": "",
            "expiresAt": None,
            "connectedAt": None,
            "lastUsedAt": None,
        }
    ]
    response = owner_client.post(
        f"{API}/mcp-servers/tickets/connect", {"token": USER_TOKEN}, format="json"
    )
    assert response.status_code == 200, response.content
    assert USER_TOKEN not in response.content.decode()
    assert response.json()["server"]["connected"] is True
    assert response.json()["server"]["hint"] == "••••" + USER_TOKEN[-4:]

    llm.enqueue(tool_reply(tool_call(LIST, {}, id="toolu_p1")), text_reply("Listed."))
    post_message(owner_client, session, run_tasks, "list")
    assert tool_result_event(owner_client, session, "toolu_p1")["meta"]["ok"] is True
    assert f"Bearer {USER_TOKEN}" in tickets.state["auth_seen"]
    # Another user's list shows the server unconnected: connections are per user.
    [theirs] = other_client.get(f"{API}/mcp-servers").json()["servers"]
    assert theirs["connected"] is False

    assert owner_client.delete(f"{API}/mcp-servers/tickets/connection").status_code == 204
    llm.enqueue(tool_reply(tool_call(LIST, {}, id="toolu_p2")), text_reply("Not connected."))
    payload = post_message(owner_client, session, run_tasks, "list again")
    assert payload["status"] == "idle"
    result = tool_result_event(owner_client, session, "toolu_p2")
    assert result["meta"]["error"] == "ahentic_mcp_auth_required"
    assert "Connect Tickets in the sidebar's Connections" in result["content"]
    assert len(calls_of(tickets, "list_tickets")) == 1


def test_connections_refuse_unknown_servers_site_servers_and_users_without_permission(
    owner_client, noperm_client, anon_client, tickets
):
    assert (
        owner_client.post(
            f"{API}/mcp-servers/nope/connect", {"token": "x"}, format="json"
        ).status_code
        == 404
    )
    response = owner_client.post(
        f"{API}/mcp-servers/tickets/connect", {"token": "abc"}, format="json"
    )
    assert (response.status_code, response.json()["code"]) == (400, "ahentic_mcp_not_per_user")
    assert noperm_client.get(f"{API}/mcp-servers").status_code == 403
    assert anon_client.get(f"{API}/mcp-servers").status_code in (401, 403)
    assert owner_client.delete(f"{API}/mcp-servers/nope/connection").status_code == 404


def oauth_connect(owner_client, tickets) -> McpCredential:
    """Connect the owner with OAuth: discovery, registration, authorize, callback."""
    response = owner_client.post(f"{API}/mcp-servers/tickets/connect", {}, format="json")
    assert response.status_code == 200, response.content
    url = response.json()["authorizationUrl"]
    redirect = httpx2.get(url, follow_redirects=False)
    assert redirect.status_code == 302
    callback = urlsplit(redirect.headers["location"])
    page = owner_client.get(f"{callback.path}?{callback.query}")
    assert page.status_code == 200, page.content
    assert "Connected to Tickets" in page.content.decode()
    return McpCredential.objects.get(user__username="owner", revoked_at=None)


def test_an_oauth_connection_is_made_and_its_expired_token_refreshed_before_the_call(
    owner_client, session, llm, run_tasks, tickets
):
    server = per_user_server(tickets)
    tickets.state["tokens"] = set()  # only tokens the authorization server issues
    seed_tools(server)
    credential = oauth_connect(owner_client, tickets)
    assert credential.kind == "oauth" and credential.expires_at is not None
    first_token = vault.unseal(credential.access_token)
    assert first_token in tickets.state["tokens"]
    # The token expired: the call refreshes it first (refresh_token grant) and sends the new one.
    McpCredential.objects.filter(pk=credential.pk).update(
        expires_at=timezone.now() - timedelta(minutes=1)
    )
    tickets.state["tokens"].discard(first_token)
    llm.enqueue(tool_reply(tool_call(LIST, {}, id="toolu_o1")), text_reply("Listed."))
    post_message(owner_client, session, run_tasks, "list")
    assert tool_result_event(owner_client, session, "toolu_o1")["meta"]["ok"] is True
    assert tickets.state["refreshes"] == 1
    credential.refresh_from_db()
    assert credential.expires_at > timezone.now()
    second_token = vault.unseal(credential.access_token)
    assert second_token != first_token
    assert tickets.state["auth_seen"][-1] == f"Bearer {second_token}"
    # The same state cannot finish a second connection.
    assert owner_client.get(f"{API}/mcp-servers/oauth/callback?state=x&code=y").status_code == 400


def test_secrets_never_reach_the_payload_the_trace_the_model_the_logs_or_the_admin(
    owner_client, session, llm, run_tasks, tickets, admin_client, caplog
):
    caplog.set_level(logging.DEBUG)
    server = per_user_server(tickets)
    seed_tools(server, policy="always_ask")
    owner_client.post(f"{API}/mcp-servers/tickets/connect", {"token": USER_TOKEN}, format="json")
    llm.enqueue(
        tool_reply(tool_call(CREATE, {"title": "Secretless"}, id="toolu_z1")), text_reply("Ok.")
    )
    post_message(owner_client, session, run_tasks, "open one")
    decide(owner_client, session, run_tasks, "allow_once")
    assert calls_of(tickets, "create_ticket") == [{"title": "Secretless", "body": ""}]
    credential = McpCredential.objects.get(user__username="owner")
    seen = [
        owner_client.get(session_url(session)).content.decode(),
        owner_client.get(session_url(session, "diagnostics")).content.decode(),
        owner_client.get(session_url(session, "messages") + "?view=debug").content.decode(),
        owner_client.get(f"{API}/mcp-servers").content.decode(),
        str([entry["json"] for entry in llm.requests if entry.get("json")]),
        caplog.text,
    ]
    for url in (
        "/admin/orchestrator_app/mcpcredential/",
        f"/admin/orchestrator_app/mcpcredential/{credential.pk}/change/",
        f"/admin/orchestrator_app/mcpserver/{server.pk}/change/",
    ):
        page = admin_client.get(url)
        assert page.status_code == 200
        seen.append(page.content.decode())
    for text in seen:
        assert USER_TOKEN not in text
        assert credential.access_token not in text


def test_the_vault_rotates_to_a_new_key_and_refuses_a_missing_one(tickets, settings, owner):
    server = per_user_server(tickets)
    from orchestrator_app.mcp import credentials as mcp_credentials

    mcp_credentials.bearer_save(server=server, user=owner, token=USER_TOKEN)
    new_key = Fernet.generate_key().decode()
    settings.AHENTIC = {**settings.AHENTIC, "VAULT_KEYS": [new_key, KEY]}
    call_command("ahentic_vault_rotate", stdout=open("/dev/null", "w"))  # noqa: SIM115
    settings.AHENTIC = {**settings.AHENTIC, "VAULT_KEYS": [new_key]}
    credential = McpCredential.objects.get(user=owner)
    assert vault.unseal(credential.access_token) == USER_TOKEN
    settings.AHENTIC = {**settings.AHENTIC, "VAULT_KEYS": [KEY]}
    with pytest.raises(vault.VaultError):
        vault.unseal(credential.access_token)


# The ids of the MCP client's checks and the vault's.
MCP_CHECKS = {"E034", "E035", "E036", "W017", "W018"}


def test_the_system_checks_want_a_vault_key_for_credentials_and_known_servers(tickets, settings):
    from django.core.checks import run_checks

    def check_mcp():
        return [m for m in run_checks(databases=["default"]) if m.id[8:] in MCP_CHECKS]

    assert [m.id for m in check_mcp()] == []
    McpServer.objects.filter(slug="tickets").update(auth="user")
    settings.AHENTIC = {**settings.AHENTIC, "VAULT_KEYS": [], "MCP_SERVERS": ["tickets", "gone"]}
    ids = sorted(m.id for m in check_mcp())
    assert ids == ["ahentic.E034", "ahentic.W017"]
    settings.AHENTIC = {**settings.AHENTIC, "VAULT_KEYS": ["not a key"], "MCP_SERVERS": []}
    assert [m.id for m in check_mcp()] == ["ahentic.E035"]
    settings.AHENTIC = {**settings.AHENTIC, "VAULT_KEYS": [KEY], "MCP_ALLOW_INSECURE_LOCAL": False}
    assert [m.id for m in check_mcp()] == ["ahentic.W018"]
    settings.SECRET_KEY = KEY
    settings.AHENTIC = {**settings.AHENTIC, "MCP_ALLOW_INSECURE_LOCAL": True}
    assert [m.id for m in check_mcp()] == ["ahentic.E036"]


def test_long_tool_names_are_shortened_stably_to_fit_the_api_pattern():
    from orchestrator_app.mcp.tools import tool_name
    from orchestrator_app.tools import NAME_RE

    long_a = "a" * 70 + ".one"
    long_b = "a" * 70 + ".two"
    name_a = tool_name("tickets", long_a)
    assert NAME_RE.match(name_a) and name_a.startswith("mcp__tickets__aaaa")
    assert name_a == tool_name("tickets", long_a)
    assert name_a != tool_name("tickets", long_b)
    assert tool_name("tickets", "list_tickets") == LIST


@pytest.fixture(scope="module")
def demo_tickets_server():
    from orchestrator_app.testing.demo_mcp import build_server

    server = TicketServer(build_server().streamable_http_app())
    yield server
    server.stop()


def test_the_offline_demo_lists_tickets_unasked_and_creates_one_after_approval(
    owner_client, session, llm, run_tasks, demo_tickets_server, settings
):
    from orchestrator_app.testing.offline import demo_model

    settings.AHENTIC = {
        **settings.AHENTIC,
        "MCP_SERVERS": ["tickets"],
        "MCP_ALLOW_INSECURE_LOCAL": True,
    }
    McpServer.objects.create(
        slug="tickets",
        name="Demo tickets",
        url=demo_tickets_server.url,
        readonly_default_allow=True,
    )
    llm.responder = demo_model
    payload = post_message(owner_client, session, run_tasks, "List the tickets")
    assert payload["status"] == "idle"
    assert "#1 The printer is on fire (open)" in payload["messages"][-1]["content"]

    payload = post_message(owner_client, session, run_tasks, "Create a ticket about the lift")
    assert payload["status"] == "awaiting_human"
    assert payload["pendingTool"]["summary"] == "Demo tickets · create_ticket"
    assert payload["pendingTool"]["input"] == {"title": "the lift"}
    payload = decide(owner_client, session, run_tasks, "allow_once")
    assert payload["status"] == "idle"
    assert "Created ticket #4: the lift" in payload["messages"][-1]["content"]


def test_images_links_resources_and_structured_content_become_the_tool_result(
    owner_client, session, llm, run_tasks, tickets
):
    McpServer.objects.filter(slug="tickets").update(readonly_default_allow=True)
    llm.enqueue(
        tool_reply(
            tool_call("mcp__tickets__ticket_report", {}, id="toolu_m1"),
            tool_call("mcp__tickets__ticket_stats", {}, id="toolu_m2"),
        ),
        text_reply("Reported."),
    )
    payload = post_message(owner_client, session, run_tasks, "report")
    assert payload["status"] == "idle"
    request = model_requests(llm, llm_model())[-1]["json"]
    report = result_of(request, "toolu_m1")
    texts = " ".join(b["text"] for b in report["content"] if b["type"] == "text")
    assert "Two open tickets." in texts
    assert "Resource link: Ticket 1 <https://tickets.example/1>" in texts
    assert "Resource <file:///notes.txt>:\\nCall the plumber." in texts
    [image] = [b for b in report["content"] if b["type"] == "image"]
    assert image["source"]["media_type"] == "image/png"
    stats = result_of(request, "toolu_m2")
    stats_text = (
        stats["content"] if isinstance(stats["content"], str) else stats["content"][0]["text"]
    )
    assert '{\\"closed\\": 1, \\"open\\": 2}' in stats_text


def test_an_agent_version_may_list_only_registered_mcp_servers(tickets):
    from django.core.exceptions import ValidationError

    from sessions_app import agents
    from sessions_app.models import Agent

    agent = Agent.objects.create(slug="ops", name="Ops")
    version = agents.version_save(agent, config={"MCP_SERVERS": ["tickets"]})
    assert version.config == {"MCP_SERVERS": ["tickets"]}
    with pytest.raises(ValidationError, match="no registered MCP server named gone"):
        agents.version_save(agent, config={"MCP_SERVERS": ["tickets", "gone"]})
    with pytest.raises(ValidationError, match="a list of MCP server slugs"):
        agents.version_save(agent, config={"MCP_SERVERS": "tickets"})


def test_the_mcp_admin_pages_render_and_staff_revoke_a_credential(tickets, admin_client, owner):
    from orchestrator_app.mcp import credentials as mcp_credentials

    server = McpServer.objects.get(slug="tickets")
    McpServer.objects.filter(pk=server.pk).update(auth="user")
    credential = mcp_credentials.bearer_save(server=server, user=owner, token=USER_TOKEN)
    for url in (
        "/admin/orchestrator_app/mcpserver/",
        "/admin/orchestrator_app/mcpserver/add/",
        "/admin/orchestrator_app/mcpcredential/",
    ):
        page = admin_client.get(url)
        assert page.status_code == 200, url
        assert USER_TOKEN not in page.content.decode()
    response = admin_client.post(
        "/admin/orchestrator_app/mcpcredential/",
        {"action": "revoke_credentials", "_selected_action": [credential.pk]},
    )
    assert response.status_code == 302
    credential.refresh_from_db()
    assert credential.revoked_at is not None


def test_the_admin_refuses_an_http_url_unless_local_development_allows_it(
    tickets, admin_client, settings
):
    form = {
        "name": "Remote",
        "slug": "remote",
        "url": "http://tickets.example/mcp",
        "active": "on",
        "auth": "none",
        "tool_settings-TOTAL_FORMS": "0",
        "tool_settings-INITIAL_FORMS": "0",
    }
    page = admin_client.post("/admin/orchestrator_app/mcpserver/add/", form)
    assert page.status_code == 200
    assert "http:// is allowed only for localhost" in page.content.decode()
    settings.AHENTIC = {**settings.AHENTIC, "MCP_ALLOW_INSECURE_LOCAL": False}
    form["url"] = "http://127.0.0.1:9/mcp"
    page = admin_client.post("/admin/orchestrator_app/mcpserver/add/", form)
    assert "must use https://" in page.content.decode()
    form["url"] = "https://tickets.example/mcp"
    assert admin_client.post("/admin/orchestrator_app/mcpserver/add/", form).status_code == 302
    assert McpServer.objects.filter(slug="remote").exists()


def test_always_allow_grants_that_tool_of_that_server_in_every_chat(
    owner_client, owner, llm, run_tasks, tickets
):
    from orchestrator_app.models import ToolGrant
    from tests.support.factories import SessionFactory

    first, second = SessionFactory(owner=owner), SessionFactory(owner=owner)
    llm.enqueue(
        tool_reply(tool_call(CREATE, {"title": "One"}, id="toolu_a1")),
        text_reply("One."),
        tool_reply(tool_call(CREATE, {"title": "Two"}, id="toolu_a2")),
        text_reply("Two."),
    )
    post_message(owner_client, first, run_tasks, "open one")
    decide(owner_client, first, run_tasks, "always_allow")
    assert list(ToolGrant.objects.values_list("tool_name", flat=True)) == [CREATE]
    payload = post_message(owner_client, second, run_tasks, "open another")
    assert payload["status"] == "idle"
    assert [c["title"] for c in calls_of(tickets, "create_ticket")] == ["One", "Two"]


def test_each_mcp_call_is_a_span_and_counted_by_server_and_outcome(
    owner_client, session, llm, run_tasks, tickets, otel
):
    McpServer.objects.filter(slug="tickets").update(timeout_s=1, readonly_default_allow=True)
    llm.enqueue(text_reply("Ready."))
    post_message(owner_client, session, run_tasks, "hi")  # lists the tools
    llm.enqueue(tool_reply(tool_call(LIST, {}, id="toolu_ok")), text_reply("Two tickets."))
    post_message(owner_client, session, run_tasks, "list the tickets")
    tickets.state["hang_s"] = 3
    llm.enqueue(tool_reply(tool_call(LIST, {}, id="toolu_slow")), text_reply("It timed out."))
    post_message(owner_client, session, run_tasks, "list them again")

    listed = otel.one("mcp tickets tools/list")
    assert listed.attributes["ahentic.mcp.server"] == "tickets"
    ok, slow = sorted(otel.spans("mcp tickets tools/call"), key=lambda s: s.start_time)
    [tool_span] = [s for s in otel.spans("execute_tool ") if s.context.span_id == ok.parent.span_id]
    assert tool_span.attributes["gen_ai.tool.call.id"] == "toolu_ok"
    assert ok.attributes["gen_ai.tool.name"] == "list_tickets"
    assert ok.status.status_code.name == "UNSET"
    assert (slow.status.status_code.name, slow.attributes["error.type"]) == (
        "ERROR",
        "ahentic_mcp_timeout",
    )
    counted = {
        (p.attributes["mcp.method.name"], p.attributes["ahentic.mcp.outcome"]): p.value
        for p in otel.points("ahentic.mcp.calls")
        if p.attributes["ahentic.mcp.server"] == "tickets"
    }
    assert counted == {("tools/list", "ok"): 1, ("tools/call", "ok"): 1, ("tools/call", "error"): 1}
