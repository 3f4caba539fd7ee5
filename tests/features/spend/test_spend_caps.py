"""Spend caps: a chat whose cost reaches its cap (the agent version's ``SPEND_CAP_USD``, or the
chat's own, set by staff in the session admin) pauses at the next step boundary; raising the cap
then Continue, or a Continue by a user who may exceed caps, resumes it. A cap on a model without
prices is refused (system check, agent form, session form)."""

import re
from datetime import timedelta
from decimal import Decimal

import pytest
from django.contrib.auth.models import Permission
from django.core.checks import run_checks
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from orchestrator_app.models import DailyUsage, UsageRecord
from orchestrator_app.testing.localapi import text_reply, tool_call, tool_reply
from sessions_app import agents, runstate, services
from sessions_app.models import Agent, AgentVersion, Session
from tests.support.api import decide, payload_of, post, post_message, transcript_of
from tests.support.factories import UserFactory

pytestmark = pytest.mark.usefixtures("llm_strict")

MODEL = "claude-sonnet-5-5"
# $0.003 a token: any model call costs more than a cent.
PRICE = {"input": 3000, "output": 3000, "cache_write": 3000, "cache_read": 3000}


@pytest.fixture(autouse=True)
def priced(settings):
    settings.AHENTIC = {**settings.AHENTIC, "PRICES": {MODEL: PRICE}}


def new_agent(slug: str, config: dict) -> Agent:
    agent = Agent.objects.create(slug=slug, name=slug.title())
    agents.version_save(agent, config=config)
    return agent


def chat_with(owner, agent: Agent) -> Session:
    return services.session_create(owner=owner, agent_version=agents.latest_version(agent))


def grant(user, codename: str, app_label: str = "sessions_app") -> None:
    user.user_permissions.add(
        Permission.objects.get(codename=codename, content_type__app_label=app_label)
    )


def row(chat) -> Session:
    return Session.objects.get(pk=chat.pk)


@pytest.fixture
def capped(owner):
    """A chat of an agent capped at one cent."""
    return chat_with(owner, new_agent("capped", {"MODEL": MODEL, "SPEND_CAP_USD": 0.01}))


@pytest.fixture
def paused(capped, owner_client, llm, run_tasks, tool_calls):
    """``capped`` after a turn that asked for a tool and crossed the cap: the run paused."""
    llm.enqueue(tool_reply(tool_call("echo", {"text": "hi"})), text_reply("Done."))
    post_message(owner_client, capped, run_tasks, "Echo hi")
    return capped


@pytest.fixture
def staff(db):
    user = UserFactory(username="staffer")
    user.is_staff = True
    user.save()
    grant(user, "view_session")
    grant(user, "change_session")
    client = APIClient()
    client.force_login(user)
    return client


def change_url(chat) -> str:
    return reverse("admin:sessions_app_session_change", args=[chat.pk])


def save_cap(client, chat, cap: str, loaded: str = ""):
    return client.post(
        change_url(chat), {"spend_cap_usd": cap, "spend_cap_loaded": loaded, "_save": "Save"}
    )


# --- the pause ---------------------------------------------------------------------------------


def test_a_turn_that_crosses_the_cap_is_kept_and_nothing_starts_after_it(
    paused, owner_client, llm, tool_calls
):
    payload = payload_of(owner_client, paused)

    # The model call in flight finished (its tool call is written) but its tool never ran and
    # no further model call was made.
    assert len(llm.message_requests()) == 1
    assert tool_calls == []
    assert any(m["meta"].get("tool") == "echo" for m in transcript_of(owner_client, paused))
    assert payload["status"] == "error"
    assert payload["lastErrorCode"] == "ahentic_spend_cap"
    assert payload["jobResumable"] is True
    assert "spend cap of $0.01" in payload["lastError"]
    said = [m["content"] for m in transcript_of(owner_client, paused)]
    assert any("reached its spend cap of $0.01" in text and "Continue" in text for text in said)
    assert row(paused).cost_usd > Decimal("0.01")


def test_an_approval_given_after_the_cap_was_lowered_runs_nothing_until_it_is_raised(
    owner, owner_client, staff, llm, run_tasks, tool_calls
):
    chat = chat_with(owner, new_agent("roomy", {"MODEL": MODEL, "SPEND_CAP_USD": 1000}))
    llm.enqueue(tool_reply(tool_call("notes_create", {"title": "Groceries"})), text_reply("Ok."))
    assert post_message(owner_client, chat, run_tasks, "Note it")["status"] == "awaiting_human"
    assert save_cap(staff, chat, "1").status_code == 302  # below what it spent already

    payload = decide(owner_client, chat, run_tasks)

    # The step the approval started stopped at its boundary: the approved tool did not run.
    assert tool_calls == [] and len(llm.message_requests()) == 1
    assert (payload["status"], payload["lastErrorCode"]) == ("error", "ahentic_spend_cap")
    assert save_cap(staff, chat, "1000", loaded="1.0000").status_code == 302
    run_tasks(post, owner_client, chat, "continue")
    assert [c["tool"] for c in tool_calls] == ["notes_create"]
    assert payload_of(owner_client, chat)["status"] == "idle"


def test_a_new_message_to_a_capped_chat_is_refused(paused, owner_client, llm):
    refused = post(owner_client, paused, "messages", {"content": "And more"})

    assert refused.status_code == 409
    assert refused.json()["code"] == "ahentic_spend_cap"
    assert "Staff can raise" in refused.json()["detail"]
    assert len(llm.message_requests()) == 1


def test_continue_without_a_raised_cap_or_the_permission_is_refused(
    paused, owner_client, llm, run_tasks, tool_calls
):
    refused = run_tasks(post, owner_client, paused, "continue")

    assert refused.status_code == 409
    assert refused.json()["code"] == "ahentic_spend_cap"
    assert "permission to exceed spend caps" in refused.json()["detail"]
    assert tool_calls == [] and len(llm.message_requests()) == 1
    assert row(paused).status == "error" and row(paused).spend_cap_usd is None


def test_staff_raise_the_cap_in_the_admin_and_continue_resumes_the_run(
    paused, owner_client, staff, llm, run_tasks, tool_calls
):
    saved = save_cap(staff, paused, "100")
    assert saved.status_code == 302, saved.content
    assert row(paused).spend_cap_usd == Decimal("100")

    continued = run_tasks(post, owner_client, paused, "continue")

    assert continued.status_code == 200, continued.content
    # The paused turn's tool ran, then the model answered it.
    assert [c["tool"] for c in tool_calls] == ["echo"]
    assert len(llm.message_requests()) == 2
    payload = payload_of(owner_client, paused)
    assert payload["status"] == "idle" and payload["lastErrorCode"] == ""


def test_a_new_agent_version_with_a_higher_cap_then_continue_resumes_the_run(
    paused, owner_client, admin_client, llm, run_tasks, tool_calls
):
    agent = row(paused).agent_version.agent
    agents.version_save(agent, config={"MODEL": MODEL, "SPEND_CAP_USD": 1000})
    moved = admin_client.post(
        reverse("admin:sessions_app_session_changelist"),
        {"action": "agent_version_latest", "_selected_action": [str(paused.pk)]},
    )
    assert moved.status_code == 302
    assert row(paused).agent_version.number == 2

    continued = run_tasks(post, owner_client, paused, "continue")

    assert continued.status_code == 200, continued.content
    assert [c["tool"] for c in tool_calls] == ["echo"]
    assert payload_of(owner_client, paused)["status"] == "idle"


def test_a_user_who_may_exceed_caps_continues_past_the_cap_once(
    paused, owner, owner_client, llm, run_tasks, tool_calls
):
    grant(owner, "exceed_spend_cap")
    spent = row(paused).cost_usd

    continued = run_tasks(post, owner_client, paused, "continue")

    assert continued.status_code == 200, continued.content
    assert [c["tool"] for c in tool_calls] == ["echo"]
    assert len(llm.message_requests()) == 2
    # The chat's own cap is now its spend at the pause plus one more of its cap ($0.01).
    assert row(paused).spend_cap_usd == (spent + Decimal("0.01")).quantize(Decimal("0.0001"))
    # That answer crossed the new cap too: the chat is at its cap again, so a message is
    # refused, and the user is told they can Continue.
    refused = post(owner_client, paused, "messages", {"content": "More"})
    assert refused.status_code == 409
    assert "Continue" in refused.json()["detail"]


def test_a_user_who_may_exceed_caps_goes_on_in_a_finished_chat_by_sending_continue(
    capped, owner, owner_client, llm, run_tasks
):
    grant(owner, "exceed_spend_cap")
    llm.enqueue(text_reply("First."), text_reply("Second."))
    assert post_message(owner_client, capped, run_tasks, "Hello")["status"] == "idle"

    payload = post_message(owner_client, capped, run_tasks, "continue")

    assert payload["status"] == "idle"
    assert len(llm.message_requests()) == 2
    assert row(capped).spend_cap_usd is not None


def test_the_chats_own_cap_overrides_its_agents_either_way(owner, owner_client, llm, run_tasks):
    generous = chat_with(owner, new_agent("generous", {"MODEL": MODEL, "SPEND_CAP_USD": 1000}))
    stingy = chat_with(owner, new_agent("stingy", {"MODEL": MODEL, "SPEND_CAP_USD": 0.01}))
    assert runstate.spend_cap_set(session_id=generous.pk, cap=Decimal("0.01"), from_cap=None)
    assert runstate.spend_cap_set(session_id=stingy.pk, cap=Decimal("1000"), from_cap=None)
    llm.enqueue(
        tool_reply(tool_call("echo", {"text": "a"})),
        tool_reply(tool_call("echo", {"text": "b"})),
        text_reply("Done."),
    )

    assert post_message(owner_client, generous, run_tasks, "Go")["lastErrorCode"] == (
        "ahentic_spend_cap"
    )
    assert post_message(owner_client, stingy, run_tasks, "Go")["status"] == "idle"
    assert agents.spend_cap(row(generous)) == 0.01
    assert agents.spend_cap(row(stingy)) == 1000


# --- the session admin -------------------------------------------------------------------------


def test_the_cap_field_shows_the_agents_cap_and_the_spend(paused, staff):
    page = staff.get(change_url(paused)).content.decode()

    assert 'name="spend_cap_usd"' in page
    assert "the agent's cap, $0.0100" in page
    assert f"Spent so far: ${row(paused).cost_usd:,.4f}" in page


@pytest.mark.parametrize(
    "cap, error",
    [("-1", "greater than or equal to 0"), ("abc", "Enter a number")],
)
def test_a_bad_cap_is_refused(capped, staff, cap, error):
    response = save_cap(staff, capped, cap)

    assert response.status_code == 200
    assert error in response.content.decode()
    assert row(capped).spend_cap_usd is None


def test_a_cap_saved_over_a_newer_one_is_refused(capped, staff):
    runstate.spend_cap_set(session_id=capped.pk, cap=Decimal("2"), from_cap=None)

    response = save_cap(staff, capped, "9", loaded="")  # the page showed no cap

    assert response.status_code == 200
    assert "changed to $2.0000 after you opened this page" in response.content.decode()
    assert row(capped).spend_cap_usd == Decimal("2")


def test_a_cap_on_a_chat_whose_model_has_no_prices_is_refused(owner, staff):
    chat = chat_with(owner, new_agent("unpriced", {"MODEL": "claude-unpriced"}))

    response = save_cap(staff, chat, "3")

    assert response.status_code == 200
    assert "has no prices" in response.content.decode()
    assert row(chat).spend_cap_usd is None


def test_staff_who_may_only_view_see_the_cap_read_only(capped, db):
    viewer = UserFactory(username="viewer")
    viewer.is_staff = True
    viewer.save()
    grant(viewer, "view_session")
    client = APIClient()
    client.force_login(viewer)

    page = client.get(change_url(capped))
    refused = save_cap(client, capped, "3")

    assert page.status_code == 200
    assert 'name="spend_cap_usd"' not in page.content.decode()
    assert refused.status_code == 403
    assert row(capped).spend_cap_usd is None


# --- prices --------------------------------------------------------------------------------------


@pytest.mark.django_db(databases="__all__")
def test_a_cap_on_a_model_without_prices_is_a_system_check_error():
    agent = Agent.objects.create(slug="unpriced", name="Unpriced")
    # Written as a row (an older release, a fixture): the agent form refuses it (below).
    AgentVersion.objects.create(
        agent=agent, number=1, config={"MODEL": "claude-unpriced", "SPEND_CAP_USD": 5}
    )
    AgentVersion.objects.create(
        agent=Agent.objects.create(slug="priced", name="Priced"),
        number=1,
        config={"MODEL": MODEL, "SPEND_CAP_USD": 5},
    )

    messages = [
        m for m in run_checks(databases=["default"]) if m.id in ("ahentic.E028", "ahentic.W011")
    ]

    assert [(m.id, m.msg.split(" SPEND_CAP_USD")[0]) for m in messages] == [
        ("ahentic.W011", "Agent 'priced' v1"),  # its brain model has no prices
        ("ahentic.E028", "Agent 'unpriced' v1"),
    ]


def test_the_agent_form_refuses_a_cap_on_a_model_without_prices(admin_client):
    response = admin_client.post(
        reverse("admin:sessions_app_agent_add"),
        {
            "slug": "unpriced",
            "name": "Unpriced",
            "colour": "",
            "permission": "",
            "shows_on": "site",
            "active": "on",
            "configuration": '{"MODEL": "claude-unpriced", "SPEND_CAP_USD": 5}',
            "based_on": "0",
            "_save": "Save",
        },
    )

    assert response.status_code == 200
    assert "has no prices" in response.content.decode()
    assert not Agent.objects.filter(slug="unpriced").exists()


# --- the spend page ------------------------------------------------------------------------------

SPEND_URL = "/admin/orchestrator_app/spend/"


def spent(session, cost: str, *, days_ago: int = 0, tokens: int = 100):
    record = UsageRecord.objects.create(
        session=session,
        user=session.owner,
        model=MODEL,
        input_tokens=tokens,
        cost_usd=Decimal(cost),
    )
    at = timezone.now() - timedelta(days=days_ago)
    UsageRecord.objects.filter(pk=record.pk).update(created_at=at)  # created_at is auto_now_add
    return record


def totals(page: str) -> dict[str, tuple[str, str]]:
    """The totals table: name -> (cost, tokens)."""
    table = page.split('id="ahentic-spend-totals"')[1].split("</table>")[0]
    body = table.split("<tbody>")[1].split("</tbody>")[0]
    rows = re.findall(
        r'<th scope="row">(?:<span[^>]*></span>)?([^<]+)</th><td class="num">([^<]+)</td>'
        r'<td class="num">([^<]+)</td>',
        body,
    )
    return {name: (cost, tokens) for name, cost, tokens in rows}


@pytest.fixture
def ledger(db, settings):
    """Two agents, two users, spend today, yesterday and 40 days ago."""
    settings.AHENTIC = {**settings.AHENTIC, "DAILY_TOKEN_LIMIT": 50000}
    alpha = new_agent("alpha", {"MODEL": MODEL})
    beta = new_agent("beta", {"MODEL": MODEL})
    ann, bob = UserFactory(username="ann"), UserFactory(username="bob")
    spent(chat_with(ann, alpha), "0.40")
    spent(chat_with(ann, alpha), "0.60", tokens=300)
    spent(chat_with(bob, alpha), "2.00")
    spent(chat_with(bob, beta), "0.50", days_ago=1)
    spent(chat_with(bob, beta), "100.00", days_ago=40)
    DailyUsage.objects.create(day=timezone.localdate(), tokens=12345)


@pytest.fixture
def spend_staff(db):
    user = UserFactory(username="accountant")
    user.is_staff = True
    user.save()
    grant(user, "view_usagerecord", "orchestrator_app")
    client = APIClient()
    client.force_login(user)
    return client


def test_the_spend_page_sums_the_ledger_by_agent_with_the_daily_limit(ledger, spend_staff):
    response = spend_staff.get(SPEND_URL)

    assert response.status_code == 200
    page = response.content.decode()
    assert totals(page) == {"Alpha": ("$3.00", "500"), "Beta": ("$0.50", "100")}
    assert '<tfoot><tr><th scope="row">Total</th><td class="num">$3.50</td>' in page
    # Two charts with their titles and descriptions; the daily limit beside the tokens.
    assert page.count('class="ahentic-spend-chart"') == 2
    assert '<title id="ahentic-spend-title">Spend per day by agent, last 30 days</title>' in page
    assert "$3.50 in all" in page
    assert "Daily token limit: 50,000 tokens" in page
    assert "daily limit 50,000</text>" in page
    assert "12,345 tokens" in page  # today's bar's tooltip
    assert "<script" not in page.split('id="content-main"')[1]


def test_the_spend_page_by_user_and_over_90_days(ledger, spend_staff):
    by_user = spend_staff.get(SPEND_URL, {"by": "user"}).content.decode()
    quarter = spend_staff.get(SPEND_URL, {"days": "90"}).content.decode()
    week = spend_staff.get(SPEND_URL, {"days": "nonsense", "by": "nonsense"})

    assert totals(by_user) == {"bob": ("$2.50", "200"), "ann": ("$1.00", "400")}
    assert totals(quarter)["Beta"] == ("$100.50", "200")
    assert week.status_code == 200 and totals(week.content.decode())["Alpha"][0] == "$3.00"


def test_the_spend_page_keeps_the_top_five_and_sums_the_rest(spend_staff, owner):
    for n in range(7):
        spent(chat_with(owner, new_agent(f"agent{n}", {"MODEL": MODEL})), f"{n + 1}.00")

    shown = totals(spend_staff.get(SPEND_URL).content.decode())

    assert list(shown) == ["Agent6", "Agent5", "Agent4", "Agent3", "Agent2", "other"]
    assert shown["other"] == ("$3.00", "200")  # agent1 and agent0


def test_the_spend_page_needs_the_ledgers_view_permission(ledger, db):
    staff_only = UserFactory(username="nosy")
    staff_only.is_staff = True
    staff_only.save()
    client = APIClient()
    client.force_login(staff_only)

    assert client.get(SPEND_URL).status_code == 403


def test_the_spend_page_reads_the_ledger_in_a_fixed_number_of_queries(ledger, spend_staff, owner):
    with CaptureQueriesContext(connection) as few:
        assert spend_staff.get(SPEND_URL).status_code == 200
    for n in range(8):
        spent(chat_with(owner, new_agent(f"more{n}", {"MODEL": MODEL})), "1.00", days_ago=n)
    with CaptureQueriesContext(connection) as many:
        assert spend_staff.get(SPEND_URL, {"by": "user"}).status_code == 200

    assert len(few) == len(many) == 6, [q["sql"] for q in many.captured_queries]


def test_the_spend_page_by_schedule_counts_a_continued_chat_once(spend_staff, owner):
    from orchestrator_app.models import ScheduleRun
    from tests.support.factories import schedule_create

    agent = new_agent("digester", {"MODEL": MODEL})
    digest = schedule_create(owner, agent, name="Nightly digest", chat_mode="continue")
    continued = chat_with(owner, agent)
    # Three firings logged in the one chat the schedule continues.
    for minute in (5, 10, 15):
        ScheduleRun.objects.create(
            schedule=digest,
            due_at=timezone.now().replace(second=0, microsecond=0) - timedelta(minutes=minute),
            session=continued,
            status="done",
        )
    spent(continued, "1.25")
    spent(continued, "0.75")
    spent(chat_with(owner, agent), "0.10")  # a chat of the user's own

    shown = totals(spend_staff.get(SPEND_URL, {"by": "schedule"}).content.decode())

    assert shown == {"Nightly digest": ("$2.00", "200"), "(not scheduled)": ("$0.10", "100")}


def test_the_spend_page_tells_two_agents_of_the_same_name_apart_by_slug(spend_staff, owner):
    first = new_agent("writer", {"MODEL": MODEL})
    second = Agent.objects.create(slug="writer-2", name="Writer")
    agents.version_save(second, config={"MODEL": MODEL})
    spent(chat_with(owner, first), "2.00")
    spent(chat_with(owner, second), "1.00")

    shown = totals(spend_staff.get(SPEND_URL).content.decode())

    assert list(shown) == ["Writer (writer)", "Writer (writer-2)"]
