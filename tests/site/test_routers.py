"""The app on the database a site's router picks: every query, transaction, lock and on-commit
hook of a whole conversation (create, message, a tool step, an approval, the poll and its 304,
the admin) runs on the routed alias, and nothing touches ``default``."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.db import connections, transaction
from rest_framework.test import APIClient

from orchestrator_app.testing.localapi import text_reply, tool_call, tool_reply
from sessions_app.models import Event, Session

API = "/ahentic/v1"


class EverythingOn:
    """A site's router: every model on one alias."""

    def __init__(self, alias: str):
        self.alias = alias

    def db_for_read(self, model, **hints):
        return self.alias

    def db_for_write(self, model, **hints):
        return self.alias

    def allow_relation(self, obj1, obj2, **hints):
        return True

    def allow_migrate(self, db, app_label, **hints):
        return True


class DefaultUse:
    """What reached the ``default`` database: statements, transactions and on-commit hooks."""

    def __init__(self):
        self.statements: list[str] = []
        self.atomics: list[str] = []
        self.hooks: list[str] = []

    def __call__(self, execute, sql, params, many, context):
        self.statements.append(sql)
        return execute(sql, params, many, context)

    @property
    def any(self) -> bool:
        return bool(self.statements or self.atomics or self.hooks)


@pytest.fixture
def on_other(settings, monkeypatch):
    settings.DATABASE_ROUTERS = [EverythingOn("other")]
    use = DefaultUse()
    enter, on_commit = transaction.Atomic.__enter__, transaction.on_commit

    def recorded_enter(self):
        if transaction.get_connection(self.using).alias == "default":
            use.atomics.append(f"atomic(using={self.using!r})")
        return enter(self)

    def recorded_on_commit(func, using=None, robust=False):
        if transaction.get_connection(using).alias == "default":
            use.hooks.append(repr(func))
        return on_commit(func, using=using, robust=robust)

    monkeypatch.setattr(transaction.Atomic, "__enter__", recorded_enter)
    monkeypatch.setattr(transaction, "on_commit", recorded_on_commit)
    with connections["default"].execute_wrapper(use):
        yield use


@pytest.mark.django_db(databases=["default", "other"])
def test_a_conversation_runs_on_the_routed_database_and_never_on_default(
    on_other, llm, django_capture_on_commit_callbacks
):
    user = get_user_model().objects.create_user("routed", "routed@example.com", "pw")
    user.user_permissions.add(
        Permission.objects.get(codename="use_agent", content_type__app_label="sessions_app")
    )
    staff = get_user_model().objects.create_superuser("staff", "staff@example.com", "pw")
    client, admin_client = APIClient(), APIClient()
    client.force_login(user)
    admin_client.force_login(staff)

    def run(fn, *args, **kwargs):
        with django_capture_on_commit_callbacks(using="other", execute=True):
            return fn(*args, **kwargs)

    llm.enqueue(
        tool_reply(tool_call("notes_create", {"title": "Routed"}, id="toolu_r1")),
        text_reply("Noted on the routed database."),
    )
    created = client.post(f"{API}/sessions", {}, format="json")
    assert created.status_code == 201, created.content
    url = f"{API}/sessions/{created.json()['id']}"
    posted = run(client.post, f"{url}/messages", {"content": "Note it"}, format="json")
    assert posted.status_code in (200, 202), posted.content
    waiting = client.get(url).json()
    assert waiting["status"] == "awaiting_human"
    decided = run(client.post, f"{url}/approvals", {"decision": "allow_once"}, format="json")
    assert decided.status_code in (200, 202), decided.content
    done = client.get(url)
    assert done.json()["status"] == "idle"
    assert client.get(url, HTTP_IF_NONE_MATCH=done["ETag"]).status_code == 304
    assert admin_client.get("/admin/sessions_app/session/").status_code == 200
    assert admin_client.get("/admin/sessions_app/session/", {"q": "routed"}).status_code == 200

    # Everything is on "other"; "default" holds none of it and saw nothing.
    assert Session.objects.using("other").count() == 1
    assert Event.objects.using("other").filter(kind=Event.Kind.TOOL_RESPONSE).count() == 1
    assert not on_other.any, (on_other.statements, on_other.atomics, on_other.hooks)
    assert not Session.objects.using("default").exists()
