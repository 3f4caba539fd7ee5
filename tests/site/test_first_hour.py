"""The first hour on a real site (issue 21): safety of writes, host tools, stale admin forms,
the install docs and the demo.

Through the public surfaces: the HTTP API with the local Messages API server, the admin with
the test client, system checks, the management commands and the demo's pages.
"""

import ast
import json
import re
import subprocess
from html import unescape
from pathlib import Path

import pytest
from django.contrib.flatpages.models import FlatPage
from django.contrib.sites.models import Site
from django.core import signing
from django.core.checks import run_checks
from django.urls import reverse

from orchestrator_app.models import ToolGrant
from orchestrator_app.testing.localapi import text_reply, tool_call, tool_reply
from orchestrator_app.tools import tool, unregister
from orchestrator_app.tools.admin_tools import stale
from sessions_app.models import Session
from tests.support.admin import Agent, staff
from tests.support.api import API, payload_of, post, transcript_of
from tests.support.paths import ROOT

pytestmark = pytest.mark.usefixtures("llm_strict")

PAGES = "flatpages.flatpage"
README = ROOT / "README.md"


@pytest.fixture
def enabled(settings):
    settings.AHENTIC = {**settings.AHENTIC, "ADMIN_TOOLS": [PAGES, "auth.group"]}


@pytest.fixture
def editor(db, enabled):
    return staff("editor", "view_flatpage", "add_flatpage", "change_flatpage", "delete_flatpage")


@pytest.fixture
def agent_for(llm, run_tasks):
    from rest_framework.test import APIClient

    def make(user):
        client = APIClient()
        client.force_login(user)
        return Agent(user, client, llm, run_tasks)

    return make


@pytest.fixture
def page(db):
    page = FlatPage.objects.create(url="/about/", title="About", content="<p>Hello.</p>")
    page.sites.add(Site.objects.get_current())
    return page


def tool_responses(agent) -> list[dict]:
    return [m for m in transcript_of(agent.client, agent.session) if m["kind"] == "tool_response"]


# --- 1. a write from POST actions waits for the user's decision ------------------------------------


def test_an_admin_delete_action_shows_the_card_and_deletes_only_once_allowed(
    agent_for, editor, page
):
    agent = agent_for(editor)

    response = agent.post(
        "actions", {"name": "admin_delete", "input": {"model": PAGES, "id": page.pk}}
    )

    assert response.status_code == 202, response.content
    body = payload_of(agent.client, agent.session)
    assert body["status"] == "awaiting_human"
    card = body["pendingTool"]
    assert (card["name"], card["nonPreallowable"], card["approved"]) == (
        "admin_delete",
        True,
        None,
    )
    assert "/about/" in card["summary"]
    assert FlatPage.objects.filter(pk=page.pk).exists()
    assert tool_responses(agent) == []

    for decision in ("allow_session", "always_allow"):
        refused = agent.post("approvals", {"decision": decision})
        assert refused.status_code == 400
        assert refused.json()["code"] == "ahentic_hitl_not_preallowable"
    assert FlatPage.objects.filter(pk=page.pk).exists()

    agent.llm.enqueue(text_reply("Deleted."))
    assert agent.post("approvals", {"decision": "allow_once"}).status_code == 200

    assert not FlatPage.objects.filter(pk=page.pk).exists()
    [result] = tool_responses(agent)
    assert result["meta"]["approved"] == "allow_once"
    assert json.loads(result["content"])["deleted"] is True
    assert payload_of(agent.client, agent.session)["status"] == "idle"


def test_an_admin_action_asks_every_time_even_with_a_grant_or_a_chat_allow(agent_for, editor, page):
    agent = agent_for(editor)
    # Grants named after the tool (as an older release or a hand-made row might hold) never
    # pre-allow a non-preallowable tool.
    ToolGrant.objects.create(user=editor, tool_name="admin_action")
    Session.objects.filter(pk=agent.session.pk).update(hitl_allows=["admin_action"])
    action = {"model": PAGES, "action": "delete_selected", "ids": [page.pk]}

    response = agent.post("actions", {"name": "admin_action", "input": action})

    assert response.status_code == 202, response.content
    body = payload_of(agent.client, agent.session)
    assert body["status"] == "awaiting_human"
    assert body["pendingTool"]["name"] == "admin_action"
    assert FlatPage.objects.filter(pk=page.pk).exists()

    agent.llm.enqueue(text_reply("Left it alone."))
    assert agent.post("approvals", {"decision": "deny", "reason": "no"}).status_code == 200

    assert FlatPage.objects.filter(pk=page.pk).exists()
    [result] = tool_responses(agent)
    assert json.loads(result["content"])["error"] == "user_denied"


def test_a_grant_covers_an_action_of_a_preallowable_tool_as_it_covers_a_model_call(
    agent_for, editor, page
):
    agent = agent_for(editor)
    # "Always allow" on a model-made admin_save of flat pages, through the card.
    result = agent.call(
        "admin_save",
        {"model": PAGES, "id": page.pk, "values": {"title": "About us"}},
        "always_allow",
    )
    assert result["ok"] is True
    assert ToolGrant.objects.filter(user=editor, tool_name=f"admin_save:{PAGES}").exists()

    agent.llm.enqueue(text_reply("Renamed."))
    response = agent.post(
        "actions",
        {"name": "admin_save", "input": {"model": PAGES, "id": page.pk, "values": {"title": "Hi"}}},
    )

    assert response.status_code == 202
    assert payload_of(agent.client, agent.session)["status"] == "idle"
    page.refresh_from_db()
    assert page.title == "Hi"
    assert tool_responses(agent)[-1]["meta"]["approved"] == "preallowed"


def test_a_readonly_action_runs_at_once(agent_for, editor, page):
    agent = agent_for(editor)
    agent.llm.enqueue(text_reply("Read it."))

    response = agent.post(
        "actions", {"name": "admin_get", "input": {"model": PAGES, "id": page.pk}}
    )

    assert response.status_code == 202
    assert payload_of(agent.client, agent.session)["status"] == "idle"
    [result] = tool_responses(agent)
    answer = json.loads(result["content"])
    assert (answer["ok"], answer["repr"]) == (True, str(page))


# --- 2. a host tool written from the docs -----------------------------------------------------------


@pytest.fixture
def host_tools():
    """Tools a test registers as a host app would; unregistered afterwards."""
    names: list[str] = []
    yield names
    for name in names:
        unregister(name)


def check_messages(tool_id: str = "ahentic.W003") -> list:
    return [m for m in run_checks() if m.id == tool_id]


def register_note_tool(host_tools, **options):
    calls = []

    @tool(
        name="host_note_write",
        description="Write a note.",
        input_schema={"type": "object", "properties": {"title": {"type": "string"}}},
        **options,
    )
    def host_note_write(ctx, input):
        calls.append(input)
        return {"ok": True}

    host_tools.append("host_note_write")
    return calls


def test_a_host_tool_that_says_nothing_about_approval_asks_before_it_runs(
    owner_client, session, llm, run_tasks, host_tools
):
    calls = register_note_tool(host_tools)  # neither readonly nor requires_approval given
    listed = {t["name"]: t for t in owner_client.get(f"{API}/tools").json()}
    assert listed["host_note_write"]["readonly"] is False
    assert listed["host_note_write"]["requiresApproval"] is True
    llm.enqueue(tool_reply(tool_call("host_note_write", {"title": "x"}, id="toolu_host")))

    run_tasks(post, owner_client, session, "messages", {"content": "Write a note"})

    body = payload_of(owner_client, session)
    assert body["status"] == "awaiting_human"
    assert body["pendingTool"]["name"] == "host_note_write"
    assert calls == []


@pytest.mark.django_db(databases="__all__")
def test_a_host_tool_that_writes_without_a_permission_function_is_a_warning(host_tools):
    register_note_tool(host_tools)

    [warning] = check_messages()

    assert warning.obj == "host_note_write"
    assert "tests.site.test_first_hour" in warning.msg
    assert "permission=" in warning.hint


@pytest.mark.django_db(databases="__all__")
@pytest.mark.parametrize(
    "options",
    [{"permission": lambda user: user.is_staff}, {"readonly": True}],
    ids=["with-permission", "readonly"],
)
def test_a_host_tool_with_a_permission_or_readonly_is_no_warning(host_tools, options):
    register_note_tool(host_tools, **options)

    assert check_messages() == []  # the built-ins (page_fill_fields...) are not warned about


def test_a_permission_function_keeps_a_host_tool_from_a_non_staff_user(
    owner_client, session, llm, run_tasks, host_tools
):
    calls = register_note_tool(host_tools, permission=lambda user: user.is_staff)
    llm.enqueue(
        tool_reply(tool_call("host_note_write", {"title": "x"}, id="toolu_host")),
        text_reply("I may not."),
    )

    run_tasks(post, owner_client, session, "messages", {"content": "Write a note"})

    assert "host_note_write" not in {t["name"] for t in llm.message_requests()[0]["tools"]}
    assert payload_of(owner_client, session)["status"] == "idle"
    assert calls == []


# The @tool example and its table of options: tests/docs/test_docs.py (docs/howto/tools.md).


# --- 11. check --deploy: the model's base URL is this machine --------------------------------------


def deploy_ids() -> set[str]:
    return {m.id for m in run_checks(include_deployment_checks=True) if m.id.startswith("ahentic.")}


@pytest.mark.django_db(databases="__all__")
@pytest.mark.parametrize(
    "base_url",
    [
        "http://127.0.0.1:8765",
        "http://localhost:8765/",
        "http://[::1]:8765",
        "http://127.0.0.2",
        "http://0.0.0.0:8765",
        "http://api.localhost",
    ],
)
def test_a_local_base_url_in_production_is_a_deploy_warning(settings, base_url):
    settings.DEBUG = False
    settings.AHENTIC = {**settings.AHENTIC, "BASE_URL": base_url}

    assert "ahentic.W004" in deploy_ids()
    # A deploy check only: plain `check` (the development server) stays quiet.
    assert "ahentic.W004" not in {m.id for m in run_checks()}


@pytest.mark.django_db(databases="__all__")
def test_the_environments_base_url_counts_too(settings, monkeypatch):
    settings.DEBUG = False
    settings.AHENTIC = {k: v for k, v in settings.AHENTIC.items() if k != "BASE_URL"}
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://localhost:8765")

    assert "ahentic.W004" in deploy_ids()


@pytest.mark.django_db(databases="__all__")
@pytest.mark.parametrize(
    "debug, base_url",
    [
        (True, "http://127.0.0.1:8765"),
        (False, "https://api.anthropic.com"),
        (False, "https://llm-proxy.internal.example.com"),
        (False, ""),
    ],
)
def test_a_remote_base_url_or_debug_is_no_deploy_warning(settings, monkeypatch, debug, base_url):
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    settings.DEBUG = debug
    settings.AHENTIC = {**settings.AHENTIC, "BASE_URL": base_url, "API_KEY": "sk-test"}

    assert "ahentic.W004" not in deploy_ids()


# --- 3. an open admin change form does not undo the agent's change ---------------------------------


def change_url(page, site: str = "admin") -> str:
    return reverse(f"{site}:flatpages_flatpage_change", args=[page.pk])


def open_change_form(client, url: str) -> dict:
    """GET the change form; the data its Save button would post, the hidden token included."""
    response = client.get(url)
    assert response.status_code == 200
    html = response.content.decode()
    form = response.context["adminform"].form
    data: dict = {}
    for name in form.fields:
        value = form[name].value()
        if value is True:
            data[name] = "on"
        elif value not in (None, False):
            data[name] = [str(v) for v in value] if isinstance(value, list) else str(value)
    [token] = re.findall(r'<input type="hidden" name="_ahentic_loaded" value="([^"]+)">', html)
    data["_ahentic_loaded"] = token
    return data


@pytest.fixture
def editor_in_admin(editor, client):
    client.force_login(editor)
    return client


@pytest.mark.parametrize(
    "site", ["admin", pytest.param("pages", marks=pytest.mark.urls("tests.stale_admin_site"))]
)
def test_a_form_opened_before_the_agent_changed_the_object_warns_and_saves_nothing(
    agent_for, editor, editor_in_admin, page, site
):
    url = change_url(page, site)
    form = open_change_form(editor_in_admin, url)
    result = agent_for(editor).call(
        "admin_save", {"model": PAGES, "id": page.pk, "values": {"title": "About us"}}
    )
    assert result["ok"] is True

    # The user edits another field of the stale form and saves.
    response = editor_in_admin.post(url, {**form, "content": "<p>Mine.</p>", "_save": "Save"})

    assert response.status_code == 200  # shown again, not redirected
    html = response.content.decode()
    assert "was changed after you opened this form" in html
    assert "Title" in response.context["adminform"].form.non_field_errors()[0]
    assert 'name="_ahentic_save_anyway"' in html
    page.refresh_from_db()
    assert (page.title, page.content) == ("About us", "<p>Hello.</p>")

    # The re-shown form keeps the first token: saving again without the box still warns.
    again = open_form_data(response)
    assert again["_ahentic_loaded"] == form["_ahentic_loaded"]
    assert editor_in_admin.post(url, {**again, "_save": "Save"}).status_code == 200
    page.refresh_from_db()
    assert page.title == "About us"

    confirmed = editor_in_admin.post(url, {**again, "_ahentic_save_anyway": "1", "_save": "Save"})

    assert confirmed.status_code == 302
    page.refresh_from_db()
    assert (page.title, page.content) == ("About", "<p>Mine.</p>")


def open_form_data(response) -> dict:
    """The posted data of a re-shown change form, token included (as the browser sends it)."""
    html = response.content.decode()
    form = response.context["adminform"].form
    data = {name: form.data.getlist(name) for name in form.data if not name.startswith("_")}
    [token] = re.findall(r'<input type="hidden" name="_ahentic_loaded" value="([^"]+)">', html)
    data["_ahentic_loaded"] = token
    return data


def test_a_form_saved_with_no_change_since_it_was_loaded_saves_at_once(editor_in_admin, page):
    url = change_url(page)
    form = open_change_form(editor_in_admin, url)

    response = editor_in_admin.post(url, {**form, "title": "Welcome", "_save": "Save"})

    assert response.status_code == 302
    page.refresh_from_db()
    assert page.title == "Welcome"


def test_an_agent_save_that_changes_no_stored_value_is_no_conflict(
    agent_for, editor, editor_in_admin, page
):
    # The agent saves the same title again (a LogEntry is written): nothing the form edits
    # changed in storage, so the user's save overwrites nothing.
    url = change_url(page)
    form = open_change_form(editor_in_admin, url)
    agent_for(editor).call(
        "admin_save", {"model": PAGES, "id": page.pk, "values": {"title": "About"}}
    )

    response = editor_in_admin.post(url, {**form, "content": "<p>Mine.</p>", "_save": "Save"})

    assert response.status_code == 302
    page.refresh_from_db()
    assert page.content == "<p>Mine.</p>"


def test_an_agent_action_that_logs_nothing_is_caught_too(editor, editor_in_admin, page):
    # A change made without a LogEntry (a bulk update, an admin action, another process).
    url = change_url(page)
    form = open_change_form(editor_in_admin, url)
    FlatPage.objects.filter(pk=page.pk).update(registration_required=True)

    response = editor_in_admin.post(url, {**form, "_save": "Save"})

    assert response.status_code == 200
    assert "Registration required" in response.context["adminform"].form.non_field_errors()[0]
    page.refresh_from_db()
    assert page.registration_required is True


def forged_token(page, **changes) -> str:
    """A token for ``page`` as the guard makes it, with ``changes`` to its payload."""
    payload = {
        "model": PAGES,
        "pk": str(page.pk),
        "fields": stale.digests(page, ["title", "content"]),
        **changes,
    }
    key = changes.pop("key", None)
    payload.pop("key", None)
    return signing.dumps(payload, key=key, salt=stale.SALT, compress=True)


def altered(token: str) -> str:
    return token[:-3] + ("aaa" if not token.endswith("aaa") else "bbb")


@pytest.mark.parametrize(
    "make_token",
    [
        pytest.param(lambda page, other, token: altered(token), id="altered"),
        pytest.param(lambda page, other, token: "", id="empty"),
        pytest.param(lambda page, other, token: "not-a-token", id="garbage"),
        pytest.param(
            lambda page, other, token: stale.make_token(other, ["title", "content"]),
            id="another-object",
        ),
        pytest.param(
            lambda page, other, token: forged_token(page, model="auth.group"), id="another-model"
        ),
        pytest.param(
            lambda page, other, token: forged_token(page, key="another-secret-key"),
            id="another-key",
        ),
    ],
)
def test_a_form_with_a_token_that_is_not_this_objects_warns_and_saves_nothing(
    editor_in_admin, page, make_token
):
    other = FlatPage.objects.create(url="/other/", title="Other", content="<p>Other.</p>")
    url = change_url(page)
    form = open_change_form(editor_in_admin, url)
    token = make_token(page, other, form["_ahentic_loaded"])

    response = editor_in_admin.post(
        url, {**form, "_ahentic_loaded": token, "title": "Mine", "_save": "Save"}
    )

    assert response.status_code == 200  # shown again, not redirected
    html = response.content.decode()
    assert "is not valid" in html
    assert 'name="_ahentic_save_anyway"' in html
    page.refresh_from_db()
    assert page.title == "About"

    confirmed = editor_in_admin.post(
        url,
        {**form, "_ahentic_loaded": token, "title": "Mine", "_ahentic_save_anyway": "1"},
    )

    assert confirmed.status_code == 302
    page.refresh_from_db()
    assert page.title == "Mine"


@pytest.mark.parametrize(
    "site", ["admin", pytest.param("pages", marks=pytest.mark.urls("tests.stale_admin_site"))]
)
def test_a_form_that_drops_the_token_field_warns_and_saves_nothing_and_it_is_logged(
    agent_for, editor, editor_in_admin, page, site, caplog
):
    # Without its token a form cannot tell what changed since it was opened: the agent's
    # change must not be overwritten by a form that simply leaves the field out.
    url = change_url(page, site)
    form = open_change_form(editor_in_admin, url)
    del form["_ahentic_loaded"]
    result = agent_for(editor).call(
        "admin_save", {"model": PAGES, "id": page.pk, "values": {"title": "About us"}}
    )
    assert result["ok"] is True

    with caplog.at_level("WARNING", logger="ahentic"):
        response = editor_in_admin.post(url, {**form, "content": "<p>Mine.</p>", "_save": "Save"})

    assert response.status_code == 200  # shown again, not redirected
    html = response.content.decode()
    assert "carries no record" in response.context["adminform"].form.non_field_errors()[0]
    assert 'name="_ahentic_save_anyway"' in html
    page.refresh_from_db()
    assert (page.title, page.content) == ("About us", "<p>Hello.</p>")
    assert any(
        "without a stale-form token" in r.getMessage() and str(page.pk) in r.getMessage()
        for r in caplog.records
    )

    # The re-shown form gets no fresh token (that would let a second Save through
    # unchecked): saving it again without the box still warns.
    assert 'name="_ahentic_loaded"' not in html
    again = {**form, "content": "<p>Mine.</p>", "_save": "Save"}
    assert editor_in_admin.post(url, again).status_code == 200
    page.refresh_from_db()
    assert page.title == "About us"

    confirmed = editor_in_admin.post(url, {**form, "_ahentic_save_anyway": "1", "_save": "Save"})

    assert confirmed.status_code == 302
    page.refresh_from_db()
    assert (page.title, page.content) == ("About", "<p>Hello.</p>")


def test_an_admin_tools_model_whose_admin_lacks_the_mixin_is_a_warning(settings, db):
    settings.AHENTIC = {**settings.AHENTIC, "ADMIN_TOOLS": [PAGES, "ahentic_tests.book"]}

    warnings = [m.msg for m in run_checks() if m.id == "ahentic.W005"]

    # (Other tests may leave AdminSites of their own that register books too.)
    on_admin = [msg for msg in warnings if "on the admin site 'admin'" in msg]
    assert len(on_admin) == 1
    assert "ahentic_tests.book" in on_admin[0]
    assert not [msg for msg in warnings if PAGES in msg]  # guarded on every site


def test_a_model_admin_without_the_mixin_gets_no_token_and_is_never_swapped(admin_client, db):
    from django.contrib import admin

    from tests.models import Book, Shelf

    book = Book.objects.create(shelf=Shelf.objects.create(code="A1", name="A"), title="Dune")
    plain = type(admin.site.get_model_admin(Book))

    response = admin_client.get(reverse("admin:ahentic_tests_book_change", args=[book.pk]))

    assert response.status_code == 200
    assert "_ahentic_loaded" not in response.content.decode()
    assert type(admin.site.get_model_admin(Book)) is plain  # no class swapped per request


@pytest.mark.urls("tests.stale_admin_site")
def test_the_user_change_form_is_guarded_too_and_its_password_hash_is_not_part_of_it(
    agent_for, client, settings, db
):
    # UserAdmin has a get_form of its own signature and a disabled password field.
    settings.AHENTIC = {**settings.AHENTIC, "ADMIN_TOOLS": ["auth.user"]}
    manager = staff("manager", "view_user", "change_user")
    client.force_login(manager)
    url = reverse("pages:auth_user_change", args=[manager.pk])
    form = open_change_form(client, url)
    assert "password" not in signing.loads(form["_ahentic_loaded"], salt=stale.SALT)["fields"]
    form.pop("password", None)
    result = agent_for(manager).call(
        "admin_save", {"model": "auth.user", "id": manager.pk, "values": {"first_name": "Ann"}}
    )
    assert result["ok"] is True

    response = client.post(url, {**form, "last_name": "Lee", "_save": "Save"})

    assert response.status_code == 200
    assert "First name" in response.context["adminform"].form.non_field_errors()[0]
    manager.refresh_from_db()
    assert (manager.first_name, manager.last_name) == ("Ann", "")


# --- 11. the Makefile's DEMO_ADDR ---------------------------------------------------------------------


def test_make_demo_serves_on_the_address_demo_addr_names():
    def demo_command(*args: str) -> str:
        dry_run = subprocess.run(
            ["make", "-n", "demo", *args], cwd=ROOT, capture_output=True, text=True, check=True
        )
        [line] = [line for line in dry_run.stdout.splitlines() if "ahentic_demo" in line]
        return line

    assert demo_command().endswith("manage.py ahentic_demo --addrport 127.0.0.1:8000")
    assert demo_command("DEMO_ADDR=127.0.0.1:8123").endswith("--addrport 127.0.0.1:8123")


def readme_section(title: str) -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index(title)
    end = text.find("\n## ", start + len(title))
    return text[start : end if end > 0 else len(text)]


def test_the_readme_refers_to_no_file_outside_the_repository_and_installs_by_a_real_name():
    text = README.read_text(encoding="utf-8")
    assert "../" not in text
    install = readme_section("## Installing into a host site")
    assert (
        "pip install django-ahentic\n" not in install
        and "`pip install django-ahentic`" not in install
    )
    assert "dist/django_ahentic-" in install
    # Running without a key is an install step, before the section ends.
    steps = install[install.index("### Steps") :]
    assert "ahentic_localapi --offline" in steps
    assert "ANTHROPIC_BASE_URL=http://127.0.0.1:8765" in steps


# --- 12. the demo's "Things to type" ------------------------------------------------------------------


@pytest.fixture
def demo_settings(settings, db):
    from ahentic_site.settings import AHENTIC as DEMO

    settings.AHENTIC = {**settings.AHENTIC, "ADMIN_TOOLS": DEMO["ADMIN_TOOLS"]}


def things_to_type(client) -> list[str]:
    response = client.get("/")
    assert response.status_code == 200
    html = response.content.decode()
    section = html[html.index("Things to type") : html.index("Coffee newsletter")]
    return [unescape(prompt) for prompt in re.findall(r"<kbd>(.*?)</kbd>", section)]


def run_prompt(client, session, llm, run_tasks, prompt: str) -> dict:
    """Type ``prompt``; answer a browser tool as the sidebar would; the final payload."""
    url = f"{API}/sessions/{session.pk}"
    response = run_tasks(client.post, f"{url}/messages", {"content": prompt}, format="json")
    assert response.status_code == 202, response.content
    body = client.get(url).json()
    if body["status"] == "awaiting_browser":
        result = {"title": "Ahentic demo", "url": "/", "text": "Things to type"}
        run_tasks(
            client.post,
            f"{url}/browser-results",
            {"callId": body["pendingTool"]["callId"], "result": result},
            format="json",
        )
        body = client.get(url).json()
    return body


def test_the_member_is_offered_only_prompts_that_work_for_it(demo_settings, llm, run_tasks):
    from rest_framework.test import APIClient

    from orchestrator_app.testing.offline import demo_responder
    from tests.support.factories import SessionFactory, UserFactory

    member = UserFactory(username="member", is_staff=False, agent_permission=True)
    client = APIClient()
    client.force_login(member)
    prompts = things_to_type(client)
    assert prompts and "Write a page about coffee" not in prompts
    assert "List the pages" not in prompts
    llm.responder = demo_responder

    for prompt in prompts:
        session = SessionFactory(owner=member)
        body = run_prompt(client, session, llm, run_tasks, prompt)
        assert body["status"] == "idle", prompt
        transcript = client.get(f"{API}/sessions/{session.pk}/messages?view=debug").json()
        failed = [
            m
            for m in transcript["messages"]
            if m["kind"] == "tool_response" and not m["meta"]["ok"]
        ]
        assert failed == [], prompt
        reply = transcript["messages"][-1]
        assert reply["kind"] == "agent_message" and "did not work" not in reply["content"], prompt


def test_staff_with_the_page_admin_is_offered_the_admin_prompts_too(demo_settings, client):
    from tests.support.factories import UserFactory

    demo = UserFactory(username="demo", is_staff=True, is_superuser=True, agent_permission=True)
    client.force_login(demo)

    prompts = things_to_type(client)

    assert {"Write a page about coffee", "List the pages", "What is on this page?"} <= set(prompts)


def test_the_offline_models_texts_do_not_tell_a_host_site_to_run_make_demo(
    owner_client, session, llm, run_tasks
):
    from orchestrator_app.testing import offline

    llm.responder = offline.demo_responder
    body = run_prompt(owner_client, session, llm, run_tasks, "Hello there")

    reply = body["messages"][-1]["content"]
    assert "You said: “Hello there”" in reply
    assert "make demo" not in reply
    assert "ANTHROPIC_API_KEY" in reply
    # No reply text of the offline model names the demo's command: no string in the module but
    # its docstrings (which are for the engineers) says it.
    tree = ast.parse(Path(offline.__file__).read_text(encoding="utf-8"))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    texts = [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
    ]
    assert any("(Offline demo model)" in t for t in texts)
    assert not [t for t in texts if "make demo" in t]
