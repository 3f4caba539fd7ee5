"""Email notifications: an approval waiting while the user is away, a scheduled run ended, and
the user's opt-outs (``GET``/``PATCH me/notifications``).

The run goes through the HTTP API and the synchronous worker; the approval mail's delayed task
is the one-off django-q2 schedule the request made, run here through the task entry point with
the schedule's own arguments and due time (no sleeping). Mail goes to Django's locmem outbox.
"""

import ast
import threading
from datetime import timedelta
from types import SimpleNamespace
from unittest import mock

import pytest
from django.conf import settings
from django.core import mail
from django.db import connection
from django.utils import timezone
from django_q.models import Schedule

from orchestrator_app.models import Notification
from orchestrator_app.notifications import services as notifications
from orchestrator_app.notifications import tasks as notification_tasks
from orchestrator_app.signals import schedule_run_finished, send_after_commit
from orchestrator_app.testing.localapi import text_reply, tool_call, tool_reply
from sessions_app.models import Session
from tests.support.api import API, decide, payload_of, post, session_url

pytestmark = pytest.mark.usefixtures("llm_strict")

SECRET = "Salary of Alice: 123456"
PREFS = f"{API}/me/notifications"
SITE = "https://intranet.example.org/work/"


@pytest.fixture(autouse=True)
def site_url(settings):
    settings.AHENTIC = {**settings.AHENTIC, "SITE_URL": SITE}


def pause_for_approval(client, session, llm, run_tasks):
    """The run waits for approval of a call whose input the mail must not show. No poll
    afterwards: the user is away."""
    llm.enqueue(tool_reply(tool_call("notes_create", {"title": SECRET}, id="toolu_note")))
    response = run_tasks(post, client, session, "messages", {"content": "Make the note"})
    assert response.status_code == 202
    assert Session.objects.get(pk=session.pk).status == "awaiting_human"


def due_task():
    """The one-off schedule the approval request made: (its args, its due time)."""
    [row] = Schedule.objects.filter(func="orchestrator_app.notifications.tasks.notify_approval")
    assert row.schedule_type == Schedule.ONCE
    args = ast.literal_eval(row.args)
    return (args if isinstance(args, tuple) else (args,)), row.next_run


def run_due(now=None):
    args, due = due_task()
    return notification_tasks.notify_approval(*args, now=now or due)


def test_an_unseen_approval_mails_the_owner_once_after_the_delay(
    owner_client, owner, session, llm, run_tasks
):
    pause_for_approval(owner_client, session, llm, run_tasks)
    args, due = due_task()
    assert args == (str(session.pk), "toolu_note")
    assert timedelta(seconds=295) < due - timezone.now() <= timedelta(seconds=300)

    assert run_due(now=due - timedelta(seconds=60)) is False  # not waited long enough
    assert mail.outbox == []
    assert run_due() is True
    assert run_due() is False  # the task again (a retry, a second worker): no second mail
    [message] = mail.outbox
    assert message.to == [owner.email]
    assert (
        message.subject == f"{settings.EMAIL_SUBJECT_PREFIX}The agent is waiting for your approval"
    )
    assert message.from_email == settings.DEFAULT_FROM_EMAIL
    link = f"{SITE}?ahentic_session={session.pk}"
    [(html, kind)] = message.alternatives
    assert kind == "text/html"
    for body in (message.body, html):
        assert link in body
        assert "notes create" in body  # the tool's name in words
        assert "Salary" not in body and "123456" not in body  # never the tool's input
    assert Notification.objects.filter(kind="approval", user=owner).count() == 1


def test_the_task_run_twice_sends_one_mail(owner_client, session, llm, run_tasks):
    pause_for_approval(owner_client, session, llm, run_tasks)
    assert [run_due(), run_due()] == [True, False]
    assert len(mail.outbox) == 1


@pytest.mark.django_db(transaction=True)
def test_two_workers_at_once_send_one_mail(owner_client, session, llm, run_tasks):
    # transaction=True: each thread has its own connection and sees committed rows.
    pause_for_approval(owner_client, session, llm, run_tasks)
    args, due = due_task()
    # Both workers pass every check before either claims the mail.
    both_checked = threading.Barrier(2, timeout=10)
    wants = notifications._wants

    def checked_then_wait(*a, **kw):
        answer = wants(*a, **kw)
        both_checked.wait()
        return answer

    results = []

    def worker():
        try:
            results.append(notification_tasks.notify_approval(*args, now=due))
        finally:
            connection.close()

    with mock.patch.object(notifications, "_wants", side_effect=checked_then_wait):
        threads = [threading.Thread(target=worker) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)

    assert sorted(results) == [False, True]
    assert len(mail.outbox) == 1
    assert Notification.objects.count() == 1


def test_no_mail_when_the_owner_polled_the_chat_after_the_request(
    owner_client, session, llm, run_tasks
):
    pause_for_approval(owner_client, session, llm, run_tasks)
    payload_of(owner_client, session)  # the sidebar's poll: the card was seen
    assert run_due() is False
    assert mail.outbox == []


def test_a_poll_before_the_request_does_not_count_as_seeing_it(
    owner_client, session, llm, run_tasks
):
    payload_of(owner_client, session)
    pause_for_approval(owner_client, session, llm, run_tasks)
    assert run_due() is True
    assert len(mail.outbox) == 1


def test_another_users_poll_does_not_count(owner_client, other_client, session, llm, run_tasks):
    pause_for_approval(owner_client, session, llm, run_tasks)
    assert other_client.get(session_url(session)).status_code == 404
    assert run_due() is True


def test_no_mail_when_the_approval_was_decided_before_the_delay(
    owner_client, session, llm, run_tasks
):
    pause_for_approval(owner_client, session, llm, run_tasks)
    llm.enqueue(text_reply("Done."))
    mail.outbox.clear()
    args, due = due_task()
    decide(owner_client, session, run_tasks, "deny")
    assert notification_tasks.notify_approval(*args, now=due) is False
    assert mail.outbox == []


def test_no_mail_when_the_owner_opted_out(owner_client, session, llm, run_tasks):
    response = owner_client.patch(PREFS, {"approvalsMail": False}, format="json")
    assert response.status_code == 200
    pause_for_approval(owner_client, session, llm, run_tasks)
    # Nothing scheduled; and a check already scheduled before the opt-out sends nothing either.
    assert not Schedule.objects.filter(
        func="orchestrator_app.notifications.tasks.notify_approval"
    ).exists()
    due = timezone.now() + timedelta(seconds=301)
    assert notification_tasks.notify_approval(str(session.pk), "toolu_note", now=due) is False
    assert mail.outbox == []


def test_no_mail_without_an_address_or_when_the_delay_is_zero(
    owner_client, owner, session, llm, run_tasks, settings
):
    owner.email = ""
    owner.save()
    pause_for_approval(owner_client, session, llm, run_tasks)
    assert not Schedule.objects.filter(
        func="orchestrator_app.notifications.tasks.notify_approval"
    ).exists()
    owner.email = "owner@example.com"
    owner.save()
    settings.AHENTIC = {**settings.AHENTIC, "NOTIFY_APPROVAL_AFTER_S": 0}
    later = timezone.now() + timedelta(days=1)
    assert notification_tasks.notify_approval(str(session.pk), "toolu_note", now=later) is False
    assert mail.outbox == []


def test_the_link_falls_back_to_the_current_site(owner_client, session, llm, run_tasks, settings):
    from django.contrib.sites.models import Site

    settings.AHENTIC = {**settings.AHENTIC, "SITE_URL": ""}
    Site.objects.update_or_create(pk=settings.SITE_ID, defaults={"domain": "agents.example.com"})
    Site.objects.clear_cache()
    pause_for_approval(owner_client, session, llm, run_tasks)
    assert run_due() is True
    assert f"https://agents.example.com/?ahentic_session={session.pk}" in mail.outbox[0].body


def test_without_site_url_the_link_uses_the_address_the_chat_was_used_on(
    owner_client, session, llm, run_tasks, settings
):
    """The demo served on 8801 mailed links to 8000: with no SITE_URL, the link takes the
    scheme and host of the page the message was sent from, before the sites framework's."""
    settings.AHENTIC = {**settings.AHENTIC, "SITE_URL": ""}
    llm.enqueue(tool_reply(tool_call("notes_create", {"title": SECRET}, id="toolu_note")))
    page = {"url": "http://127.0.0.1:8801/coffee/?x=1", "title": "Coffee"}
    body = {"content": "Make the note", "pageContext": page}
    assert run_tasks(post, owner_client, session, "messages", body).status_code == 202

    assert run_due() is True

    assert f"http://127.0.0.1:8801/?ahentic_session={session.pk}" in mail.outbox[0].body


# --- a scheduled run ended ---------------------------------------------------------------------


def schedule_ended(session, run_pk, status, error="", run_tasks=None):
    """Send ``schedule_run_finished`` as the schedules' code does, with stand-ins for the
    schedule (``name``) and its run log row (``pk``, ``error``)."""
    schedule = SimpleNamespace(name="Nightly digest")
    schedule_run = SimpleNamespace(pk=run_pk, error=error)
    run_tasks(
        send_after_commit,
        schedule_run_finished,
        session,
        schedule=schedule,
        schedule_run=schedule_run,
        status=status,
    )


def test_a_finished_scheduled_run_mails_its_owner_once(owner, session, run_tasks):
    schedule_ended(session, 41, "succeeded", run_tasks=run_tasks)
    schedule_ended(session, 41, "succeeded", run_tasks=run_tasks)  # the same run again
    [message] = mail.outbox
    assert message.to == [owner.email]
    assert "Nightly digest" in message.subject and "succeeded" in message.subject
    assert f"{SITE}?ahentic_session={session.pk}" in message.body
    assert Notification.objects.get(kind="schedule_run").key == "41"


def test_a_failed_scheduled_run_mails_the_status_and_the_error(session, run_tasks):
    schedule_ended(session, 42, "failed", error="The agent was removed.", run_tasks=run_tasks)
    [message] = mail.outbox
    assert "failed" in message.subject
    assert "The agent was removed." in message.body


def test_no_schedule_mail_when_the_owner_opted_out(owner_client, session, run_tasks):
    assert owner_client.patch(PREFS, {"schedulesMail": False}, format="json").status_code == 200
    schedule_ended(session, 43, "failed", run_tasks=run_tasks)
    assert mail.outbox == []


# --- the preferences API -----------------------------------------------------------------------


def test_the_preferences_default_to_every_mail_and_change_field_by_field(
    owner_client, other_client
):
    assert owner_client.get(PREFS).json() == {"approvalsMail": True, "schedulesMail": True}
    response = owner_client.patch(PREFS, {"schedulesMail": False}, format="json")
    assert response.status_code == 200
    assert response.json() == {"approvalsMail": True, "schedulesMail": False}
    assert owner_client.get(PREFS + "/").json() == {"approvalsMail": True, "schedulesMail": False}
    # Another user's preferences are their own.
    assert other_client.get(PREFS).json() == {"approvalsMail": True, "schedulesMail": True}


@pytest.mark.parametrize(
    "body",
    [
        {"approvalsMail": "sometimes"},
        {"approvals_mail": False},
        {"email": "x@example.com"},
        [],
        # Only JSON true/false: no coercion of strings, numbers or null.
        {"approvalsMail": "false"},
        {"approvalsMail": "true", "schedulesMail": False},
        {"schedulesMail": 0},
        {"schedulesMail": 1},
        {"approvalsMail": None},
        {"schedulesMail": "off"},
    ],
)
def test_a_bad_preference_body_is_a_400_with_a_code(owner_client, body):
    response = owner_client.patch(PREFS, body, format="json")
    assert response.status_code == 400
    assert response.json()["code"] == "ahentic_invalid_input"
    if isinstance(body, dict) and set(body) <= {"approvalsMail", "schedulesMail"}:
        assert set(response.json()["fields"]) == {
            key for key, value in body.items() if not isinstance(value, bool)
        }
    assert owner_client.get(PREFS).json() == {"approvalsMail": True, "schedulesMail": True}


def test_the_preferences_need_a_login_and_the_agent_permission(anon_client, noperm_client):
    assert anon_client.get(PREFS).status_code == 401
    assert anon_client.patch(PREFS, {}, format="json").status_code == 401
    assert noperm_client.get(PREFS).status_code == 403
    assert noperm_client.patch(PREFS, {"approvalsMail": False}, format="json").status_code == 403
    assert noperm_client.post(PREFS, {}, format="json").status_code in (403, 405)


def test_the_preferences_route_is_in_the_schema(owner_client):
    paths = owner_client.get(f"{API}/schema", HTTP_ACCEPT="application/json").json()["paths"]
    assert {"get", "patch"} <= set(paths["/me/notifications"])


def test_staff_see_the_mail_log_and_the_opt_outs_in_the_admin(
    admin_client, owner_client, session, run_tasks
):
    owner_client.patch(PREFS, {"schedulesMail": False}, format="json")
    assert owner_client.patch(PREFS, {"schedulesMail": True}, format="json").status_code == 200
    schedule_ended(session, 44, "succeeded", run_tasks=run_tasks)
    log = admin_client.get("/admin/orchestrator_app/notification/")
    assert log.status_code == 200 and b"Scheduled run ended" in log.content
    prefs = admin_client.get("/admin/orchestrator_app/notificationpreference/")
    assert prefs.status_code == 200 and b"owner" in prefs.content
    assert admin_client.get("/admin/orchestrator_app/notification/add/").status_code == 403
