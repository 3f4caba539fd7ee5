"""A session runs with the agent version it pinned: its model, instructions, tools, approval
policy, limits, skills and roster; a later version changes new chats only. Also the migration
that pins the sessions of a settings-only install to the default agent."""

import pytest

from orchestrator_app.testing.localapi import text_reply, tool_call, tool_reply
from sessions_app import agents, services
from sessions_app.models import Agent, Session
from tests.support.api import API, post, post_message
from tests.support.factories import UserFactory

pytestmark = pytest.mark.usefixtures("llm_strict")


def new_agent(slug: str, config: dict | None = None, **fields) -> Agent:
    agent = Agent.objects.create(slug=slug, name=fields.pop("name", slug.title()), **fields)
    agents.version_save(agent, config=config or {})
    return agent


def chat_with(owner, agent: Agent) -> Session:
    return services.session_create(owner=owner, agent_version=agents.latest_version(agent))


def system_text(request: dict) -> str:
    return " ".join(block["text"] for block in request["system"])


def tool_names(request: dict) -> set[str]:
    return {t["name"] for t in request.get("tools", [])}


def test_a_chat_keeps_its_version_when_the_agent_changes_and_a_new_chat_takes_the_new_one(
    owner, owner_client, llm, run_tasks
):
    agent = new_agent("helper", {"MODEL": "claude-sonnet-5-5", "SOUL": "You are Helper one."})
    first = chat_with(owner, agent)
    llm.enqueue(text_reply("Hi."), text_reply("Hi again."), text_reply("New."))
    post_message(owner_client, first, run_tasks, "Hello")

    agents.version_save(agent, config={"MODEL": "claude-opus-4-6", "SOUL": "You are Helper two."})
    post_message(owner_client, first, run_tasks, "Still there?")
    second = chat_with(owner, agent)
    post_message(owner_client, second, run_tasks, "Hello")

    one, two, three = llm.message_requests()
    assert (one["model"], two["model"], three["model"]) == (
        "claude-sonnet-5-5",
        "claude-sonnet-5-5",
        "claude-opus-4-6",
    )
    assert "You are Helper one." in system_text(two)
    assert "You are Helper two." in system_text(three)
    # The pinned chat's prefix is the same bytes: the change did not touch it.
    assert one["system"] == two["system"] and one["tools"] == two["tools"]


def test_an_agent_offers_only_its_tools(owner, owner_client, llm, run_tasks):
    agent = new_agent("reader", {"TOOLS": ["echo"]})
    llm.enqueue(text_reply("Done."))

    post_message(owner_client, chat_with(owner, agent), run_tasks, "Hi")

    [request] = llm.message_requests()
    assert "echo" in tool_names(request)
    assert "notes_create" not in tool_names(request) and "update_plan" not in tool_names(request)


def test_an_agent_never_offers_a_tool_its_user_may_not_use(owner, owner_client, llm, run_tasks):
    """``staff_report`` needs a staff user: naming it in TOOLS does not give it to others."""
    agent = new_agent("wide", {"TOOLS": ["echo", "staff_report"]})
    llm.enqueue(text_reply("Done."))

    post_message(owner_client, chat_with(owner, agent), run_tasks, "Hi")

    [request] = llm.message_requests()
    assert tool_names(request) >= {"echo"} and "staff_report" not in tool_names(request)


def test_always_ask_asks_for_a_read_only_tool_every_time(
    owner, owner_client, llm, run_tasks, tool_calls
):
    agent = new_agent("careful", {"APPROVAL": {"echo": "always_ask"}})
    chat = chat_with(owner, agent)
    llm.enqueue(tool_reply(tool_call("echo", {"text": "hi"})), text_reply("Echoed."))

    payload = post_message(owner_client, chat, run_tasks, "Echo hi")

    assert payload["status"] == "awaiting_human"
    assert payload["pendingTool"]["name"] == "echo"
    assert payload["pendingTool"]["nonPreallowable"] is True  # no "allow for this chat"
    refused = post(owner_client, chat, "approvals", {"decision": "allow_session"})
    assert refused.status_code == 400
    assert refused.json()["code"] == "ahentic_hitl_not_preallowable"
    assert tool_calls == []


def test_always_allow_runs_a_tool_without_a_card_but_never_a_tool_that_asks_every_time(
    owner, owner_client, llm, run_tasks, tool_calls
):
    agent = new_agent(
        "trusted", {"APPROVAL": {"notes_create": "always_allow", "payment_send": "always_allow"}}
    )
    chat = chat_with(owner, agent)
    llm.enqueue(
        tool_reply(tool_call("notes_create", {"title": "Groceries"})),
        text_reply("Noted."),
        tool_reply(tool_call("payment_send", {"amount": 5})),
    )

    assert post_message(owner_client, chat, run_tasks, "Note it")["status"] == "idle"
    payload = post_message(owner_client, chat, run_tasks, "Pay 5")

    assert [c["tool"] for c in tool_calls] == ["notes_create"]
    assert payload["status"] == "awaiting_human"
    assert payload["pendingTool"]["name"] == "payment_send"


def test_a_chat_past_its_agents_spend_cap_takes_no_more_messages(
    owner, owner_client, llm, run_tasks, settings
):
    settings.AHENTIC = {
        **settings.AHENTIC,
        "PRICES": {
            "claude-sonnet-5-5": {
                "input": 3000,
                "output": 3000,
                "cache_write": 3000,
                "cache_read": 3000,
            }
        },
    }
    agent = new_agent("capped", {"MODEL": "claude-sonnet-5-5", "SPEND_CAP_USD": 0.01})
    chat = chat_with(owner, agent)
    llm.enqueue(text_reply("An answer that costs a lot."))
    post_message(owner_client, chat, run_tasks, "Hello")
    assert float(Session.objects.get(pk=chat.pk).cost_usd) >= 0.01

    refused = post(owner_client, chat, "messages", {"content": "And more"})

    assert refused.status_code == 409
    assert refused.json()["code"] == "ahentic_spend_cap"
    assert len(llm.message_requests()) == 1


def test_a_new_chat_starts_in_the_agents_mode(owner_client, owner, settings, llm):
    agent = new_agent("asker", {"MODE": "ask"}, is_default=True)
    assert agents.default_agent() == agent

    created = owner_client.post(f"{API}/sessions", {}, format="json")

    assert created.status_code == 201, created.content
    assert created.json()["mode"] == "ask"


def test_an_agent_activates_only_its_skills(
    owner, owner_client, llm, run_tasks, settings, tmp_path
):
    (tmp_path / "tone.md").write_text("---\nname: tone\ndescription: Friendly tone.\n---\nBe kind.")
    settings.AHENTIC = {**settings.AHENTIC, "SKILL_DIRS": [str(tmp_path)]}
    agent = new_agent("plain", {"SKILLS": []})
    chat = chat_with(owner, agent)
    llm.enqueue(tool_reply(tool_call("activate_skill", {"name": "tone"})), text_reply("OK."))

    post_message(owner_client, chat, run_tasks, "Be friendly")

    first, second = llm.message_requests()
    assert "tone" not in system_text(first)
    result = second["messages"][-1]["content"][0]
    assert result["type"] == "tool_result" and result.get("is_error") is True
    assert Session.objects.get(pk=chat.pk).active_skills == []


@pytest.fixture
def researcher_roster(owner):
    lead = new_agent("lead", {"ROSTER": ["researcher", "vault"]})
    researcher = new_agent(
        "researcher",
        {"MODEL": "claude-opus-4-6", "TOOLS": ["echo"]},
        description="Finds facts.",
    )
    # An agent the owner may not use: its permission is one they do not hold.
    new_agent("vault", {}, permission="sessions_app.control_runs")
    return lead, researcher


def test_a_sub_agent_runs_as_a_roster_agent_with_its_own_version_and_tools(
    owner, owner_client, llm, run_tasks, researcher_roster
):
    lead, researcher = researcher_roster
    chat = chat_with(owner, lead)
    llm.enqueue(
        tool_reply(
            tool_call("spawn_subagent", {"name": "facts", "task": "Find X", "agent": "researcher"})
        ),
        text_reply("Started."),
        text_reply("X is 4."),  # the sub-agent's reply
        text_reply("It says 4."),
    )

    post_message(owner_client, chat, run_tasks, "Find X")

    child = Session.objects.get(parent=chat)
    assert child.agent_version == agents.latest_version(researcher)
    first = llm.message_requests()[0]
    assert "researcher: Researcher (Finds facts.)" in system_text(first)
    assert "vault" not in system_text(first)  # not usable by this user: not offered
    child_request = next(r for r in llm.message_requests() if r["model"] == "claude-opus-4-6")
    assert "notes_create" not in tool_names(child_request) and "echo" in tool_names(child_request)


@pytest.mark.parametrize(
    ("slug", "message"),
    [("vault", "not available"), ("stranger", "not in your roster")],
)
def test_a_sub_agent_is_never_an_agent_off_the_roster_or_beyond_the_user(
    owner, owner_client, llm, run_tasks, researcher_roster, slug, message
):
    lead, _ = researcher_roster
    new_agent("stranger")
    chat = chat_with(owner, lead)
    llm.enqueue(
        tool_reply(tool_call("spawn_subagent", {"name": "x", "task": "Go", "agent": slug})),
        text_reply("Could not."),
    )

    post_message(owner_client, chat, run_tasks, "Delegate")

    assert not Session.objects.filter(parent=chat).exists()
    result = llm.message_requests()[1]["messages"][-1]["content"][0]
    assert result.get("is_error") is True and message in str(result["content"])


def test_a_user_without_the_agents_group_cannot_start_it(owner, db):
    from django.contrib.auth.models import Group

    editors = Group.objects.create(name="Editors")
    agent = new_agent("editor")
    agent.groups.add(editors)

    with pytest.raises(agents.AgentNotFound):
        agents.version_for_new_session(owner, "editor")
    owner.groups.add(editors)
    owner = type(owner).objects.get(pk=owner.pk)
    assert agents.version_for_new_session(owner, "editor") == agents.latest_version(agent)
    staff = UserFactory(username="boss", is_superuser=True, is_staff=True)
    assert agents.version_for_new_session(staff, "editor") == agents.latest_version(agent)


@pytest.mark.django_db(transaction=True)
def test_the_migration_pins_a_settings_only_installs_sessions_to_the_default_agent(owner):
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    before = [("sessions_app", "0009_session_edit_version")]
    after = [("sessions_app", "0010_agents")]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    old_apps = executor.loader.project_state(before).apps
    OldSession = old_apps.get_model("sessions_app", "Session")
    old = OldSession.objects.create(owner_id=owner.pk)

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(after)
    at_0010 = executor.loader.project_state(after).apps.get_model("sessions_app", "Session")
    pinned_version = at_0010.objects.filter(pk=old.pk).values_list("agent_version", flat=True)
    pinned_version = pinned_version.get()
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())
    pinned = Session.objects.select_related("agent_version__agent").get(pk=old.pk)
    default = Agent.objects.get(is_default=True)

    assert pinned.agent_version_id == pinned_version
    assert pinned.agent_version.agent == default
    assert pinned.agent_version.number == 1 and pinned.agent_version.config == {}
    # Overriding nothing, the default agent reads the site's settings.
    assert agents.settings_for(pinned).MODEL == agents.ahentic_settings.MODEL


def test_the_other_agents_are_named_as_a_run_found_them_and_an_agent_added_from_the_next_run(
    owner, owner_client, llm, tool_calls
):
    """The system prompt names the other agents the user may pick; a run reads them at its
    first step and keeps them (the cached prefix stays the same through the run), so an agent
    added during a run is named from the next run on."""
    from orchestrator_app.loop.prompt import OTHER_AGENTS_HEADING
    from tests.support.runs import post_unqueued, step_next

    new_agent("editor", name="Editor", description="Writes the site's pages.")
    chat = chat_with(owner, new_agent("reader", name="Reader"))
    llm.enqueue(tool_reply(tool_call("echo", {"text": "one"})), text_reply("Done."))
    llm.enqueue(text_reply("Again."))

    post_unqueued(owner_client, chat, "Echo once")
    step_next(chat)
    new_agent("critic", name="Critic", description="Reviews drafts.")  # during the run
    step_next(chat)
    post_unqueued(owner_client, chat, "And now?")
    step_next(chat)

    first, second, next_run = (system_text(r) for r in llm.message_requests())
    assert OTHER_AGENTS_HEADING in first and "- Editor (everywhere)" in first
    assert second == first  # the same prefix through the run: no Critic yet
    assert "- Critic (everywhere): Reviews drafts." in next_run
    assert "- Editor (everywhere)" in next_run and "- Reader" not in next_run
    assert [call["input"] for call in tool_calls] == [{"text": "one"}]
