"""The site as an MCP server (``POST ahentic/v1/mcp``), through the ``mcp`` client SDK against a
live server of the test site, and its token routes (``mcp-tokens``).

The live server runs django-q2 in sync mode: a call's step runs when its request commits, in
the server's thread, so the endpoint finds the answer at once.
"""

import asyncio
import hashlib
import json
from datetime import timedelta

import httpx2
import pytest
from django.utils import timezone
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from orchestrator_app.mcp import tokens as mcp_tokens
from orchestrator_app.models import McpCall, McpToken, ToolGrant
from sessions_app.models import Event, Session
from tests.support.api import API
from tests.support.mcp import mcp_client_session, text_of

pytestmark = pytest.mark.django_db(transaction=True)


def mcp_url(live_server) -> str:
    return f"{live_server.url}{API}/mcp"


def token_for(user, **kwargs) -> str:
    return mcp_tokens.token_create(user=user, name=kwargs.pop("name", "laptop"), **kwargs).secret


def with_client(live_server, secret, work):
    """Run ``work(client)`` with an initialized MCP ``ClientSession`` (the SDK is async)."""
    return asyncio.run(mcp_client_session(mcp_url(live_server), secret, work))


def rpc(live_server, body, secret=None, **headers):
    """One raw POST (for what the SDK never sends)."""
    if secret:
        headers["Authorization"] = f"Bearer {secret}"
    content = body if isinstance(body, bytes | str) else json.dumps(body)
    headers.setdefault("Content-Type", "application/json")
    return httpx2.post(mcp_url(live_server), content=content, headers=headers, timeout=30)


# --- tools through the SDK ---------------------------------------------------------------------


def test_the_sdk_lists_the_users_tools_and_calls_a_read_tool(live_server, owner, tool_calls):
    secret = token_for(owner)

    async def work(client):
        listed = await client.list_tools()
        result = await client.call_tool("echo", {"text": "hello"})
        return listed, result

    listed, result = with_client(live_server, secret, work)
    tools = {tool.name: tool for tool in listed.tools}
    assert tools["echo"].annotations.read_only_hint is True
    assert tools["notes_create"].annotations.read_only_hint is False
    assert tools["echo"].input_schema["required"] == ["text"]
    # Chat-state built-ins, browser tools and tools the user may not use are not offered.
    assert not {"set_goal", "ask_user", "stage_artifact", "page_read", "staff_report"} & set(tools)
    assert result.is_error is False
    assert json.loads(text_of(result)) == {"ok": True, "echo": "hello"}
    assert tool_calls == [{"tool": "echo", "input": {"text": "hello"}}]
    # Recorded in a chat of the user, as a tool call answered in a run that ended idle.
    session = Session.objects.get(owner=owner)
    assert session.title.startswith("MCP: laptop ")
    assert session.status == Session.Status.IDLE
    kinds = list(session.events.order_by("seq").values_list("kind", flat=True))
    assert kinds == [Event.Kind.USER_MESSAGE, Event.Kind.TOOL_CALL, Event.Kind.TOOL_RESPONSE]
    assert session.trace_events.filter(type="tool_executed").exists()
    # The token itself is nowhere in what was recorded.
    recorded = json.dumps(
        [
            list(session.events.values()),
            list(session.trace_events.values()),
            list(Session.objects.filter(pk=session.pk).values()),
            list(McpCall.objects.values()),
            list(McpToken.objects.values()),
        ],
        default=str,
    )
    assert secret not in recorded and secret[len("ahmcp_") :] not in recorded


def test_a_tool_refusal_is_a_tool_error_and_an_unknown_tool_a_protocol_error(
    live_server, owner, tool_calls
):
    secret = token_for(owner)

    async def work(client):
        invalid = await client.call_tool("echo", {"text": 3})
        forbidden = None
        try:
            await client.call_tool("staff_report", {})
        except MCPError as exc:
            forbidden = exc.error.code
        return invalid, forbidden

    invalid, forbidden = with_client(live_server, secret, work)
    assert invalid.is_error is True
    assert json.loads(text_of(invalid))["error"] == "invalid_input"
    assert forbidden == -32602  # not among the user's tools
    assert tool_calls == []


def test_a_mutating_call_waits_for_approval_and_runs_once_after_it(
    live_server, owner, owner_client, tool_calls
):
    secret = token_for(owner)

    async def first(client):
        return await client.call_tool("notes_create", {"title": "Plan"})

    waiting = with_client(live_server, secret, first)
    assert waiting.is_error is False
    assert waiting.meta["ahentic/status"] == "awaiting_approval"
    assert "Waiting for approval" in text_of(waiting)
    assert tool_calls == []
    session = Session.objects.get(owner=owner)
    assert session.status == Session.Status.AWAITING_HUMAN
    assert waiting.meta["ahentic/chat"]["id"] == str(session.pk)
    # The text links straight to the chat: the sidebar opens ?ahentic_session=<id>.
    link = f"{live_server.url}/?ahentic_session={session.pk}"
    assert waiting.meta["ahentic/chat"]["link"] == link
    assert f"Waiting for approval at {link} " in text_of(waiting)

    # Asking again before a decision neither runs it nor makes a second call.
    again = with_client(live_server, secret, first)
    assert again.meta["ahentic/status"] == "awaiting_approval"
    assert McpCall.objects.count() == 1

    response = owner_client.post(
        f"{API}/sessions/{session.pk}/approvals", {"decision": "allow_once"}, format="json"
    )
    assert response.status_code == 200, response.content
    assert tool_calls == [{"tool": "notes_create", "input": {"title": "Plan"}}]
    session.refresh_from_db()
    assert session.status == Session.Status.IDLE  # the run ended with the answer, no model call

    done = with_client(live_server, secret, first)
    assert done.is_error is False
    assert json.loads(text_of(done))["ok"] is True
    assert len(tool_calls) == 1  # the stored result, not a second run
    # Delivered: the same call once more is a new call (and waits again).
    fresh = with_client(live_server, secret, first)
    assert fresh.meta["ahentic/status"] == "awaiting_approval"
    assert len(tool_calls) == 1


def test_a_denied_call_returns_the_reason(live_server, owner, owner_client, tool_calls):
    secret = token_for(owner)

    async def call(client):
        return await client.call_tool("notes_create", {"title": "Nope"})

    with_client(live_server, secret, call)
    session = Session.objects.get(owner=owner)
    response = owner_client.post(
        f"{API}/sessions/{session.pk}/approvals",
        {"decision": "deny", "reason": "not today"},
        format="json",
    )
    assert response.status_code == 200, response.content
    denied = with_client(live_server, secret, call)
    assert denied.is_error is True
    body = json.loads(text_of(denied))
    assert (body["error"], body["reason"]) == ("user_denied", "not today")
    assert tool_calls == []
    session.refresh_from_db()
    assert session.status == Session.Status.IDLE


def test_an_always_grant_from_the_chats_lets_the_call_run_at_once(live_server, owner, tool_calls):
    ToolGrant.objects.create(user=owner, tool_name="notes_create")
    secret = token_for(owner)

    async def call(client):
        return await client.call_tool("notes_create", {"title": "Granted"})

    result = with_client(live_server, secret, call)
    assert result.is_error is False
    assert json.loads(text_of(result))["ok"] is True
    assert tool_calls == [{"tool": "notes_create", "input": {"title": "Granted"}}]


def test_the_daily_limit_blocks_calls(live_server, owner, settings, tool_calls):
    from orchestrator_app.models import DailyUsage

    settings.AHENTIC = {**settings.AHENTIC, "DAILY_TOKEN_LIMIT": 10}
    DailyUsage.objects.create(day=timezone.localdate(), tokens=10)
    secret = token_for(owner)

    async def call(client):
        return await client.call_tool("echo", {"text": "x"})

    result = with_client(live_server, secret, call)
    assert result.is_error is True
    assert json.loads(text_of(result))["error"] == "ahentic_daily_token_limit"
    assert tool_calls == []


def test_a_call_counts_against_the_message_throttle(live_server, owner, settings, tool_calls):
    settings.AHENTIC = {**settings.AHENTIC, "THROTTLE_MESSAGES": "1/min"}
    secret = token_for(owner)

    async def work(client):
        first = await client.call_tool("echo", {"text": "1"})
        second = await client.call_tool("echo", {"text": "2"})
        return first, second

    first, second = with_client(live_server, secret, work)
    assert first.is_error is False
    assert json.loads(text_of(second))["error"] == "ahentic_throttled"
    assert len(tool_calls) == 1


# --- authentication ----------------------------------------------------------------------------


def test_without_a_token_the_answer_is_401_with_the_resource_metadata(live_server, db):
    response = rpc(live_server, {"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert response.status_code == 401
    challenge = response.headers["WWW-Authenticate"]
    assert challenge.startswith('Bearer resource_metadata="http')
    metadata_url = challenge.split('"')[1]
    metadata = httpx2.get(metadata_url).json()
    assert metadata["resource"] == mcp_url(live_server)
    assert metadata["bearer_methods_supported"] == ["header"]


def test_the_sdk_without_a_token_fails_to_connect(live_server, db):
    async def work(client):
        return await client.list_tools()

    with pytest.raises(Exception):  # noqa: B017 - the SDK surfaces the 401 as its own error
        with_client(live_server, None, work)


@pytest.mark.parametrize("state", ["revoked", "expired", "unknown"])
def test_a_revoked_expired_or_unknown_token_is_refused(live_server, owner, state):
    issued = mcp_tokens.token_create(user=owner, name="old")
    secret = issued.secret
    if state == "revoked":
        mcp_tokens.token_revoke(token=issued.token)
    elif state == "expired":
        McpToken.objects.filter(pk=issued.token.pk).update(
            expires_at=timezone.now() - timedelta(minutes=1)
        )
    else:
        secret = secret[:-2] + "xx"
    response = rpc(live_server, {"jsonrpc": "2.0", "id": 1, "method": "ping"}, secret)
    assert response.status_code == 401
    assert "resource_metadata" in response.headers["WWW-Authenticate"]


def test_a_user_without_the_agent_permission_is_refused(live_server, noperm):
    secret = token_for(noperm)
    response = rpc(live_server, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, secret)
    assert response.status_code == 403
    assert response.json()["error"]["code"] == -32001


def test_a_token_records_its_last_use(live_server, owner):
    issued = mcp_tokens.token_create(user=owner, name="t")
    assert issued.token.last_used_at is None
    rpc(live_server, {"jsonrpc": "2.0", "id": 1, "method": "ping"}, issued.secret)
    issued.token.refresh_from_db()
    assert issued.token.last_used_at is not None


# --- the protocol's edges ----------------------------------------------------------------------


def test_malformed_bodies_batches_and_unknown_methods_get_json_rpc_errors(live_server, owner):
    secret = token_for(owner)
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    cases = [
        ("{not json", 400, -32700),
        ("[]", 400, -32600),
        (json.dumps({"jsonrpc": "2.0", "id": 2, "method": "nope/nothing"}), 200, -32601),
        (json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": 7}), 200, -32600),
        (
            json.dumps({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {}}),
            200,
            -32602,
        ),
        (json.dumps({"id": 5, "method": "ping"}), 200, -32600),
        (json.dumps("ping"), 400, -32600),
        ("[" * 100 + "]" * 100, 400, -32700),
    ]
    for body, status, code in cases:
        response = rpc(live_server, body, secret)
        assert response.status_code == status, (body, response.content)
        assert response.json()["error"]["code"] == code, (body, response.content)
    batch = rpc(
        live_server,
        [ping, {"jsonrpc": "2.0", "method": "notifications/initialized"}, {**ping, "id": 9}],
        secret,
    )
    assert batch.status_code == 200
    assert [answer["id"] for answer in batch.json()] == [1, 9]
    notification = rpc(
        live_server, {"jsonrpc": "2.0", "method": "notifications/initialized"}, secret
    )
    assert notification.status_code == 202
    huge = rpc(live_server, {**ping, "params": {"x": "a" * (3 * 1024 * 1024)}}, secret)
    assert huge.status_code == 413
    wrong_type = rpc(live_server, "x=1", secret, **{"Content-Type": "text/plain"})
    assert wrong_type.status_code == 415
    assert (
        httpx2.get(mcp_url(live_server), headers={"Authorization": f"Bearer {secret}"}).status_code
        == 405
    )
    old = rpc(live_server, ping, secret, **{"MCP-Protocol-Version": "1999-01-01"})
    assert old.status_code == 400


# --- the token routes --------------------------------------------------------------------------


def test_a_token_is_shown_once_and_stored_hashed(owner_client, owner):
    response = owner_client.post(f"{API}/mcp-tokens", {"name": "Laptop"}, format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    secret = body["token"]
    assert secret.startswith("ahmcp_") and len(secret) > 40
    stored = McpToken.objects.get(pk=body["id"])
    assert stored.token_hash == hashlib.sha256(secret.encode()).hexdigest()
    assert secret not in json.dumps(list(McpToken.objects.values()), default=str)
    assert body["expiresAt"] is not None  # 90 days unless asked otherwise
    listed = owner_client.get(f"{API}/mcp-tokens").json()
    assert [t["name"] for t in listed] == ["Laptop"]
    assert "token" not in listed[0] and secret not in json.dumps(listed)
    assert listed[0]["prefix"] == secret[:10]


def test_token_routes_validate_and_hide_other_users_tokens(
    owner_client, other_client, anon_client, noperm_client, owner
):
    for bad in (
        {},
        {"name": ""},
        {"name": 5},
        {"name": "x" * 101},
        {"name": "a", "expiresInDays": 0},
        {"name": "a", "extra": 1},
    ):
        response = owner_client.post(f"{API}/mcp-tokens", bad, format="json")
        assert response.status_code == 400, bad
        assert response.json()["code"] == "ahentic_invalid_input"
    never = owner_client.post(
        f"{API}/mcp-tokens", {"name": "ci", "expiresInDays": None}, format="json"
    )
    assert never.status_code == 201 and never.json()["expiresAt"] is None
    token_id = never.json()["id"]
    assert anon_client.get(f"{API}/mcp-tokens").status_code == 401
    assert noperm_client.post(f"{API}/mcp-tokens", {"name": "x"}, format="json").status_code == 403
    assert other_client.get(f"{API}/mcp-tokens").json() == []
    response = other_client.delete(f"{API}/mcp-tokens/{token_id}")
    assert response.status_code == 404
    assert response.json()["code"] == "ahentic_mcp_token_not_found"
    assert owner_client.delete(f"{API}/mcp-tokens/{token_id}").status_code == 204
    assert owner_client.delete(f"{API}/mcp-tokens/{token_id}").status_code == 404
    assert owner_client.delete(f"{API}/mcp-tokens/abc").status_code == 404
    assert owner_client.get(f"{API}/mcp-tokens").json() == []
    assert McpToken.objects.get(pk=token_id).revoked_at is not None


# --- the admin ---------------------------------------------------------------------------------


def test_staff_make_a_token_for_a_user_shown_once_and_revoke_it(admin_client, owner, live_server):
    response = admin_client.post(
        "/admin/orchestrator_app/mcptoken/add/",
        {"user": owner.pk, "name": "Desktop", "expires_at_0": "", "expires_at_1": ""},
        follow=True,
    )
    assert response.status_code == 200
    shown = [str(m) for m in response.context["messages"]]
    [secret] = [word for m in shown for word in m.split() if word.startswith("ahmcp_")]
    token = McpToken.objects.get(user=owner)
    assert token.token_hash == hashlib.sha256(secret.encode()).hexdigest()
    assert token.name == "Desktop"
    # The list never shows it again.
    listing = admin_client.get("/admin/orchestrator_app/mcptoken/")
    assert secret not in listing.content.decode()
    assert (
        rpc(live_server, {"jsonrpc": "2.0", "id": 1, "method": "ping"}, secret).status_code == 200
    )
    admin_client.post(
        "/admin/orchestrator_app/mcptoken/",
        {"action": "revoke", "_selected_action": [token.pk]},
    )
    token.refresh_from_db()
    assert token.revoked_at is not None
    assert (
        rpc(live_server, {"jsonrpc": "2.0", "id": 1, "method": "ping"}, secret).status_code == 401
    )


def test_admin_tools_run_with_the_users_own_permissions_and_log_like_the_admin(
    live_server, settings, tool_calls
):
    from django.contrib.admin.models import CHANGE, LogEntry
    from django.contrib.auth.models import Permission
    from django.contrib.flatpages.models import FlatPage
    from django.contrib.sites.models import Site
    from rest_framework.test import APIClient

    from tests.support.factories import UserFactory

    settings.AHENTIC = {**settings.AHENTIC, "ADMIN_TOOLS": ["flatpages.flatpage"]}
    editor = UserFactory(username="editor", agent_permission=True, is_staff=True)
    editor.user_permissions.add(
        *Permission.objects.filter(codename__in=["view_flatpage", "change_flatpage"])
    )
    page = FlatPage.objects.create(url="/about/", title="Abut us", content="<p>Hi.</p>")
    page.sites.add(Site.objects.get_current())
    secret = token_for(editor)
    change = {"model": "flatpages.flatpage", "id": page.pk, "values": {"title": "About us"}}

    async def work(client):
        listed = await client.list_tools()
        read = await client.call_tool("admin_get", {"model": "flatpages.flatpage", "id": page.pk})
        save = await client.call_tool("admin_save", change)
        return listed, read, save

    listed, read, save = with_client(live_server, secret, work)
    names = {tool.name for tool in listed.tools}
    assert {"admin_get", "admin_save", "admin_list"} <= names
    assert json.loads(text_of(read))["ok"] is True
    assert save.meta["ahentic/status"] == "awaiting_approval"
    page.refresh_from_db()
    assert page.title == "Abut us"

    client = APIClient()
    client.force_login(editor)
    session = Session.objects.get(owner=editor)
    response = client.post(
        f"{API}/sessions/{session.pk}/approvals", {"decision": "allow_once"}, format="json"
    )
    assert response.status_code == 200, response.content
    page.refresh_from_db()
    assert page.title == "About us"
    entry = LogEntry.objects.filter(object_id=str(page.pk)).latest("action_time")
    assert (entry.action_flag, entry.user_id) == (CHANGE, editor.pk)

    async def again(client):
        return await client.call_tool("admin_save", change)

    result = with_client(live_server, secret, again)
    assert json.loads(text_of(result))["changed"] == ["title"]


@pytest.mark.parametrize(
    "overrides, check_id",
    [
        ({"MCP_SERVER": "yes"}, "ahentic.E038"),
        ({"MCP_CALL_WAIT_S": -1}, "ahentic.E039"),
        ({"MCP_CALL_WAIT_S": "20"}, "ahentic.E039"),
        ({"MCP_CALL_WAIT_S": 300}, "ahentic.W020"),
        ({"MCP_ELICITATION": "yes"}, "ahentic.E046"),
    ],
)
def test_the_system_checks_refuse_bad_mcp_settings(settings, overrides, check_id):
    from django.core.checks import run_checks

    settings.AHENTIC = {**settings.AHENTIC, **overrides}
    assert check_id in {message.id for message in run_checks()}


def test_the_endpoint_can_be_turned_off(live_server, owner, settings):
    settings.AHENTIC = {**settings.AHENTIC, "MCP_SERVER": False}
    secret = token_for(owner)
    response = rpc(live_server, {"jsonrpc": "2.0", "id": 1, "method": "ping"}, secret)
    assert response.status_code == 404


def test_allow_for_this_chat_covers_the_next_calls_of_that_chat(
    live_server, owner, owner_client, tool_calls
):
    secret = token_for(owner)

    async def call(client, title):
        return await client.call_tool("notes_create", {"title": title})

    waiting = with_client(live_server, secret, lambda client: call(client, "One"))
    assert waiting.meta["ahentic/status"] == "awaiting_approval"
    session = Session.objects.get(owner=owner)
    response = owner_client.post(
        f"{API}/sessions/{session.pk}/approvals", {"decision": "allow_session"}, format="json"
    )
    assert response.status_code == 200, response.content

    async def both(client):
        return await call(client, "One"), await call(client, "Two")

    first, second = with_client(live_server, secret, both)
    assert json.loads(text_of(first))["ok"] is True
    assert json.loads(text_of(second))["ok"] is True  # no approval asked: the chat's grant
    assert [c["input"]["title"] for c in tool_calls] == ["One", "Two"]
    assert Session.objects.filter(owner=owner).count() == 1


def test_a_call_while_another_waits_for_approval_runs_in_a_second_chat(
    live_server, owner, tool_calls
):
    secret = token_for(owner, name="cli")

    async def work(client):
        waiting = await client.call_tool("notes_create", {"title": "Later"})
        read = await client.call_tool("echo", {"text": "now"})
        return waiting, read

    waiting, read = with_client(live_server, secret, work)
    assert waiting.meta["ahentic/status"] == "awaiting_approval"
    assert json.loads(text_of(read)) == {"ok": True, "echo": "now"}
    titles = sorted(Session.objects.filter(owner=owner).values_list("title", "status"))
    day = timezone.localdate().isoformat()
    assert titles == [
        (f"MCP: cli {day}", Session.Status.AWAITING_HUMAN),
        (f"MCP: cli {day} (2)", Session.Status.IDLE),
    ]


def test_the_user_can_talk_about_the_calls_in_their_mcp_chat(
    live_server, owner, owner_client, llm, run_tasks, tool_calls
):
    from orchestrator_app.testing.localapi import text_reply
    from tests.support.api import post_message

    secret = token_for(owner)

    async def call(client):
        return await client.call_tool("echo", {"text": "hi"})

    with_client(live_server, secret, call)
    session = Session.objects.get(owner=owner)
    llm.enqueue(text_reply("The client echoed hi."))
    payload = post_message(owner_client, session, run_tasks, "What did the client do?")
    assert payload["status"] == "idle"
    assert payload["messages"][-1]["content"] == "The client echoed hi."
    [request] = [r["json"] for r in llm.requests if r["path"] == "/v1/messages"]
    # The call and its answer are in the conversation the model reads.
    blocks = [b for m in request["messages"] for b in m["content"] if isinstance(b, dict)]
    assert [b["type"] for b in blocks if b["type"].startswith("tool_")] == [
        "tool_use",
        "tool_result",
    ]


# --- approvals asked in the client (elicitation, protocol 2026-07-28) --------------------------


async def _with_modern_client(url: str, secret: str, work, elicit=None):
    from mcp.client.client import Client

    headers = {"Authorization": f"Bearer {secret}"}
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
        transport = streamable_http_client(url, http_client=http)
        async with Client(transport, elicitation_callback=elicit) as client:
            assert client.protocol_version == "2026-07-28"  # server/discover, not initialize
            return await work(client)


def with_modern_client(live_server, secret, work, elicit=None):
    """Run ``work(client)`` with the SDK's ``Client`` (a ``ClientSession`` that negotiates
    through ``server/discover`` and drives ``input_required`` rounds through ``elicit``)."""
    return asyncio.run(_with_modern_client(mcp_url(live_server), secret, work, elicit))


def answering(action: str, decision: str | None = None, before=None):
    """An elicitation callback that records what it was asked and answers ``action``."""
    from mcp.types import ElicitResult

    asked = []

    async def elicit(context, params):
        asked.append(params)
        if before is not None:
            await asyncio.to_thread(before)
        content = {"decision": decision} if decision else None
        return ElicitResult(action=action, content=content)

    elicit.asked = asked
    return elicit


def decisions_traced(session) -> list[str]:
    return list(
        session.trace_events.filter(type__in=["hitl_approved", "hitl_denied"])
        .order_by("id")
        .values_list("summary", flat=True)
    )


def test_a_client_that_can_ask_gets_the_approval_there_and_allow_runs_the_call_once(
    live_server, owner, owner_client, tool_calls
):
    secret = token_for(owner)
    elicit = answering("accept", "allow_once")

    async def call(client):
        return await client.call_tool("notes_create", {"title": "Asked"})

    result = with_modern_client(live_server, secret, call, elicit)
    assert result.is_error is False, text_of(result)
    assert json.loads(text_of(result))["ok"] is True
    assert tool_calls == [{"tool": "notes_create", "input": {"title": "Asked"}}]
    [asked] = elicit.asked
    session = Session.objects.get(owner=owner)
    assert "notes_create" in asked.message or "Create" in asked.message
    assert f"?ahentic_session={session.pk}" in asked.message  # the card waits there too
    choices = asked.requested_schema["properties"]["decision"]["oneOf"]
    assert [(c["const"], c["title"]) for c in choices] == [
        ("allow_once", "Allow once"),
        ("deny", "Deny"),
    ]
    session.refresh_from_db()
    assert session.status == Session.Status.IDLE
    assert decisions_traced(session) == ["notes_create: allow_once"]
    # The card can no longer decide it: one decision only.
    late = owner_client.post(
        f"{API}/sessions/{session.pk}/approvals", {"decision": "deny"}, format="json"
    )
    assert late.status_code == 409
    assert late.json()["code"] == "ahentic_no_pending"
    # Delivered: calling again is a new call that asks again, the tool ran once so far.
    with_modern_client(live_server, secret, call, elicit)
    assert len(elicit.asked) == 2
    assert len(tool_calls) == 2


def test_a_decline_in_the_client_is_one_denial(live_server, owner, tool_calls):
    secret = token_for(owner)
    elicit = answering("decline")

    async def call(client):
        return await client.call_tool("notes_create", {"title": "No"})

    result = with_modern_client(live_server, secret, call, elicit)
    assert result.is_error is True
    body = json.loads(text_of(result))
    assert body["error"] == "user_denied"
    assert tool_calls == []
    session = Session.objects.get(owner=owner)
    session.refresh_from_db()
    assert session.status == Session.Status.IDLE
    assert decisions_traced(session) == ["notes_create: deny"]
    # What the model reads of the chat: the call answered once, with the denial.
    responses = list(session.events.filter(kind=Event.Kind.TOOL_RESPONSE))
    assert len(responses) == 1
    assert json.loads(responses[0].content)["error"] == "user_denied"


def test_the_card_answered_first_wins_and_the_clients_late_answer_is_already_decided(
    live_server, owner, owner_client, tool_calls
):
    secret = token_for(owner)

    def card_denies():
        session = Session.objects.get(owner=owner)
        response = owner_client.post(
            f"{API}/sessions/{session.pk}/approvals",
            {"decision": "deny", "reason": "from the card"},
            format="json",
        )
        assert response.status_code == 200, response.content

    # The user denies in the sidebar while the client's question is open, then allows there.
    elicit = answering("accept", "allow_once", before=card_denies)

    async def call(client):
        return await client.call_tool("notes_create", {"title": "Race"})

    result = with_modern_client(live_server, secret, call, elicit)
    assert len(elicit.asked) == 1
    assert tool_calls == []  # the card's denial stands
    assert result.is_error is True
    assert result.meta["ahentic/decision"] == "already_decided"
    assert "already decided" in result.content[0].text
    assert json.loads(result.content[1].text)["reason"] == "from the card"
    session = Session.objects.get(owner=owner)
    assert decisions_traced(session) == ["notes_create: deny"]
    assert session.events.filter(kind=Event.Kind.TOOL_RESPONSE).count() == 1


def test_a_cancelled_question_leaves_the_call_waiting_for_the_card(live_server, owner, tool_calls):
    secret = token_for(owner)
    elicit = answering("cancel")

    async def call(client):
        return await client.call_tool("notes_create", {"title": "Later"})

    result = with_modern_client(live_server, secret, call, elicit)
    assert result.meta["ahentic/status"] == "awaiting_approval"
    assert "Waiting for approval at" in text_of(result)
    session = Session.objects.get(owner=owner)
    assert session.status == Session.Status.AWAITING_HUMAN
    assert decisions_traced(session) == []
    assert tool_calls == []


def test_clients_that_cannot_ask_keep_the_waiting_answer(live_server, owner, tool_calls):
    from mcp.types import ElicitResult

    secret = token_for(owner)

    async def call(client):
        return await client.call_tool("notes_create", {"title": "Plain"})

    # 2026-07-28 without the elicitation capability.
    modern = with_modern_client(live_server, secret, call)
    assert modern.meta["ahentic/status"] == "awaiting_approval"
    assert "Waiting for approval at" in text_of(modern)

    # A handshake-era client: its capability was declared in initialize, which a stateless
    # server does not keep, and it has no stream for a request of the server.
    asked = []

    async def elicit(context, params):
        asked.append(params)
        return ElicitResult(action="accept", content={"decision": "allow_once"})

    async def legacy():
        headers = {"Authorization": f"Bearer {secret}"}
        async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
            async with streamable_http_client(mcp_url(live_server), http_client=http) as streams:
                async with ClientSession(*streams, elicitation_callback=elicit) as client:
                    await client.initialize()
                    return await client.call_tool("notes_create", {"title": "Old"})

    old = asyncio.run(legacy())
    assert old.meta["ahentic/status"] == "awaiting_approval"
    assert "Waiting for approval at" in text_of(old)
    assert asked == [] and tool_calls == []


def test_a_forged_or_foreign_request_state_is_refused(live_server, owner, other, tool_calls):
    secret = token_for(owner)
    elicit = answering("accept", "allow_once")

    async def ask(client):
        return await client.session.call_tool(
            "notes_create", {"title": "Mine"}, allow_input_required=True
        )

    asked = with_modern_client(live_server, secret, ask, elicit)
    assert asked.result_type == "input_required"
    allow = {"approval": {"action": "accept", "content": {"decision": "allow_once"}}}

    async def answer(client, arguments, state):
        try:
            await client.session.call_tool(
                "notes_create", arguments, input_responses=allow, request_state=state
            )
        except MCPError as exc:
            return exc.error.code
        return None

    cases = [
        (token_for(other), {"title": "Mine"}, asked.request_state),  # another user's token
        (token_for(owner, name="phone"), {"title": "Mine"}, asked.request_state),  # other token
        (secret, {"title": "Other"}, asked.request_state),  # other arguments
        (secret, {"title": "Mine"}, asked.request_state[:-3] + "xyz"),  # tampered
        (secret, {"title": "Mine"}, None),  # an answer without the state
    ]
    for token, arguments, state in cases:
        code = with_modern_client(
            live_server, token, lambda c, a=arguments, s=state: answer(c, a, s), elicit
        )
        assert code == -32602, (arguments, state)
    assert tool_calls == []
    assert Session.objects.get(owner=owner).status == Session.Status.AWAITING_HUMAN


def test_a_site_can_keep_approvals_out_of_the_clients(live_server, owner, settings, tool_calls):
    secret = token_for(owner)
    elicit = answering("accept", "allow_once")

    async def ask(client):
        return await client.session.call_tool(
            "notes_create", {"title": "Kept"}, allow_input_required=True
        )

    asked = with_modern_client(live_server, secret, ask, elicit)
    assert asked.result_type == "input_required"
    settings.AHENTIC = {**settings.AHENTIC, "MCP_ELICITATION": False}

    async def call(client):
        return await client.call_tool("notes_create", {"title": "Kept"})

    waiting = with_modern_client(live_server, secret, call, elicit)
    assert waiting.meta["ahentic/status"] == "awaiting_approval"
    assert elicit.asked == []

    # An answer to a question asked before the switch is refused too.
    async def answer(client):
        try:
            await client.session.call_tool(
                "notes_create",
                {"title": "Kept"},
                input_responses={
                    "approval": {"action": "accept", "content": {"decision": "allow_once"}}
                },
                request_state=asked.request_state,
            )
        except MCPError as exc:
            return exc.error.code
        return None

    assert with_modern_client(live_server, secret, answer) == -32602
    assert tool_calls == []
    assert Session.objects.get(owner=owner).status == Session.Status.AWAITING_HUMAN


def test_the_2026_envelope_is_checked_before_any_method(live_server, owner, tool_calls):
    secret = token_for(owner)
    modern = "2026-07-28"
    meta = {
        "io.modelcontextprotocol/protocolVersion": modern,
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
    }

    def send(method, params, **headers):
        body = {"jsonrpc": "2.0", "id": 7, "method": method, "params": params}
        headers = {"MCP-Protocol-Version": modern, "Mcp-Method": method, **headers}
        return rpc(live_server, body, secret, **headers)

    discover = send("server/discover", {"_meta": meta})
    assert discover.status_code == 200, discover.content
    assert modern in discover.json()["result"]["supportedVersions"]
    assert discover.json()["result"]["resultType"] == "complete"
    no_envelope = send("tools/list", {})
    assert (no_envelope.status_code, no_envelope.json()["error"]["code"]) == (400, -32602)
    mismatch = send("tools/list", {"_meta": meta}, **{"Mcp-Method": "tools/call"})
    assert (mismatch.status_code, mismatch.json()["error"]["code"]) == (400, -32020)
    handshake = send("initialize", {"_meta": meta})
    assert (handshake.status_code, handshake.json()["error"]["code"]) == (404, -32601)
    batch = rpc(
        live_server,
        [{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}],
        secret,
        **{"MCP-Protocol-Version": modern},
    )
    assert batch.status_code == 400
    for extra in (
        {"inputResponses": 5},
        {"requestState": 7},
        {"inputResponses": {"approval": {"action": "maybe"}}, "requestState": "x"},
    ):
        params = {"_meta": meta, "name": "notes_create", "arguments": {"title": "x"}, **extra}
        bad = send("tools/call", params, **{"Mcp-Name": "notes_create"})
        assert bad.status_code == 400, (extra, bad.content)
        assert bad.json()["error"]["code"] == -32602
    assert tool_calls == []
    assert not Session.objects.filter(owner=owner).exists()


def test_a_late_answer_never_decides_the_next_call_of_the_chat(
    live_server, owner, owner_client, tool_calls
):
    secret = token_for(owner)
    elicit = answering("accept", "allow_once")

    async def ask(client, title):
        return await client.session.call_tool(
            "notes_create", {"title": title}, allow_input_required=True
        )

    first = with_modern_client(live_server, secret, lambda c: ask(c, "A"), elicit)
    session = Session.objects.get(owner=owner)
    response = owner_client.post(
        f"{API}/sessions/{session.pk}/approvals", {"decision": "allow_once"}, format="json"
    )
    assert response.status_code == 200, response.content
    # The chat moves on: the next call waits for approval in the same chat.
    with_modern_client(live_server, secret, lambda c: ask(c, "B"), elicit)
    session.refresh_from_db()
    assert session.status == Session.Status.AWAITING_HUMAN
    assert session.pending_tool["input"] == {"title": "B"}

    async def answer_first(client):
        return await client.session.call_tool(
            "notes_create",
            {"title": "A"},
            input_responses={
                "approval": {"action": "accept", "content": {"decision": "allow_once"}}
            },
            request_state=first.request_state,
        )

    late = with_modern_client(live_server, secret, answer_first)
    assert late.meta["ahentic/decision"] == "already_decided"
    assert json.loads(late.content[1].text)["ok"] is True  # A's result, from the card's allow
    assert [c["input"]["title"] for c in tool_calls] == ["A"]  # B still waits
    session.refresh_from_db()
    assert session.status == Session.Status.AWAITING_HUMAN
    assert session.pending_tool["input"] == {"title": "B"}


# --- what a client gets (the sidebar's "MCP access" panel) ----------------------------------------


def test_access_names_the_endpoint_and_the_tools_for_the_default_agent_and_another(
    owner_client, owner
):
    from sessions_app import agents
    from tests.support.factories import agent_create

    default = agents.default_agent()
    if default is None:  # a transactional test before this one flushed the migration's
        default = agent_create("assistant", name="Assistant")
        agents.default_set(default)
    editor = agent_create("editor", name="Editor")
    agents.version_save(editor, config={"TOOLS": ["notes_create", "update_plan"]})

    mine = owner_client.get(f"{API}/mcp-tokens/access")
    assert mine.status_code == 200, mine.content
    body = mine.json()
    assert body["agent"] == {"slug": default.slug, "name": default.name, "isDefault": True}
    assert body["endpoint"] == "http://testserver/ahentic/v1/mcp"  # no ?agent= for the default
    assert "notes_create" in body["tools"] and "update_plan" not in body["tools"]
    assert body["reason"] == ""
    assert {a["slug"] for a in body["agents"]} == {default.slug, "editor"}

    other = owner_client.get(f"{API}/mcp-tokens/access?agent=editor").json()
    assert other["endpoint"] == "http://testserver/ahentic/v1/mcp?agent=editor"
    assert other["tools"] == ["notes_create"]  # update_plan is the chat's own


def test_access_says_why_an_agent_gives_a_client_no_tools(owner_client, owner):
    from sessions_app import agents
    from tests.support.factories import agent_create

    reader = agent_create("reader", name="Reader")
    agents.version_save(reader, config={"TOOLS": ["update_plan", "page_read"]})

    body = owner_client.get(f"{API}/mcp-tokens/access?agent=reader").json()

    assert body["tools"] == []
    assert body["reason"].startswith(
        "Reader's tools all need the sidebar (a browser page or a chat): "
    )
    assert "update_plan" in body["reason"]


def test_access_to_an_agent_the_user_may_not_use_is_a_404(owner_client, anon_client):
    response = owner_client.get(f"{API}/mcp-tokens/access?agent=nobody")
    assert response.status_code == 404
    assert response.json()["code"] == "ahentic_agent_not_found"
    assert anon_client.get(f"{API}/mcp-tokens/access").status_code in (401, 403)
