"""The API on any host: the agent permission check for any user model, conditional GET, and the
OpenAPI schema on a host that configured neither DRF nor drf-spectacular."""

import json
import re
import subprocess
import sys
import textwrap
import uuid
from types import SimpleNamespace

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from artifacts_app import store
from orchestrator_app.api.permissions import HasAgentPermission
from sessions_app import services
from tests.support.api import API, payload_of
from tests.support.factories import SessionFactory, UserFactory
from tests.support.paths import ROOT

pytestmark = pytest.mark.django_db


def agent_permission() -> Permission:
    return Permission.objects.get(codename="use_agent", content_type__app_label="sessions_app")


def holds(user) -> bool:
    return HasAgentPermission().has_permission(SimpleNamespace(user=user), None)


def api_status(user) -> int:
    """What GET sessions answers ``user`` now (a fresh login, as a new request would)."""
    client = APIClient()
    client.force_login(get_user_model().objects.get(pk=user.pk))
    return client.get(f"{API}/sessions").status_code


# --- the permission check ------------------------------------------------------------------


def test_a_staff_user_without_the_permission_is_refused_on_every_route():
    staff = UserFactory(is_staff=True, agent_permission=False)
    session = SessionFactory(owner=staff)
    client = APIClient()
    client.force_login(staff)

    answers = {
        "list": client.get(f"{API}/sessions").status_code,
        "create": client.post(f"{API}/sessions", {}, format="json").status_code,
        "poll": client.get(f"{API}/sessions/{session.pk}").status_code,
        "messages": client.get(f"{API}/sessions/{session.pk}/messages").status_code,
        "tools": client.get(f"{API}/tools").status_code,
    }

    assert answers == dict.fromkeys(answers, 403)
    staff.user_permissions.add(agent_permission())
    assert client.get(f"{API}/sessions/{session.pk}").status_code == 200


def test_a_superuser_holds_it_without_a_grant():
    user = UserFactory(agent_permission=False)
    assert api_status(user) == 403

    user.is_superuser = True
    user.save()
    assert api_status(user) == 200

    user.is_superuser = False
    user.save()
    assert api_status(user) == 403


@pytest.mark.parametrize("grant", ["direct", "group"])
def test_the_answer_is_read_once_then_cached(grant):
    user = UserFactory(agent_permission=False)
    if grant == "direct":
        user.user_permissions.add(agent_permission())
    else:
        group = Group.objects.create(name="agents")
        group.permissions.add(agent_permission())
        user.groups.add(group)

    with CaptureQueriesContext(connection) as first:
        assert holds(get_user_model().objects.get(pk=user.pk))
    with CaptureQueriesContext(connection) as second:
        assert holds(get_user_model().objects.get(pk=user.pk))

    # ModelBackend's two reads (own and group permissions) besides loading the user, then none.
    assert len(first) == 3
    assert len(second) == 1


def test_without_a_cache_time_every_check_asks_the_backends(settings):
    settings.AHENTIC = {**settings.AHENTIC, "PERMISSION_CACHE_S": 0}
    user = get_user_model().objects.get(pk=UserFactory(agent_permission=True).pk)

    for _ in range(2):
        with CaptureQueriesContext(connection) as queries:
            assert holds(get_user_model().objects.get(pk=user.pk))
        assert len(queries) == 3


def test_a_grant_or_revocation_from_the_users_side_takes_effect_at_once():
    user = UserFactory(agent_permission=False)
    assert api_status(user) == 403

    user.user_permissions.add(agent_permission())
    assert api_status(user) == 200
    user.user_permissions.remove(agent_permission())
    assert api_status(user) == 403

    group = Group.objects.create(name="agents")
    group.permissions.add(agent_permission())
    user.groups.add(group)
    assert api_status(user) == 200
    user.groups.clear()
    assert api_status(user) == 403


def test_a_grant_or_revocation_from_the_permissions_or_groups_side_takes_effect_at_once():
    user, bystander = UserFactory(agent_permission=False), UserFactory(agent_permission=True)
    assert (api_status(user), api_status(bystander)) == (403, 200)

    agent_permission().user_set.add(user)
    assert api_status(user) == 200
    agent_permission().user_set.remove(user)
    assert api_status(user) == 403

    group = Group.objects.create(name="agents")
    group.permissions.add(agent_permission())
    group.user_set.add(user)
    assert api_status(user) == 200
    group.user_set.clear()
    assert api_status(user) == 403
    assert api_status(bystander) == 200


def test_what_a_group_grants_changes_its_members_answers():
    members = [UserFactory(agent_permission=False) for _ in range(2)]
    group = Group.objects.create(name="agents")
    group.user_set.add(*members)
    assert [api_status(m) for m in members] == [403, 403]

    group.permissions.add(agent_permission())
    assert [api_status(m) for m in members] == [200, 200]
    group.permissions.remove(agent_permission())
    assert [api_status(m) for m in members] == [403, 403]

    agent_permission().group_set.add(group)
    assert [api_status(m) for m in members] == [200, 200]
    group.delete()
    assert [api_status(m) for m in members] == [403, 403]


def test_a_deleted_permission_is_no_longer_held(settings):
    settings.AHENTIC = {**settings.AHENTIC, "PERMISSION": "sessions_app.try_agent"}
    permission = Permission.objects.create(
        codename="try_agent",
        name="Try the agent",
        content_type=agent_permission().content_type,
    )
    group = Group.objects.create(name="triers")
    group.permissions.add(permission)
    user = UserFactory(agent_permission=False)
    user.groups.add(group)
    assert api_status(user) == 200

    permission.delete()
    assert api_status(user) == 403


def test_the_answer_is_per_user_and_per_permission_setting(settings):
    granted, refused = UserFactory(agent_permission=True), UserFactory(agent_permission=False)
    assert (api_status(granted), api_status(refused)) == (200, 403)

    settings.AHENTIC = {**settings.AHENTIC, "PERMISSION": "auth.view_user"}
    assert (api_status(granted), api_status(refused)) == (403, 403)
    refused.user_permissions.add(Permission.objects.get(codename="view_user"))
    assert (api_status(granted), api_status(refused)) == (403, 200)


class GrantingBackend:
    def authenticate(self, request, **credentials):
        return None

    def has_perm(self, user_obj, perm, obj=None):
        return getattr(user_obj, "name", "") == "granted" and perm == "sessions_app.use_agent"


def user_without_permissions_mixin(name: str, pk: int = 1, **attributes):
    """An authenticated user of a model without ``PermissionsMixin``: no ``is_superuser``, no
    ``groups``, no ``user_permissions``, no ``has_perm``."""
    return SimpleNamespace(
        pk=pk, name=name, is_active=True, is_authenticated=True, is_anonymous=False, **attributes
    )


def test_without_has_perm_only_the_backends_other_than_the_model_backend_grant(settings):
    settings.AUTHENTICATION_BACKENDS = ["django.contrib.auth.backends.ModelBackend"]
    assert not holds(user_without_permissions_mixin("granted", pk=1))

    settings.AUTHENTICATION_BACKENDS = [
        "django.contrib.auth.backends.ModelBackend",
        f"{__name__}.GrantingBackend",
    ]
    with CaptureQueriesContext(connection) as queries:
        assert holds(user_without_permissions_mixin("granted", pk=2))
        assert not holds(user_without_permissions_mixin("someone else", pk=3))
    assert len(queries) == 0


def test_a_user_models_own_has_perm_decides():
    def has_perm(perm):
        return perm == "sessions_app.use_agent"

    assert holds(user_without_permissions_mixin("any", pk=1, has_perm=has_perm))
    assert not holds(user_without_permissions_mixin("any", pk=2, has_perm=lambda perm: False))


# --- conditional GET ------------------------------------------------------------------------


@pytest.mark.parametrize("header", ['W/"{tag}"', '"other", {etag}', "*"])
def test_a_poll_answers_304_to_a_weak_listed_or_star_tag(owner_client, session, header):
    etag = owner_client.get(f"{API}/sessions/{session.pk}")["ETag"]

    response = owner_client.get(
        f"{API}/sessions/{session.pk}",
        HTTP_IF_NONE_MATCH=header.format(etag=etag, tag=etag.strip('"')),
    )

    assert response.status_code == 304
    assert response["ETag"] == etag
    assert "X-Ahentic-Heartbeat" in response


def test_a_poll_for_a_foreign_session_is_a_404_without_reading_it_twice(other_client, session):
    with CaptureQueriesContext(connection) as queries:
        response = other_client.get(f"{API}/sessions/{session.pk}")

    assert response.status_code == 404
    # Authentication (2), the permission check (ModelBackend's two reads, then cached), the
    # poll's read (no row); the demo site's flatpage middleware then looks at every 404.
    ours = [
        q for q in queries if "django_flatpage" not in q["sql"] and "django_site" not in q["sql"]
    ]
    assert len(ours) == 5


def test_the_payload_cache_serves_each_session_its_own_payload(owner_client, owner):
    first, second = (
        SessionFactory(owner=owner, title="First"),
        SessionFactory(owner=owner, title="Second"),
    )
    assert first.version == second.version  # the same version: only the id tells them apart

    answers = [owner_client.get(f"{API}/sessions/{s.pk}").json() for s in (first, second, first)]

    assert [(a["id"], a["title"]) for a in answers] == [
        (str(first.pk), "First"),
        (str(second.pk), "Second"),
        (str(first.pk), "First"),
    ]


def test_the_payload_cache_serves_no_user_another_users_session(owner_client, session):
    other = UserFactory(agent_permission=True)
    own = SessionFactory(owner=other, title="Theirs")
    other_client = APIClient()
    other_client.force_login(other)
    assert owner_client.get(f"{API}/sessions/{session.pk}").status_code == 200  # now cached

    foreign = other_client.get(f"{API}/sessions/{session.pk}")
    theirs = other_client.get(f"{API}/sessions/{own.pk}")

    assert foreign.status_code == 404
    assert foreign.json()["code"] == "ahentic_session_not_found"
    assert (theirs.json()["id"], theirs.json()["title"]) == (str(own.pk), "Theirs")


def test_the_payload_cache_keeps_the_artifact_bodies_apart(owner_client, session):
    store.stage(session_id=session.pk, key="draft", kind="markdown", payload={"content": "# A"})
    url = f"{API}/sessions/{session.pk}"

    plain = owner_client.get(url).json()
    full = owner_client.get(url, {"include": "artifacts"}).json()
    plain_again = owner_client.get(url).json()

    assert "payload" not in plain["artifacts"][0]
    assert full["artifacts"][0]["payload"] == {"content": "# A"}
    assert plain_again == plain


def test_the_trace_part_is_cached_per_session_and_follows_new_rows(owner_client, owner):
    first, second = SessionFactory(owner=owner), SessionFactory(owner=owner)
    for session in (first, second):
        services.trace_record(session_id=session.pk, type="step", summary=f"{session.pk} one")

    def trace(session):
        return [row["summary"] for row in payload_of(owner_client, session)["trace"]]

    assert trace(first) == [f"{first.pk} one"]
    assert trace(second) == [f"{second.pk} one"]  # the same trace count, its own rows
    services.trace_record(session_id=first.pk, type="step", summary="two")
    owner_client.patch(f"{API}/sessions/{first.pk}", {"title": "Renamed"}, format="json")

    assert trace(first) == [f"{first.pk} one", "two"]


# --- the schema -----------------------------------------------------------------------------


def served_schema(client) -> dict:
    response = client.get(f"{API}/schema", {"format": "json"})
    assert response.status_code == 200
    return response.json()["components"]["schemas"]


def test_the_schema_states_what_the_request_bodies_take(owner_client, settings):
    settings.AHENTIC = {**settings.AHENTIC, "ATTACHMENT_MAX_PER_MESSAGE": 3}
    schemas = served_schema(owner_client)

    approval = schemas["ApprovalRequest"]["properties"]
    assert schemas["DecisionEnum"]["enum"] == [
        "allow_once",
        "allow_session",
        "always_allow",
        "deny",
    ]
    assert approval["decision"] == {"$ref": "#/components/schemas/DecisionEnum"}
    for component, field in [
        ("ApprovalRequest", "input"),
        ("ActionRequest", "input"),
        ("MessageCreateRequest", "pageContext"),
        ("PatchedSessionUpdateRequest", "pageContext"),
    ]:
        assert schemas[component]["properties"][field]["type"] == "object", component
    browser = schemas["BrowserResultRequest"]
    assert browser["anyOf"] == [
        {"required": ["result"]},
        {"required": ["error"], "properties": {"error": {"type": "string"}}},
    ]
    attachments = schemas["MessageCreateRequest"]["properties"]["attachments"]
    assert attachments["maxItems"] == 3
    assert attachments["items"] == {"type": "string", "format": "uuid"}


def test_the_shared_status_enums_have_names(owner_client):
    schemas = served_schema(owner_client)

    assert "SessionStatusEnum" in schemas
    hashed = [name for name in schemas if re.fullmatch(r"\w+[0-9A-F]{3}Enum", name)]
    assert hashed == []
    row_status = schemas["SessionRow"]["properties"]["status"]
    assert row_status == {"$ref": "#/components/schemas/SessionStatusEnum"}


def test_what_the_schema_allows_the_api_takes(owner_client, session):
    """Cases at the edges of the schema (the fuzzing leg's positive phase runs many)."""
    url = f"{API}/sessions/{session.pk}"

    answers = [
        owner_client.get(f"{url}/messages", {"after": 2, "before": 9}).status_code,
        owner_client.get(f"{API}/sessions", {"cursor": ""}).status_code,
        owner_client.post(
            f"{url}/approvals", {"decision": "deny", "input": {}}, format="json"
        ).status_code,
        owner_client.post(
            f"{url}/browser-results", {"callId": "x", "result": None}, format="json"
        ).status_code,
        owner_client.post(
            f"{url}/messages",
            {"content": "", "attachments": [str(uuid.uuid4())]},
            format="json",
        ).status_code,
    ]

    # Taken, or refused for the session's state (nothing pending, no such upload): 409.
    assert answers == [200, 200, 409, 409, 409]


@pytest.mark.parametrize(
    ("accept", "content_type"),
    [
        ("application/json", "application/json"),
        ("application/vnd.oai.openapi+json", "application/vnd.oai.openapi+json"),
        ("application/vnd.oai.openapi", "application/vnd.oai.openapi"),
        ("*/*", "application/vnd.oai.openapi+json"),
    ],
)
def test_the_schema_answers_json_and_yaml_by_accept_header(owner_client, accept, content_type):
    response = owner_client.get(f"{API}/schema", HTTP_ACCEPT=accept)

    assert response.status_code == 200
    assert response["Content-Type"].startswith(content_type)
    assert b"SessionPayload" in response.content


BARE_HOST_SETTINGS = """\
from tests.settings import *  # noqa: F403

# What the README's install steps leave out: no REST_FRAMEWORK, no SPECTACULAR_SETTINGS, and
# drf_spectacular is not an installed app.
del REST_FRAMEWORK, SPECTACULAR_SETTINGS
INSTALLED_APPS = [app for app in INSTALLED_APPS if not app.startswith("drf_spectacular")]
ROOT_URLCONF = "bare_host_urls"
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}


# Every app's tables made from its models (what pytest-django's --nomigrations does): this host
# is about the schema view, and replaying every migration costs seconds of CPU (the suite's own
# test database runs them).
class NoMigrations(dict):
    def __contains__(self, app_label):
        return True

    def __getitem__(self, app_label):
        return None


MIGRATION_MODULES = NoMigrations()
"""

BARE_HOST_URLS = """\
from django.urls import include, path

urlpatterns = [path("ahentic/v1/", include("orchestrator_app.urls"))]
"""

BARE_HOST_RUN = """\
import json

import django

django.setup()
from django.contrib.auth.models import Permission, User
from django.core.management import call_command
from django.test import Client

call_command("migrate", run_syncdb=True, verbosity=0)  # the tables, from the models
user = User.objects.create_user("host", password="pw")
user.user_permissions.add(Permission.objects.get(codename="use_agent"))
client = Client()
client.force_login(user)
answers = {}
for accept in ("application/json", "application/vnd.oai.openapi", None):
    headers = {"HTTP_ACCEPT": accept} if accept else {}
    response = client.get("/ahentic/v1/schema", **headers)
    answers[str(accept)] = [response.status_code, response["Content-Type"], len(response.content)]
print(json.dumps(answers))
"""


def test_the_schema_is_served_on_a_host_without_drf_or_spectacular_settings(tmp_path):
    (tmp_path / "bare_host_settings.py").write_text(BARE_HOST_SETTINGS)
    (tmp_path / "bare_host_urls.py").write_text(BARE_HOST_URLS)
    env = {
        "DJANGO_SETTINGS_MODULE": "bare_host_settings",
        "PYTHONPATH": f"{tmp_path}:{ROOT}",
        "PATH": "/usr/bin:/bin",
    }
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(BARE_HOST_RUN)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )

    assert result.returncode == 0, result.stderr
    answers = json.loads(result.stdout.splitlines()[-1])
    status, content_type, _ = answers["application/json"]
    assert (status, content_type.split(";")[0]) == (200, "application/json")
    status, content_type, _ = answers["application/vnd.oai.openapi"]
    assert (status, content_type.split(";")[0]) == (200, "application/vnd.oai.openapi")
    assert answers["None"][0] == 200
