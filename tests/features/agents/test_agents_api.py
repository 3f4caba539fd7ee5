"""Agents through the API: GET agents (who may use which, where they show), POST sessions with
an agent or a version, the payload's and the list's agent, and moving a chat to its agent's
latest version."""

import pytest
from django.contrib.auth.models import Group, Permission
from django.db import connection
from django.test.utils import CaptureQueriesContext

from sessions_app import agents, runstate
from sessions_app.models import Agent, Session
from tests.support.api import API, client_for
from tests.support.factories import UserFactory


def make_agent(slug, *, config=None, groups=(), **fields):
    agent = Agent.objects.create(slug=slug, name=slug.title(), **fields)
    agent.groups.set(groups)
    agents.version_save(agent, config=config or {})
    return agent


@pytest.fixture
def editors(db):
    return Group.objects.create(name="editors")


@pytest.fixture
def roster(db, editors):
    """The default agent (from the migration) and agents each hidden from a plain user for
    one reason: the place they show is not, permission, group, inactive."""
    return {
        "helper": make_agent("helper", shows_on=Agent.Place.SITE, description="Reads pages"),
        "admin-only": make_agent("admin-only", shows_on=Agent.Place.ADMIN),
        "ops": make_agent("ops", permission="sessions_app.control_runs"),
        "editor": make_agent("editor", groups=[editors]),
        "retired": make_agent("retired", active=False),
    }


def slugs(client, query=""):
    response = client.get(f"{API}/agents{query}")
    assert response.status_code == 200, response.content
    return [agent["slug"] for agent in response.json()]


def grant(user, codename):
    user.user_permissions.add(
        Permission.objects.get(codename=codename, content_type__app_label="sessions_app")
    )


# --- GET agents -----------------------------------------------------------------------------


def test_it_lists_the_agents_the_user_may_use(owner_client, roster):
    assert slugs(owner_client) == ["admin-only", "default", "helper"]


def test_the_agents_permission_and_groups_decide(roster, editors):
    user = UserFactory(agent_permission=True)
    grant(user, "control_runs")
    user.groups.add(editors)

    assert slugs(client_for(user)) == ["admin-only", "default", "editor", "helper", "ops"]


def test_a_superuser_sees_every_active_agent(roster):
    admin = UserFactory(is_superuser=True, is_staff=True)

    assert slugs(client_for(admin)) == ["admin-only", "default", "editor", "helper", "ops"]


@pytest.mark.parametrize(
    ("place", "expected"),
    [("site", ["default", "helper"]), ("admin", ["admin-only", "default"])],
)
def test_place_filters_where_an_agent_shows(owner_client, roster, place, expected):
    assert slugs(owner_client, f"?place={place}") == expected


def test_an_unknown_place_is_a_400(owner_client, roster):
    response = owner_client.get(f"{API}/agents?place=moon")

    assert response.status_code == 400
    assert response.json()["code"] == "ahentic_invalid_input"
    assert "place" in response.json()["fields"]


def test_an_agent_shows_its_latest_version_and_what_it_is(owner_client, roster):
    agents.version_save(roster["helper"], config={"MODEL": "claude-haiku-4-5"})
    Agent.objects.filter(pk=roster["helper"].pk).update(colour="#336699")

    response = owner_client.get(f"{API}/agents/helper")

    assert response.status_code == 200
    assert response.json() == {
        "slug": "helper",
        "name": "Helper",
        "description": "Reads pages",
        "colour": "#336699",
        "showsOn": "site",
        "isDefault": False,
        "version": 2,
    }
    [default] = [a for a in owner_client.get(f"{API}/agents").json() if a["isDefault"]]
    assert default["slug"] == "default"


@pytest.mark.parametrize("slug", ["ops", "editor", "retired", "nobody"])
def test_an_agent_the_user_may_not_use_is_a_404(owner_client, roster, slug):
    response = owner_client.get(f"{API}/agents/{slug}")

    assert response.status_code == 404
    assert response.json()["code"] == "ahentic_agent_not_found"


def test_the_list_reads_a_fixed_number_of_queries_whatever_the_number_of_agents(
    owner_client, editors
):
    owner_client.get(f"{API}/agents")  # the agent permission, then cached
    with CaptureQueriesContext(connection) as one:
        owner_client.get(f"{API}/agents")
    for i in range(6):
        make_agent(f"extra-{i}")

    with CaptureQueriesContext(connection) as seven:
        assert len(slugs(owner_client)) == 7

    assert len(seven) == len(one)


def test_agents_that_name_groups_cost_one_query_of_the_users_groups_whatever_their_number(
    editors,
):
    """``sessions_app.access``: the user's groups are read once for the whole list, not once
    per agent that names groups."""
    user = UserFactory(agent_permission=True)
    user.groups.add(editors)
    client = client_for(user)
    make_agent("editor-0", groups=[editors])
    slugs(client)  # the agent permission, then cached
    with CaptureQueriesContext(connection) as one:
        assert "editor-0" in slugs(client)
    for i in range(1, 7):
        make_agent(f"editor-{i}", groups=[editors])
    make_agent("others", groups=[Group.objects.create(name="others")])

    with CaptureQueriesContext(connection) as seven:
        listed = slugs(client)

    assert [slug for slug in listed if slug.startswith("editor-")] == [
        f"editor-{i}" for i in range(7)
    ]
    assert "others" not in listed
    assert len(seven) == len(one)


def test_agents_need_the_api_permission(noperm_client, anon_client, roster):
    assert noperm_client.get(f"{API}/agents").status_code == 403
    assert anon_client.get(f"{API}/agents").status_code == 401


# --- POST sessions with an agent --------------------------------------------------------------


def create(client, body):
    return client.post(f"{API}/sessions", body, format="json")


def test_a_chat_names_its_agent_and_pins_its_latest_version(owner_client, roster):
    agents.version_save(roster["helper"], config={"MODEL": "claude-haiku-4-5"})

    response = create(owner_client, {"agent": "helper"})

    assert response.status_code == 201, response.content
    assert response.json()["agent"] == {
        "slug": "helper",
        "name": "Helper",
        "colour": "",
        "version": 2,
        "latestVersion": 2,
    }
    session = Session.objects.get(pk=response.json()["id"])
    assert (session.agent_version.agent.slug, session.agent_version.number) == ("helper", 2)


def test_a_chat_may_name_a_version(owner_client, roster):
    agents.version_save(roster["helper"], config={"MODEL": "claude-haiku-4-5"})

    response = create(owner_client, {"agent": "helper", "agentVersion": 1})

    assert response.status_code == 201
    assert response.json()["agent"]["version"] == 1
    assert response.json()["agent"]["latestVersion"] == 2


def test_without_an_agent_a_chat_has_the_default_one(owner_client, roster):
    response = create(owner_client, {})

    assert response.status_code == 201
    assert response.json()["agent"]["slug"] == "default"


@pytest.mark.parametrize(
    "body",
    [
        {"agent": "ops"},
        {"agent": "editor"},
        {"agent": "retired"},
        {"agent": "nobody"},
        {"agent": "helper", "agentVersion": 7},
        {"agentVersion": 9},
    ],
)
def test_an_agent_or_version_the_user_may_not_use_creates_nothing(owner_client, roster, body):
    response = create(owner_client, body)

    assert response.status_code == 404
    assert response.json()["code"] == "ahentic_agent_not_found"
    assert not Session.objects.exists()


@pytest.mark.parametrize(
    "body",
    [{"agent": 3}, {"agent": "x" * 65}, {"agentVersion": 0}, {"agentVersion": 2**31}],
)
def test_a_malformed_agent_is_a_400(owner_client, roster, body):
    response = create(owner_client, body)

    assert response.status_code == 400
    assert response.json()["code"] == "ahentic_invalid_input"
    assert not Session.objects.exists()


def test_a_group_member_may_start_a_chat_with_the_groups_agent(roster, editors):
    user = UserFactory(agent_permission=True)
    user.groups.add(editors)

    response = create(client_for(user), {"agent": "editor"})

    assert response.status_code == 201
    assert response.json()["agent"]["slug"] == "editor"


# --- the payload's agent, pinning, the list ---------------------------------------------------


def test_a_new_version_does_not_change_a_chats_version(owner_client, roster):
    created = create(owner_client, {"agent": "helper"}).json()

    agents.version_save(roster["helper"], config={"SOUL": "Be brief."})
    payload = owner_client.get(f"{API}/sessions/{created['id']}").json()

    assert payload["agent"]["version"] == 1
    assert payload["agent"]["latestVersion"] == 2
    session = Session.objects.get(pk=created["id"])
    assert agents.settings_for(session).SOUL != "Be brief."


def test_a_chat_pinned_to_no_version_has_no_agent(owner_client, owner):
    from tests.support.factories import SessionFactory

    session = SessionFactory(owner=owner)
    Session.objects.filter(pk=session.pk).update(agent_version=None)  # a row from before agents

    payload = owner_client.get(f"{API}/sessions/{session.pk}").json()
    listed = owner_client.get(f"{API}/sessions").json()["sessions"]

    assert payload["agent"] is None
    assert listed[0]["agent"] is None


def test_the_list_shows_and_filters_by_agent(owner_client, roster):
    helper = create(owner_client, {"agent": "helper", "title": "With the helper"}).json()
    create(owner_client, {"title": "With the default"})

    listed = owner_client.get(f"{API}/sessions").json()["sessions"]
    filtered = owner_client.get(f"{API}/sessions?agent=helper").json()["sessions"]
    none = owner_client.get(f"{API}/sessions?agent=nobody").json()["sessions"]

    assert [(row["title"], row["agent"]["slug"]) for row in listed] == [
        ("With the default", "default"),
        ("With the helper", "helper"),
    ]
    assert listed[1]["agent"] == {"slug": "helper", "name": "Helper", "colour": "", "version": 1}
    assert [row["id"] for row in filtered] == [helper["id"]]
    assert none == []


# --- moving a chat to the latest version ------------------------------------------------------


def latest_url(session_id):
    return f"{API}/sessions/{session_id}/agent/latest"


def test_moving_to_the_latest_version_says_what_changes(owner_client, roster):
    created = create(owner_client, {"agent": "helper"}).json()
    agents.version_save(roster["helper"], config={"MODEL": "claude-haiku-4-5", "SOUL": "Be brief."})

    preview = owner_client.get(latest_url(created["id"]))
    moved = owner_client.post(latest_url(created["id"]), format="json")

    assert preview.status_code == 200
    changes = sorted(preview.json()["changes"], key=lambda c: c["key"])
    assert [c["key"] for c in changes] == ["MODEL", "SOUL"]
    assert changes[0]["after"] == "claude-haiku-4-5"
    assert changes[1]["after"] == "Be brief."
    assert preview.json()["version"] == 1 and preview.json()["latestVersion"] == 2
    assert moved.status_code == 200, moved.content
    assert moved.json()["agent"]["version"] == 2
    assert sorted(moved.json()["changes"], key=lambda c: c["key"]) == changes
    assert moved.json()["version"] > created["version"]  # the ETag moves
    session = Session.objects.get(pk=created["id"])
    assert agents.settings_for(session).SOUL == "Be brief."


def test_a_chat_at_the_latest_version_moves_nowhere(owner_client, roster):
    created = create(owner_client, {"agent": "helper"}).json()

    moved = owner_client.post(latest_url(created["id"]), format="json")

    assert moved.status_code == 200
    assert moved.json()["changes"] == []
    assert moved.json()["version"] == created["version"]
    assert "changes" not in owner_client.get(f"{API}/sessions/{created['id']}").json()


@pytest.mark.parametrize("newer", [True, False], ids=["newer", "at-latest"])
@pytest.mark.parametrize("status", Session.LIVE)
def test_a_live_chat_keeps_its_version(owner_client, roster, status, newer):
    created = create(owner_client, {"agent": "helper"}).json()
    if newer:
        agents.version_save(roster["helper"], config={"SOUL": "Be brief."})
    runstate.session_update(session_id=created["id"], status=status)

    response = owner_client.post(latest_url(created["id"]), format="json")

    assert response.status_code == 409
    assert response.json()["code"] == "ahentic_session_busy"
    assert Session.objects.get(pk=created["id"]).agent_version.number == 1


def test_the_writer_refuses_a_live_chat(owner_client, roster):
    created = create(owner_client, {"agent": "helper"}).json()
    version = agents.version_save(roster["helper"], config={"SOUL": "Be brief."})
    runstate.session_update(session_id=created["id"], status=Session.Status.RUNNING)

    assert runstate.agent_version_set(created["id"], version.pk) is False
    runstate.session_update(session_id=created["id"], status=Session.Status.IDLE)
    assert runstate.agent_version_set(created["id"], version.pk) is True
    assert Session.objects.get(pk=created["id"]).agent_version_id == version.pk


def test_a_chat_whose_agent_the_user_may_no_longer_use_does_not_move(owner_client, roster):
    created = create(owner_client, {"agent": "helper"}).json()
    agents.version_save(roster["helper"], config={"SOUL": "Be brief."})
    Agent.objects.filter(slug="helper").update(active=False)

    for method in ("get", "post"):
        response = getattr(owner_client, method)(latest_url(created["id"]), format="json")
        assert response.status_code == 404
        assert response.json()["code"] == "ahentic_agent_not_found"
    assert Session.objects.get(pk=created["id"]).agent_version.number == 1


def test_another_users_chat_does_not_move(owner_client, other_client, roster):
    created = create(owner_client, {"agent": "helper"}).json()
    agents.version_save(roster["helper"], config={"SOUL": "Be brief."})

    response = other_client.post(latest_url(created["id"]), format="json")

    assert response.status_code == 404
    assert response.json()["code"] == "ahentic_session_not_found"
    assert Session.objects.get(pk=created["id"]).agent_version.number == 1


def test_the_schema_documents_the_agent_routes(owner_client):
    schema = owner_client.get(f"{API}/schema", HTTP_ACCEPT="application/json").json()

    assert {"/agents", "/agents/{slug}", "/sessions/{session_id}/agent/latest"} <= set(
        schema["paths"]
    )
    assert set(schema["paths"]["/sessions/{session_id}/agent/latest"]) == {"get", "post"}
    create_body = schema["components"]["schemas"]["SessionCreateRequest"]["properties"]
    assert {"agent", "agentVersion"} <= set(create_body)
    payload = schema["components"]["schemas"]["SessionPayload"]["properties"]
    assert "agent" in payload and "changes" in payload
