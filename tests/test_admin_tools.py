"""Admin tools: the site's ModelAdmins as a small catalog of generic tools (ADMIN_TOOLS).

Through the HTTP API and the local Messages API server: the model calls an admin_* tool, the
owner approves through the API when asked, and the test reads the tool result the model got in
its next request. Writes are compared with posting the real admin forms with the test client.
"""

import json

import pytest
from django.contrib import admin
from django.contrib.admin.models import ADDITION, CHANGE, DELETION, LogEntry
from django.contrib.auth.models import Group, Permission
from django.contrib.flatpages.admin import FlatPageAdmin
from django.contrib.flatpages.models import FlatPage
from django.contrib.sites.models import Site
from django.core.checks import run_checks
from django.test import Client

from orchestrator_app.testing.localapi import text_reply, tool_call, tool_reply
from sessions_app.models import Session

from .conftest import API, payload_of, session_url
from .factories import SessionFactory, UserFactory

pytestmark = pytest.mark.usefixtures("llm_strict")

ADMIN_TOOL_NAMES = [
    "admin_action",
    "admin_delete",
    "admin_get",
    "admin_list",
    "admin_models",
    "admin_save",
]
PAGES = "flatpages.flatpage"


@pytest.fixture(autouse=True)
def enabled(settings):
    settings.AHENTIC = {**settings.AHENTIC, "ADMIN_TOOLS": [PAGES, "auth.group", "auth.user"]}


def staff(username: str, *codenames: str, agent: bool = True):
    user = UserFactory(username=username, agent_permission=agent, is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(codename__in=codenames))
    return user


@pytest.fixture
def editor(db):
    return staff("editor", "view_flatpage", "add_flatpage", "change_flatpage", "delete_flatpage")


@pytest.fixture
def client_of():
    def make(user):
        from rest_framework.test import APIClient

        client = APIClient()
        client.force_login(user)
        return client

    return make


@pytest.fixture
def site(db):
    return Site.objects.get_current()


def make_page(site, url="/about/", title="Abut us", content="<p>Hello.</p>") -> FlatPage:
    page = FlatPage.objects.create(url=url, title=title, content=content)
    page.sites.add(site)
    return page


class Agent:
    """One session of ``user``; ``call`` makes the model call a tool and returns its result."""

    def __init__(self, user, client, llm, run_tasks):
        self.user, self.client, self.llm, self.run_tasks = user, client, llm, run_tasks
        self.session = SessionFactory(owner=user)
        self.count = 0

    def post(self, path, data):
        return self.run_tasks(
            self.client.post, session_url(self.session, path), data, format="json"
        )

    def call(self, name: str, input: dict, decision: str | None = "allow_once") -> dict:
        self.count += 1
        call_id = f"toolu_{name}_{self.count}"
        self.llm.enqueue(tool_reply(tool_call(name, input, id=call_id)), text_reply("Done."))
        response = self.post("messages", {"content": f"Please run {name}"})
        assert response.status_code == 202, response.content
        body = payload_of(self.client, self.session)
        if body["status"] == "awaiting_human":
            if not decision:
                return {}  # the card stays; the test decides
            response = self.post("approvals", {"decision": decision})
            assert response.status_code == 200, response.content
        return self.result(call_id)

    def pending(self) -> dict:
        return payload_of(self.client, self.session)["pendingTool"]

    def result(self, call_id: str) -> dict:
        for request in reversed(self.llm.message_requests()):
            for message in request["messages"]:
                for block in message["content"]:
                    if block.get("type") == "tool_result" and block["tool_use_id"] == call_id:
                        return json.loads(block["content"])
        raise AssertionError(f"no result for {call_id}")


@pytest.fixture
def agent_for(client_of, llm, run_tasks):
    return lambda user: Agent(user, client_of(user), llm, run_tasks)


def catalog_names(client) -> list[str]:
    response = client.get(f"{API}/tools")
    assert response.status_code == 200
    return sorted(t["name"] for t in response.json() if t["name"].startswith("admin_"))


# --- the catalog ----------------------------------------------------------------------------------


def test_a_user_without_admin_permissions_gets_no_admin_tools(owner_client, client_of, db):
    assert catalog_names(owner_client) == []
    # Staff without any permission on an enabled model: none either.
    assert catalog_names(client_of(staff("bare"))) == []


def test_admin_tools_are_off_by_default(settings, editor, client_of):
    settings.AHENTIC = {**settings.AHENTIC, "ADMIN_TOOLS": None}
    assert catalog_names(client_of(editor)) == []


def test_a_view_only_user_reads_pages_and_every_write_is_denied(agent_for, site):
    page = make_page(site)
    agent = agent_for(staff("viewer", "view_flatpage"))
    assert catalog_names(agent.client) == ADMIN_TOOL_NAMES

    models = agent.call("admin_models", {})
    assert models["models"] == [
        {"model": PAGES, "name": "flat page", "namePlural": "flat pages", "permissions": ["view"]}
    ]
    described = agent.call("admin_models", {"model": PAGES})
    assert {f["name"] for f in described["fields"]} >= {"url", "title", "content", "sites"}
    assert all(f["readonly"] for f in described["fields"])
    listed = agent.call("admin_list", {"model": PAGES})
    assert [(r["id"], r["url"], r["title"]) for r in listed["rows"]] == [
        (page.pk, "/about/", "Abut us")
    ]
    got = agent.call("admin_get", {"model": PAGES, "id": page.pk})
    assert got["fields"]["title"] == "Abut us"
    assert got["fields"]["sites"] == [site.pk]

    for name, input in [
        ("admin_save", {"model": PAGES, "id": page.pk, "values": {"title": "About us"}}),
        ("admin_save", {"model": PAGES, "values": {"url": "/new/", "title": "New"}}),
        ("admin_delete", {"model": PAGES, "id": page.pk}),
        ("admin_action", {"model": PAGES, "action": "delete_selected", "ids": [page.pk]}),
    ]:
        result = agent.call(name, input)
        expected = "admin_action_unknown" if name == "admin_action" else "admin_permission_denied"
        assert (result["ok"], result["error"]) == (False, expected), name
    page.refresh_from_db()
    assert page.title == "Abut us"
    assert not LogEntry.objects.exists()


def test_an_unknown_model_lists_the_enabled_models(agent_for, editor):
    result = agent_for(editor).call("admin_list", {"model": "blog.post"})
    assert result["error"] == "admin_model_unknown"
    assert result["models"] == [PAGES]  # only those this user may use


# --- writes match the admin's own views ------------------------------------------------------------


def admin_post(user, url: str, data: dict) -> None:
    client = Client()
    client.force_login(user)
    response = client.post(url, data)
    assert response.status_code == 302, response.content.decode()[:2000]


def row(page: FlatPage) -> dict:
    page.refresh_from_db()
    return {
        "title": page.title,
        "content": page.content,
        "template_name": page.template_name,
        "registration_required": page.registration_required,
        "enable_comments": page.enable_comments,
        "sites": [s.pk for s in page.sites.all()],
    }


def last_log(page_pk) -> tuple:
    entry = LogEntry.objects.filter(object_id=str(page_pk)).latest("pk")
    return entry.action_flag, entry.get_change_message(), entry.object_repr, entry.user_id


def test_an_update_gives_the_same_row_and_log_entry_as_the_admin_change_form(
    agent_for, editor, site
):
    by_form = make_page(site, url="/a/")
    by_agent = make_page(site, url="/b/")
    admin_post(
        editor,
        f"/admin/flatpages/flatpage/{by_form.pk}/change/",
        {
            "url": "/a/",
            "title": "About us",
            "content": "<p>Hello.</p>",
            "sites": [site.pk],
            "template_name": "",
        },
    )

    agent = agent_for(editor)
    result = agent.call(
        "admin_save", {"model": PAGES, "id": by_agent.pk, "values": {"title": "About us"}}
    )

    assert result.get("updated"), result
    assert (result["ok"], result["updated"], result["changed"]) == (True, True, ["title"])
    assert row(by_agent) == row(by_form)
    flag, message, _, user_id = last_log(by_agent.pk)
    assert (flag, message, user_id) == (CHANGE, "Changed Title.", editor.pk)
    assert last_log(by_form.pk)[:2] == (flag, message)


def test_a_create_gives_the_same_row_and_log_entry_as_the_admin_add_form(agent_for, editor, site):
    values = {"title": "Coffee", "content": "<p>Beans.</p>", "sites": [site.pk]}
    admin_post(editor, "/admin/flatpages/flatpage/add/", {**values, "url": "/form/"})

    result = agent_for(editor).call(
        "admin_save", {"model": PAGES, "values": {**values, "url": "/agent/"}}
    )

    assert (result["ok"], result["created"], result["url"]) == (True, True, "/agent/")
    by_form, by_agent = FlatPage.objects.get(url="/form/"), FlatPage.objects.get(url="/agent/")
    assert result["id"] == by_agent.pk
    assert row(by_agent) == row(by_form)
    assert last_log(by_agent.pk)[:2] == last_log(by_form.pk)[:2] == (ADDITION, "Added.")
    assert last_log(by_agent.pk)[2] == "/agent/ -- Coffee"


def test_a_delete_gives_the_same_log_entry_as_the_admin_delete_page(agent_for, editor, site):
    by_form, by_agent = make_page(site, url="/a/"), make_page(site, url="/b/")
    admin_post(editor, f"/admin/flatpages/flatpage/{by_form.pk}/delete/", {"post": "yes"})
    agent = agent_for(editor)

    result = agent.call("admin_delete", {"model": PAGES, "id": by_agent.pk})

    assert (result["ok"], result["deleted"]) == (True, True)
    assert not FlatPage.objects.exists()
    assert last_log(by_agent.pk) == (DELETION, "", "/b/ -- Abut us", editor.pk)
    assert last_log(by_form.pk)[:2] == (DELETION, "")


def test_an_admin_action_runs_on_the_selected_objects_and_logs_like_the_changelist(
    agent_for, editor, site
):
    keep, gone = make_page(site, url="/keep/"), make_page(site, url="/gone/")
    agent = agent_for(editor)

    unknown = agent.call("admin_action", {"model": PAGES, "action": "publish", "ids": [gone.pk]})
    assert unknown["error"] == "admin_action_unknown"
    assert unknown["actions"] == ["delete_selected"]

    result = agent.call(
        "admin_action", {"model": PAGES, "action": "delete_selected", "ids": [gone.pk]}
    )

    assert (result["ok"], result["count"]) == (True, 1)
    assert result["messages"] == ["Successfully deleted 1 flat page."]
    assert list(FlatPage.objects.all()) == [keep]
    assert last_log(gone.pk)[:3] == (DELETION, "", "/gone/ -- Abut us")


# --- errors the model can act on ------------------------------------------------------------------


def test_form_errors_come_back_field_by_field_and_nothing_is_written(agent_for, editor, site):
    result = agent_for(editor).call(
        "admin_save",
        {"model": PAGES, "values": {"url": "no-slash", "title": "", "sites": [site.pk]}},
    )

    assert (result["ok"], result["error"]) == (False, "admin_invalid")
    assert result["errors"]["url"] == ["URL is missing a leading slash."]
    assert result["errors"]["title"] == ["This field is required."]
    assert not FlatPage.objects.exists()
    assert not LogEntry.objects.exists()


def test_a_raising_save_model_writes_nothing(agent_for, editor, site, monkeypatch):
    page = make_page(site)

    def explode(self, request, obj, form, change):
        obj.save()
        raise RuntimeError("disk full")

    monkeypatch.setattr(FlatPageAdmin, "save_model", explode)
    result = agent_for(editor).call(
        "admin_save", {"model": PAGES, "id": page.pk, "values": {"title": "New"}}
    )

    assert result["ok"] is False
    assert "disk full" in result["message"]
    assert row(page)["title"] == "Abut us"
    assert not LogEntry.objects.exists()


def test_an_unknown_object_is_admin_object_not_found(agent_for, editor):
    agent = agent_for(editor)
    assert agent.call("admin_get", {"model": PAGES, "id": 999})["error"] == "admin_object_not_found"
    assert agent.call("admin_get", {"model": PAGES, "id": "x"})["error"] == "admin_object_not_found"


def test_hidden_and_read_only_fields_cannot_be_written(agent_for, editor, site, monkeypatch):
    page = make_page(site)
    monkeypatch.setattr(FlatPageAdmin, "readonly_fields", ("template_name",), raising=False)
    monkeypatch.setattr(FlatPageAdmin, "ahentic_hidden_fields", ("enable_comments",), raising=False)
    agent = agent_for(editor)

    for field, value in (("template_name", "evil.html"), ("enable_comments", True)):
        result = agent.call("admin_save", {"model": PAGES, "id": page.pk, "values": {field: value}})
        assert result["error"] == "admin_invalid", field
        assert list(result["errors"]) == [field]

    fields = agent.call("admin_get", {"model": PAGES, "id": page.pk})["fields"]
    assert "enable_comments" not in fields
    assert fields["template_name"] == ""  # read-only fields are still shown
    assert (row(page)["template_name"], row(page)["enable_comments"]) == ("", False)


def test_a_password_hash_is_never_returned(agent_for, db):
    superuser = UserFactory(
        username="boss", agent_permission=True, is_staff=True, is_superuser=True
    )
    agent = agent_for(superuser)

    got = agent.call("admin_get", {"model": "auth.user", "id": superuser.pk})
    described = agent.call("admin_models", {"model": "auth.user"})
    denied = agent.call(
        "admin_save", {"model": "auth.user", "id": superuser.pk, "values": {"password": "x"}}
    )

    assert got["fields"]["username"] == "boss"
    assert "password" not in got["fields"]
    assert superuser.password not in json.dumps(got)
    assert "password" not in {f["name"] for f in described["fields"]}
    assert denied["error"] == "admin_invalid"
    superuser.refresh_from_db()
    assert superuser.check_password("pw")


def test_a_model_admin_can_opt_out(agent_for, editor, monkeypatch):
    monkeypatch.setattr(FlatPageAdmin, "ahentic_tools", False, raising=False)
    assert catalog_names(agent_for(editor).client) == []


# --- approval ---------------------------------------------------------------------------------------


def test_the_approval_summary_shows_the_before_after_diff(agent_for, editor, site):
    page = make_page(site)
    agent = agent_for(editor)

    agent.call(
        "admin_save",
        {"model": PAGES, "id": page.pk, "values": {"title": "About us", "url": "/about/"}},
        decision=None,
    )

    pending = agent.pending()
    assert pending["name"] == "admin_save"
    # The unchanged url is not listed.
    assert pending["summary"] == (
        f"Update flat page “/about/ -- Abut us” (#{page.pk}): title “Abut us” → “About us”"
    )
    assert row(page)["title"] == "Abut us"


def test_long_values_are_shortened_in_the_summary(agent_for, editor, site):
    page = make_page(site, content="<p>" + "old " * 200 + "</p>")
    agent = agent_for(editor)
    agent.call(
        "admin_save",
        {"model": PAGES, "id": page.pk, "values": {"content": "new " * 500}},
        decision=None,
    )
    summary = agent.pending()["summary"]
    assert summary.startswith(
        f"Update flat page “/about/ -- Abut us” (#{page.pk}): content “<p>old"
    )
    assert "→ “new new" in summary and "…" in summary
    assert len(summary) <= 300


def test_admin_delete_refuses_allow_session(agent_for, editor, site):
    page = make_page(site)
    agent = agent_for(editor)
    agent.call("admin_delete", {"model": PAGES, "id": page.pk}, decision=None)
    assert agent.pending()["summary"] == f"Delete flat page “/about/ -- Abut us” (#{page.pk})"
    assert agent.pending()["nonPreallowable"] is True

    response = agent.post("approvals", {"decision": "allow_session"})

    assert response.status_code == 400
    assert response.json()["code"] == "ahentic_hitl_not_preallowable"
    assert FlatPage.objects.filter(pk=page.pk).exists()


def test_reads_run_without_approval(agent_for, editor, site):
    make_page(site)
    agent = agent_for(editor)
    agent.call("admin_list", {"model": PAGES}, decision=None)
    assert Session.objects.get(pk=agent.session.pk).status == "idle"


def test_a_long_body_comes_from_a_staged_artifact(agent_for, editor, site, llm):
    agent = agent_for(editor)
    body = "<p>" + "Coffee is a brewed drink. " * 40 + "</p>"
    llm.enqueue(
        tool_reply(
            tool_call(
                "stage_artifact",
                {
                    "key": "coffee",
                    "kind": "html",
                    "title": "Coffee page",
                    "payload": {"content": body},
                },
            )
        )
    )
    result = agent.call(
        "admin_save",
        {
            "model": PAGES,
            "values": {"url": "/coffee/", "title": "Coffee", "sites": [site.pk]},
            "body_field": "content",
            "from_memory": "coffee",
        },
        decision=None,
    )
    del result  # the staging turn answered; the save waits for approval
    pending = agent.pending()
    assert pending["input"]["from_memory"] == "coffee"
    assert pending["summary"] == (
        f"Create flat page: url “/coffee/”, title “Coffee”, sites [{site.pk}], content from artifact "
        "coffee · Coffee page · 1061 bytes"
    )
    agent.post("approvals", {"decision": "allow_once"})

    page = FlatPage.objects.get(url="/coffee/")
    assert page.content == body
    assert last_log(page.pk)[:2] == (ADDITION, "Added.")
    artifacts = payload_of(agent.client, agent.session)["artifacts"]
    assert [(a["key"], a["status"]) for a in artifacts] == [("coffee", "applied")]


# --- listing -----------------------------------------------------------------------------------------


def test_listing_searches_filters_orders_and_pages(agent_for, editor, site):
    for i in range(5):
        make_page(site, url=f"/p{i}/", title=f"Page {i}")
    secret = make_page(site, url="/members/", title="Members")
    secret.registration_required = True
    secret.save()
    agent = agent_for(editor)

    first = agent.call("admin_list", {"model": PAGES, "ordering": "-title", "limit": 2})
    assert [r["title"] for r in first["rows"]] == ["Page 4", "Page 3"]
    assert (first["count"], first["nextOffset"]) == (6, 2)
    second = agent.call(
        "admin_list", {"model": PAGES, "ordering": "-title", "limit": 2, "offset": 2}
    )
    assert [r["title"] for r in second["rows"]] == ["Page 2", "Page 1"]
    found = agent.call("admin_list", {"model": PAGES, "search": "members"})
    assert [r["url"] for r in found["rows"]] == ["/members/"]
    filtered = agent.call(
        "admin_list", {"model": PAGES, "filters": {"registration_required": True}}
    )
    assert [r["url"] for r in filtered["rows"]] == ["/members/"]
    refused = agent.call("admin_list", {"model": PAGES, "filters": {"content__contains": "x"}})
    assert refused["error"] == "admin_invalid"
    too_many = agent.call("admin_list", {"model": PAGES, "limit": 51})
    assert too_many["error"] == "invalid_input"


# --- the catalog stays small and byte-stable -------------------------------------------------------


@pytest.fixture
def thirty_models(settings):
    """30 proxy models of Group registered in the admin, all enabled."""
    from . import admin_tool_models

    labels = []
    for model in admin_tool_models.PROXIES:
        admin.site.register(model)
        labels.append(f"ahentic_tests.{model._meta.model_name}")
    settings.AHENTIC = {**settings.AHENTIC, "ADMIN_TOOLS": labels}
    yield labels
    for model in admin_tool_models.PROXIES:
        admin.site.unregister(model)


def test_with_thirty_models_the_catalog_is_the_same_handful_and_byte_stable(
    agent_for, thirty_models, llm, db
):
    superuser = UserFactory(
        username="boss", agent_permission=True, is_staff=True, is_superuser=True
    )
    agent = agent_for(superuser)
    described = agent.call("admin_models", {})
    assert len(described["models"]) == 30
    agent.call("admin_list", {"model": thirty_models[0]})

    requests = llm.message_requests()
    catalogs = [json.dumps(r["tools"], sort_keys=False) for r in requests]
    assert len(set(catalogs)) == 1
    names = [t["name"] for t in requests[0]["tools"] if t["name"].startswith("admin_")]
    assert names == ADMIN_TOOL_NAMES


# --- page awareness and settings ------------------------------------------------------------------


def test_on_an_admin_change_page_the_step_context_names_the_model_and_object(
    agent_for, editor, site, llm
):
    page = make_page(site)
    agent = agent_for(editor)
    llm.enqueue(text_reply("I see it."))
    response = agent.post(
        "messages",
        {
            "content": "Fix the typo in this page's title",
            "pageContext": {
                "url": f"http://testserver/admin/flatpages/flatpage/{page.pk}/change/",
                "title": "Change flat page",
            },
        },
    )
    assert response.status_code == 202

    request = llm.message_requests()[-1]
    context = request["messages"][-1]["content"][-1]["text"]
    assert (
        f'"admin": {{"id": "{page.pk}", "model": "flatpages.flatpage", "view": "change"}}'
        in context
    )


def test_other_pages_get_no_admin_target(agent_for, editor, llm):
    agent = agent_for(editor)
    llm.enqueue(text_reply("Hi."))
    agent.post(
        "messages",
        {"content": "Hi", "pageContext": {"url": "http://testserver/admin/auth/group/1/change/"}},
    )
    context = llm.message_requests()[-1]["messages"][-1]["content"][-1]["text"]
    assert '"admin"' not in context  # editor has no permission on groups


def test_the_demo_makes_groups_read_only_for_the_agent(agent_for, db):
    group = Group.objects.create(name="Editors")
    superuser = UserFactory(
        username="boss", agent_permission=True, is_staff=True, is_superuser=True
    )
    agent = agent_for(superuser)

    models = {m["model"]: m["permissions"] for m in agent.call("admin_models", {})["models"]}
    denied = agent.call(
        "admin_save", {"model": "auth.group", "id": group.pk, "values": {"name": "X"}}
    )

    assert models["auth.group"] == ["view"]
    assert denied["error"] == "admin_permission_denied"
    # People keep editing groups in the admin.
    admin_post(superuser, f"/admin/auth/group/{group.pk}/change/", {"name": "Writers"})
    group.refresh_from_db()
    assert group.name == "Writers"


def check_ids():
    return {m.id for m in run_checks() if m.id.startswith("ahentic.")}


@pytest.mark.parametrize(
    ("value", "error"),
    [
        (["flatpages.flatpage", "blog.post"], "ahentic.E006"),
        (["contenttypes.contenttype"], "ahentic.E006"),  # installed, not in the admin
        ("flatpages.flatpage", "ahentic.E005"),
        (["orchestrator_app.toolgrant"], "ahentic.E007"),
    ],
)
def test_the_system_check_rejects_unknown_models(db, settings, value, error):
    settings.AHENTIC = {**settings.AHENTIC, "ADMIN_TOOLS": value}
    assert error in check_ids()


def test_the_system_check_accepts_the_demo_list_and_all(db, settings):
    for value in (["flatpages.flatpage", "auth.group"], "all", None):
        settings.AHENTIC = {**settings.AHENTIC, "ADMIN_TOOLS": value}
        assert check_ids() == set()
