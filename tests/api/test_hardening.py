"""Hardening: no 5xx on any input, bounded payloads, throttled run starts, admin permissions,
errors users may read, persistence that survives the model's output, fast recovery."""

import json
import re
import threading
import time
from datetime import timedelta
from decimal import Decimal
from unittest import mock

import pytest
from django.contrib.auth.models import Permission
from django.core.cache import cache
from django.db import DataError, connection
from django.urls import reverse
from django.utils import timezone

from orchestrator_app import tasks
from orchestrator_app.control import runs
from orchestrator_app.testing.localapi import error_reply, text_reply, tool_call, tool_reply
from orchestrator_app.tools import tool
from sessions_app import runstate, services
from sessions_app.models import Event, Goal, PendingMessage, Session, TraceEvent
from tests.support.api import API, payload_of, post, session_url, transcript_of
from tests.support.factories import GoalFactory, SessionFactory, UsageRecordFactory, UserFactory

# Every route that takes a JSON body, with a valid body whose ``slot`` key takes any JSON.
JSON_ROUTES = [
    ("patch", "sessions/{id}", "pageContext", {}),
    ("post", "sessions/{id}/messages", "pageContext", {"content": "hi"}),
    ("post", "sessions/{id}/approvals", "input", {"decision": "allow_once"}),
    ("post", "sessions/{id}/actions", "input", {"name": "echo"}),
    ("post", "sessions/{id}/browser-results", "result", {"callId": "toolu_1"}),
]


def nested(depth: int):
    """``depth`` objects, one inside the other."""
    value: dict = {}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


def send(client, method, path, session, body):
    return getattr(client, method)(
        f"{API}/{path.format(id=session.pk)}", json.dumps(body), content_type="application/json"
    )


# --- 1. nesting depth ----------------------------------------------------------------------------


@pytest.mark.parametrize(("method", "path", "slot", "body"), JSON_ROUTES)
def test_deeply_nested_json_is_a_400_on_every_json_route(
    owner_client, session, method, path, slot, body
):
    before = Session.objects.values_list("version", flat=True).get(pk=session.pk)
    deep = '{"a": ' * 950 + "1" + "}" * 950
    raw = f'{{"{slot}": {deep}}}'
    if body:
        raw = json.dumps(body)[:-1] + ", " + raw[1:]

    response = getattr(owner_client, method)(
        f"{API}/{path.format(id=session.pk)}", raw, content_type="application/json"
    )

    assert response.status_code == 400
    assert response.json()["code"] == "ahentic_invalid_json"
    assert Session.objects.values_list("version", flat=True).get(pk=session.pk) == before


def test_json_nesting_up_to_the_limit_is_accepted(owner_client, session):
    # 32 levels: what MariaDB's JSON_VALID check (the JSONField's constraint) accepts.
    ok = send(owner_client, "patch", "sessions/{id}", session, {"pageContext": nested(31)})
    deep = send(owner_client, "patch", "sessions/{id}", session, {"pageContext": nested(32)})

    assert ok.status_code == 200  # 32 levels with the body itself
    assert deep.status_code == 400
    assert deep.json()["code"] == "ahentic_invalid_json"


# --- 2. NUL characters ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "body", "field"),
    [
        ("post", "sessions", {"title": "a\x00b"}, "title"),
        ("patch", "sessions/{id}", {"title": "a\x00b"}, "title"),
        ("patch", "sessions/{id}", {"pageContext": {"url": "/x\x00"}}, "pageContext"),
        ("post", "sessions/{id}/messages", {"content": "hi\x00"}, "content"),
        (
            "post",
            "sessions/{id}/approvals",
            {"decision": "allow_once", "input": {"\x00": 1}},
            "input",
        ),
        ("post", "sessions/{id}/actions", {"name": "echo", "input": {"text": "\x00"}}, "input"),
        ("post", "sessions/{id}/browser-results", {"callId": "t", "result": ["\x00"]}, "result"),
    ],
)
def test_a_nul_character_in_any_field_is_a_400_naming_the_field(
    owner_client, session, llm, method, path, body, field
):
    response = send(owner_client, method, path, session, body)

    assert response.status_code == 400
    assert response.json()["code"] == "ahentic_invalid_input"
    assert field in response.json()["fields"]
    assert Session.objects.count() == 1
    assert not Event.objects.exists()


def test_nul_characters_in_the_models_output_are_stripped_and_the_run_goes_on(
    owner_client, session, llm, run_tasks, tool_calls
):
    llm.enqueue(
        tool_reply(tool_call("echo", {"text": "a\x00b"}), text="Calling\x00 echo"),
        text_reply("Done\x00."),
    )

    response = run_tasks(post, owner_client, session, "messages", {"content": "Go"})

    assert response.status_code == 202
    body = payload_of(owner_client, session)
    assert body["status"] == "idle"
    assert tool_calls == [{"tool": "echo", "input": {"text": "ab"}}]
    transcript = transcript_of(owner_client, session)
    assert [m["content"] for m in transcript if m["kind"] == "agent_message"] == [
        "Calling echo",
        "Done.",
    ]
    assert all("\x00" not in json.dumps(m) for m in transcript)


# --- 3. what users see of errors -----------------------------------------------------------------


def test_a_provider_error_shows_users_a_short_message_and_the_trace_the_details(
    owner_client, session, llm, run_tasks
):
    raw = "Overloaded shard 7; request_id=req_0123456789abcdef"
    llm.enqueue(*(error_reply(500, "api_error", message=raw, retry_after_ms=1) for _ in range(3)))

    run_tasks(post, owner_client, session, "messages", {"content": "Go"})

    body = payload_of(owner_client, session)
    assert body["lastErrorCode"] == "ahentic_llm_error"
    assert body["lastError"] == "The model call failed (HTTP 500). Press Continue to try again."
    assert "req_" not in json.dumps(body["messages"])
    trace = owner_client.get(session_url(session, "diagnostics")).json()["trace"]
    [llm_error] = [row for row in trace if row["type"] == "llm_error"]
    assert "req_0123456789abcdef" in llm_error["data"]["detail"]


def test_an_internal_error_hides_the_database_words_from_the_user(
    owner_client, session, llm, run_tasks
):
    sql = 'value too long for type character varying(255)\nLINE 1: UPDATE "sessions_app_session"'
    with mock.patch("orchestrator_app.loop.step.tools_for", side_effect=DataError(sql)):
        run_tasks(post, owner_client, session, "messages", {"content": "Go"})

    body = payload_of(owner_client, session)
    assert body["status"] == "error"
    assert body["lastErrorCode"] == "ahentic_internal_error"
    assert "LINE 1" not in body["lastError"]
    assert "LINE 1" not in json.dumps(body["messages"])
    trace = owner_client.get(session_url(session, "diagnostics")).json()["trace"]
    assert any("LINE 1" in (row["data"] or {}).get("detail", "") for row in trace)


# --- 4. path ids, unknown routes, large bodies ---------------------------------------------------


@pytest.mark.parametrize("pending_id", ["²", "1" * 4300, "-1", "1.0", "٣"])
def test_a_malformed_pending_id_is_a_404(owner_client, session, pending_id):
    response = owner_client.delete(session_url(session, f"pending-messages/{pending_id}"))

    assert response.status_code == 404
    assert response.json()["code"] == "ahentic_pending_not_found"


@pytest.mark.parametrize("key", ["a\x00b", "x" * 5000, "Ü"])
def test_a_malformed_artifact_key_is_a_404(owner_client, session, key):
    response = owner_client.get(session_url(session, f"artifacts/{key}"))

    assert response.status_code == 404
    assert response.json()["code"] == "artifact_missing"


@pytest.mark.parametrize("path", ["nothing-here", "sessions/x/y/z", "stats", "tools/1"])
def test_an_unknown_route_is_a_json_404(owner_client, path):
    response = owner_client.get(f"{API}/{path}")

    assert response.status_code == 404
    assert response.json()["code"] == "ahentic_not_found"
    assert set(response.json()) == {"code", "detail"}


@pytest.mark.parametrize("query", ["before=99999999999999999999999", "after=9223372036854775808"])
def test_a_cursor_beyond_a_database_integer_is_a_400(owner_client, session, query):
    response = owner_client.get(session_url(session, f"messages?{query}"))

    assert response.status_code == 400
    assert response.json()["code"] == "ahentic_invalid_input"


# --- 5. one run-start rate ---------------------------------------------------------------------


@pytest.fixture
def throttled(settings):
    cache.clear()
    settings.AHENTIC = {
        **settings.AHENTIC,
        "THROTTLE_MESSAGES": "3/min",
        "THROTTLE_SESSIONS": "2/min",
    }
    yield
    cache.clear()


def test_every_route_that_starts_or_resumes_a_run_shares_one_rate(
    owner_client, other_client, owner, other, llm, throttled
):
    mine = SessionFactory(owner=owner)
    with mock.patch("orchestrator_app.control.queue.async_task"):  # no step runs
        codes = [
            post(owner_client, mine, "messages", {"content": "one"}).status_code,
            post(owner_client, mine, "continue").status_code,
            post(
                owner_client, mine, "actions", {"name": "echo", "input": {"text": "x"}}
            ).status_code,
        ]
        throttled_action = post(owner_client, mine, "actions", {"name": "echo", "input": {}})
        throttled_message = post(owner_client, mine, "messages", {"content": "two"})
        other_user = post(other_client, SessionFactory(owner=other), "messages", {"content": "hi"})

    assert 429 not in codes
    for response in (throttled_action, throttled_message):
        assert response.status_code == 429
        assert response.json()["code"] == "ahentic_throttled"
        assert int(response["Retry-After"]) > 0
    assert other_user.status_code == 202


def test_session_creation_has_its_own_rate(owner_client, throttled):
    codes = [owner_client.post(f"{API}/sessions", {}, format="json") for _ in range(3)]

    assert [r.status_code for r in codes] == [201, 201, 429]
    assert codes[2].json()["code"] == "ahentic_throttled"
    assert "Retry-After" in codes[2]
    assert Session.objects.count() == 2


# --- 6. bounded payload ------------------------------------------------------------------------


def test_a_full_queue_refuses_more_messages_with_409(owner_client, session, llm, settings):
    settings.AHENTIC = {**settings.AHENTIC, "MAX_PENDING_MESSAGES": 3}
    runstate.session_transition(session_id=session.pk, from_statuses=["idle"], to_status="running")

    codes = [post(owner_client, session, "messages", {"content": f"m{i}"}) for i in range(4)]

    assert [r.status_code for r in codes] == [200, 200, 200, 409]
    assert codes[3].json()["code"] == "ahentic_queue_full"
    assert PendingMessage.objects.filter(session=session).count() == 3


def grow(session, messages: int):
    """``messages`` short user turns, each with the goal a message used to create, some
    completed, some abandoned, plus queued messages and refused queue attempts."""
    start = Event.objects.filter(session=session).count()
    services.events_append(
        session_id=session.pk,
        items=[
            {"kind": Event.Kind.USER_MESSAGE, "content": f"m{(start + i) % 10}"}
            for i in range(messages - start)
        ],
    )
    statuses = [Goal.Status.COMPLETED, Goal.Status.ABANDONED]
    Goal.objects.bulk_create(
        Goal(session=session, description=f"goal {i % 10}", status=statuses[i % 2])
        for i in range(start, messages)
    )


def test_the_payload_stops_growing_beyond_its_windows(owner_client, session, llm):
    runstate.session_transition(session_id=session.pk, from_statuses=["idle"], to_status="running")
    GoalFactory(session=session, description="The current goal")
    refused = 0
    for i in range(30):  # queue attempts beyond the cap are refused, not listed
        response = post(owner_client, session, "messages", {"content": f"q{i % 10}"})
        refused += response.status_code == 409
    sizes = {}
    for count in (100, 3000):
        grow(session, count)
        body = payload_of(owner_client, session)
        # Numbers count as one character: ids and seqs only gain digits.
        sizes[count] = len(re.sub(r"\d+", "0", json.dumps(body)))

    assert refused == 10
    assert len(body["pendingMessages"]) == 20
    assert len(body["goals"]) == 6  # the active goal and the five completed last
    assert "The current goal" in [goal["description"] for goal in body["goals"]]
    assert sizes[3000] <= sizes[100]


# --- 7. admin permissions ----------------------------------------------------------------------


@pytest.fixture
def viewer(db):
    """Staff with view_session only: may look, may not control runs."""
    user = UserFactory(username="viewer")
    user.is_staff = True
    user.save()
    user.user_permissions.add(
        Permission.objects.get(codename="view_session", content_type__app_label="sessions_app")
    )
    return user


def admin_url(view, *args):
    return reverse(f"admin:sessions_app_session_{view}", args=args)


def live(session):
    runstate.session_transition(
        session_id=session.pk, from_statuses=["idle"], to_status="running", lease_token=""
    )


@pytest.mark.parametrize("action", ["cancel_runs", "continue_runs", "heal_tool_calls"])
def test_a_viewer_gets_no_run_actions_and_posting_one_does_nothing(client, viewer, session, action):
    client.force_login(viewer)
    live(session)
    before = Session.objects.values_list("version", "status").get(pk=session.pk)

    changelist = client.get(admin_url("changelist"))
    page = client.get(admin_url("change", session.pk))
    with mock.patch("orchestrator_app.control.queue.async_task") as enqueued:
        client.post(admin_url("changelist"), {"action": action, "_selected_action": [session.pk]})

    assert changelist.status_code == page.status_code == 200
    assert action not in changelist.content.decode()
    assert action not in page.content.decode()
    assert Session.objects.values_list("version", "status").get(pk=session.pk) == before
    assert not enqueued.called


def test_the_session_page_offers_the_run_actions_as_buttons(admin_client, admin_user, session):
    live(session)

    page = admin_client.get(admin_url("change", session.pk)).content.decode()
    for action in ("cancel_runs", "continue_runs", "heal_tool_calls", "export_diagnostics"):
        assert f'name="action" value="{action}"' in page
    response = admin_client.post(
        admin_url("changelist"), {"action": "cancel_runs", "_selected_action": [session.pk]}
    )

    assert response.status_code == 302
    assert Session.objects.get(pk=session.pk).status == "cancelled"
    trace = TraceEvent.objects.filter(session=session, type="run_idle").last()
    assert trace.summary == f"Cancelled by staff {admin_user.username}"


# --- 8. no tool call after "Run cancelled." --------------------------------------------------------


def cancelled_after(session) -> list[str]:
    """Kinds of the events saved after the "Run cancelled." event."""
    cancelled = Event.objects.filter(session=session, content="Run cancelled.").first()
    if cancelled is None:
        return []
    return list(
        Event.objects.filter(session=session, seq__gt=cancelled.seq).values_list("kind", flat=True)
    )


def test_a_cancel_between_the_steps_check_and_its_persist_saves_no_tool_call(
    owner_client, session, llm, run_tasks, tool_calls
):
    from orchestrator_app.loop.step import StepRunner

    original = StepRunner.persist_turn

    def cancel_first(runner, result, tool_uses):
        runs.run_cancel(session_id=runner.session_id)  # commits after the still-running check
        return original(runner, result, tool_uses)

    llm.enqueue(tool_reply(tool_call("echo", {"text": "late"})))
    with mock.patch.object(StepRunner, "persist_turn", cancel_first):
        run_tasks(post, owner_client, session, "messages", {"content": "Go"})

    assert Session.objects.get(pk=session.pk).status == "cancelled"
    assert not Event.objects.filter(session=session, kind=Event.Kind.TOOL_CALL).exists()
    assert cancelled_after(session) == []
    assert tool_calls == []


@pytest.mark.skipif(
    connection.vendor != "postgresql", reason="the cancel race needs PostgreSQL's row locks"
)
@pytest.mark.django_db(transaction=True)
def test_cancel_racing_a_step_never_leaves_a_tool_call_after_the_cancel(owner, llm, tool_calls):
    """Real threads on PostgreSQL: the step's model reply is released and the cancel sent at
    the same moment, with a varying offset, many times."""
    for attempt in range(20):
        session = SessionFactory(owner=owner)
        gate = threading.Event()
        llm.enqueue(tool_reply(tool_call("echo", {"text": "x"}), gate=gate), text_reply("Done."))
        with mock.patch("orchestrator_app.control.queue.async_task"):
            response = runs.message_post(session=session, content="Go")
        assert response is None
        step = threading.Thread(target=tasks.run_step, args=(str(session.pk), 1))
        step.start()
        gate.set()
        time.sleep((attempt % 5) * 0.002)
        runs.run_cancel(session_id=session.pk)
        step.join(30)

        assert cancelled_after(session) == [], attempt
        calls = set(
            Event.objects.filter(session=session, kind=Event.Kind.TOOL_CALL).values_list(
                "tool_use_id", flat=True
            )
        )
        answered = set(
            Event.objects.filter(session=session, kind=Event.Kind.TOOL_RESPONSE).values_list(
                "tool_use_id", flat=True
            )
        )
        assert calls <= answered, attempt
    connection.close()


# --- 9. a short lease, refreshed while a tool runs ---------------------------------------------


# Registered only for the tests that use it: every tool in the catalog enlarges each request,
# and other modules size their context budgets by the catalog.
definition = tool(
    name="lease_probe",
    description="Reports the run's lease as seen while this tool runs.",
    input_schema={
        "type": "object",
        "properties": {
            "wait_for_beat": {"type": "boolean"},
            "cancel_then_wait": {"type": "boolean"},
        },
    },
    readonly=True,
)


def lease_probe(ctx, input):
    """``wait_for_beat``: wait (at most 10 s) until the heartbeat moves ``heartbeat_at``.
    ``cancel_then_wait``: cancel the run, then wait three heartbeat intervals."""
    import time

    from django.utils import timezone

    from orchestrator_app.control import runs
    from sessions_app.conf import ahentic_settings
    from sessions_app.models import Session

    row = Session.objects.filter(pk=ctx.session.pk)
    out = {}
    if input.get("wait_for_beat"):
        first = row.values_list("heartbeat_at", flat=True).get()
        for _ in range(200):
            time.sleep(0.05)
            if row.values_list("heartbeat_at", flat=True).get() != first:
                out["beat"] = True
                break
        else:
            out["beat"] = False
    if input.get("cancel_then_wait"):
        runs.run_cancel(session_id=ctx.session.pk)
        out["version_after_cancel"] = row.values_list("version", flat=True).get()
        time.sleep(float(ahentic_settings.RUN_LEASE_S))
        out["version_after_wait"] = row.values_list("version", flat=True).get()
    expires = row.values_list("lease_expires_at", flat=True).get()
    out["lease_left_s"] = (expires - timezone.now()).total_seconds() if expires else None
    return out


@pytest.fixture
def lease_probe_tool():
    from orchestrator_app.tools import unregister

    definition(lease_probe)
    yield
    unregister("lease_probe")


def test_a_running_tool_holds_a_lease_no_longer_than_run_lease_s(
    owner_client, session, llm, run_tasks, settings, lease_probe_tool
):
    settings.AHENTIC = {**settings.AHENTIC, "RUN_LEASE_S": 30}
    llm.enqueue(tool_reply(tool_call("lease_probe", {})), text_reply("Done."))

    run_tasks(post, owner_client, session, "messages", {"content": "Go"})

    [result] = [m for m in transcript_of(owner_client, session) if m["kind"] == "tool_response"]
    lease_left_s = json.loads(result["content"])["lease_left_s"]
    assert 0 < lease_left_s <= 30  # not stretched by the tool's time limit (180 s)


@pytest.mark.django_db(transaction=True)
def test_a_heartbeat_refreshes_the_lease_while_a_long_tool_runs(
    owner, llm, settings, lease_probe_tool
):
    settings.AHENTIC = {**settings.AHENTIC, "RUN_LEASE_S": 1}
    session = SessionFactory(owner=owner)
    llm.enqueue(tool_reply(tool_call("lease_probe", {"wait_for_beat": True})), text_reply("Ok."))
    with mock.patch("orchestrator_app.control.queue.async_task"):
        runs.message_post(session=session, content="Go")

    tasks.run_step(str(session.pk), 1)

    result = Event.objects.get(session=session, kind=Event.Kind.TOOL_RESPONSE)
    probe = json.loads(result.content)
    assert probe["beat"] is True  # the heartbeat moved heartbeat_at while the tool ran
    assert 0 < probe["lease_left_s"] <= 1
    # A lost lease: the probe's second call cancels the run itself, then waits for beats.
    connection.close()


@pytest.mark.django_db(transaction=True)
def test_the_heartbeat_stops_writing_once_the_lease_is_lost(owner, llm, settings, lease_probe_tool):
    settings.AHENTIC = {**settings.AHENTIC, "RUN_LEASE_S": 1}
    session = SessionFactory(owner=owner)
    llm.enqueue(tool_reply(tool_call("lease_probe", {"cancel_then_wait": True})))
    with mock.patch("orchestrator_app.control.queue.async_task"):
        runs.message_post(session=session, content="Go")

    tasks.run_step(str(session.pk), 1)

    session.refresh_from_db()
    assert session.status == "cancelled"
    result = Event.objects.get(session=session, kind=Event.Kind.TOOL_RESPONSE)
    probe = json.loads(result.content)
    assert probe["version_after_cancel"] == probe["version_after_wait"]
    connection.close()


def test_continue_after_the_lease_expired_recovers_at_once(
    owner_client, session, llm, run_tasks, settings
):
    llm.enqueue(text_reply("Recovered."))
    with mock.patch("orchestrator_app.control.queue.async_task"):
        post(owner_client, session, "messages", {"content": "Go"})
    lease = runstate.run_claim(session_id=session.pk, run_seq=1)
    assert lease is not None  # a worker took it, then died
    Session.objects.filter(pk=session.pk).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)
    )

    run_tasks(post, owner_client, session, "continue")

    body = payload_of(owner_client, session)
    assert body["status"] == "idle"
    assert body["messages"][-1]["content"] == "Recovered."


# --- API consistency -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "field", "message"),
    [
        ({"status": "idle"}, "status", "This field is read-only."),
        ({"tokensUsed": 0}, "tokensUsed", "This field is read-only."),
        ({"colour": "red"}, "colour", "Unknown field."),
    ],
)
def test_patch_with_an_unknown_or_read_only_field_is_a_400_naming_it(
    owner_client, session, body, field, message
):
    response = owner_client.patch(session_url(session), {"title": "T", **body}, format="json")

    assert response.status_code == 400
    assert response.json()["fields"] == {field: [message]}
    assert Session.objects.get(pk=session.pk).title != "T"


def test_validation_errors_name_fields_in_camel_case(owner_client, session):
    response = owner_client.post(
        session_url(session, "browser-results"), {"callId": "t"}, format="json"
    )

    assert response.status_code == 400
    assert "nonFieldErrors" in response.json()["fields"]


def test_anonymous_requests_are_401(anon_client, session):
    for path in ("sessions", f"sessions/{session.pk}", "tools", "schema"):
        response = anon_client.get(f"{API}/{path}")
        assert response.status_code == 401
        assert response.json()["code"] == "ahentic_unauthenticated"


def test_the_session_list_pages_with_a_cursor(owner_client, owner):
    made = [SessionFactory(owner=owner, title=f"S{i}") for i in range(5)]
    for i, session in enumerate(made):  # distinct, increasing modification times
        Session.objects.filter(pk=session.pk).update(
            updated_at=timezone.now() - timedelta(minutes=10 - i)
        )

    titles, cursor, pages = [], "", 0
    while True:
        page = owner_client.get(f"{API}/sessions?limit=2{'&cursor=' + cursor if cursor else ''}")
        assert page.status_code == 200
        titles += [s["title"] for s in page.json()["sessions"]]
        pages += 1
        if not page.json()["hasMore"]:
            assert page.json()["nextCursor"] is None
            break
        cursor = page.json()["nextCursor"]

    assert titles == ["S4", "S3", "S2", "S1", "S0"]
    assert pages == 3
    bad = owner_client.get(f"{API}/sessions?cursor=not-a-cursor")
    assert bad.status_code == 404  # a cursor the list never handed out names no page
    assert bad.json()["code"] == "ahentic_cursor_not_found"


def test_token_stats_say_null_for_a_day_with_an_unpriced_call(owner_client, owner, session):
    UsageRecordFactory(session=session, user=owner, cost_usd=Decimal("0.5"))
    UsageRecordFactory(session=session, user=owner, cost_usd=None)

    [today] = owner_client.get(f"{API}/stats/tokens?days=1").json()["series"]

    assert today["total"] > 0
    assert today["costUsd"] is None


def test_every_timestamp_in_the_payload_ends_with_z(owner_client, session, llm, run_tasks):
    llm.enqueue(
        tool_reply(
            tool_call(
                "update_plan",
                {"title": "P", "steps": [{"id": f"s{i}", "content": f"c{i}"} for i in range(3)]},
            )
        ),
        text_reply("Done."),
    )
    run_tasks(post, owner_client, session, "messages", {"content": "Go"})
    runstate.session_update(session_id=session.pk, progress=runstate._progress("Working"))

    body = payload_of(owner_client, session)
    stamps = [
        body["createdAt"],
        body["modifiedAt"],
        body["progress"]["updatedAt"],
        *[m["createdAt"] for m in body["messages"]],
    ]
    if body["plan"]:
        stamps.append(body["plan"]["updatedAt"])
    assert all(stamp.endswith("Z") for stamp in stamps), stamps


# --- the contract: viewsets, schema ------------------------------------------------------------


def test_the_schema_is_served_valid(owner_client):
    from drf_spectacular.validation import validate_schema

    response = owner_client.get(f"{API}/schema?format=json")

    assert response.status_code == 200
    schema = response.json()
    validate_schema(schema)
    # The routes and payload keys against docs/reference/api.md: tests/docs/test_docs.py.
    payload = schema["components"]["schemas"]["SessionPayload"]["properties"]
    assert {"messages", "pendingMessages", "goals", "lastError", "version"} <= set(payload)
    for operation in (op for item in schema["paths"].values() for op in item.values()):
        assert "404" in operation["responses"] or "400" in operation["responses"]


@pytest.mark.parametrize(
    ("method", "path"),
    [("get", ""), ("patch", ""), ("get", "/messages"), ("post", "/cancel"), ("get", "/artifacts")],
)
def test_a_route_that_forgot_its_scope_still_hides_another_users_session(
    other_client, session, method, path
):
    from orchestrator_app.api.views import SessionViewSet

    with mock.patch.object(SessionViewSet, "get_queryset", lambda self: Session.objects.all()):
        response = getattr(other_client, method)(f"{session_url(session)}{path}", {}, format="json")

    assert response.status_code == 404
    assert response.json()["code"] == "ahentic_session_not_found"
