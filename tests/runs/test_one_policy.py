"""One policy, enforced where calls run: what an agent version offers the model is also all its
runs may call (the chat, its sub-agents, the site's MCP endpoint), and who may use a
group-restricted agent is decided alike on every surface (the picker, a new chat, a schedule,
the MCP endpoint's ``?agent=``)."""

import asyncio
import json

import httpx2
import pytest
from django.contrib.auth.models import Group, Permission
from django.urls import reverse

from orchestrator_app.mcp import tokens as mcp_tokens
from orchestrator_app.models import Schedule
from orchestrator_app.schedules import services as schedules
from orchestrator_app.testing.localapi import text_reply, tool_call, tool_reply
from sessions_app import agents, services
from sessions_app.models import Agent, Session
from tests.support.api import API, client_for, post_message, result_of
from tests.support.factories import UserFactory

pytestmark = pytest.mark.usefixtures("llm_strict")


def new_agent(slug: str, config: dict | None = None, *, groups=(), **fields) -> Agent:
    agent = Agent.objects.create(slug=slug, name=slug.title(), **fields)
    agent.groups.set(groups)
    agents.version_save(agent, config=config or {})
    return agent


def chat_with(owner, agent: Agent) -> Session:
    return services.session_create(owner=owner, agent_version=agents.latest_version(agent))


# --- TOOLS: offered and enforced alike ------------------------------------------------------------


def test_a_call_outside_the_agents_tools_is_a_tool_error_never_an_approval_card(
    owner, owner_client, llm, run_tasks, tool_calls
):
    chat = chat_with(owner, new_agent("reader", {"TOOLS": ["echo"]}))
    llm.enqueue(
        tool_reply(tool_call("notes_create", {"title": "Sneaky"}, id="toolu_note")),
        text_reply("I cannot write notes here."),
    )

    body = post_message(owner_client, chat, run_tasks, "Write a note")

    assert body["status"] == "idle" and body["pendingTool"] is None  # no card
    first, second = llm.message_requests()
    assert "notes_create" not in {t["name"] for t in first["tools"]}
    result = result_of(second, "toolu_note")
    assert result.get("is_error") is True
    content = json.loads(result["content"])
    assert content["error"] == "ability_unavailable"
    assert "not one of this agent's tools" in content["message"]
    assert tool_calls == []


def test_a_sub_agent_may_call_only_its_own_agents_tools(
    owner, owner_client, llm, run_tasks, tool_calls
):
    lead = new_agent("lead", {"ROSTER": ["researcher"]})
    new_agent("researcher", {"MODEL": "claude-opus-4-6", "TOOLS": ["echo"]})
    chat = chat_with(owner, lead)
    # Each model its own script: the parent's and the child's steps interleave.
    child_replies = [
        tool_reply(tool_call("notes_create", {"title": "From the child"}, id="toolu_child")),
        text_reply("I could not write it."),
    ]
    parent_replies = [
        tool_reply(
            tool_call("spawn_subagent", {"name": "facts", "task": "Go", "agent": "researcher"})
        ),
        text_reply("Started."),
    ]

    def responder(body):
        replies = child_replies if body["model"] == "claude-opus-4-6" else parent_replies
        return replies.pop(0) if replies else text_reply("Done.")

    llm.responder = responder

    post_message(owner_client, chat, run_tasks, "Delegate")

    child = Session.objects.get(parent=chat)
    assert child.status == "idle" and child.pending_tool is None
    child_requests = [r for r in llm.message_requests() if r["model"] == "claude-opus-4-6"]
    result = result_of(child_requests[-1], "toolu_child")
    assert result.get("is_error") is True
    assert json.loads(result["content"])["error"] == "ability_unavailable"
    assert tool_calls == []


def test_a_spawn_naming_an_agent_off_the_roster_is_refused(owner, owner_client, llm, run_tasks):
    lead = new_agent("lead", {"ROSTER": []})
    new_agent("stranger")
    chat = chat_with(owner, lead)
    llm.enqueue(
        tool_reply(
            tool_call("spawn_subagent", {"name": "x", "task": "Go", "agent": "stranger"}, id="t1")
        ),
        text_reply("Could not."),
    )

    post_message(owner_client, chat, run_tasks, "Delegate")

    assert not Session.objects.filter(parent=chat).exists()
    result = result_of(llm.message_requests()[1], "t1")
    assert result.get("is_error") is True and "not in your roster" in str(result["content"])


# --- staff rights: one answer on every surface -------------------------------------------------


@pytest.fixture
def editors(db):
    return Group.objects.create(name="editors")


@pytest.fixture
def editor_agent(editors):
    return new_agent("editor", groups=[editors])


def staff_outside(editors):
    """Staff with the agent permission (and every schedule permission), not in ``editors``."""
    user = UserFactory(username="staffer", agent_permission=True, is_staff=True)
    user.user_permissions.add(
        *Permission.objects.filter(
            content_type__app_label="orchestrator_app",
            codename__in=["add_schedule", "change_schedule", "view_schedule"],
        )
    )
    return user


def test_staff_outside_an_agents_groups_may_not_use_it_anywhere(editors, editor_agent, llm):
    staffer = staff_outside(editors)
    client = client_for(staffer)

    # The picker and the agent's own route.
    listed = [a["slug"] for a in client.get(f"{API}/agents").json()]
    assert "editor" not in listed
    assert client.get(f"{API}/agents/editor").status_code == 404
    # A new chat.
    created = client.post(f"{API}/sessions", {"agent": "editor"}, format="json")
    assert created.status_code == 404
    assert created.json()["code"] == "ahentic_agent_not_found"
    assert not Session.objects.filter(owner=staffer).exists()
    # A schedule run as them: the admin form refuses it, and a firing would too.
    form = {
        "name": "Digest",
        "agent": editor_agent.pk,
        "agent_version": "",
        "run_as": staffer.pk,
        "cron": "*/5 * * * *",
        "time_zone": "UTC",
        "first_message": "Write the digest.",
        "chat_mode": "new",
        "spend_cap_usd": "",
    }
    client.force_login(staffer)
    response = client.post(reverse("admin:orchestrator_app_schedule_add"), form)
    assert response.status_code == 200
    assert "may not use the agent Editor" in response.content.decode()
    assert not Schedule.objects.exists()
    found = schedules.refusal(Schedule(agent=editor_agent, run_as=staffer))
    assert isinstance(found, schedules.Refusal)
    assert found.code == "ahentic_schedule_agent_permission"


def test_a_superuser_may_use_a_group_restricted_agent(editors, editor_agent, llm):
    boss = UserFactory(username="boss", is_superuser=True, is_staff=True)
    client = client_for(boss)

    assert "editor" in [a["slug"] for a in client.get(f"{API}/agents").json()]
    assert client.post(f"{API}/sessions", {"agent": "editor"}, format="json").status_code == 201


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"},
    },
}


def mcp_initialize(live_server, user, agent: str):
    secret = mcp_tokens.token_create(user=user, name="laptop").secret
    return httpx2.post(
        f"{live_server.url}{API}/mcp?agent={agent}",
        content=json.dumps(INITIALIZE),
        headers={
            "Authorization": f"Bearer {secret}",
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        },
        timeout=30,
    )


@pytest.mark.django_db(transaction=True)
def test_the_mcp_endpoint_refuses_a_group_agent_to_staff_outside_its_groups(live_server):
    editors = Group.objects.create(name="editors")
    new_agent("editor", groups=[editors])
    staffer = staff_outside(editors)
    boss = UserFactory(username="boss", is_superuser=True, is_staff=True)

    refused = mcp_initialize(live_server, staffer, "editor")
    allowed = mcp_initialize(live_server, boss, "editor")

    assert refused.status_code == 404, refused.text
    assert allowed.status_code == 200, allowed.text


@pytest.mark.django_db(transaction=True)
def test_the_mcp_endpoint_offers_and_runs_only_the_agents_tools_with_its_approval_policy(
    live_server, owner, tool_calls
):
    from mcp.shared.exceptions import MCPError

    from tests.support.mcp import mcp_client_session, text_of

    new_agent("careful", {"TOOLS": ["echo"], "APPROVAL": {"echo": "always_ask"}})
    secret = mcp_tokens.token_create(user=owner, name="laptop").secret

    async def work(client):
        listed = await client.list_tools()
        echo = await client.call_tool("echo", {"text": "hi"})
        try:
            await client.call_tool("notes_create", {"title": "Sneaky"})
            refused = None
        except MCPError as exc:
            refused = exc.error.code
        return listed, echo, refused

    url = f"{live_server.url}{API}/mcp?agent=careful"
    listed, echo, refused = asyncio.run(mcp_client_session(url, secret, work))

    assert [tool.name for tool in listed.tools] == ["echo"]
    # The agent's "always_ask" holds for a read-only tool called by an MCP client too.
    assert echo.meta["ahentic/status"] == "awaiting_approval", text_of(echo)
    assert refused == -32602  # not among this agent's tools
    assert tool_calls == []
