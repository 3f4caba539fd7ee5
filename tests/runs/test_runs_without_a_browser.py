"""Runs no browser serves: a schedule's, one started by host code through the services. They
are never offered browser tools, a call to one anyway is a tool error and the run goes on; a
run that waits on a browser no tab claims is timed out by the recover sweep; the schedule form
warns about an agent that names browser tools."""

from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse
from django.utils import timezone

from orchestrator_app import tasks
from orchestrator_app.control import runs
from orchestrator_app.models import Schedule, ScheduleRun
from orchestrator_app.schedules import tasks as schedule_tasks
from orchestrator_app.testing.localapi import text_reply, tool_call, tool_reply
from sessions_app import agents, services
from sessions_app.models import Session
from tests.support.api import post_message, result_of
from tests.support.factories import UserFactory, agent_create, schedule_create

pytestmark = pytest.mark.usefixtures("llm_strict")

T0 = datetime(2026, 5, 4, 9, 0, tzinfo=UTC)


def tool_names(request: dict) -> set[str]:
    return {t["name"] for t in request.get("tools", [])}


def fire_once(owner, agent, run_tasks, **fields) -> ScheduleRun:
    schedule = schedule_create(owner, agent, now=T0, **fields)
    run_tasks(schedule_tasks.schedule_tick, (T0 + timedelta(minutes=5, seconds=20)).isoformat())
    return ScheduleRun.objects.get(schedule=schedule)


def test_a_scheduled_run_is_never_offered_browser_tools_and_a_call_to_one_is_a_tool_error(
    owner, llm, run_tasks
):
    llm.enqueue(
        tool_reply(tool_call("page_read", {}, id="toolu_page")),
        text_reply("No page to read; here is the digest."),
    )

    row = fire_once(owner, agent_create("digest"), run_tasks)

    first, second = llm.message_requests()
    assert "page_read" not in tool_names(first) and "page_fill_fields" not in tool_names(first)
    assert "echo" in tool_names(first)  # the other tools are there
    result = result_of(second, "toolu_page")
    assert result.get("is_error") is True
    assert "ability_no_browser" in str(result["content"])
    assert "no browser serves this run" in str(result["content"])
    session = Session.objects.get(pk=row.session_id)
    assert session.status == "idle"  # the run went on and ended; it never waited
    row.refresh_from_db()
    assert row.status == "done"


def test_a_scheduled_chat_continued_in_the_sidebar_gets_a_browser_for_that_run(
    owner, owner_client, llm, run_tasks
):
    llm.enqueue(text_reply("Digest."), tool_reply(tool_call("page_read", {}, id="toolu_page")))
    row = fire_once(owner, agent_create("digest"), run_tasks, chat_mode="continue")
    chat = Session.objects.get(pk=row.session_id)

    body = post_message(owner_client, chat, run_tasks, "Now look at this page")

    scheduled, sidebar = llm.message_requests()
    assert "page_read" not in tool_names(scheduled)
    assert "page_read" in tool_names(sidebar)
    assert body["status"] == "awaiting_browser"
    assert body["pendingTool"]["name"] == "page_read"


def test_a_run_host_code_starts_through_the_services_has_no_browser(owner, llm, run_tasks):
    chat = services.session_create(owner=owner, agent_version=agents.default_version())
    llm.enqueue(
        tool_reply(tool_call("page_fill_fields", {"fields": {"q": "x"}}, id="toolu_fill")),
        text_reply("Done without the page."),
    )

    run_tasks(runs.message_post, session=chat, content="Fill the search box")

    first, second = llm.message_requests()
    assert "page_fill_fields" not in tool_names(first)
    result = result_of(second, "toolu_fill")
    assert result.get("is_error") is True and "ability_no_browser" in str(result["content"])
    chat.refresh_from_db()
    assert chat.status == "idle" and chat.pending_tool is None


# --- the browser timeout, without anyone's nudge --------------------------------------------


def test_the_recover_sweep_times_out_a_browser_call_no_tab_claims(
    owner, owner_client, session, llm, run_tasks, settings
):
    settings.AHENTIC = {**settings.AHENTIC, "BROWSER_TIMEOUT_S": 45}
    llm.enqueue(
        tool_reply(tool_call("page_read", {}, id="toolu_page")),
        text_reply("The page did not answer; going on without it."),
    )
    assert post_message(owner_client, session, run_tasks, "Read the page")["status"] == (
        "awaiting_browser"
    )

    # Within the timeout the sweep leaves the call to the browser.
    run_tasks(tasks.recover)
    assert Session.objects.get(pk=session.pk).status == "awaiting_browser"

    Session.objects.filter(pk=session.pk).update(
        browser_paused_at=timezone.now() - timedelta(seconds=46)
    )
    run_tasks(tasks.recover)

    session.refresh_from_db()
    assert session.status == "idle" and session.pending_tool is None
    result = result_of(llm.message_requests()[-1], "toolu_page")
    assert result.get("is_error") is True
    assert "ahentic_browser_timeout" in str(result["content"])


# --- the schedule form ---------------------------------------------------------------------------


@pytest.fixture
def scheduler(db):
    user = UserFactory(username="scheduler", is_staff=True)
    user.user_permissions.add(
        *Permission.objects.filter(
            content_type__app_label="orchestrator_app",
            codename__in=["add_schedule", "change_schedule", "view_schedule"],
        )
    )
    return user


def add_form(owner, agent) -> dict:
    return {
        "name": "Page digest",
        "agent": agent.pk,
        "agent_version": "",
        "run_as": owner.pk,
        "cron": "*/5 * * * *",
        "time_zone": "UTC",
        "first_message": "Write the digest.",
        "chat_mode": "new",
        "spend_cap_usd": "",
    }


def test_the_schedule_form_warns_when_the_agent_names_browser_tools(client, scheduler, owner, llm):
    reader = agent_create("reader")
    agents.version_save(reader, config={"TOOLS": ["echo", "page_read"]})
    plain = agent_create("plain")
    agents.version_save(plain, config={"TOOLS": ["echo"]})
    client.force_login(scheduler)
    add = reverse("admin:orchestrator_app_schedule_add")

    warned = client.post(add, add_form(owner, reader), follow=True).content.decode()
    quiet = client.post(add, {**add_form(owner, plain), "name": "Plain"}, follow=True)

    assert Schedule.objects.count() == 2  # a warning, never a refusal
    assert "page_read" in warned and "no browser" in warned
    assert "no browser" not in quiet.content.decode()
