"""Agents in the admin: every changed save is a new version, versions compare and roll back,
"make default", and the Session admin shows, filters and moves a session's agent version.

``admin_client`` (pytest-django) is a logged-in superuser.
"""

import json
import re

import pytest
from django.contrib.admin.models import ADDITION, CHANGE, LogEntry
from django.contrib.auth.models import Permission
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import NoReverseMatch, reverse

from sessions_app import agents, runstate
from sessions_app.models import Agent, AgentVersion, Session
from tests.support.factories import SessionFactory, UserFactory


def agent_url(view, *args):
    return reverse(f"admin:sessions_app_agent_{view}", args=args)


def shown_messages(response) -> list[str]:
    return [str(m) for m in response.context["messages"]]


def form_data(**overrides):
    data = {
        "slug": "helper",
        "name": "Helper",
        "description": "Reads pages for members.",
        "colour": "#336699",
        "permission": "",
        "shows_on": "site",
        "active": "on",
        "configuration": json.dumps({"MODEL": "claude-helper", "TOOLS": ["echo"]}),
        "change_note": "First cut",
        "based_on": "2",  # the latest version of ``helper`` when its page was opened
        "_save": "Save",
    }
    data.update(overrides)
    return {k: v for k, v in data.items() if v is not None}


@pytest.fixture
def helper(admin_user):
    agent = Agent.objects.create(slug="helper", name="Helper", shows_on="site")
    agents.version_save(agent, config={"MODEL": "claude-one"}, user=admin_user, note="v1 note")
    agents.version_save(
        agent, config={"MODEL": "claude-two", "SOUL": "Be brief."}, user=admin_user, note="v2"
    )
    return agent


def numbers(agent) -> list[int]:
    return list(agent.versions.order_by("number").values_list("number", flat=True))


def last_log(agent) -> LogEntry:
    return LogEntry.objects.filter(object_id=str(agent.pk)).order_by("-pk").first()


# --- saving ------------------------------------------------------------------------------------


def test_a_new_agent_gets_version_1_with_its_configuration(admin_client, admin_user):
    response = admin_client.post(agent_url("add"), form_data())

    assert response.status_code == 302, response.content
    agent = Agent.objects.get(slug="helper")
    version = agent.versions.get()
    assert (version.number, version.config, version.note) == (
        1,
        {"MODEL": "claude-helper", "TOOLS": ["echo"]},
        "First cut",
    )
    assert version.created_by == admin_user
    log = last_log(agent)
    assert log.action_flag == ADDITION
    assert "v1" in log.get_change_message()


def test_a_changed_configuration_makes_a_new_version_an_unchanged_one_does_not(
    admin_client, helper
):
    url = agent_url("change", helper.pk)
    page = admin_client.get(url).content.decode()
    assert "claude-two" in page  # the form shows the latest version's configuration

    renamed = admin_client.post(
        url,
        form_data(
            name="Helper 2",
            configuration=json.dumps({"SOUL": "Be brief.", "MODEL": "claude-two"}),
            change_note="",
        ),
    )
    assert renamed.status_code == 302, renamed.content
    helper.refresh_from_db()
    assert helper.name == "Helper 2"
    assert numbers(helper) == [1, 2]
    assert "version" not in last_log(helper).get_change_message()

    changed = admin_client.post(
        url,
        form_data(
            name="Helper 2",
            configuration=json.dumps({"MODEL": "claude-three"}),
            change_note="Newer model",
        ),
    )
    assert changed.status_code == 302, changed.content
    assert numbers(helper) == [1, 2, 3]
    latest = agents.latest_version(helper)
    assert (latest.config, latest.note) == ({"MODEL": "claude-three"}, "Newer model")
    log = last_log(helper)
    assert log.action_flag == CHANGE
    assert "v3" in log.get_change_message()


def test_a_configuration_saved_over_a_newer_version_is_refused(admin_client, helper, admin_user):
    agents.version_save(helper, config={"MODEL": "claude-meanwhile"}, user=admin_user)

    stale = admin_client.post(
        agent_url("change", helper.pk),
        form_data(configuration=json.dumps({"MODEL": "claude-mine"}), based_on="2"),
    )
    renamed = admin_client.post(
        agent_url("change", helper.pk),
        form_data(
            name="Renamed", configuration=json.dumps({"MODEL": "claude-meanwhile"}), based_on="2"
        ),
    )

    assert stale.status_code == 200
    assert f"v3 was saved by {admin_user.get_username()} after you opened" in (
        stale.content.decode()
    )
    assert renamed.status_code == 302  # the same configuration as v3: nothing to lose
    assert numbers(helper) == [1, 2, 3]
    assert agents.latest_version(helper).config == {"MODEL": "claude-meanwhile"}


@pytest.mark.parametrize(
    "configuration, problem",
    [
        (json.dumps({"MODLE": "claude-x"}), "MODLE: not a setting an agent may set"),
        (json.dumps({"MAX_STEPS_PER_RUN": -1}), "MAX_STEPS_PER_RUN: a positive whole number"),
        (json.dumps(["MODEL"]), "a JSON object"),
        ("{not json", "Enter a valid JSON"),
        # The model surface, refused here as the system checks refuse it in settings.
        (json.dumps({"THINKING": 12}), "THINKING for agent mode is 12"),
        (json.dumps({"EFFORT": "extreme"}), "THINKING_DISPLAY / EFFORT for agent mode"),
        (json.dumps({"WEB_SEARCH": {"max_uses": 0}}), "WEB_SEARCH for agent mode must be None"),
    ],
)
def test_an_invalid_configuration_is_a_form_error_and_saves_nothing(
    admin_client, helper, configuration, problem
):
    before = helper.updated_at
    response = admin_client.post(
        agent_url("change", helper.pk), form_data(name="Renamed", configuration=configuration)
    )

    assert response.status_code == 200
    assert problem in response.content.decode()
    helper.refresh_from_db()
    assert (helper.name, helper.updated_at) == ("Helper", before)
    assert numbers(helper) == [1, 2]

    added = admin_client.post(
        agent_url("add"), form_data(slug="other", configuration=configuration)
    )
    assert added.status_code == 200
    assert not Agent.objects.filter(slug="other").exists()


def test_a_colour_and_a_permission_are_checked(admin_client):
    response = admin_client.post(
        agent_url("add"), form_data(colour="blue", permission="nosuch.use_it")
    )

    page = response.content.decode()
    assert response.status_code == 200
    assert "A colour is #rrggbb" in page
    assert "No permission &#x27;nosuch.use_it&#x27; exists." in page
    assert not Agent.objects.filter(slug="helper").exists()


def test_the_list_shows_each_agents_latest_version(admin_client, helper):
    with CaptureQueriesContext(connection) as one:
        admin_client.get(agent_url("changelist"))
    for slug in ("b", "c"):
        agent = Agent.objects.create(slug=slug, name=slug.upper())
        agents.version_save(agent, config={})
    with CaptureQueriesContext(connection) as three:
        page = admin_client.get(agent_url("changelist")).content.decode()

    assert re.search(r"<td class=\"field-latest_version\">v2</td>", page)
    assert len(three) == len(one)  # no query per agent


# --- versions are never edited here ------------------------------------------------------------


def test_versions_have_no_admin_of_their_own(admin_client, helper):
    with pytest.raises(NoReverseMatch):
        reverse("admin:sessions_app_agentversion_changelist")
    version = helper.versions.first()
    assert admin_client.get(
        f"/admin/sessions_app/agentversion/{version.pk}/change/"
    ).status_code in (
        302,
        404,
    )
    assert AgentVersion.objects.get(pk=version.pk).config == version.config


# --- history, compare, rollback ----------------------------------------------------------------


def test_the_change_page_and_the_versions_page_list_the_history(admin_client, helper, admin_user):
    change = admin_client.get(agent_url("change", helper.pk)).content.decode()
    versions = admin_client.get(agent_url("versions", helper.pk)).content.decode()

    for page in (change, versions):
        assert "v1 note" in page and admin_user.get_username() in page
        assert f"{agent_url('versions_compare', helper.pk)}?a=1&amp;b=2" in page
    assert versions.count('value="Roll back to this version"') == 1  # not on the latest


def test_the_diff_of_two_versions_is_a_table_of_what_changed(admin_client, helper):
    response = admin_client.get(agent_url("versions_compare", helper.pk), {"a": 1, "b": 2})

    page = response.content.decode()
    table = page[page.index('id="agent-diff"') :]
    rows = re.findall(r"<tr>(.*?)</tr>", table, re.S)
    assert len(rows) == 3  # the head, MODEL and SOUL
    assert "MODEL" in rows[1] and "&quot;claude-one&quot;" in rows[1]
    assert "&quot;claude-two&quot;" in rows[1]
    assert "SOUL" in rows[2] and "&quot;Be brief.&quot;" in rows[2]

    same = admin_client.get(agent_url("versions_compare", helper.pk), {"a": 2, "b": 2})
    assert "No differences" in same.content.decode()


@pytest.mark.parametrize("query", [{"a": 1, "b": 9}, {"a": "x", "b": 2}, {}])
def test_comparing_versions_that_do_not_exist_is_a_message(admin_client, helper, query):
    response = admin_client.get(agent_url("versions_compare", helper.pk), query, follow=True)

    assert response.redirect_chain == [(agent_url("versions", helper.pk), 302)]
    assert shown_messages(response) == ["Choose two versions of this agent to compare."]


def test_a_rollback_makes_a_new_version_with_the_old_configuration(
    admin_client, helper, admin_user
):
    url = agent_url("versions_rollback", helper.pk, 1)
    assert admin_client.get(url).status_code == 405

    response = admin_client.post(url, follow=True)

    assert numbers(helper) == [1, 2, 3]
    latest = agents.latest_version(helper)
    assert latest.config == {"MODEL": "claude-one"}
    assert (latest.note, latest.created_by) == ("Rolled back to v1", admin_user)
    assert AgentVersion.objects.get(agent=helper, number=2).config["MODEL"] == "claude-two"
    assert "back to v1" in shown_messages(response)[0]
    assert last_log(helper).get_change_message() == "Rolled back to v1: new version v3."

    again = admin_client.post(agent_url("versions_rollback", helper.pk, 3), follow=True)
    assert numbers(helper) == [1, 2, 3]
    assert shown_messages(again) == ["v3 is already the latest version of Helper."]


def test_a_rollback_needs_the_change_permission(client, helper):
    viewer = UserFactory(username="viewer", is_staff=True)
    viewer.user_permissions.add(
        Permission.objects.get(content_type__app_label="sessions_app", codename="view_agent")
    )
    client.force_login(viewer)

    page = client.get(agent_url("versions", helper.pk))
    response = client.post(agent_url("versions_rollback", helper.pk, 1))

    assert page.status_code == 200
    assert "Roll back to this version" not in page.content.decode()
    assert response.status_code == 403
    assert numbers(helper) == [1, 2]
    assert client.post(agent_url("make_default", helper.pk)).status_code == 403


# --- the default agent -------------------------------------------------------------------------


def test_make_default_moves_the_default_and_is_logged(admin_client, helper):
    old = agents.default_agent()
    assert old is not None and old != helper

    response = admin_client.post(agent_url("make_default", helper.pk), follow=True)

    assert agents.default_agent() == helper
    assert Agent.objects.filter(is_default=True).count() == 1
    assert shown_messages(response) == ["Helper is now the default agent (latest version v2)."]
    assert last_log(helper).get_change_message() == "Made the default agent (latest version v2)."

    action = admin_client.post(
        agent_url("changelist"),
        {"action": "make_default", "_selected_action": [str(old.pk)]},
    )
    assert action.status_code == 302
    assert agents.default_agent() == old


def test_an_inactive_agent_cannot_be_the_default(admin_client, helper):
    Agent.objects.filter(pk=helper.pk).update(active=False)

    response = admin_client.post(agent_url("make_default", helper.pk), follow=True)

    assert "make it active" in shown_messages(response)[0]
    helper.refresh_from_db()
    assert not helper.is_default


# --- deleting ----------------------------------------------------------------------------------


def test_deleting_an_agent_that_sessions_use_is_refused_with_a_message(admin_client, helper, owner):
    SessionFactory(owner=owner, agent_version=agents.latest_version(helper))
    url = agent_url("delete", helper.pk)

    page = admin_client.get(url)
    posted = admin_client.post(url, {"post": "yes"})
    listed = admin_client.post(
        agent_url("changelist"),
        {"action": "delete_selected", "_selected_action": [str(helper.pk)], "post": "yes"},
    )

    assert page.status_code == 200
    assert "protected related objects" in page.content.decode()
    assert posted.status_code == 200 and listed.status_code == 200
    assert Agent.objects.filter(pk=helper.pk).exists()
    assert numbers(helper) == [1, 2]


def test_an_agent_no_session_uses_deletes_with_its_versions(admin_client, helper):
    response = admin_client.post(agent_url("delete", helper.pk), {"post": "yes"})

    assert response.status_code == 302
    assert not Agent.objects.filter(pk=helper.pk).exists()
    assert not AgentVersion.objects.filter(agent_id=helper.pk).exists()


# --- the Session admin -------------------------------------------------------------------------


def session_url(view, *args):
    return reverse(f"admin:sessions_app_session_{view}", args=args)


def test_the_session_list_shows_and_filters_by_agent(admin_client, helper, owner):
    on_helper = SessionFactory(
        owner=owner, title="With helper", agent_version=helper.versions.get(number=1)
    )
    SessionFactory(owner=owner, title="With default")

    everything = admin_client.get(session_url("changelist")).content.decode()
    filtered = admin_client.get(
        session_url("changelist"), {"agent_version__agent__id__exact": helper.pk}
    ).content.decode()
    detail = admin_client.get(session_url("change", on_helper.pk)).content.decode()

    assert "Helper v1" in everything and "With default" in everything
    assert "With helper" in filtered and "With default" not in filtered
    assert '<span class="ahentic-muted">Helper v1</span>' in filtered  # under the owner
    assert f"{agent_url('versions_compare', helper.pk)}?a=1&amp;b=2" in detail  # latest: v2


@pytest.mark.urls("tests.host_admin_site_without_agents")
def test_a_session_page_on_a_site_without_the_agents_admin_names_the_agent(
    admin_client, helper, owner
):
    session = SessionFactory(owner=owner, agent_version=helper.versions.get(number=1))

    response = admin_client.get(f"/ops/sessions_app/session/{session.pk}/change/")

    assert response.status_code == 200
    assert "Helper v1 (latest: v2)" in response.content.decode()


def test_the_session_list_costs_the_same_queries_for_more_sessions(admin_client, helper, owner):
    SessionFactory(owner=owner, agent_version=helper.versions.get(number=1))
    with CaptureQueriesContext(connection) as one:
        admin_client.get(session_url("changelist"))
    SessionFactory(owner=owner, agent_version=helper.versions.get(number=2))
    SessionFactory(owner=owner)
    with CaptureQueriesContext(connection) as three:
        admin_client.get(session_url("changelist"))

    assert len(three) == len(one)


def move(client, *sessions):
    return client.post(
        session_url("changelist"),
        {"action": "agent_version_latest", "_selected_action": [str(s.pk) for s in sessions]},
        follow=True,
    )


def test_moving_a_session_to_the_latest_version_says_what_changes(admin_client, helper, owner):
    session = SessionFactory(
        owner=owner, title="Old chat", agent_version=helper.versions.get(number=1)
    )
    before = Session.objects.get(pk=session.pk).version

    response = move(admin_client, session)

    session.refresh_from_db()
    assert session.agent_version == agents.latest_version(helper)
    assert session.version == before + 1  # the payload's ETag moves
    assert shown_messages(response) == [
        "“Old chat” moved from Helper v1 to v2. Changes: MODEL: "
        '"claude-one" → "claude-two"; SOUL: null → "Be brief.".'
    ]
    log = LogEntry.objects.get(object_id=str(session.pk))
    assert log.get_change_message() == "Moved from Helper v1 to v2."
    again = move(admin_client, session)
    assert shown_messages(again) == ["“Old chat” is already on Helper v2."]


def test_a_live_session_is_not_moved(admin_client, helper, owner):
    session = SessionFactory(owner=owner, agent_version=helper.versions.get(number=1))
    runstate.session_transition(
        session_id=session.pk, from_statuses=["idle"], to_status="running", lease_token=""
    )

    response = move(admin_client, session)

    session.refresh_from_db()
    assert session.agent_version.number == 1
    assert "a run is in progress" in shown_messages(response)[0]


def test_moving_needs_the_run_control_permission(client, helper, owner):
    session = SessionFactory(owner=owner, agent_version=helper.versions.get(number=1))
    viewer = UserFactory(username="viewer", is_staff=True)
    viewer.user_permissions.add(
        Permission.objects.get(content_type__app_label="sessions_app", codename="view_session")
    )
    client.force_login(viewer)

    page = client.get(session_url("change", session.pk))
    move(client, session)

    assert page.status_code == 200
    assert 'value="agent_version_latest"' not in page.content.decode()
    session.refresh_from_db()
    assert session.agent_version.number == 1


# --- the form a non-programmer uses ---------------------------------------------------------------


PRICED = {"input": 3, "output": 15, "cache_write": 3.75, "cache_read": 0.3}


@pytest.fixture
def form_world(settings):
    """A priced model, an MCP server and an agent a roster may name."""
    from orchestrator_app.models import McpServer

    settings.AHENTIC = {**settings.AHENTIC, "PRICES": {"claude-sonnet-5-5": PRICED}}
    McpServer.objects.create(slug="tickets", name="Tickets", url="https://mcp.example.com/mcp")
    researcher = Agent.objects.create(slug="researcher", name="Researcher")
    agents.version_save(researcher, config={})


def test_the_agent_form_shows_priced_models_tools_servers_and_agents(admin_client, form_world):
    page = admin_client.get(agent_url("add")).content.decode()

    assert 'value="claude-sonnet-5-5"' in page  # the model list: the priced models
    assert '<input type="checkbox" name="tools" value="echo"' in page
    assert 'name="tools-approval-echo"' in page  # each tool's approval policy beside it
    assert 'name="mcp_servers" value="tickets"' in page
    assert 'name="roster" value="researcher"' in page
    assert 'name="memory"' in page and 'name="spend_cap"' in page
    assert "Advanced" in page and 'name="configuration"' in page  # the raw JSON, folded


def test_saving_through_the_form_makes_the_version_the_same_settings_as_json_make(
    admin_client, form_world
):
    settings_as_json = {
        "MODEL": "claude-sonnet-5-5",
        "SOUL": "Answer members' questions.\nBe brief.",
        "TOOLS": ["echo", "notes_create"],
        "APPROVAL": {"notes_create": "always_allow"},
        "MCP_SERVERS": ["tickets"],
        "MEMORY": "user",
        "SPEND_CAP_USD": 2.5,
        "ROSTER": ["researcher"],
    }
    by_json = admin_client.post(
        agent_url("add"),
        form_data(slug="by-json", based_on="", configuration=json.dumps(settings_as_json)),
    )
    by_form = admin_client.post(
        agent_url("add"),
        {
            **form_data(slug="by-form", based_on="", configuration="{}"),
            "structured": "1",
            "model": "claude-sonnet-5-5",
            "instructions": "Answer members' questions.\r\nBe brief.",
            "tools": ["echo", "notes_create"],
            "tools-approval-echo": "",
            "tools-approval-notes_create": "always_allow",
            "mcp_servers": ["tickets"],
            "memory": "user",
            "spend_cap": "2.50",
            "roster": ["researcher"],
        },
    )

    assert by_json.status_code == 302 and by_form.status_code == 302
    json_version = agents.latest_version(Agent.objects.get(slug="by-json"))
    form_version = agents.latest_version(Agent.objects.get(slug="by-form"))
    assert form_version.config == json_version.config == settings_as_json


def test_an_unchanged_form_keeps_the_configuration_and_a_changed_field_makes_a_version(
    admin_client, helper, form_world
):
    page = admin_client.get(agent_url("change", helper.pk))
    form = page.context["adminform"].form
    posted = {
        **form_data(configuration=json.dumps(helper.versions.get(number=2).config)),
        "structured": "1",
        "model": form["model"].value() or "",
        "instructions": form["instructions"].value() or "",
        "tools-all": "on",
        "memory": "",
        "spend_cap": "",
    }

    unchanged = admin_client.post(agent_url("change", helper.pk), posted)
    assert unchanged.status_code == 302
    assert numbers(helper) == [1, 2]  # the form's fields say what v2 says: no new version

    del posted["tools-all"]  # only the checked tools, one of them
    changed = admin_client.post(
        agent_url("change", helper.pk),
        {**posted, "model": "claude-sonnet-5-5", "spend_cap": "5", "tools": ["echo"]},
    )
    assert changed.status_code == 302
    assert numbers(helper) == [1, 2, 3]
    assert agents.latest_version(helper).config == {
        "MODEL": "claude-sonnet-5-5",
        "SOUL": "Be brief.",
        "SPEND_CAP_USD": 5,
        "TOOLS": ["echo"],
    }
