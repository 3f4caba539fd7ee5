"""The session REST API: access control, input validation, payload, paging, polling cost."""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.conf import settings
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from orchestrator_app import tasks
from sessions_app import runstate, services
from sessions_app.models import Event, Session, TraceEvent
from tests.support.api import API, csrf_client, csrf_token_for
from tests.support.factories import ArtifactFactory, GoalFactory, SessionFactory, UsageRecordFactory

# (method, path, body) of every endpoint that addresses one session.
SESSION_ENDPOINTS = [
    ("get", "sessions/{id}", None),
    ("patch", "sessions/{id}", {"title": "Renamed"}),
    ("delete", "sessions/{id}", None),
    ("get", "sessions/{id}/messages", None),
    ("get", "sessions/{id}/diagnostics", None),
]
ALL_ENDPOINTS = [
    ("get", "sessions", None),
    ("post", "sessions", {"title": "Mine"}),
    *SESSION_ENDPOINTS,
    ("get", "stats/tokens", None),
]


def call(client, method, path, body=None, **extra):
    return getattr(client, method)(f"{API}/{path}", body, format="json", **extra)


def snapshot(session):
    """The columns a refused request must not have changed."""
    return Session.objects.filter(pk=session.pk).values("title", "version", "updated_at").first()


def add_events(session, count, *, kind=Event.Kind.AGENT_MESSAGE):
    return services.events_append(
        session_id=session.pk,
        items=[{"kind": kind, "content": f"message {i + 1}"} for i in range(count)],
    )


def seqs(response):
    return [m["seq"] for m in response.json()["messages"]]


# Access control


@pytest.mark.parametrize(("method", "path", "body"), SESSION_ENDPOINTS)
def test_it_hides_another_users_session(other_client, session, method, path, body):
    before = snapshot(session)

    response = call(other_client, method, path.format(id=session.pk), body)

    assert response.status_code == 404
    assert response.json()["code"] == "ahentic_session_not_found"
    assert snapshot(session) == before


def test_it_lists_only_the_users_own_sessions(owner_client, other_client, session):
    theirs = other_client.post(f"{API}/sessions", {"title": "Theirs"}, format="json").json()

    mine = [s["id"] for s in owner_client.get(f"{API}/sessions").json()["sessions"]]
    others = [s["id"] for s in other_client.get(f"{API}/sessions").json()["sessions"]]

    assert mine == [str(session.pk)]
    assert others == [theirs["id"]]


@pytest.mark.parametrize(("method", "path", "body"), ALL_ENDPOINTS)
def test_it_refuses_a_user_without_the_agent_permission(noperm_client, session, method, path, body):
    before = snapshot(session)

    response = call(noperm_client, method, path.format(id=session.pk), body)

    assert response.status_code == 403
    assert response.json()["code"] == "ahentic_forbidden"
    assert snapshot(session) == before
    assert Session.objects.count() == 1


class AgentForNopermBackend:
    """A site's own authentication backend that grants the agent permission to "noperm"."""

    def authenticate(self, request, **credentials):
        return None

    def get_user(self, user_id):
        return None

    def has_perm(self, user_obj, perm, obj=None):
        return user_obj.username == "noperm" and perm == "sessions_app.use_agent"


def test_another_authentication_backend_can_grant_the_agent_permission(noperm_client, settings):
    settings.AUTHENTICATION_BACKENDS = [
        "django.contrib.auth.backends.ModelBackend",
        f"{__name__}.AgentForNopermBackend",
    ]

    created = noperm_client.post(f"{API}/sessions", {"title": "Granted"}, format="json")
    assert created.status_code == 201, created.content
    polled = noperm_client.get(f"{API}/sessions/{created.json()['id']}")

    assert polled.status_code == 200
    assert polled.json()["title"] == "Granted"
    assert noperm_client.get(f"{API}/sessions").status_code == 200


@pytest.mark.parametrize(("method", "path", "body"), ALL_ENDPOINTS)
def test_it_refuses_an_anonymous_visitor(anon_client, session, method, path, body):
    before = snapshot(session)

    response = call(anon_client, method, path.format(id=session.pk), body)

    assert response.status_code in (401, 403)
    assert response.json()["code"] == "ahentic_unauthenticated"
    assert snapshot(session) == before
    assert Session.objects.count() == 1


UNSAFE_REQUESTS = [
    ("post", "sessions", {"title": "Created"}, 201),
    ("patch", "sessions/{id}", {"title": "Renamed"}, 200),
    ("delete", "sessions/{id}", None, 204),
]


@pytest.mark.parametrize(("method", "path", "body", "expected"), UNSAFE_REQUESTS)
def test_it_refuses_unsafe_requests_without_a_csrf_token(
    owner, session, method, path, body, expected
):
    client = csrf_client(owner)
    before = snapshot(session)

    response = call(client, method, path.format(id=session.pk), body)

    assert response.status_code == 403
    assert "CSRF" in response.json()["detail"]
    assert snapshot(session) == before
    assert Session.objects.count() == 1


@pytest.mark.parametrize(("method", "path", "body", "expected"), UNSAFE_REQUESTS)
def test_it_accepts_unsafe_requests_with_a_csrf_token(owner, session, method, path, body, expected):
    client = csrf_client(owner)
    token = csrf_token_for(client)

    response = call(client, method, path.format(id=session.pk), body, HTTP_X_CSRFTOKEN=token)

    assert response.status_code == expected, response.content


# Creating, renaming, deleting


def test_it_creates_an_untitled_session_with_an_automatic_title(owner_client):
    response = owner_client.post(f"{API}/sessions", {}, format="json")

    assert response.status_code == 201
    body = response.json()
    assert (body["title"], body["autoTitle"], body["mode"]) == ("New Agent", True, "agent")
    assert body["status"] == "idle"
    assert response["ETag"] == f'"v{body["version"]}"'


def test_it_creates_a_titled_session_in_ask_mode(owner_client, owner):
    response = owner_client.post(
        f"{API}/sessions", {"title": "  Quarterly report ", "mode": "ask"}, format="json"
    )

    body = response.json()
    assert response.status_code == 201
    assert (body["title"], body["autoTitle"], body["mode"]) == ("Quarterly report", False, "ask")
    assert Session.objects.get(pk=body["id"]).owner == owner


def test_it_rejects_an_unknown_mode(owner_client):
    response = owner_client.post(f"{API}/sessions", {"mode": "chaos"}, format="json")

    assert response.status_code == 400
    assert response.json()["code"] == "ahentic_invalid_input"
    assert "mode" in response.json()["fields"]
    assert not Session.objects.exists()


def test_it_renames_a_session_and_stops_automatic_titles(owner_client, session):
    assert session.auto_title

    response = owner_client.patch(f"{API}/sessions/{session.pk}", {"title": "Mine"}, format="json")

    assert response.status_code == 200
    assert (response.json()["title"], response.json()["autoTitle"]) == ("Mine", False)
    assert Session.objects.get(pk=session.pk).title_source == Session.TitleSource.USER


def test_it_updates_the_session_settings(owner_client, session, settings, tmp_path):
    (tmp_path / "seo.md").write_text("---\nname: seo\ndescription: Rank.\n---\nUse keywords.")
    (tmp_path / "tone.md").write_text("---\nname: tone\n---\nBe warm.")
    (tmp_path / "publish.md").write_text("---\nname: publish\n---\n1. Draft 2. Publish")
    settings.AHENTIC = {**settings.AHENTIC, "SKILL_DIRS": [tmp_path], "WORKFLOW_DIRS": [tmp_path]}
    response = owner_client.patch(
        f"{API}/sessions/{session.pk}",
        {
            "mode": "ask",
            "viewMode": "debug",
            "pageContext": {"url": "/admin/", "nested": {"Keep": "verbatim"}},
            "activeSkills": ["seo", "seo", "tone"],
            "activeWorkflow": "publish",
        },
        format="json",
    )

    body = response.json()
    assert response.status_code == 200
    assert (body["mode"], body["viewMode"]) == ("ask", "debug")
    assert body["activeSkills"] == ["seo", "tone"]
    assert body["activeWorkflow"] == "publish"
    assert body["autoTitle"] is True
    assert Session.objects.get(pk=session.pk).page_context == {
        "url": "/admin/",
        "nested": {"Keep": "verbatim"},
    }


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"title": 5}, "title"),
        ({"title": "   "}, "title"),
        ({"title": "x" * 256}, "title"),
        ({"pageContext": "x"}, "pageContext"),
        ({"pageContext": [1, 2]}, "pageContext"),
        ({"activeSkills": "a"}, "activeSkills"),
        ({"activeSkills": ["a", 5]}, "activeSkills"),
        ({"viewMode": "loud"}, "viewMode"),
        ({"mode": True}, "mode"),
        ({"activeWorkflow": 3}, "activeWorkflow"),
    ],
)
def test_it_rejects_a_patch_with_wrong_types(owner_client, session, body, field):
    before = snapshot(session)

    response = owner_client.patch(f"{API}/sessions/{session.pk}", body, format="json")

    assert response.status_code == 400
    assert response.json()["code"] == "ahentic_invalid_input"
    assert field in response.json()["fields"]
    assert snapshot(session) == before


def test_it_deletes_a_session_with_its_children_and_events(owner_client, session, owner):
    child = SessionFactory(owner=owner, parent=session)
    add_events(session, 3)
    add_events(child, 2)

    response = owner_client.delete(f"{API}/sessions/{session.pk}")
    # The chat is gone for its owner at once; its rows go when the undo window is over.
    assert response.status_code == 204
    assert owner_client.get(f"{API}/sessions/{session.pk}").status_code == 404
    tasks.purge_deleted_chats((timezone.now() + timedelta(days=1)).isoformat())

    assert not Session.objects.exists()
    assert not Event.objects.exists()


def test_it_lists_root_sessions_newest_first_with_a_status_filter(owner_client, owner):
    older = SessionFactory(owner=owner, title="Older")
    newer = SessionFactory(owner=owner, title="Newer")
    SessionFactory(owner=owner, parent=newer, title="Child")
    runstate.session_transition(session_id=older.pk, from_statuses=["idle"], to_status="running")
    runstate.session_transition(session_id=older.pk, from_statuses=["running"], to_status="error")
    runstate.session_update(session_id=newer.pk, title="Newer")  # the latest write

    listed = owner_client.get(f"{API}/sessions").json()["sessions"]
    errors = owner_client.get(f"{API}/sessions?status=error").json()["sessions"]
    limited = owner_client.get(f"{API}/sessions?limit=1").json()["sessions"]

    assert [s["title"] for s in listed] == ["Newer", "Older"]
    assert set(listed[0]) == {
        "id",
        "title",
        "status",
        "mode",
        "tokensUsed",
        "parentId",
        "modifiedAt",
        "createdAt",
        "agent",
        "match",
    }
    assert [s["title"] for s in errors] == ["Older"]
    assert [s["title"] for s in limited] == ["Newer"]


# Routing


@pytest.mark.parametrize("slash", ["", "/"])
@pytest.mark.parametrize(
    ("method", "path", "body", "expected"),
    [
        ("get", "sessions", None, 200),
        ("post", "sessions", {}, 201),
        ("get", "sessions/{id}", None, 200),
        ("patch", "sessions/{id}", {"title": "T"}, 200),
        ("get", "sessions/{id}/messages", None, 200),
        ("get", "sessions/{id}/diagnostics", None, 200),
        ("get", "stats/tokens", None, 200),
        ("delete", "sessions/{id}", None, 204),
    ],
)
def test_it_answers_with_and_without_a_trailing_slash(
    owner_client, session, slash, method, path, body, expected
):
    response = call(owner_client, method, path.format(id=session.pk) + slash, body)

    assert response.status_code == expected, response.content


@pytest.mark.parametrize(("method", "path", "body"), SESSION_ENDPOINTS)
@pytest.mark.parametrize("bad_id", ["not-a-uuid", "12345", "00000000-0000-0000-0000-000000000000"])
def test_it_treats_an_invalid_or_unknown_session_id_as_not_found(
    owner_client, session, method, path, body, bad_id
):
    response = call(owner_client, method, path.format(id=bad_id), body)

    assert response.status_code == 404
    assert response.json()["code"] == "ahentic_session_not_found"


# Bad input is a 400 with a code, never a 500


@pytest.mark.parametrize(("method", "path"), [("post", "sessions"), ("patch", "sessions/{id}")])
@pytest.mark.parametrize(
    ("raw", "content_type", "status", "code"),
    [
        ("{not json", "application/json", 400, "ahentic_invalid_json"),
        ('["a", "list"]', "application/json", 400, "ahentic_invalid_input"),
        ('"a string"', "application/json", 400, "ahentic_invalid_input"),
        ("title=x", "application/x-www-form-urlencoded", 415, "ahentic_unsupported_media_type"),
    ],
)
def test_it_rejects_a_body_that_is_not_a_json_object(
    owner_client, session, method, path, raw, content_type, status, code
):
    before = snapshot(session)

    response = getattr(owner_client, method)(
        f"{API}/{path.format(id=session.pk)}", raw, content_type=content_type
    )

    assert response.status_code == status
    assert response.json()["code"] == code
    assert snapshot(session) == before
    assert Session.objects.count() == 1


@pytest.mark.parametrize(("method", "path"), [("post", "sessions"), ("patch", "sessions/{id}")])
def test_it_rejects_a_body_over_two_mebibytes(owner_client, session, method, path):
    body = {"title": "x" * (2 * 1024 * 1024 + 1)}

    response = call(owner_client, method, path.format(id=session.pk), body)

    assert response.status_code == 413
    assert response.json()["code"] == "ahentic_body_too_large"
    assert Session.objects.count() == 1


@pytest.mark.parametrize(
    "path",
    [
        "sessions?limit=abc",
        "sessions?limit=500",
        "sessions?limit=0",
        "sessions?status=sleeping",
        "sessions/{id}/messages?limit=abc",
        "sessions/{id}/messages?limit=500",
        "sessions/{id}/messages?before=x",
        "sessions/{id}/messages?after=-1",
        "sessions/{id}/messages?view=loud",
        "stats/tokens?days=0",
        "stats/tokens?days=121",
        "stats/tokens?days=abc",
    ],
)
def test_it_rejects_bad_query_parameters(owner_client, session, path):
    response = owner_client.get(f"{API}/{path.format(id=session.pk)}")

    assert response.status_code == 400
    assert response.json()["code"] == "ahentic_invalid_input"


# Polling: constant cost, ETag


def fill_session(session, *, events):
    """Give a session ``events`` events and proportionally many other rows."""
    many = max(1, events // 10)
    kinds = [Event.Kind.USER_MESSAGE, Event.Kind.TOOL_CALL, Event.Kind.TOOL_RESPONSE]
    services.events_append(
        session_id=session.pk,
        items=[
            {"kind": kinds[i % 3], "content": f"event {i}", "tool_use_id": f"toolu_{i // 3}"}
            for i in range(events)
        ],
    )
    for i in range(events):
        services.trace_record(session_id=session.pk, type="step", summary=f"trace {i}")
    for i in range(many):
        services.pending_message_add(session_id=session.pk, content=f"pending {i}")
        root = GoalFactory(session=session)
        GoalFactory(session=session, parent=root)
        SessionFactory(owner=session.owner, parent=session)
        ArtifactFactory(session=session)
    runstate.session_update(session_id=session.pk, view_mode=Session.ViewMode.DEBUG)


def test_it_reads_a_session_in_a_constant_number_of_queries(owner_client, owner):
    small, large = SessionFactory(owner=owner), SessionFactory(owner=owner)
    fill_session(small, events=5)
    fill_session(large, events=400)
    owner_client.get(f"{API}/tools")  # the permission answer is read once, then cached

    with CaptureQueriesContext(connection) as small_queries:
        small_response = owner_client.get(f"{API}/sessions/{small.pk}")
    with CaptureQueriesContext(connection) as large_queries:
        large_response = owner_client.get(f"{API}/sessions/{large.pk}")

    assert small_response.status_code == large_response.status_code == 200
    assert len(large_response.json()["messages"]) == 50
    assert large_response.json()["traceCount"] == 400
    assert len(large_response.json()["children"]) == 40
    assert len(small_queries) == len(large_queries) <= 10


def test_it_answers_304_to_a_poll_with_the_current_etag(
    owner_client, session, django_assert_max_num_queries
):
    etag = owner_client.get(f"{API}/sessions/{session.pk}")["ETag"]

    # Authentication (the login session, the user) and one query for the version, the
    # heartbeat and the agent permission.
    with django_assert_max_num_queries(3):
        response = owner_client.get(f"{API}/sessions/{session.pk}", HTTP_IF_NONE_MATCH=etag)

    assert response.status_code == 304
    assert response.content == b""
    assert response["ETag"] == etag


@pytest.mark.parametrize(
    "write",
    [
        lambda client, s: client.patch(f"{API}/sessions/{s.pk}", {"title": "T"}, format="json"),
        lambda client, s: services.event_append(session_id=s.pk, kind="user_message", content="hi"),
        lambda client, s: services.pending_message_add(session_id=s.pk, content="later"),
    ],
    ids=["patch", "event", "pending-message"],
)
def test_it_changes_the_etag_on_every_visible_write(owner_client, session, write):
    etag = owner_client.get(f"{API}/sessions/{session.pk}")["ETag"]

    write(owner_client, session)
    response = owner_client.get(f"{API}/sessions/{session.pk}", HTTP_IF_NONE_MATCH=etag)

    assert response.status_code == 200
    assert response["ETag"] != etag


def test_bookkeeping_keeps_the_etag_and_the_heartbeat_header_moves(owner_client, session):
    """Trace rows, token sums, the step counter and the heartbeat do not change the ETag (a
    watching sidebar keeps getting 304s); the heartbeat is served in a header instead."""
    first = owner_client.get(f"{API}/sessions/{session.pk}")
    runstate.session_transition(session_id=session.pk, from_statuses=["idle"], to_status="running")
    lease = runstate.run_claim(session_id=session.pk, run_seq=0)
    etag = owner_client.get(f"{API}/sessions/{session.pk}")["ETag"]
    assert etag != first["ETag"]

    services.trace_record(session_id=session.pk, type="step")
    runstate.usage_add(
        session_id=session.pk,
        input_tokens=10,
        output_tokens=5,
        cache_read_tokens=0,
        cache_write_tokens=0,
        cost=None,
    )
    assert runstate.lease_refresh(lease)
    poll = owner_client.get(f"{API}/sessions/{session.pk}", HTTP_IF_NONE_MATCH=etag)

    assert poll.status_code == 304
    heartbeat = Session.objects.get(pk=session.pk).heartbeat_at
    assert poll["X-Ahentic-Heartbeat"] == heartbeat.isoformat().replace("+00:00", "Z")
    runstate.progress_set(lease, "Reading the page")  # what the user sees moves it
    moved = owner_client.get(f"{API}/sessions/{session.pk}", HTTP_IF_NONE_MATCH=etag)
    assert moved.status_code == 200
    assert moved.json()["progress"]["label"] == "Reading the page"
    assert moved.json()["tokensUsed"] == 15


@pytest.mark.parametrize(
    "child_write",
    [
        lambda child: runstate.session_transition(
            session_id=child.pk, from_statuses=["idle"], to_status="running"
        ),
        lambda child: runstate.session_update(session_id=child.pk, title="Researcher"),
        lambda child: runstate.session_update(session_id=child.pk, tokens_out=500),
        lambda child: services.session_delete(session_id=child.pk),
        lambda child: SessionFactory(owner=child.owner, parent=child.parent),
    ],
    ids=["status", "title", "tokens", "deleted", "sibling-created"],
)
def test_it_changes_the_parents_etag_when_a_child_changes(
    owner_client, session, owner, child_write
):
    child = SessionFactory(owner=owner, parent=session)
    etag = owner_client.get(f"{API}/sessions/{session.pk}")["ETag"]

    child_write(child)
    response = owner_client.get(f"{API}/sessions/{session.pk}", HTTP_IF_NONE_MATCH=etag)

    assert response.status_code == 200
    assert response["ETag"] != etag


def test_it_keeps_the_parents_etag_when_a_child_only_records_events(owner_client, session, owner):
    child = SessionFactory(owner=owner, parent=session)
    etag = owner_client.get(f"{API}/sessions/{session.pk}")["ETag"]

    services.event_append(session_id=child.pk, kind="agent_message", content="working")
    services.trace_record(session_id=child.pk, type="step")

    response = owner_client.get(f"{API}/sessions/{session.pk}", HTTP_IF_NONE_MATCH=etag)
    assert response.status_code == 304


# Messages: paging and view modes


@pytest.mark.parametrize(
    ("query", "expected", "has_more"),
    [
        ("limit=3", [8, 9, 10], True),
        ("limit=10", list(range(1, 11)), False),
        ("before=5&limit=3", [2, 3, 4], True),
        ("before=4&limit=3", [1, 2, 3], False),
        ("before=1", [], False),
        ("after=2&limit=3", [3, 4, 5], True),
        ("after=7&limit=3", [8, 9, 10], False),
        ("after=10", [], False),
        # Both: the range between them, oldest first from after.
        ("after=2&before=9&limit=3", [3, 4, 5], True),
        ("after=5&before=9&limit=3", [6, 7, 8], False),
        ("after=5&before=6", [], False),
    ],
)
def test_it_pages_messages_by_seq(owner_client, session, query, expected, has_more):
    add_events(session, 10)

    response = owner_client.get(f"{API}/sessions/{session.pk}/messages?{query}")

    assert response.status_code == 200
    assert seqs(response) == expected
    assert response.json()["hasMore"] is has_more


def add_tool_turn(session):
    services.events_append(
        session_id=session.pk,
        items=[
            {"kind": Event.Kind.USER_MESSAGE, "content": "Draft a page"},
            {
                "kind": Event.Kind.TOOL_CALL,
                "content": "c" * 600,
                "payload": {"tool": "create_page", "input": {"title": "About"}},
                "tool_use_id": "toolu_1",
            },
            {
                "kind": Event.Kind.TOOL_RESPONSE,
                "content": "r" * 600,
                "payload": {"tool": "create_page", "ok": True},
                "tool_use_id": "toolu_1",
            },
            {"kind": Event.Kind.AGENT_MESSAGE, "content": "a" * 600},
        ],
    )


def test_it_shows_only_conversation_text_in_basic_view(owner_client, session):
    add_tool_turn(session)

    messages = owner_client.get(f"{API}/sessions/{session.pk}/messages").json()["messages"]

    assert [(m["role"], m["kind"]) for m in messages] == [
        ("user", "user_message"),
        ("assistant", "agent_message"),
    ]
    assert messages[1]["content"] == "a" * 600


def test_it_cuts_tool_traffic_to_500_characters_in_verbose_view(owner_client, session):
    add_tool_turn(session)
    owner_client.patch(f"{API}/sessions/{session.pk}", {"viewMode": "verbose"}, format="json")

    messages = owner_client.get(f"{API}/sessions/{session.pk}/messages").json()["messages"]

    call_, result = messages[1], messages[2]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert call_["content"] == "c" * 500 + "…"
    assert call_["meta"] == {
        "tool": "create_page",
        "label": "Create page",  # no such tool: the name in words
        "callId": "toolu_1",
        "input": {"title": "About"},
    }
    assert result["content"] == "r" * 500 + "…"
    assert result["meta"] == {
        "tool": "create_page",
        "label": "Create page",
        "callId": "toolu_1",
        "ok": True,
    }
    assert messages[3]["content"] == "a" * 600


def test_it_shows_everything_in_full_in_debug_view(owner_client, session):
    add_tool_turn(session)

    messages = owner_client.get(f"{API}/sessions/{session.pk}/messages?view=debug").json()[
        "messages"
    ]

    assert [len(m["content"]) for m in messages] == [len("Draft a page"), 600, 600, 600]


# Token statistics and diagnostics


def usage(session, *, days_ago, **tokens):
    record = UsageRecordFactory(session=session, **tokens)
    created = timezone.now() - timedelta(days=days_ago)
    type(record).objects.filter(pk=record.pk).update(created_at=created)
    return record


def test_it_sums_the_users_token_usage_per_day(owner_client, session, other):
    usage(
        session,
        days_ago=0,
        input_tokens=100,
        output_tokens=50,
        cache_read_tokens=1000,
        cache_write_tokens=200,
        cost_usd=Decimal("0.010000"),
    )
    usage(session, days_ago=0, input_tokens=5, output_tokens=5, cost_usd=Decimal("0.002500"))
    usage(session, days_ago=3, input_tokens=7, output_tokens=3, cost_usd=None)
    usage(SessionFactory(owner=other), days_ago=0, input_tokens=99999, output_tokens=99999)

    series = owner_client.get(f"{API}/stats/tokens?days=7").json()["series"]

    today = timezone.localdate()
    assert [d["date"] for d in series] == [
        (today - timedelta(days=n)).isoformat() for n in range(6, -1, -1)
    ]
    assert series[-1] == {
        "date": today.isoformat(),
        "in": 105 + 1000 + 200,
        "out": 55,
        "cacheRead": 1000,
        "cacheWrite": 200,
        "total": 1305 + 55,
        "costUsd": pytest.approx(0.0125),
    }
    assert series[3] == {
        "date": (today - timedelta(days=3)).isoformat(),
        "in": 7,
        "out": 3,
        "cacheRead": 0,
        "cacheWrite": 0,
        "total": 10,
        "costUsd": None,  # calls without a price
    }
    quiet = [d for i, d in enumerate(series) if i not in (3, 6)]
    assert all((d["total"], d["costUsd"]) == (0, 0) for d in quiet)


def test_it_reports_thirty_zero_filled_days_by_default(owner_client):
    series = owner_client.get(f"{API}/stats/tokens").json()["series"]

    assert len(series) == 30
    assert series[-1]["date"] == timezone.localdate().isoformat()
    assert set(series[0]) == {"date", "in", "out", "cacheRead", "cacheWrite", "total", "costUsd"}


def test_it_exports_diagnostics_with_the_full_trace(owner_client, session):
    for i in range(5):
        services.trace_record(session_id=session.pk, type="step", data={"i": i, "raw": "<x>"})

    with override_settings(AHENTIC={**settings.AHENTIC, "TRACE_POLL_WINDOW": 2}):
        payload = owner_client.get(f"{API}/sessions/{session.pk}").json()
        response = owner_client.get(f"{API}/sessions/{session.pk}/diagnostics")

    body = response.json()
    assert response.status_code == 200
    assert set(body) == {"id", "title", "exportedAt", "environment", "session", "state", "trace"}
    assert [t["data"] for t in body["trace"]] == [{"i": i, "raw": "<x>"} for i in range(5)]
    assert [t["id"] for t in body["trace"]] == list(
        TraceEvent.objects.filter(session=session).order_by("seq").values_list("pk", flat=True)
    )
    assert len(payload["trace"]) == 2 and "data" not in payload["trace"][0]
    assert payload["traceCount"] == 5


def test_the_payloads_trace_is_the_newest_rows_oldest_first(owner_client, session):
    # The sidebar's debugger shows the window as it comes: in the order things happened.
    for i in range(5):
        services.trace_record(session_id=session.pk, type="step", summary=f"step {i}")

    with override_settings(AHENTIC={**settings.AHENTIC, "TRACE_POLL_WINDOW": 3}):
        trace = owner_client.get(f"{API}/sessions/{session.pk}").json()["trace"]

    assert [t["summary"] for t in trace] == ["step 2", "step 3", "step 4"]
    assert [t["at"] for t in trace] == sorted(t["at"] for t in trace)


def test_it_refuses_unknown_skills_and_workflows(owner_client, session):
    url = f"{API}/sessions/{session.pk}"
    skill = owner_client.patch(url, {"activeSkills": ["no_such_skill"]}, format="json")
    workflow = owner_client.patch(url, {"activeWorkflow": "no_such_flow"}, format="json")
    assert (skill.status_code, skill.json()["code"]) == (400, "ahentic_unknown_skill")
    assert (workflow.status_code, workflow.json()["code"]) == (400, "ahentic_unknown_workflow")
    assert Session.objects.get(pk=session.pk).active_skills == []
