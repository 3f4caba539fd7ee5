"""Scheduled runs: firing through the tick task (``orchestrator_app.schedules.tasks.schedule_tick`` with
a given "now"), the wall-clock rules across DST changes, pause/unpause without backfill, Run
now, the refusals and the auto-pause, approvals left to the user, one continued chat, and the
admin pages. Two clusters on one due time: tests/features/schedules/test_schedules_integration.py."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse
from django_q.models import Schedule as QSchedule

from orchestrator_app.models import Schedule, ScheduleRun
from orchestrator_app.notifications import tasks as notification_tasks
from orchestrator_app.schedules import services as schedules
from orchestrator_app.schedules import tasks as schedule_tasks
from orchestrator_app.signals import run_finished, schedule_run_finished, send_after_commit
from orchestrator_app.testing.localapi import text_reply, tool_call, tool_reply
from sessions_app import agents
from sessions_app.models import Session
from tests.support.api import API, transcript_of
from tests.support.factories import UserFactory, agent_create, schedule_create

pytestmark = pytest.mark.usefixtures("llm_strict")

T0 = datetime(2026, 5, 4, 9, 0, tzinfo=UTC)  # a Monday


def at(moment: datetime, seconds: int = 20) -> str:
    """A tick's "now": ``seconds`` into the minute of ``moment`` (ticks are never on the dot)."""
    return (moment + timedelta(seconds=seconds)).isoformat()


def tick(moment: datetime, seconds: int = 20) -> int:
    return schedule_tasks.schedule_tick(at(moment, seconds))


@pytest.fixture
def helper(db):
    return agent_create("digest")


def new_schedule(run_as, agent, *, now: datetime = T0, **fields) -> Schedule:
    return schedule_create(run_as, agent, now=now, **fields)


def log_of(schedule: Schedule) -> list[tuple[datetime, str, str]]:
    """(due_at, status, error_code) of the schedule's run log, oldest first."""
    rows = ScheduleRun.objects.filter(schedule=schedule).order_by("due_at")
    return [(row.due_at, row.status, row.error_code) for row in rows]


@pytest.fixture
def finished():
    """``schedule_run_finished`` as host code receives it: (status, schedule, session)."""
    received = []

    def receiver(sender, session, schedule, schedule_run, status, **kwargs):
        received.append((status, schedule.pk, session.pk if session else None))

    schedule_run_finished.connect(receiver)
    yield received
    schedule_run_finished.disconnect(receiver)


# --- firing -------------------------------------------------------------------------------------


def test_a_due_schedule_posts_its_message_as_its_user_and_logs_the_run_with_its_cost(
    owner, owner_client, helper, llm, run_tasks, finished, django_capture_on_commit_callbacks
):
    schedule = new_schedule(owner, helper, spend_cap_usd=Decimal("2.5"))
    assert schedule.next_due_at == T0 + timedelta(minutes=5)
    llm.enqueue(text_reply("Digest: 3 new pages, no errors."))

    assert tick(T0 + timedelta(minutes=4)) == 0  # not due yet
    assert run_tasks(tick, T0 + timedelta(minutes=5)) == 1

    # The run ended inside run_tasks: run_finished settled its log row at once.
    [row] = ScheduleRun.objects.filter(schedule=schedule)
    assert (row.due_at, row.status) == (T0 + timedelta(minutes=5), "done")
    chat = row.session
    assert chat.owner == owner and chat.title == "Site digest, 2026-05-04 09:05"
    assert chat.spend_cap_usd == Decimal("2.5")
    assert agents.spend_cap(chat) == 2.5
    assert [m["content"] for m in transcript_of(owner_client, chat)] == [
        "Write the site digest.",
        "Digest: 3 new pages, no errors.",
    ]
    # The next tick changes nothing: the row already has its end and the run's cost.
    with django_capture_on_commit_callbacks(execute=True):
        tick(T0 + timedelta(minutes=6))
    row.refresh_from_db()
    assert row.status == "done" and row.finished_at is not None
    assert row.cost_usd == chat.usage_records.get().cost_usd
    assert finished == [("done", schedule.pk, chat.pk)]
    # The user's own sidebar lists the chat.
    listed = owner_client.get(f"{API}/sessions").json()
    assert str(chat.pk) in [item["id"] for item in listed["sessions"]]


def test_a_due_time_fires_once_however_often_the_tick_runs(owner, helper, llm):
    schedule = new_schedule(owner, helper)
    for seconds in (1, 20, 40, 59):
        tick(T0 + timedelta(minutes=5), seconds)
    assert log_of(schedule) == [(T0 + timedelta(minutes=5), "running", "")]
    assert Session.objects.filter(owner=owner).count() == 1


def test_continue_one_chat_posts_every_firing_into_the_same_chat(
    owner, owner_client, helper, llm, run_tasks
):
    schedule = new_schedule(owner, helper, chat_mode=Schedule.ChatMode.CONTINUE)
    llm.enqueue(text_reply("First digest."), text_reply("Second digest."))

    run_tasks(tick, T0 + timedelta(minutes=5))
    run_tasks(tick, T0 + timedelta(minutes=10))

    first, second = ScheduleRun.objects.filter(schedule=schedule).order_by("due_at")
    assert first.session_id == second.session_id
    assert (first.run, second.run) == (1, 2)
    chat = Session.objects.get(owner=owner)
    assert chat.title == "Site digest"
    assert chat.spend_cap_usd is None
    assert [m["content"] for m in transcript_of(owner_client, chat)] == [
        "Write the site digest.",
        "First digest.",
        "Write the site digest.",
        "Second digest.",
    ]
    # Staff give the schedule a cap: the chat it keeps takes it at the next firing.
    Schedule.objects.filter(pk=schedule.pk).update(spend_cap_usd=Decimal("1.25"))
    llm.enqueue(text_reply("Third digest."))
    run_tasks(tick, T0 + timedelta(minutes=15))
    chat.refresh_from_db()
    assert chat.spend_cap_usd == Decimal("1.25")
    assert ScheduleRun.objects.filter(schedule=schedule, session=chat).count() == 3


def test_a_firing_gives_way_while_the_continued_chat_is_still_running(owner, helper, llm):
    # No run_tasks: the first run's step never runs, so the chat stays "running".
    schedule = new_schedule(owner, helper, chat_mode=Schedule.ChatMode.CONTINUE)
    tick(T0 + timedelta(minutes=5))
    tick(T0 + timedelta(minutes=10))
    assert log_of(schedule) == [
        (T0 + timedelta(minutes=5), "running", ""),
        (T0 + timedelta(minutes=10), "skipped", "ahentic_schedule_busy"),
    ]
    assert (
        schedule.runs.get(status="skipped").error
        == "The chat is still running from an earlier run."
    )


# --- wall-clock time across DST changes (Europe/Berlin, 2026) -----------------------------------


def tick_every_minute(start: datetime, end: datetime) -> None:
    moment = start
    while moment <= end:
        tick(moment)
        moment += timedelta(minutes=1)


def test_a_time_skipped_by_spring_forward_does_not_fire(owner, helper, llm):
    # 29 March 2026: 02:00 CET becomes 03:00 CEST; 02:30 does not exist in Berlin that day.
    schedule = new_schedule(
        owner,
        helper,
        cron="30 2 * * *",
        time_zone="Europe/Berlin",
        now=datetime(2026, 3, 28, 12, 0, tzinfo=UTC),
    )
    # The 28th's 02:30 CET is past; the 29th has none; the 30th's is 02:30 CEST = 00:30 UTC.
    assert schedule.next_due_at == datetime(2026, 3, 30, 0, 30, tzinfo=UTC)

    tick_every_minute(
        datetime(2026, 3, 28, 23, 50, tzinfo=UTC), datetime(2026, 3, 29, 2, 0, tzinfo=UTC)
    )
    assert log_of(schedule) == []

    tick_every_minute(
        datetime(2026, 3, 30, 0, 25, tzinfo=UTC), datetime(2026, 3, 30, 0, 35, tzinfo=UTC)
    )
    assert log_of(schedule) == [(datetime(2026, 3, 30, 0, 30, tzinfo=UTC), "running", "")]


def test_a_time_repeated_by_fall_back_fires_once_at_its_first_occurrence(owner, helper, llm):
    # 25 October 2026: 03:00 CEST becomes 02:00 CET; 02:30 happens at 00:30 and 01:30 UTC.
    schedule = new_schedule(
        owner,
        helper,
        cron="30 2 * * *",
        time_zone="Europe/Berlin",
        now=datetime(2026, 10, 24, 12, 0, tzinfo=UTC),
    )
    assert schedule.next_due_at == datetime(2026, 10, 25, 0, 30, tzinfo=UTC)

    tick_every_minute(
        datetime(2026, 10, 25, 0, 20, tzinfo=UTC), datetime(2026, 10, 25, 1, 45, tzinfo=UTC)
    )

    assert log_of(schedule) == [(datetime(2026, 10, 25, 0, 30, tzinfo=UTC), "running", "")]
    schedule.refresh_from_db()
    # The next is the 26th's 02:30 CET.
    assert schedule.next_due_at == datetime(2026, 10, 26, 1, 30, tzinfo=UTC)


def test_the_cron_expression_is_wall_clock_time_in_the_schedule_zone(owner, helper, llm):
    schedule = new_schedule(owner, helper, cron="0 11 * * *", time_zone="Europe/Berlin")
    assert schedule.next_due_at == datetime(2026, 5, 4, 9, 0, tzinfo=UTC) + timedelta(days=1)
    winter = new_schedule(
        owner,
        helper,
        cron="0 11 * * *",
        time_zone="Europe/Berlin",
        now=datetime(2026, 1, 5, tzinfo=UTC),
    )
    assert winter.next_due_at == datetime(2026, 1, 5, 10, 0, tzinfo=UTC)


# --- no backfill ------------------------------------------------------------------------------


def test_after_downtime_only_the_latest_due_time_fires_and_the_first_missed_is_logged(
    owner, helper, llm
):
    schedule = new_schedule(owner, helper)
    # No tick ran from 09:00 to 09:31 (the workers were down): 09:05 ... 09:30 were due.
    tick(T0 + timedelta(minutes=31))
    assert log_of(schedule) == [
        (T0 + timedelta(minutes=5), "skipped", "ahentic_schedule_missed"),
        (T0 + timedelta(minutes=30), "running", ""),
    ]
    # Back to normal: the next due time fires, nothing else.
    tick(T0 + timedelta(minutes=35))
    assert len(log_of(schedule)) == 3


def test_a_due_time_older_than_the_grace_window_is_not_run(owner, helper, llm, settings):
    settings.AHENTIC = {**settings.AHENTIC, "SCHEDULE_GRACE_S": 60}
    schedule = new_schedule(owner, helper)
    tick(T0 + timedelta(minutes=7))  # 09:05 is two minutes old
    assert log_of(schedule) == [(T0 + timedelta(minutes=5), "skipped", "ahentic_schedule_missed")]


def test_a_paused_schedule_does_not_fire_and_unpausing_does_not_catch_up(
    owner, helper, llm, admin_client
):
    schedule = new_schedule(owner, helper)
    changelist = reverse("admin:orchestrator_app_schedule_changelist")
    admin_client.post(changelist, {"action": "pause_schedules", "_selected_action": [schedule.pk]})
    schedule.refresh_from_db()
    assert schedule.paused and schedule.paused_reason == "Paused by admin."

    tick_every_minute(T0 + timedelta(minutes=4), T0 + timedelta(minutes=21))
    assert log_of(schedule) == []

    # Unpaused at 09:21:30 (the service with that clock, as the admin action calls it): 09:20,
    # a minute old, was due while paused and does not fire; 09:25 does.
    schedules.unpause(schedule, now=T0 + timedelta(minutes=21, seconds=30))
    schedule.refresh_from_db()
    assert (schedule.paused, schedule.paused_reason) == (False, "")
    assert schedule.next_due_at == T0 + timedelta(minutes=25)
    tick_every_minute(T0 + timedelta(minutes=22), T0 + timedelta(minutes=25))
    assert log_of(schedule) == [(T0 + timedelta(minutes=25), "running", "")]


def test_the_unpause_action_moves_the_next_due_time_past_now(owner, helper, llm, admin_client):
    schedule = new_schedule(owner, helper, now=datetime(2026, 1, 1, tzinfo=UTC))
    schedules.pause(schedule, reason="maintenance")
    changelist = reverse("admin:orchestrator_app_schedule_changelist")
    response = admin_client.post(
        changelist, {"action": "unpause_schedules", "_selected_action": [schedule.pk]}, follow=True
    )
    assert "Unpaused 1 schedule(s)" in response.content.decode()
    schedule.refresh_from_db()
    assert not schedule.paused and schedule.next_due_at > datetime.now(UTC)


# --- run now ------------------------------------------------------------------------------------


def test_run_now_fires_at_once_and_at_most_once_in_that_minute(owner, helper, llm, admin_client):
    schedule = new_schedule(owner, helper, now=datetime.now(UTC), cron="0 0 1 1 *")
    changelist = reverse("admin:orchestrator_app_schedule_changelist")
    data = {"action": "run_now", "_selected_action": [schedule.pk]}

    first = admin_client.post(changelist, data, follow=True).content.decode()
    second = admin_client.post(changelist, data, follow=True).content.decode()

    [row] = ScheduleRun.objects.filter(schedule=schedule)
    assert row.manual and row.status == "running" and row.session.owner == owner
    assert row.due_at == row.started_at.replace(second=0, microsecond=0)
    assert "Site digest: started." in first
    assert "already ran this minute" in second
    # A tick in that minute cannot fire the same due time again.
    assert schedules.fire(schedule, due_at=row.due_at) is None


# --- refusals -----------------------------------------------------------------------------------


def test_a_user_without_the_agents_permission_is_refused_and_told_why(
    owner, helper, llm, mailoutbox, run_tasks
):
    helper.permission = "auth.view_user"  # the agent needs a permission owner lacks
    helper.save()
    schedule = new_schedule(owner, helper)

    run_tasks(tick, T0 + timedelta(minutes=5))

    [row] = ScheduleRun.objects.filter(schedule=schedule)
    assert (row.status, row.error_code) == ("failed", "ahentic_schedule_agent_permission")
    assert row.error == "The user owner may not use the agent Digest (its permission or groups)."
    assert row.session is None and not Session.objects.filter(owner=owner).exists()
    # The schedule's user is told by mail, with the reason (there is no chat to link to).
    [mail] = mailoutbox
    assert mail.to == [owner.email] and "failed" in mail.subject
    assert "may not use the agent Digest" in mail.body


def test_a_user_without_the_app_permission_is_refused(noperm, helper, llm):
    schedule = new_schedule(noperm, helper)
    tick(T0 + timedelta(minutes=5))
    [row] = ScheduleRun.objects.filter(schedule=schedule)
    assert row.error_code == "ahentic_schedule_no_permission"
    assert "sessions_app.use_agent" in row.error


def test_repeated_lasting_failures_pause_the_schedule_and_say_why(
    owner, helper, llm, admin_client, finished, django_capture_on_commit_callbacks
):
    schedule = new_schedule(owner, helper)
    owner.is_active = False
    owner.save()

    with django_capture_on_commit_callbacks(execute=True):
        tick_every_minute(T0 + timedelta(minutes=5), T0 + timedelta(minutes=30))

    assert log_of(schedule) == [
        (T0 + timedelta(minutes=m), "failed", "ahentic_schedule_user_inactive") for m in (5, 10, 15)
    ]
    schedule.refresh_from_db()
    assert schedule.paused and schedule.consecutive_failures == 3
    assert schedule.paused_reason == (
        "Paused after 3 failed firings in a row: The user owner is inactive."
    )
    assert [status for status, _, _ in finished] == ["failed"] * 3
    page = admin_client.get(reverse("admin:orchestrator_app_schedule_changelist")).content.decode()
    assert "Paused after 3 failed firings in a row: The user owner is inactive." in page


def test_a_removed_agent_fails_the_firing(owner, helper, llm):
    schedule = new_schedule(owner, helper)
    helper.delete()
    tick(T0 + timedelta(minutes=5))
    assert log_of(schedule) == [
        (T0 + timedelta(minutes=5), "failed", "ahentic_schedule_agent_missing")
    ]


def test_a_success_resets_the_failure_count(owner, helper, llm):
    schedule = new_schedule(owner, helper)
    helper.active = False
    helper.save()
    tick(T0 + timedelta(minutes=5))
    tick(T0 + timedelta(minutes=10))
    helper.active = True
    helper.save()
    tick(T0 + timedelta(minutes=15))
    schedule.refresh_from_db()
    assert (schedule.consecutive_failures, schedule.paused) == (0, False)


def test_the_daily_limit_fails_a_firing_without_leaving_an_empty_chat(owner, helper, llm, settings):
    from orchestrator_app.ledger import usage

    settings.AHENTIC = {**settings.AHENTIC, "DAILY_TOKEN_LIMIT": 1}
    usage.usage_record(
        session_id=None,
        user_id=owner.pk,
        run=0,
        model="claude-sonnet-5-5",
        purpose="step",
        input_tokens=5,
        output_tokens=0,
        cache_read_tokens=0,
        cache_write_tokens=0,
        duration_ms=1,
        add_to_session=False,
    )
    schedule = new_schedule(owner, helper)
    tick(T0 + timedelta(minutes=5))
    [row] = ScheduleRun.objects.filter(schedule=schedule)
    assert (row.status, row.error_code) == ("failed", "ahentic_daily_token_limit")
    assert not Session.objects.filter(owner=owner).exists()
    schedule.refresh_from_db()
    assert schedule.consecutive_failures == 0  # passes by itself: never pauses the schedule


# --- approvals ----------------------------------------------------------------------------------


def test_a_scheduled_run_reaching_an_approval_waits_for_the_user(
    owner,
    owner_client,
    helper,
    llm,
    run_tasks,
    tool_calls,
    finished,
    django_capture_on_commit_callbacks,
    mailoutbox,
):
    schedule = new_schedule(owner, helper)
    llm.enqueue(tool_reply(tool_call("notes_create", {"title": "Digest"}, id="toolu_note")))

    run_tasks(tick, T0 + timedelta(minutes=5))
    with django_capture_on_commit_callbacks(execute=True):
        tick(T0 + timedelta(minutes=6))

    [row] = ScheduleRun.objects.filter(schedule=schedule)
    assert row.status == "awaiting_human"
    assert tool_calls == []  # never approved by the schedule
    assert finished == [("awaiting_human", schedule.pk, row.session_id)]
    # Later ticks leave it waiting; nothing more is sent.
    tick(T0 + timedelta(minutes=7))
    assert finished == [("awaiting_human", schedule.pk, row.session_id)]
    # The user, who has not opened the chat, gets one mail about the approval, however often
    # the check runs; no "scheduled run ended" mail while it only waits.
    assert mailoutbox == []
    [check] = QSchedule.objects.filter(func="orchestrator_app.notifications.tasks.notify_approval")
    due = check.next_run + timedelta(seconds=1)
    assert notification_tasks.notify_approval(str(row.session_id), "toolu_note", now=due) is True
    assert notification_tasks.notify_approval(str(row.session_id), "toolu_note", now=due) is False
    [mail] = mailoutbox
    assert mail.to == [owner.email] and f"ahentic_session={row.session_id}" in mail.body
    # The chat shows the card when the user opens it.
    body = owner_client.get(f"{API}/sessions/{row.session_id}").json()
    assert body["status"] == "awaiting_human"
    assert body["pendingTool"]["name"] == "notes_create"


def test_run_finished_settles_the_log_row_at_once(owner, helper, llm, run_tasks, finished):
    schedule = new_schedule(owner, helper)
    llm.enqueue(text_reply("Digest."))
    run_tasks(tick, T0 + timedelta(minutes=5))
    row = ScheduleRun.objects.get(schedule=schedule)

    def sent():
        send_after_commit(run_finished, row.session, run=row.run, outcome="idle", error_code="")

    run_tasks(sent)
    row.refresh_from_db()
    assert row.status == "done"
    assert finished == [("done", schedule.pk, row.session_id)]


# --- the admin ----------------------------------------------------------------------------------


@pytest.fixture
def scheduler(db):
    """Staff with the permissions to manage schedules."""
    user = UserFactory(username="scheduler", is_staff=True)
    user.user_permissions.add(
        *Permission.objects.filter(
            content_type__app_label="orchestrator_app",
            codename__in=["add_schedule", "change_schedule", "view_schedule"],
        )
    )
    return user


def add_form(owner, helper, **overrides) -> dict:
    return {
        "name": "Site digest",
        "agent": helper.pk,
        "agent_version": "",
        "run_as": owner.pk,
        "cron": "*/5 * * * *",
        "time_zone": "Europe/Berlin",
        "first_message": "Write the site digest.",
        "chat_mode": "continue",
        "spend_cap_usd": "",
        **overrides,
    }


def test_staff_with_the_permissions_manage_schedules_in_the_admin(
    client, scheduler, owner, helper, llm
):
    client.force_login(scheduler)
    add = reverse("admin:orchestrator_app_schedule_add")
    assert client.get(add).status_code == 200
    response = client.post(add, add_form(owner, helper))
    assert response.status_code == 302, response.content.decode()[:2000]
    schedule = Schedule.objects.get()
    assert schedule.next_due_at is not None and schedule.chat_mode == "continue"

    changelist_url = reverse("admin:orchestrator_app_schedule_changelist")
    response = client.post(
        changelist_url, {"action": "run_now", "_selected_action": [schedule.pk]}, follow=True
    )
    assert "Site digest: started." in response.content.decode()
    changelist = client.get(changelist_url).content.decode()
    assert "Site digest" in changelist and "running" in changelist
    change = client.get(reverse("admin:orchestrator_app_schedule_change", args=[schedule.pk]))
    assert change.status_code == 200
    row = ScheduleRun.objects.get()
    chat_url = reverse("admin:sessions_app_session_change", args=[row.session_id])
    assert chat_url in change.content.decode()
    log = client.get(reverse("admin:orchestrator_app_schedulerun_changelist") + "?status=running")
    assert log.status_code == 200 and chat_url in log.content.decode()
    detail = client.get(reverse("admin:orchestrator_app_schedulerun_change", args=[row.pk]))
    assert detail.status_code == 200

    # An edit keeps what the tick wrote meanwhile and recomputes the next due time.
    form = add_form(owner, helper, cron="0 7 * * *")
    response = client.post(
        reverse("admin:orchestrator_app_schedule_change", args=[schedule.pk]), form
    )
    assert response.status_code == 302
    schedule.refresh_from_db()
    assert schedule.cron == "0 7 * * *" and schedule.chat_id == row.session_id

    client.post(changelist_url, {"action": "pause_schedules", "_selected_action": [schedule.pk]})
    schedule.refresh_from_db()
    assert schedule.paused and schedule.paused_reason == "Paused by scheduler."


def test_staff_without_the_permissions_cannot_see_schedules(client, owner, helper, llm):
    staff = UserFactory(username="staff", is_staff=True)
    client.force_login(staff)
    schedule = new_schedule(owner, helper)
    for url in (
        reverse("admin:orchestrator_app_schedule_changelist"),
        reverse("admin:orchestrator_app_schedule_add"),
        reverse("admin:orchestrator_app_schedule_change", args=[schedule.pk]),
        reverse("admin:orchestrator_app_schedulerun_changelist"),
    ):
        assert client.get(url).status_code == 403, url
    response = client.post(
        reverse("admin:orchestrator_app_schedule_changelist"),
        {"action": "run_now", "_selected_action": [schedule.pk]},
    )
    assert response.status_code == 403
    assert not ScheduleRun.objects.exists()


def test_the_admin_refuses_a_schedule_whose_user_may_not_use_the_agent(
    client, scheduler, noperm, owner, helper, llm
):
    client.force_login(scheduler)
    add = reverse("admin:orchestrator_app_schedule_add")
    response = client.post(add, add_form(noperm, helper))
    assert response.status_code == 200
    assert (
        "This schedule could not run: The user noperm lacks the permission to use the agent "
        "(sessions_app.use_agent)." in response.content.decode()
    )
    for field, value, message in (
        ("cron", "every day", "is not a cron expression of five fields"),
        ("cron", "0 0 30 2 *", "never comes due"),
        ("time_zone", "Mars/Olympus", "is not an IANA time zone name"),
    ):
        response = client.post(add, add_form(owner, helper, **{field: value}))
        assert message in response.content.decode(), field
    assert not Schedule.objects.exists()


# --- system checks ------------------------------------------------------------------------------


def check_ids() -> set[str]:
    from django.core.checks import run_checks

    return {m.id for m in run_checks(databases=["default"]) if m.id.startswith("ahentic.")}


@pytest.mark.django_db(databases="__all__")
@pytest.mark.parametrize(
    "key, value, check_id",
    [
        ("SCHEDULE_GRACE_S", 30, "ahentic.E025"),
        ("SCHEDULE_GRACE_S", "120", "ahentic.E025"),
        ("SCHEDULE_MAX_FAILURES", 0, "ahentic.E026"),
    ],
)
def test_bad_schedule_settings_fail_the_checks(settings, key, value, check_id):
    settings.AHENTIC = {**settings.AHENTIC, key: value}
    assert check_ids() == {check_id}


@pytest.mark.django_db(databases="__all__")
def test_the_checks_name_schedules_that_cannot_fire(owner, noperm, helper):
    from django_q.models import Schedule as QSchedule

    assert check_ids() == set()
    refused = new_schedule(noperm, helper)
    assert check_ids() == {"ahentic.W010"}
    schedules.pause(refused, reason="until noperm gets the permission")
    broken = new_schedule(owner, helper)
    Schedule.objects.filter(pk=broken.pk).update(cron="61 * * * *")
    assert check_ids() == {"ahentic.E027"}
    Schedule.objects.filter(pk=broken.pk).update(cron="0 7 * * *")
    QSchedule.objects.filter(func="orchestrator_app.schedules.tasks.schedule_tick").delete()
    assert check_ids() == {"ahentic.W009"}


def test_the_schedule_list_costs_the_same_queries_for_more_schedules(admin_client, owner, helper):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def list_queries() -> int:
        with CaptureQueriesContext(connection) as queries:
            response = admin_client.get(reverse("admin:orchestrator_app_schedule_changelist"))
        assert response.status_code == 200
        return len(queries)

    for n in range(2):
        schedules.run_now(new_schedule(owner, helper, name=f"Schedule {n}"))
    few = list_queries()
    for n in range(2, 6):
        schedules.run_now(new_schedule(owner, helper, name=f"Schedule {n}"))
    assert list_queries() == few


def test_a_broken_schedule_stops_no_other_and_a_failing_firing_is_logged(owner, helper, llm):
    from unittest import mock

    broken = new_schedule(owner, helper, name="Broken")
    Schedule.objects.filter(pk=broken.pk).update(time_zone="Mars/Olympus")  # outside the admin
    good = new_schedule(owner, helper, name="Good")

    tick(T0 + timedelta(minutes=5))

    assert log_of(broken) == []
    assert log_of(good) == [(T0 + timedelta(minutes=5), "running", "")]

    with mock.patch(
        "orchestrator_app.control.runs.message_post", side_effect=RuntimeError("queue down")
    ):
        tick(T0 + timedelta(minutes=10))
    row = good.runs.get(due_at=T0 + timedelta(minutes=10))
    assert (row.status, row.error_code) == ("failed", "ahentic_schedule_error")
    assert row.error == "The firing failed: queue down"
