"""Outbound webhooks against a real HTTP receiver on this machine: signed deliveries, event
filtering, retries with backoff, timeouts, giving up, automatic disabling, and the admin."""

import json
import re
import threading
from collections import deque
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.contrib.auth.models import Permission
from django.core.checks import run_checks
from django.utils import timezone
from django_q.models import Schedule
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from orchestrator_app import signals
from orchestrator_app.models import WebhookDelivery, WebhookEndpoint
from orchestrator_app.testing.localapi import text_reply
from orchestrator_app.webhooks import delivery
from orchestrator_app.webhooks import tasks as webhook_tasks
from tests.support.api import post_message
from tests.support.factories import UserFactory

ALL_EVENTS = [
    "run.started",
    "run.finished",
    "run.failed",
    "approval.requested",
    "tool.executed",
    "schedule_run.finished",
]
ENDPOINTS = "/admin/orchestrator_app/webhookendpoint/"
DELIVERIES = "/admin/orchestrator_app/webhookdelivery/"


class Receiver:
    """A webhook receiver: records each request, answers with the next status of
    ``answers`` (204 when empty), and holds its answer while ``stall`` is set."""

    def __init__(self):
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                receiver.requests.append(
                    {"path": self.path, "headers": dict(self.headers), "body": body}
                )
                if receiver.stall.is_set():
                    receiver.release.wait(10)
                status, headers = receiver.answers.popleft() if receiver.answers else (204, {})
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks"
        self.stall = threading.Event()
        self.release = threading.Event()
        self.reset()

    def reset(self):
        self.requests: list[dict] = []
        self.answers: deque = deque()
        self.stall.clear()
        self.release.clear()

    def answer(self, *statuses, headers=None):
        self.answers.extend((status, headers or {}) for status in statuses)

    def events(self) -> list[str]:
        return [json.loads(r["body"])["type"] for r in self.requests]


@pytest.fixture(scope="module")
def _receiver_server():
    receiver = Receiver()
    thread = threading.Thread(target=receiver.server.serve_forever, daemon=True)
    thread.start()
    yield receiver
    receiver.release.set()
    receiver.server.shutdown()
    receiver.server.server_close()


@pytest.fixture
def receiver(_receiver_server):
    _receiver_server.reset()
    yield _receiver_server
    _receiver_server.release.set()  # a stalled handler answers and ends


@pytest.fixture
def endpoint(db, receiver):
    return create_endpoint(name="Hooks", url=receiver.url, events=ALL_EVENTS)


@pytest.fixture
def hooks(settings):
    """The AHENTIC webhook settings, changed for one test: ``hooks(WEBHOOK_MAX_ATTEMPTS=2)``."""

    def change(**values):
        settings.AHENTIC = {**settings.AHENTIC, **values}

    return change


@pytest.fixture
def send(django_capture_on_commit_callbacks):
    """Send a public signal as the app does (``send_after_commit``) and commit: the receivers
    run, and the delivery tasks they enqueue run (django-q2 sync mode)."""

    def fire(signal, session, **kwargs):
        with django_capture_on_commit_callbacks(execute=True):
            signals.send_after_commit(signal, session, **kwargs)

    return fire


@pytest.fixture
def sweep(django_capture_on_commit_callbacks):
    """Run the "deliver due" sweep at ``now`` and the attempts it enqueues."""

    def run(now):
        with django_capture_on_commit_callbacks(execute=True):
            return webhook_tasks.deliver_due_webhooks(now.isoformat())

    return run


def finished(send, session, run=1):
    send(signals.run_finished, session, run=run, outcome="idle", error_code="")


def create_endpoint(**fields) -> WebhookEndpoint:
    """An endpoint with a secret, as the admin makes one (stored encrypted)."""
    return delivery.endpoint_create(**fields)[0]


def plain(endpoint) -> str:
    """The endpoint's signing secret as it is now, decrypted."""
    return delivery.signing_secret(WebhookEndpoint.objects.get(pk=endpoint.pk))


def verified(endpoint, request) -> dict:
    """The request's JSON, after its signature verifies with the endpoint's secret."""
    return Webhook(plain(endpoint)).verify(request["body"], request["headers"])


def staff_with(*codenames):
    user = UserFactory(is_staff=True)
    user.user_permissions.add(
        *Permission.objects.filter(
            content_type__app_label="orchestrator_app", codename__in=codenames
        )
    )
    return user


# --- delivery ----------------------------------------------------------------------------------


def test_a_run_through_the_api_is_delivered_as_started_and_finished(
    owner_client, session, llm, run_tasks, endpoint, receiver
):
    # Needs the branch that sends the signals from the run loop.
    llm.enqueue(text_reply("Hello there."))

    post_message(owner_client, session, run_tasks, "Hi")

    assert receiver.events() == ["run.started", "run.finished"]
    started, done = (verified(endpoint, r) for r in receiver.requests)
    assert started["data"] == {"session": str(session.pk), "run": 1}
    assert done["data"] == {
        "session": str(session.pk),
        "run": 1,
        "outcome": "idle",
        "error_code": "",
    }


def test_a_delivery_is_signed_the_standard_webhooks_way(session, endpoint, receiver, send):
    finished(send, session, run=3)

    [request] = receiver.requests
    payload = verified(endpoint, request)
    assert payload["type"] == "run.finished"
    assert payload["data"] == {
        "session": str(session.pk),
        "run": 3,
        "outcome": "idle",
        "error_code": "",
    }
    delivery = WebhookDelivery.objects.get()
    assert request["headers"]["webhook-id"] == delivery.webhook_id
    assert request["headers"]["Content-Type"] == "application/json"
    assert (delivery.status, delivery.attempts, delivery.last_status_code) == ("delivered", 1, 204)

    # Signed with another secret, or altered, it does not verify.
    other = create_endpoint(name="Other", url=receiver.url, events=[])
    with pytest.raises(WebhookVerificationError):
        verified(other, request)
    with pytest.raises(WebhookVerificationError):
        verified(endpoint, {**request, "body": request["body"].replace(b"idle", b"error")})


def test_each_signal_is_delivered_as_its_event_with_ids_and_statuses_only(
    session, endpoint, receiver, send
):
    send(signals.run_started, session, run=1)
    send(signals.approval_requested, session, run=1, tool="notes_create", tool_use_id="toolu_1")
    send(
        signals.tool_executed,
        session,
        run=1,
        tool="notes_create",
        tool_use_id="toolu_1",
        is_error=False,
    )
    send(
        signals.run_failed,
        session,
        run=1,
        error_code="llm_error",
        message="The model said something private",
        resumable=True,
    )
    send(signals.run_finished, session, run=1, outcome="error", error_code="llm_error")
    schedule, schedule_run = Schedule(pk=7), Schedule(pk=8)  # any model rows: sent as ids
    send(
        signals.schedule_run_finished,
        session,
        schedule=schedule,
        schedule_run=schedule_run,
        status="failed",
    )

    data = {p["type"]: p["data"] for p in (verified(endpoint, r) for r in receiver.requests)}
    sid = str(session.pk)
    assert data == {
        "run.started": {"session": sid, "run": 1},
        "approval.requested": {
            "session": sid,
            "run": 1,
            "tool": "notes_create",
            "tool_use_id": "toolu_1",
        },
        "tool.executed": {
            "session": sid,
            "run": 1,
            "tool": "notes_create",
            "tool_use_id": "toolu_1",
            "is_error": False,
        },
        "run.failed": {"session": sid, "run": 1, "error_code": "llm_error", "resumable": True},
        "run.finished": {"session": sid, "run": 1, "outcome": "error", "error_code": "llm_error"},
        "schedule_run.finished": {
            "session": sid,
            "schedule": 7,
            "schedule_run": 8,
            "status": "failed",
        },
    }
    assert not any(b"private" in r["body"] for r in receiver.requests)


def test_an_endpoint_gets_only_the_events_it_subscribed_to(session, receiver, send):
    starts = create_endpoint(name="Starts", url=receiver.url + "/starts", events=["run.started"])
    create_endpoint(name="Off", url=receiver.url + "/off", events=ALL_EVENTS, active=False)

    finished(send, session)
    send(signals.run_started, session, run=2)

    assert [(r["path"], json.loads(r["body"])["type"]) for r in receiver.requests] == [
        ("/hooks/starts", "run.started")
    ]
    assert list(WebhookDelivery.objects.values_list("endpoint", "event")) == [
        (starts.pk, "run.started")
    ]


def test_a_failed_attempt_is_retried_with_backoff_until_it_succeeds(
    session, endpoint, receiver, send, sweep, hooks
):
    hooks(WEBHOOK_BACKOFF_S=60)
    receiver.answer(500, 503)
    finished(send, session)
    delivery = WebhookDelivery.objects.get()
    assert (delivery.status, delivery.attempts, delivery.last_status_code) == ("failed", 1, 500)
    first_wait = delivery.next_attempt_at - delivery.updated_at
    assert first_wait == timedelta(seconds=60)

    sweep(delivery.next_attempt_at - timedelta(seconds=1))  # not due yet
    assert len(receiver.requests) == 1

    second_at = delivery.next_attempt_at
    sweep(second_at)
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.last_status_code) == ("failed", 2, 503)
    assert delivery.next_attempt_at == second_at + timedelta(seconds=240)  # 4 times longer

    sweep(delivery.next_attempt_at)
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.last_status_code) == ("delivered", 3, 204)
    assert delivery.next_attempt_at is None
    # The same message on every attempt, each signed anew.
    assert {r["headers"]["webhook-id"] for r in receiver.requests} == {delivery.webhook_id}
    assert all(verified(endpoint, r)["type"] == "run.finished" for r in receiver.requests)

    sweep(timezone.now() + timedelta(days=1))
    assert len(receiver.requests) == 3


def test_a_duplicate_task_for_an_attempt_sends_nothing(session, endpoint, receiver, send):
    receiver.answer(500)
    finished(send, session)
    delivery = WebhookDelivery.objects.get()

    # The retry is not due: the task a second worker (or a redelivery) runs returns quietly.
    assert webhook_tasks.deliver_webhook(delivery.pk) == "skipped"
    assert webhook_tasks.deliver_webhook(delivery.pk, timezone.now().isoformat()) == "skipped"
    assert len(receiver.requests) == 1
    delivery.refresh_from_db()
    assert delivery.attempts == 1


def test_a_receiver_that_does_not_answer_in_time_is_a_failed_attempt(
    session, endpoint, receiver, send, hooks
):
    hooks(WEBHOOK_TIMEOUT_S=0.2)
    receiver.stall.set()

    finished(send, session)

    delivery = WebhookDelivery.objects.get()
    assert (delivery.status, delivery.attempts) == ("failed", 1)
    assert delivery.last_status_code is None
    assert "No answer within 0.2 s" in delivery.last_error


def test_a_redirect_is_not_followed(session, endpoint, receiver, send):
    receiver.answer(302, headers={"Location": receiver.url + "/elsewhere"})

    finished(send, session)

    assert [r["path"] for r in receiver.requests] == ["/hooks"]
    delivery = WebhookDelivery.objects.get()
    assert (delivery.status, delivery.last_status_code) == ("failed", 302)
    assert "redirects are not followed" in delivery.last_error


def test_a_delivery_gives_up_after_the_last_attempt(
    session, endpoint, receiver, send, sweep, hooks
):
    hooks(WEBHOOK_MAX_ATTEMPTS=2)
    receiver.answer(500, 500, 500)

    finished(send, session)
    sweep(WebhookDelivery.objects.get().next_attempt_at)

    delivery = WebhookDelivery.objects.get()
    assert (delivery.status, delivery.attempts, delivery.next_attempt_at) == ("gave_up", 2, None)
    sweep(timezone.now() + timedelta(days=1))
    assert len(receiver.requests) == 2
    endpoint.refresh_from_db()
    assert (endpoint.active, endpoint.consecutive_failures) == (True, 1)


def test_a_private_address_is_refused_when_sending_unless_allowed(
    session, endpoint, receiver, send, hooks
):
    hooks(WEBHOOK_ALLOW_PRIVATE=False)

    finished(send, session)

    assert receiver.requests == []
    delivery = WebhookDelivery.objects.get()
    assert (delivery.status, delivery.attempts) == ("gave_up", 1)  # permanent: no retries
    assert "WEBHOOK_ALLOW_PRIVATE" in delivery.last_error


def test_an_endpoint_is_disabled_after_deliveries_give_up_in_a_row(
    session, endpoint, receiver, send, hooks, admin_client
):
    hooks(WEBHOOK_MAX_ATTEMPTS=1, WEBHOOK_DISABLE_AFTER=2)
    receiver.answer(500, 204, 500, 500)

    for run in (1, 2, 3):  # a success in between starts the count again
        finished(send, session, run=run)
    endpoint.refresh_from_db()
    assert (endpoint.active, endpoint.consecutive_failures) == (True, 1)

    finished(send, session, run=4)
    endpoint.refresh_from_db()
    assert not endpoint.active
    assert "2 deliveries in a row gave up (last error: HTTP 500)" in endpoint.disabled_reason

    # Nothing more is sent to it.
    finished(send, session, run=5)
    assert len(receiver.requests) == 4
    assert WebhookDelivery.objects.count() == 4

    # The admin says why: on the list and on the endpoint's page.
    listing = admin_client.get(ENDPOINTS).content.decode()
    assert "2 deliveries in a row gave up" in listing
    page = admin_client.get(f"{ENDPOINTS}{endpoint.pk}/change/").content.decode()
    assert "2 deliveries in a row gave up" in page

    # Staff re-enable it: deliveries start again.
    response = admin_client.post(
        ENDPOINTS, {"action": "reenable", "_selected_action": [endpoint.pk]}
    )
    assert response.status_code == 302
    endpoint.refresh_from_db()
    assert (endpoint.active, endpoint.consecutive_failures, endpoint.disabled_reason) == (
        True,
        0,
        "",
    )
    finished(send, session, run=6)
    assert WebhookDelivery.objects.filter(status="delivered").count() == 2


# --- the admin ---------------------------------------------------------------------------------


def endpoint_form(**values) -> dict:
    return {
        "name": "Receiver",
        "url": "https://hooks.example.com/in",
        "events": ["run.finished"],
        "active": "on",
        **values,
    }


@pytest.mark.parametrize(
    "url",
    ["ftp://hooks.example.com/in", "file:///etc/passwd", "javascript:alert(1)", "gopher://x/"],
)
def test_the_admin_form_refuses_a_url_that_is_not_http(admin_client, url):
    response = admin_client.post(f"{ENDPOINTS}add/", endpoint_form(url=url))

    assert response.status_code == 200
    assert response.context["adminform"].form.errors["url"]
    assert not WebhookEndpoint.objects.exists()


@pytest.mark.parametrize(
    "url",
    ["http://127.0.0.1:8000/in", "http://10.1.2.3/in", "http://localhost/in", "http://[::1]/"],
)
def test_the_admin_form_refuses_a_private_address_unless_allowed(admin_client, hooks, url):
    hooks(WEBHOOK_ALLOW_PRIVATE=False)

    response = admin_client.post(f"{ENDPOINTS}add/", endpoint_form(url=url))

    assert "WEBHOOK_ALLOW_PRIVATE" in str(response.context["adminform"].form.errors["url"])
    assert not WebhookEndpoint.objects.exists()


def test_the_secret_is_shown_once_after_adding_an_endpoint_and_never_in_lists_or_the_log(
    admin_client, session, receiver, send
):
    form = admin_client.get(f"{ENDPOINTS}add/").content.decode()
    assert form.count('type="checkbox" name="events"') == len(ALL_EVENTS)
    assert "webhook.test" not in form  # sent from the admin, never subscribed to

    response = admin_client.post(
        f"{ENDPOINTS}add/", endpoint_form(url=receiver.url, events=["run.finished", "run.started"])
    )

    endpoint = WebhookEndpoint.objects.get()
    assert endpoint.events == ["run.finished", "run.started"]
    secret = plain(endpoint)
    assert secret.startswith("whsec_")
    assert secret in response.content.decode()
    finished(send, session)
    delivery = WebhookDelivery.objects.get()
    for page in (
        ENDPOINTS,
        f"{ENDPOINTS}{endpoint.pk}/change/",
        DELIVERIES,
        f"{DELIVERIES}{delivery.pk}/change/",
    ):
        html = admin_client.get(page).content.decode()
        assert secret not in html, page
        assert secret[6:] not in html, page
    page = admin_client.get(f"{ENDPOINTS}{endpoint.pk}/change/").content.decode()
    assert f"whsec_…{secret[-4:]}" in page


def test_the_change_form_edits_the_endpoint_and_its_active_box_disables_and_re_enables(
    admin_client, endpoint
):
    WebhookEndpoint.objects.filter(pk=endpoint.pk).update(consecutive_failures=3)
    page = f"{ENDPOINTS}{endpoint.pk}/change/"

    admin_client.post(page, endpoint_form(name="Renamed", url=endpoint.url, active=""))

    after = WebhookEndpoint.objects.get()
    assert (after.name, after.active, after.disabled_reason) == (
        "Renamed",
        False,
        "Disabled by admin.",
    )
    assert after.consecutive_failures == 3  # the form never writes the delivery counters
    assert after.secret == endpoint.secret

    admin_client.post(page, endpoint_form(name="Renamed", url=endpoint.url))

    after = WebhookEndpoint.objects.get()
    assert (after.active, after.disabled_reason, after.consecutive_failures) == (True, "", 0)


def test_rotating_the_secret_shows_the_new_one_once_and_signs_with_it(
    admin_client, session, endpoint, receiver, send
):
    old = plain(endpoint)

    response = admin_client.post(
        ENDPOINTS, {"action": "rotate_secret", "_selected_action": [endpoint.pk]}
    )

    assert plain(endpoint) != old
    assert plain(endpoint) in response.content.decode()
    finished(send, session)
    assert verified(endpoint, receiver.requests[0])["type"] == "run.finished"


def test_staff_with_the_change_permission_send_a_test_event(client, endpoint, receiver, run_tasks):
    client.force_login(staff_with("view_webhookendpoint", "change_webhookendpoint"))

    response = run_tasks(
        client.post, ENDPOINTS, {"action": "send_test_event", "_selected_action": [endpoint.pk]}
    )

    assert response.status_code == 302
    [request] = receiver.requests
    assert verified(endpoint, request) == {
        "type": "webhook.test",
        "timestamp": WebhookDelivery.objects.get().payload["timestamp"],
        "data": {"endpoint": endpoint.pk},
    }


def test_staff_without_the_change_permission_cannot_use_the_endpoint_actions(
    client, endpoint, receiver, run_tasks
):
    broken = create_endpoint(name="Broken", url=receiver.url, events=ALL_EVENTS, active=False)
    WebhookEndpoint.objects.filter(pk=broken.pk).update(disabled_reason="Down")
    client.force_login(staff_with("view_webhookendpoint"))

    for action, target in (
        ("send_test_event", endpoint),
        ("rotate_secret", endpoint),
        ("reenable", broken),
    ):
        response = run_tasks(
            client.post, ENDPOINTS, {"action": action, "_selected_action": [target.pk]}
        )
        assert response.status_code in (200, 302)

    assert receiver.requests == []
    assert not WebhookDelivery.objects.exists()
    assert WebhookEndpoint.objects.get(pk=endpoint.pk).secret == endpoint.secret
    broken.refresh_from_db()
    assert (broken.active, broken.disabled_reason) == (False, "Down")
    html = client.get(ENDPOINTS).content.decode()
    assert "send_test_event" not in html and "rotate_secret" not in html


def test_retry_now_makes_one_more_attempt_for_staff_with_permission(
    client, session, endpoint, receiver, send, hooks, run_tasks
):
    hooks(WEBHOOK_MAX_ATTEMPTS=1)
    receiver.answer(500)
    finished(send, session)
    delivery = WebhookDelivery.objects.get()
    assert delivery.status == "gave_up"

    client.force_login(staff_with("view_webhookdelivery"))
    run_tasks(client.post, DELIVERIES, {"action": "retry_now", "_selected_action": [delivery.pk]})
    assert len(receiver.requests) == 1
    delivery.refresh_from_db()
    assert delivery.status == "gave_up"

    client.force_login(staff_with("view_webhookdelivery", "change_webhookdelivery"))
    response = run_tasks(
        client.post, DELIVERIES, {"action": "retry_now", "_selected_action": [delivery.pk]}
    )
    assert response.status_code == 302
    assert len(receiver.requests) == 2
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.last_status_code) == ("delivered", 2, 204)
    # The delivery log is read-only, whatever the permissions.
    assert (
        client.get(f"{DELIVERIES}{delivery.pk}/change/").context["has_change_permission"] is False
    )


def test_the_delivery_log_filters_by_endpoint_status_and_event(
    admin_client, session, endpoint, receiver, send
):
    receiver.answer(500)
    finished(send, session)
    send(signals.run_started, session, run=2)

    failed = admin_client.get(DELIVERIES, {"status__exact": "failed"})
    started = admin_client.get(DELIVERIES, {"event__exact": "run.started"})
    mine = admin_client.get(DELIVERIES, {"endpoint__id__exact": endpoint.pk})

    assert [d.event for d in failed.context["cl"].result_list] == ["run.finished"]
    assert [d.status for d in started.context["cl"].result_list] == ["delivered"]
    assert mine.context["cl"].result_count == 2


def test_the_sweep_is_scheduled_every_minute(db):
    schedule = Schedule.objects.get(name="ahentic_webhooks")
    assert (schedule.func, schedule.schedule_type, schedule.minutes) == (
        "orchestrator_app.webhooks.tasks.deliver_due_webhooks",
        Schedule.MINUTES,
        1,
    )


# --- system checks -----------------------------------------------------------------------------


def check_ids() -> list[str]:
    return [
        message.id for message in run_checks(include_deployment_checks=True, databases=["default"])
    ]


def test_a_webhook_setting_out_of_range_is_a_system_error(db, hooks):
    hooks(WEBHOOK_MAX_ATTEMPTS=0)
    assert "ahentic.E032" in check_ids()
    hooks(WEBHOOK_MAX_ATTEMPTS=3, WEBHOOK_TIMEOUT_S="fast")
    assert "ahentic.E032" in check_ids()
    hooks(WEBHOOK_TIMEOUT_S=5)
    assert "ahentic.E032" not in check_ids()


def test_a_webhook_timeout_longer_than_the_queue_allows_is_a_system_error(db, hooks, settings):
    hooks(WEBHOOK_TIMEOUT_S=settings.Q_CLUSTER["timeout"])
    assert "ahentic.E033" in check_ids()


def test_private_webhook_addresses_allowed_without_debug_is_a_deploy_warning(db, hooks, settings):
    settings.DEBUG = False
    hooks(WEBHOOK_ALLOW_PRIVATE=True)
    assert "ahentic.W015" in check_ids()
    hooks(WEBHOOK_ALLOW_PRIVATE=False)
    assert "ahentic.W015" not in check_ids()


# --- the demo's receiver -----------------------------------------------------------------------


def signed_post(client, secret: str, payload: dict):
    body = json.dumps(payload)
    sent_at = timezone.now()
    headers = {
        "webhook-id": "msg_demo1",
        "webhook-timestamp": str(int(sent_at.timestamp())),
        "webhook-signature": Webhook(secret).sign("msg_demo1", sent_at, body),
    }
    return client.post(
        "/demo/webhooks/",
        body,
        content_type="application/json",
        headers=headers,
    )


def test_the_demo_receiver_keeps_verified_deliveries_and_lists_them(client, admin_client, endpoint):
    event = {"type": "run.finished", "timestamp": "t", "data": {"session": "s1", "run": 2}}

    assert signed_post(client, plain(endpoint), event).status_code == 204
    forged = signed_post(client, "whsec_" + "A" * 44, {**event, "data": {"run": 99}})
    assert forged.status_code == 400

    page = admin_client.get("/demo/webhooks/").content.decode()
    assert page.count('class="demo-webhook"') == 1
    assert "run.finished" in page and "run=2" in page and "msg_demo1" in page
    assert client.get("/demo/webhooks/").status_code == 302  # the list is for staff


def test_the_demo_command_points_an_endpoint_for_every_event_at_the_receiver(db):
    from orchestrator_app.management.commands.ahentic_demo import Command

    Command()._ensure_webhook("127.0.0.1:8123")
    Command()._ensure_webhook("127.0.0.1:8124")

    [endpoint] = WebhookEndpoint.objects.all()
    assert endpoint.url == "http://127.0.0.1:8124/demo/webhooks/"
    assert endpoint.events == ALL_EVENTS
    assert endpoint.active


# --- isolation from the chat's workers ---------------------------------------------------------


@pytest.fixture
def enqueued():
    """The task packages enqueued meanwhile (django-q2's ``pre_enqueue`` signal)."""
    from django_q.signals import pre_enqueue

    seen: list[dict] = []

    def record(sender, task, **kwargs):
        seen.append(task)

    pre_enqueue.connect(record, dispatch_uid="test-webhook-cluster")
    yield seen
    pre_enqueue.disconnect(dispatch_uid="test-webhook-cluster")


def test_deliveries_go_to_the_webhook_cluster_and_steps_stay_on_the_sites(
    owner_client, session, llm, run_tasks, endpoint, receiver, hooks, enqueued, sweep
):
    hooks(WEBHOOK_CLUSTER="ahentic_webhooks")
    llm.enqueue(text_reply("Hello there."))

    post_message(owner_client, session, run_tasks, "Hi")

    assert receiver.events() == ["run.started", "run.finished"]
    by_func = {}
    for task in enqueued:
        by_func.setdefault(task["func"], set()).add(task.get("cluster"))
    assert by_func["orchestrator_app.webhooks.tasks.deliver_webhook"] == {"ahentic_webhooks"}
    assert by_func["orchestrator_app.tasks.run_step"] == {None}

    # Retries the sweep enqueues go there too; without the setting, to the site's cluster.
    WebhookDelivery.objects.update(status="failed", next_attempt_at=timezone.now())
    enqueued.clear()
    sweep(timezone.now())
    assert {t.get("cluster") for t in enqueued} == {"ahentic_webhooks"}
    hooks(WEBHOOK_CLUSTER="")
    WebhookDelivery.objects.update(status="failed", next_attempt_at=timezone.now())
    enqueued.clear()
    sweep(timezone.now())
    assert enqueued and {t.get("cluster") for t in enqueued} == {None}


def test_a_webhook_cluster_setting_is_checked(db, hooks, settings):
    hooks(WEBHOOK_CLUSTER=7)
    assert "ahentic.E049" in check_ids()
    # A named cluster starts (Q_CLUSTER_NAME=<name> manage.py qcluster) only with an
    # ALT_CLUSTERS entry in Q_CLUSTER.
    hooks(WEBHOOK_CLUSTER="ahentic_webhooks")
    settings.Q_CLUSTER = {k: v for k, v in settings.Q_CLUSTER.items() if k != "ALT_CLUSTERS"}
    ids = check_ids()
    assert "ahentic.E049" not in ids and "ahentic.W024" in ids
    settings.Q_CLUSTER = {
        **settings.Q_CLUSTER,
        "ALT_CLUSTERS": {"ahentic_webhooks": {"workers": 1, "timeout": 60, "retry": 90}},
    }
    assert "ahentic.W024" not in check_ids()
    hooks(WEBHOOK_CLUSTER="")
    assert not {"ahentic.E049", "ahentic.W024"} & set(check_ids())


# --- the signing secret at rest ----------------------------------------------------------------


def test_the_secret_is_stored_encrypted_shown_once_and_signs_decrypted(
    admin_client, session, receiver, send
):
    from orchestrator_app import vault

    response = admin_client.post(
        f"{ENDPOINTS}add/", endpoint_form(url=receiver.url, events=["run.finished"])
    )

    stored = WebhookEndpoint.objects.values_list("secret", flat=True).get()
    shown = re.search(r'ahentic-webhook-secret">(whsec_[^<]+)<', response.content.decode())[1]
    assert "whsec_" not in stored and shown[6:] not in stored  # encrypted at rest
    assert vault.unseal(stored) == shown
    finished(send, session)
    [request] = receiver.requests
    Webhook(shown).verify(request["body"], request["headers"])  # signed with the decrypted one

    endpoint = WebhookEndpoint.objects.get()
    rotated = admin_client.post(
        ENDPOINTS, {"action": "rotate_secret", "_selected_action": [endpoint.pk]}
    ).content.decode()
    new_stored = WebhookEndpoint.objects.values_list("secret", flat=True).get()
    new_shown = vault.unseal(new_stored)
    assert new_shown != shown and new_shown in rotated and new_shown not in new_stored


def test_without_vault_keys_no_endpoint_is_added_and_a_check_says_why(
    admin_client, endpoint, hooks
):
    hooks(VAULT_KEYS=[])
    assert "ahentic.E034" in check_ids()

    response = admin_client.post(f"{ENDPOINTS}add/", endpoint_form(url=endpoint.url))

    assert response.status_code == 200
    assert "VAULT_KEYS" in response.content.decode()
    assert WebhookEndpoint.objects.count() == 1
    assert admin_client.get(ENDPOINTS).status_code == 200


@pytest.mark.django_db(transaction=True)
def test_the_migration_encrypts_existing_secrets_and_reverses(receiver):
    from django.core.management import call_command

    from orchestrator_app import vault

    plain = "whsec_" + "A" * 44
    call_command("migrate", "orchestrator_app", "0011", verbosity=0)
    try:
        WebhookEndpoint.objects.create(name="Old", url=receiver.url, events=[], secret=plain)
        call_command("migrate", "orchestrator_app", verbosity=0)
        stored = WebhookEndpoint.objects.values_list("secret", flat=True).get()
        assert stored != plain and vault.unseal(stored) == plain

        call_command("migrate", "orchestrator_app", "0011", verbosity=0)
        assert WebhookEndpoint.objects.values_list("secret", flat=True).get() == plain
    finally:
        call_command("migrate", "orchestrator_app", verbosity=0)


def test_each_delivery_attempt_is_a_span_and_counted_by_outcome(
    session, endpoint, receiver, send, sweep, hooks, otel
):
    hooks(WEBHOOK_MAX_ATTEMPTS=2)
    receiver.answer(500, 200)

    finished(send, session)
    sweep(WebhookDelivery.objects.get().next_attempt_at)

    failed, delivered = sorted(otel.spans("webhook run.finished"), key=lambda s: s.start_time)
    assert (failed.status.status_code.name, failed.attributes["error.type"]) == (
        "ERROR",
        "ahentic_webhook_failed",
    )
    assert failed.attributes["ahentic.webhook.attempt"] == 1
    assert delivered.attributes["ahentic.webhook.outcome"] == "delivered"
    assert delivered.attributes["ahentic.webhook.attempt"] == 2
    counted = {
        p.attributes["ahentic.webhook.outcome"]: p.value
        for p in otel.points("ahentic.webhook.deliveries")
    }
    assert counted == {"failed": 1, "delivered": 1}
    secret = plain(endpoint)
    assert all(secret not in str(v) for s in otel.spans() for v in s.attributes.values())
