"""Token budgets and cost: the session's soft budget, the site's daily limit, and prices.

Token arithmetic (SPEC §2): tokensIn = input + cache read + cache write, tokensUsed = in + out;
the soft budget and the daily limit count tokensUsed; cost prices each part at its own rate.
"""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from orchestrator_app.ledger import usage
from orchestrator_app.models import DailyUsage, UsageRecord
from orchestrator_app.testing.localapi import text_reply, tool_call, tool_reply
from sessions_app.conf import ahentic_settings
from sessions_app.models import Session
from tests.support.api import API, payload_of, session_url
from tests.support.factories import SessionFactory, UserFactory
from tests.support.model import model_requests

pytestmark = pytest.mark.usefixtures("llm_strict")

PLAN = {
    "steps": [
        {"id": "a", "content": "Collect the numbers", "status": "in_progress"},
        {"id": "b", "content": "Chart them", "status": "pending"},
        {"id": "c", "content": "Report", "status": "pending"},
    ]
}
PRICE = {"input": 3, "output": 15, "cache_write": 3.75, "cache_read": 0.3}


def configure(settings, **values):
    settings.AHENTIC = {**settings.AHENTIC, **values}


def post(client, session, path, data=None, run_tasks=None):
    call = (lambda *a, **k: run_tasks(client.post, *a, **k)) if run_tasks else client.post
    return call(session_url(session, path), data or {}, format="json")


def main_usages(llm) -> list[dict]:
    return [entry["response"]["usage"] for entry in model_requests(llm, ahentic_settings.MODEL)]


# --- the session's soft budget ------------------------------------------------------------------


@pytest.fixture
def paused(owner_client, session, llm, run_tasks, settings):
    """A run paused by a 500-token soft budget after its first model call (~1,500 tokens)."""
    configure(settings, SESSION_SOFT_TOKEN_BUDGET=500)
    llm.enqueue(tool_reply(tool_call("update_plan", PLAN)), text_reply("Finished the report."))
    response = post(owner_client, session, "messages", {"content": "Build the report"}, run_tasks)
    assert response.status_code == 202, response.content
    return payload_of(owner_client, session)


def test_a_run_pauses_at_the_soft_budget_as_a_resumable_error(paused, llm):
    assert paused["status"] == "error"
    assert paused["lastErrorCode"] == "ahentic_session_token_budget"
    assert paused["jobResumable"] is True
    assert paused["tokensUsed"] >= 500
    assert len(main_usages(llm)) == 1  # the pause came before the second model call
    assert paused["messages"][-1]["content"] == paused["lastError"]
    assert [s["status"] for s in paused["plan"]["steps"]] == ["in_progress", "pending", "pending"]


@pytest.mark.parametrize("content", ["What did you find so far?", "continue"])
def test_a_message_during_the_soft_budget_pause_is_refused(owner_client, session, paused, content):
    response = post(owner_client, session, "messages", {"content": content})

    assert response.status_code == 409
    assert response.json()["code"] == "ahentic_session_token_budget"
    assert payload_of(owner_client, session)["status"] == "error"


def test_continue_acks_the_highest_crossed_boundary_and_the_run_finishes(
    owner_client, session, paused, llm, run_tasks
):
    used = paused["tokensUsed"]
    assert used >= 1000  # several 500-token boundaries were crossed

    response = post(owner_client, session, "continue", run_tasks=run_tasks)

    assert response.status_code == 200, response.content
    body = payload_of(owner_client, session)
    assert body["status"] == "idle"
    assert body["lastErrorCode"] == ""
    assert body["messages"][-1]["content"] == "Finished the report."
    assert Session.objects.get(pk=session.pk).soft_budget_acked == used // 500 * 500


def test_cancel_also_leaves_the_soft_budget_pause(owner_client, session, paused, llm, run_tasks):
    response = post(owner_client, session, "cancel")

    assert response.status_code == 200
    assert response.json()["status"] == "cancelled"
    assert response.json()["jobResumable"] is False
    following = post(
        owner_client, session, "messages", {"content": "Something else, then"}, run_tasks
    )
    assert following.status_code == 202, following.content
    # The next run really runs (a second model call, then idle): stopping acknowledged the
    # crossed boundary instead of pausing again at once.
    assert len(main_usages(llm)) == 2
    assert payload_of(owner_client, session)["status"] == "idle"


# --- the site's daily limit ---------------------------------------------------------------------


def spend(tokens: int, cache_read_tokens: int = 0, cache_write_tokens: int = 0) -> UsageRecord:
    """Usage of another user's session today (the limit is site-wide), through the ledger's
    write path."""
    other = SessionFactory(owner=UserFactory(agent_permission=True))
    return usage.usage_record(
        session_id=other.pk,
        user_id=other.owner_id,
        run=1,
        model="claude-sonnet-5-5",
        purpose="step",
        input_tokens=tokens - 10,
        output_tokens=10,
        cache_read_tokens=cache_read_tokens,
        cache_write_tokens=cache_write_tokens,
        duration_ms=5,
    )


def test_new_messages_get_429_once_the_site_reached_its_daily_limit(
    owner_client, session, llm, settings
):
    configure(settings, DAILY_TOKEN_LIMIT=1000)
    spend(600, cache_read_tokens=300, cache_write_tokens=100)  # 1,000 tokens used

    response = post(owner_client, session, "messages", {"content": "Hello"})

    assert response.status_code == 429
    assert response.json()["code"] == "ahentic_daily_token_limit"
    body = payload_of(owner_client, session)
    assert body["status"] == "idle"
    assert body["messages"] == []


def test_below_the_daily_limit_and_with_yesterdays_spend_messages_are_accepted(
    owner_client, session, llm, settings
):
    configure(settings, DAILY_TOKEN_LIMIT=1000)
    spend(999)
    yesterday = timezone.localdate() - timedelta(days=1)
    DailyUsage.objects.create(day=yesterday, tokens=50000)

    response = post(owner_client, session, "messages", {"content": "Hello"})

    assert response.status_code == 202, response.content


def test_a_running_session_stops_at_its_next_step_when_the_daily_limit_is_reached(
    owner_client, session, llm, run_tasks, settings
):
    configure(settings, DAILY_TOKEN_LIMIT=1000)  # the first model call alone spends more
    llm.enqueue(tool_reply(tool_call("update_plan", PLAN)), text_reply("Never sent."))

    response = post(owner_client, session, "messages", {"content": "Build the report"}, run_tasks)

    assert response.status_code == 202, response.content
    body = payload_of(owner_client, session)
    assert body["status"] == "error"
    assert body["lastErrorCode"] == "ahentic_daily_token_limit"
    assert [s["status"] for s in body["plan"]["steps"]] == ["cancelled"] * 3
    assert len(main_usages(llm)) == 1
    # Nothing resumes while the limit holds.
    refused = post(owner_client, session, "continue")
    assert refused.status_code == 429
    assert refused.json()["code"] == "ahentic_daily_token_limit"


# --- cost --------------------------------------------------------------------------------------


def expected_cost(usage: dict, price: dict) -> Decimal:
    parts = (
        ("input", usage["input_tokens"]),
        ("output", usage["output_tokens"]),
        ("cache_write", usage["cache_creation_input_tokens"]),
        ("cache_read", usage["cache_read_input_tokens"]),
    )
    return sum((Decimal(str(price[k])) * n for k, n in parts), Decimal(0)) / 1_000_000


def run_two_steps(client, session, llm, run_tasks):
    llm.enqueue(tool_reply(tool_call("echo", {"text": "numbers"})), text_reply("Reported."))
    response = post(client, session, "messages", {"content": "Build the report"}, run_tasks)
    assert response.status_code == 202, response.content
    usages = main_usages(llm)
    # Both cache writes and cache reads are billed, each at its own rate.
    assert usages[0]["cache_creation_input_tokens"] > 0
    assert usages[1]["cache_read_input_tokens"] > 0
    return usages


def test_cost_prices_each_part_at_its_own_rate(owner_client, session, llm, run_tasks, settings):
    configure(settings, PRICES={ahentic_settings.MODEL: PRICE})

    usages = run_two_steps(owner_client, session, llm, run_tasks)

    records = list(UsageRecord.objects.filter(session=session).order_by("id"))
    expected = [expected_cost(u, PRICE) for u in usages]
    assert [r.model for r in records] == [ahentic_settings.MODEL] * 2
    for record, cost in zip(records, expected, strict=True):
        assert abs(record.cost_usd - cost) < Decimal("0.000001")
    total = sum(expected)
    body = payload_of(owner_client, session)
    assert body["costUsd"] == pytest.approx(float(total), abs=2e-6)
    assert body["tokensIn"] == sum(
        u["input_tokens"] + u["cache_read_input_tokens"] + u["cache_creation_input_tokens"]
        for u in usages
    )
    assert body["tokensOut"] == sum(u["output_tokens"] for u in usages)
    assert body["tokensUsed"] == body["tokensIn"] + body["tokensOut"]
    today = owner_client.get(f"{API}/stats/tokens?days=1").json()["series"][-1]
    assert today["costUsd"] == pytest.approx(float(total), abs=2e-6)
    assert today["in"] == body["tokensIn"]
    assert today["out"] == body["tokensOut"]
    assert today["cacheRead"] == sum(u["cache_read_input_tokens"] for u in usages)
    assert today["cacheWrite"] == sum(u["cache_creation_input_tokens"] for u in usages)
    assert today["total"] == body["tokensUsed"]


def test_brain_calls_are_priced_at_the_brain_models_rate(
    owner_client, session, llm, model_script, run_tasks, settings
):
    brain_price = {"input": 1, "output": 5, "cache_write": 1.25, "cache_read": 0.1}
    configure(
        settings,
        NAME_REFRESH_INTERVAL=2,
        PRICES={ahentic_settings.MODEL: PRICE, ahentic_settings.BRAIN_MODEL: brain_price},
    )
    model_script.main.append(text_reply("Reported."))
    model_script.brain = lambda body: text_reply("Report building")

    post(owner_client, session, "messages", {"content": "Build the report"}, run_tasks)

    step, named = UsageRecord.objects.filter(session=session).order_by("id")
    assert (step.purpose, named.purpose) == ("step", "brain")
    [brain_usage] = [
        entry["response"]["usage"] for entry in model_requests(llm, ahentic_settings.BRAIN_MODEL)
    ]
    assert abs(named.cost_usd - expected_cost(brain_usage, brain_price)) < Decimal("0.000001")
    body = payload_of(owner_client, session)
    assert body["title"] == "Report building"
    assert body["costUsd"] == pytest.approx(float(step.cost_usd + named.cost_usd), abs=2e-6)


def test_token_stats_count_only_the_users_own_calls(
    owner_client, other_client, session, llm, run_tasks
):
    run_two_steps(owner_client, session, llm, run_tasks)

    mine = owner_client.get(f"{API}/stats/tokens?days=1").json()["series"][-1]
    theirs = other_client.get(f"{API}/stats/tokens?days=1").json()["series"][-1]

    assert mine["total"] == payload_of(owner_client, session)["tokensUsed"]
    assert theirs["total"] == 0
    assert theirs["costUsd"] == 0


def test_a_model_without_a_price_has_no_cost(owner_client, session, llm, run_tasks, settings):
    configure(settings, PRICES={"some-other-model": PRICE})

    run_two_steps(owner_client, session, llm, run_tasks)

    assert [r.cost_usd for r in UsageRecord.objects.filter(session=session)] == [None, None]
    assert payload_of(owner_client, session)["costUsd"] is None
    today = owner_client.get(f"{API}/stats/tokens?days=1").json()["series"][-1]
    assert today["costUsd"] is None
    assert today["total"] > 0
