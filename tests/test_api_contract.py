"""The API on any host: the agent permission check for any user model, conditional GET, and the
OpenAPI schema on a host that configured neither DRF nor drf-spectacular."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.db import connection
from django.test.utils import CaptureQueriesContext

from orchestrator_app.api import permissions
from orchestrator_app.api.permissions import HasAgentPermission, agent_permission_held
from sessions_app.models import Session

from .conftest import API
from .factories import UserFactory

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.django_db


def agent_permission() -> Permission:
    return Permission.objects.get(codename="use_agent", content_type__app_label="sessions_app")


def holds(user) -> bool:
    return HasAgentPermission().has_permission(SimpleNamespace(user=user), None)


# --- the permission check ------------------------------------------------------------------


def test_the_check_reads_the_user_models_own_many_to_many_columns():
    user_model = get_user_model()
    query = user_model._base_manager.filter(agent_permission_held("pk"), pk=1).query
    sql = str(query).replace('"', "").replace("`", "")  # PostgreSQL, SQLite / MySQL quoting
    user_column = f"{user_model._meta.db_table}.{user_model._meta.pk.column}"

    for name in ("user_permissions", "groups"):
        field = user_model._meta.get_field(name)
        # Each EXISTS starts from the through table, on its column for the user (``member_id``
        # for a model named Member), correlated with the user's key.
        assert f"FROM {field.remote_field.through._meta.db_table} " in sql
        assert f".{field.m2m_column_name()} = ({user_column})" in sql
    # Held directly, through a group, and the group's grant inside the latter.
    assert sql.count("EXISTS") == 3


@pytest.mark.parametrize("grant", ["direct", "group"])
def test_a_granted_user_is_checked_in_one_query(grant):
    user = UserFactory(agent_permission=False)
    if grant == "direct":
        user.user_permissions.add(agent_permission())
    else:
        group = Group.objects.create(name="agents")
        group.permissions.add(agent_permission())
        user.groups.add(group)
    user = get_user_model().objects.get(pk=user.pk)

    with CaptureQueriesContext(connection) as queries:
        assert holds(user)

    assert len(queries) == 1


def test_a_user_without_the_permission_is_refused_in_one_query():
    user = get_user_model().objects.get(pk=UserFactory(agent_permission=False).pk)

    with CaptureQueriesContext(connection) as queries:
        assert not holds(user)

    assert len(queries) == 1


def test_another_permission_setting_is_checked_as_set(settings):
    user = UserFactory(agent_permission=True)
    settings.AHENTIC = {**settings.AHENTIC, "PERMISSION": "auth.view_user"}

    assert not holds(user)
    user.user_permissions.add(Permission.objects.get(codename="view_user"))
    assert holds(user)


class GrantingBackend:
    def authenticate(self, request, **credentials):
        return None

    def has_perm(self, user_obj, perm, obj=None):
        return getattr(user_obj, "name", "") == "granted" and perm == "sessions_app.use_agent"


def user_without_permissions_mixin(name: str, **attributes):
    """An authenticated user of a model without ``PermissionsMixin``: no ``is_superuser``, no
    ``groups``, no ``user_permissions``, no ``has_perm``."""
    return SimpleNamespace(
        pk=1, name=name, is_active=True, is_authenticated=True, is_anonymous=False, **attributes
    )


@pytest.fixture
def user_model_without_permissions_mixin():
    # A model without the permission tables (Session has neither many-to-many field).
    with mock.patch.object(permissions, "get_user_model", return_value=Session):
        yield


@pytest.mark.usefixtures("user_model_without_permissions_mixin")
def test_a_user_model_without_permissions_mixin_has_no_table_query():
    assert agent_permission_held("pk") is None


@pytest.mark.usefixtures("user_model_without_permissions_mixin")
def test_without_permissions_mixin_only_the_other_backends_grant(settings):
    settings.AUTHENTICATION_BACKENDS = ["django.contrib.auth.backends.ModelBackend"]
    assert not holds(user_without_permissions_mixin("granted"))

    settings.AUTHENTICATION_BACKENDS = [
        "django.contrib.auth.backends.ModelBackend",
        f"{__name__}.GrantingBackend",
    ]
    with CaptureQueriesContext(connection) as queries:
        assert holds(user_without_permissions_mixin("granted"))
        assert not holds(user_without_permissions_mixin("someone else"))
    assert len(queries) == 0


@pytest.mark.usefixtures("user_model_without_permissions_mixin")
def test_without_permissions_mixin_the_models_own_has_perm_decides():
    def has_perm(perm):
        return perm == "sessions_app.use_agent"

    assert holds(user_without_permissions_mixin("any", has_perm=has_perm))
    assert not holds(user_without_permissions_mixin("any", has_perm=lambda perm: False))


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
    # Authentication (2), the poll's read (no row), the permission check that tells a 404
    # from a 403; the demo site's flatpage middleware then looks at every 404.
    ours = [
        q for q in queries if "django_flatpage" not in q["sql"] and "django_site" not in q["sql"]
    ]
    assert len(ours) == 4


# --- the schema -----------------------------------------------------------------------------


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

call_command("migrate", verbosity=0)
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
