"""The Django admin: read-only inspection of sessions, the ledger, artifacts and grants.

``admin_client`` (pytest-django) is a logged-in superuser.
"""

import re

import pytest
from django.contrib import admin
from django.contrib.auth.models import Permission, User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from orchestrator_app.models import ToolGrant, UsageRecord
from sessions_app import runstate, services
from sessions_app.models import Event, Session, TraceEvent
from tests.support.factories import SessionFactory, UsageRecordFactory
from tests.support.paths import ROOT


def url(model, view, *args):
    app_label = model._meta.app_label
    return reverse(f"admin:{app_label}_{model._meta.model_name}_{view}", args=args)


def test_it_lists_sessions_with_their_children_counted(admin_client, owner):
    parent = SessionFactory(owner=owner, title="Parent agent")
    SessionFactory(owner=owner, parent=parent, title="Helper one")
    SessionFactory(owner=owner, parent=parent, title="Helper two")

    response = admin_client.get(url(Session, "changelist"))

    assert response.status_code == 200
    assert response.context["cl"].result_count == 3
    counts = {s.title: s.children_count for s in response.context["cl"].result_list}
    assert counts == {"Parent agent": 2, "Helper one": 0, "Helper two": 0}


def test_it_lists_sessions_in_a_constant_number_of_queries(admin_client, owner):
    def changelist_queries():
        with CaptureQueriesContext(connection) as queries:
            assert admin_client.get(url(Session, "changelist")).status_code == 200
        return len(queries)

    parent = SessionFactory(owner=owner)
    SessionFactory(owner=owner, parent=parent)
    few = changelist_queries()
    for _ in range(10):
        SessionFactory(parent=SessionFactory())  # each with its own owner
    many = changelist_queries()

    assert few == many


def test_it_filters_sessions_by_status_and_mode(admin_client, owner):
    running = SessionFactory(owner=owner, title="Busy one")
    runstate.session_transition(session_id=running.pk, from_statuses=["idle"], to_status="running")
    SessionFactory(owner=owner, title="Idle one")
    SessionFactory(owner=owner, title="Asking one", mode=Session.Mode.ASK)

    by_status = admin_client.get(url(Session, "changelist"), {"status__exact": "running"})
    by_mode = admin_client.get(url(Session, "changelist"), {"mode__exact": "ask"})

    assert [s.title for s in by_status.context["cl"].result_list] == ["Busy one"]
    assert [s.title for s in by_mode.context["cl"].result_list] == ["Asking one"]


@pytest.mark.parametrize("query", ["Quarterly", "owner", "owner@example.com", "{id}", "{id_upper}"])
def test_it_finds_a_session_by_title_owner_or_id(admin_client, owner, other, query):
    wanted = SessionFactory(owner=owner, title="Quarterly report")
    SessionFactory(owner=other, title="Holiday plan")

    q = query.format(id=wanted.pk, id_upper=str(wanted.pk).upper())
    response = admin_client.get(url(Session, "changelist"), {"q": q})

    assert response.status_code == 200
    assert [s.pk for s in response.context["cl"].result_list] == [wanted.pk]


def test_it_shows_a_read_only_session_page_with_timeline_and_trace(admin_client, inspected):
    response = admin_client.get(url(Session, "change", inspected.pk))

    assert response.status_code == 200
    html = response.content.decode()
    # Timeline, trace, pending messages, goals, artifacts
    assert "user_message" in html and "tool_call" in html and "create_page" in html
    assert "run_start" in html and "&lt;b&gt;bold&lt;/b&gt; start" in html
    assert "queued while busy" in html
    assert "Publish the about page" in html
    assert "about-draft" in html
    # Pretty-printed JSON
    assert "&quot;title&quot;: &quot;Launch plan&quot;" in html
    # Event content is escaped, never executed
    assert "&lt;script&gt;alert(&#x27;owned&#x27;)&lt;/script&gt;" in html
    assert "<script>alert(" not in html
    # Nothing to edit but the spend cap (tests/features/spend/test_spend_caps.py): no inputs for the rest
    assert 'name="title"' not in html and 'name="status"' not in html
    assert 'name="spend_cap_usd"' in html


def test_it_saves_nothing_but_the_spend_cap_from_the_admin(admin_client, session):
    before = Session.objects.filter(pk=session.pk).values().get()

    response = admin_client.post(
        url(Session, "change", session.pk),
        {"title": "Edited", "status": "done", "spend_cap_usd": "", "spend_cap_loaded": ""},
    )

    assert response.status_code == 302
    assert Session.objects.filter(pk=session.pk).values().get() == before


def test_it_refuses_to_add_a_session_from_the_admin(admin_client):
    assert admin_client.get(url(Session, "add")).status_code == 403
    assert admin_client.post(url(Session, "add"), {"title": "x"}).status_code == 403
    assert not Session.objects.exists()


@pytest.mark.parametrize("status", ["idle", "running"])
def test_it_deletes_a_session_with_its_rows(admin_client, inspected, status):
    if status != "idle":
        runstate.session_transition(
            session_id=inspected.pk, from_statuses=["idle"], to_status=status
        )

    confirm = admin_client.get(url(Session, "delete", inspected.pk))
    response = admin_client.post(url(Session, "delete", inspected.pk), {"post": "yes"})

    assert confirm.status_code == 200
    assert response.status_code == 302
    assert not Session.objects.exists()
    assert not Event.objects.exists() and not TraceEvent.objects.exists()


def test_it_deletes_selected_sessions_from_the_list(admin_client, owner):
    doomed = [SessionFactory(owner=owner), SessionFactory(owner=owner)]
    kept = SessionFactory(owner=owner)

    response = admin_client.post(
        url(Session, "changelist"),
        {"action": "delete_selected", "_selected_action": [s.pk for s in doomed], "post": "yes"},
    )

    assert response.status_code == 302
    assert list(Session.objects.values_list("pk", flat=True)) == [kept.pk]


@pytest.mark.parametrize("model", [Event, TraceEvent])
def test_it_shows_events_and_trace_rows_read_only(admin_client, inspected, model):
    row = model.objects.filter(session=inspected).first()

    listing = admin_client.get(url(model, "changelist"))
    detail = admin_client.get(url(model, "change", row.pk))

    assert listing.status_code == detail.status_code == 200
    assert listing.context["cl"].result_count == model.objects.count()
    assert admin_client.get(url(model, "add")).status_code == 403
    assert admin_client.post(url(model, "delete", row.pk), {"post": "yes"}).status_code == 403
    assert model.objects.filter(pk=row.pk).exists()


def test_it_filters_events_by_kind_and_searches_their_content(admin_client, inspected):
    by_kind = admin_client.get(url(Event, "changelist"), {"kind__exact": "tool_call"})
    by_text = admin_client.get(url(Event, "changelist"), {"q": "alert"})

    assert [e.kind for e in by_kind.context["cl"].result_list] == ["tool_call"]
    assert [e.kind for e in by_text.context["cl"].result_list] == ["user_message"]


def test_it_shows_artifacts_read_only(admin_client, inspected):
    artifact = inspected.artifacts.get()

    listing = admin_client.get(url(type(artifact), "changelist"), {"kind__exact": "markdown"})
    detail = admin_client.get(url(type(artifact), "change", artifact.pk))

    assert listing.status_code == detail.status_code == 200
    assert listing.context["cl"].result_count == 1
    assert "&quot;content&quot;: &quot;# Draft&quot;" in detail.content.decode()
    assert admin_client.get(url(type(artifact), "add")).status_code == 403


def test_it_shows_the_usage_ledger_by_date(admin_client, session):
    record = UsageRecordFactory(session=session, purpose="brain")

    this_year = {"created_at__year": record.created_at.year}

    listing = admin_client.get(url(type(record), "changelist"), this_year)
    by_purpose = admin_client.get(url(type(record), "changelist"), {"purpose__exact": "step"})
    detail = admin_client.get(url(type(record), "change", record.pk))

    assert listing.status_code == detail.status_code == 200
    assert listing.context["cl"].result_count == 1
    assert by_purpose.context["cl"].result_count == 0
    assert admin_client.get(url(type(record), "add")).status_code == 403


def test_it_lets_an_admin_revoke_a_tool_grant(admin_client, owner):
    grant = ToolGrant.objects.create(user=owner, tool_name="create_page")

    listing = admin_client.get(url(ToolGrant, "changelist"))
    response = admin_client.post(url(ToolGrant, "delete", grant.pk), {"post": "yes"})

    assert listing.status_code == 200 and "create_page" in listing.content.decode()
    assert response.status_code == 302
    assert not ToolGrant.objects.exists()
    assert admin_client.get(url(ToolGrant, "add")).status_code == 403


def test_it_keeps_non_staff_users_out(owner_client, session):
    response = owner_client.get(url(Session, "change", session.pk))

    assert response.status_code == 302
    assert response["Location"].startswith(reverse("admin:login"))


# --- run actions -------------------------------------------------------------------------------


def run_action(admin_client, action, *sessions):
    return admin_client.post(
        url(Session, "changelist"),
        {"action": action, "_selected_action": [str(s.pk) for s in sessions]},
    )


def test_the_cancel_action_cancels_a_live_run_and_answers_its_open_calls(admin_client, session):
    runstate.session_transition(
        session_id=session.pk, from_statuses=["idle"], to_status="running", lease_token=""
    )
    services.events_append(
        session_id=session.pk,
        items=[
            {"kind": Event.Kind.USER_MESSAGE, "content": "Do it"},
            {
                "kind": Event.Kind.TOOL_CALL,
                "payload": {"tool": "echo", "input": {}},
                "tool_use_id": "toolu_x",
            },
        ],
    )

    response = run_action(admin_client, "cancel_runs", session)

    assert response.status_code == 302
    session.refresh_from_db()
    assert session.status == "cancelled"
    answers = Event.objects.filter(session=session, kind=Event.Kind.TOOL_RESPONSE)
    assert [(a.tool_use_id, a.payload["error"]) for a in answers] == [("toolu_x", "cancelled")]


def test_the_heal_action_answers_orphaned_calls_of_an_idle_session(admin_client, session):
    services.events_append(
        session_id=session.pk,
        items=[
            {"kind": Event.Kind.USER_MESSAGE, "content": "Do it"},
            {
                "kind": Event.Kind.TOOL_CALL,
                "payload": {"tool": "echo", "input": {}},
                "tool_use_id": "toolu_o",
            },
        ],
    )

    run_action(admin_client, "heal_tool_calls", session)

    [answer] = Event.objects.filter(session=session, kind=Event.Kind.TOOL_RESPONSE)
    assert (answer.tool_use_id, answer.payload["error"]) == ("toolu_o", "tool_interrupted")


def test_the_heal_action_leaves_a_run_a_live_worker_holds(admin_client, session):
    from datetime import timedelta

    from django.utils import timezone

    runstate.session_transition(
        session_id=session.pk,
        from_statuses=["idle"],
        to_status="running",
        lease_token="live",
        lease_expires_at=timezone.now() + timedelta(seconds=60),
    )
    services.event_append(
        session_id=session.pk, kind=Event.Kind.TOOL_CALL, payload={"tool": "echo"}, tool_use_id="t1"
    )

    run_action(admin_client, "heal_tool_calls", session)

    assert not Event.objects.filter(session=session, kind=Event.Kind.TOOL_RESPONSE).exists()


def test_the_continue_action_requeues_a_stalled_run(
    admin_client, session, django_capture_on_commit_callbacks
):
    from datetime import timedelta
    from unittest.mock import patch

    from django.utils import timezone

    runstate.session_transition(
        session_id=session.pk,
        from_statuses=["idle"],
        to_status="running",
        lease_token="dead-worker",
        lease_expires_at=timezone.now() - timedelta(seconds=5),
    )
    with patch("orchestrator_app.control.queue.async_task") as enqueue:
        with django_capture_on_commit_callbacks(execute=True):
            run_action(admin_client, "continue_runs", session)

    assert enqueue.call_args.args[:3] == ("orchestrator_app.tasks.run_step", str(session.pk), 0)
    assert "run_requeue" in TraceEvent.objects.filter(session=session).values_list(
        "type", flat=True
    )


def test_the_export_action_downloads_the_diagnostics_bundle(admin_client, inspected):
    response = run_action(admin_client, "export_diagnostics", inspected)

    assert response.status_code == 200
    assert response["Content-Disposition"] == (
        f'attachment; filename="ahentic-diagnostics-{inspected.pk}.json"'
    )
    bundle = response.json()
    assert bundle["id"] == str(inspected.pk)
    assert [t["type"] for t in bundle["trace"]] == ["run_start"]
    assert bundle["trace"][0]["data"] == {}


# --- any user model: search and columns by USERNAME_FIELD / get_username() -----------------------

USER_ADMINS = [(Session, "owner"), (UsageRecord, "user"), (ToolGrant, "user")]


def user_row(model, user):
    if model is Session:
        return SessionFactory(owner=user, title="Quarterly report")
    if model is UsageRecord:
        return UsageRecordFactory(session=SessionFactory(owner=user))
    return ToolGrant.objects.create(user=user, tool_name="create_page")


@pytest.mark.parametrize(("model", "relation"), USER_ADMINS)
def test_user_search_fields_come_from_the_user_model(rf, admin_user, model, relation, monkeypatch):
    model_admin = admin.site._registry[model]
    request = rf.get("/")
    request.user = admin_user

    assert f"{relation}__username" in model_admin.get_search_fields(request)
    # A host whose user model logs in by email and has no username field.
    monkeypatch.setattr(User, "USERNAME_FIELD", "email")
    fields = model_admin.get_search_fields(request)
    assert f"{relation}__email" in fields
    assert not any("username" in f for f in fields)
    assert fields.count(f"{relation}__email") == 1


def test_no_admin_names_a_username_field():
    modules = [
        path
        for app in ("sessions_app", "orchestrator_app", "artifacts_app")
        for path in (ROOT / app).rglob("*.py")
        if path.stem.startswith("admin") or "admin" in path.parent.name.split("_")
    ]
    assert len(modules) >= 10  # every admin module of the apps, the wings' included
    for path in modules:
        source = path.read_text(encoding="utf-8")
        assert "__username" not in source, path
        assert '"username"' not in source, path


@pytest.mark.parametrize(("model", "relation"), USER_ADMINS)
def test_the_user_column_shows_and_sorts_by_get_username(
    admin_client, owner, other, model, relation, monkeypatch
):
    monkeypatch.setattr(User, "USERNAME_FIELD", "email")  # get_username() is the email
    monkeypatch.setattr(User, "__str__", lambda user: "A host's own __str__")
    owner.email, other.email = "zed@example.com", "amy@example.com"
    owner.save(), other.save()
    user_row(model, owner), user_row(model, other)
    column = list(admin.site._registry[model].list_display).index(f"{relation}_name")

    response = admin_client.get(url(model, "changelist"), {"o": str(column + 1)})

    assert response.status_code == 200
    html = response.content.decode()
    assert html.index("amy@example.com") < html.index("zed@example.com")
    assert "A host&#x27;s own __str__" not in html


@pytest.mark.parametrize(("model", "relation"), USER_ADMINS)
def test_the_admin_search_finds_rows_by_the_users_login_name(
    admin_client, owner, other, model, relation, monkeypatch
):
    wanted, _ = user_row(model, owner), user_row(model, other)
    monkeypatch.setattr(User, "USERNAME_FIELD", "email")
    owner.email = "ada@example.org"
    owner.save()

    response = admin_client.get(url(model, "changelist"), {"q": "ada@example"})

    assert response.status_code == 200
    assert [r.pk for r in response.context["cl"].result_list] == [wanted.pk]


# --- a second AdminSite ---------------------------------------------------------------------------


@pytest.mark.urls("tests.second_admin_site")
def test_a_second_admin_site_lists_searches_and_links_to_itself(admin_client, inspected):
    changelist = reverse("ops:sessions_app_session_changelist")
    listing = admin_client.get(changelist, {"q": "owner"})
    page = admin_client.get(reverse("ops:sessions_app_session_change", args=[inspected.pk]))

    assert listing.status_code == page.status_code == 200
    assert [s.pk for s in listing.context["cl"].result_list] == [inspected.pk]
    html = page.content.decode()
    assert reverse("ops:sessions_app_event_changelist") + str(inspected.events.first().pk) in html
    for path in re.findall(r'href="(/[^"]*/(?:event|traceevent|artifact)/[^"]*)"', html):
        assert path.startswith("/ops/"), path
    assert f'action="{changelist}"' in html or changelist in html


# --- run buttons on the session page (issue 21) -----------------------------------------------------


def run_button(admin_client, session, action, site="admin"):
    """What a run button of the session page posts, read from the page itself."""
    page = admin_client.get(reverse(f"{site}:sessions_app_session_change", args=[session.pk]))
    html = page.content.decode()
    forms = re.findall(
        r'<form method="post" action="([^"]+)" class="ahentic-run-action">.*?'
        r'name="action" value="([^"]+)"',
        html,
        re.S,
    )
    [target] = [target for target, name in forms if name == action]
    return admin_client.post(target, {"action": action}, follow=True)


def shown_messages(response) -> list[str]:
    return [str(m) for m in response.context["messages"]]


def test_a_run_button_returns_to_the_session_page_with_a_plain_message(admin_client, session):
    runstate.session_transition(
        session_id=session.pk, from_statuses=["idle"], to_status="running", lease_token=""
    )

    cancelled = run_button(admin_client, session, "cancel_runs")
    again = run_button(admin_client, session, "cancel_runs")
    continued = run_button(admin_client, session, "continue_runs")
    healed = run_button(admin_client, session, "heal_tool_calls")

    page = url(Session, "change", session.pk)
    for response in (cancelled, again, continued, healed):
        assert response.redirect_chain == [(page, 302)]
        assert response.status_code == 200
    assert shown_messages(cancelled) == ["Cancelled the run."]
    assert shown_messages(again) == ["Nothing to cancel: the session is cancelled."]
    assert shown_messages(continued) == ["Nothing to continue: the session is cancelled."]
    assert shown_messages(healed) == ["No orphaned tool calls to answer."]
    session.refresh_from_db()
    assert session.status == "cancelled"


def test_the_export_button_still_downloads(admin_client, inspected):
    response = run_button(admin_client, inspected, "export_diagnostics")

    assert response.redirect_chain == []
    assert response["Content-Disposition"] == (
        f'attachment; filename="ahentic-diagnostics-{inspected.pk}.json"'
    )


def test_a_run_url_refuses_actions_the_user_may_not_run(client, session):
    viewer = User.objects.create_user("viewer", password="x", is_staff=True)
    viewer.user_permissions.add(*Permission.objects.filter(codename__in=["view_session"]))
    client.force_login(viewer)
    runstate.session_transition(
        session_id=session.pk, from_statuses=["idle"], to_status="running", lease_token=""
    )
    target = reverse("admin:sessions_app_session_run", args=[session.pk])

    page = client.get(url(Session, "change", session.pk)).content.decode()
    response = client.post(target, {"action": "cancel_runs"}, follow=True)
    fetched = client.get(target)

    assert 'value="cancel_runs"' not in page and 'value="export_diagnostics"' in page
    assert response.redirect_chain == [(url(Session, "change", session.pk), 302)]
    assert shown_messages(response) == ["You may not run that action here."]
    assert fetched.status_code == 405
    session.refresh_from_db()
    assert session.status == "running"


def test_the_list_actions_count_in_words(admin_client, owner):
    live, idle = SessionFactory(owner=owner), SessionFactory(owner=owner)
    runstate.session_transition(
        session_id=live.pk, from_statuses=["idle"], to_status="running", lease_token=""
    )

    cancelled = admin_client.post(
        url(Session, "changelist"),
        {"action": "cancel_runs", "_selected_action": [str(live.pk), str(idle.pk)]},
        follow=True,
    )
    continued = admin_client.post(
        url(Session, "changelist"),
        {"action": "continue_runs", "_selected_action": [str(live.pk), str(idle.pk)]},
        follow=True,
    )

    assert shown_messages(cancelled) == ["Cancelled 1 run. Nothing to cancel in 1 other session."]
    assert shown_messages(continued) == ["Nothing to continue in 2 sessions."]


@pytest.mark.urls("tests.second_admin_site")
def test_a_run_button_on_a_second_admin_site_returns_to_that_site(admin_client, session):
    response = run_button(admin_client, session, "heal_tool_calls", site="ops")

    assert response.redirect_chain == [
        (reverse("ops:sessions_app_session_change", args=[session.pk]), 302)
    ]
    assert shown_messages(response) == ["No orphaned tool calls to answer."]


@pytest.mark.parametrize("view", ["add", "change"])
def test_the_mcp_server_form_shows_its_help_text_and_the_site_token_once(admin_client, view):
    from orchestrator_app.models import McpCredential, McpServer

    server = McpServer.objects.create(slug="tickets", name="Tickets", url="https://x.example/mcp")
    McpCredential.objects.create(server=server, kind="bearer", hint="…cdef", access_token="x")
    args = [server.pk] if view == "change" else []

    html = admin_client.get(url(McpServer, view, *args)).content.decode()

    # The slug's help text names the tools' pattern; rendered as HTML it lost "<slug>".
    assert "mcp__&lt;slug&gt;__&lt;tool&gt;" in html and "mcp____" not in html
    assert len(re.findall(r"site token", html, re.IGNORECASE)) == 1
    if view == "change":  # the current token's hint is said beside the field
        assert "…cdef" in html


def test_the_session_page_shows_the_conversation_first_and_folds_the_run_internals(
    admin_client, inspected
):
    services.events_append(
        session_id=inspected.pk,
        items=[{"kind": Event.Kind.AGENT_MESSAGE, "content": "The about page is drafted."}],
    )

    html = admin_client.get(url(Session, "change", inspected.pk)).content.decode()

    conversation = html.index('id="ahentic-conversation"')
    asked = html.index("&lt;script&gt;alert(", conversation)  # the user's message, escaped
    answered = html.index("The about page is drafted.", conversation)
    lease = html.index("Lease token")
    assert conversation < asked < answered < lease
    # The run internals (lease, fork id, ...) are a closed fold below the conversation.
    internals = html.rindex("<details", 0, lease)
    assert conversation < internals and " open" not in html[internals : html.index(">", internals)]
    assert "Fork event id" in html[internals:]


def test_every_admin_page_of_the_app_says_the_zone_its_times_are_in(
    admin_client, inspected, settings
):
    settings.TIME_ZONE = "Europe/Berlin"  # what a middleware activating the user's zone gives
    from orchestrator_app.models import Schedule

    for page in [
        url(Session, "changelist"),
        url(Session, "change", inspected.pk),
        url(Event, "changelist"),
        url(Schedule, "changelist"),
        reverse("admin:artifacts_app_artifact_changelist"),
    ]:
        html = admin_client.get(page).content.decode()
        assert "Times are in the Europe/Berlin time zone (UTC+0" in html, page

    session_page = admin_client.get(url(Session, "change", inspected.pk)).content.decode()
    listed = admin_client.get(url(Session, "changelist")).content.decode()
    # The times the app renders itself carry the zone's abbreviation (winter: CET).
    assert re.search(r"<time datetime=\"[^\"]+\+01:00\">[^<]+ CET</time>", session_page)
    assert re.search(r"\d\d:\d\d CET", listed)
