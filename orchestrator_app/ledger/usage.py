"""The token ledger: one UsageRecord per model call, session counters, cost and the daily limit.

Token arithmetic: ``tokensIn`` = input + cache read + cache write (everything the model read),
``tokensOut`` = output, ``tokensUsed`` = in + out. Cost prices each part at its own rate.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.db import IntegrityError
from django.db.models import F, Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone

from sessions_app import db, runstate
from sessions_app.conf import ahentic_settings, model_prices
from sessions_app.models import Session

from .. import llm
from ..models import DailyUsage, UsageRecord


def usage_cost(
    model: str,
    *,
    input_tokens: int,
    output_tokens: int,
    cache_read: int,
    cache_write: int,
    web_searches: int = 0,
):
    """USD cost from ``PRICES`` (per million tokens) plus ``WEB_SEARCH_PRICE_PER_1000`` per
    search, or None when the model has no price. (Thinking is billed as output tokens; web
    fetch costs only the tokens of what it fetched.)"""
    price = model_prices(model)
    if not price:
        return None
    million = Decimal(1_000_000)
    searches = Decimal(str(ahentic_settings.WEB_SEARCH_PRICE_PER_1000 or 0)) * web_searches
    return (
        Decimal(str(price["input"])) * input_tokens
        + Decimal(str(price["output"])) * output_tokens
        + Decimal(str(price["cache_read"])) * cache_read
        + Decimal(str(price["cache_write"])) * cache_write
    ) / million + searches / 1000


def usd(amount) -> str:
    """An amount in USD as people write it: "$5.00", "$0.015", "$1,200.50"."""
    text = f"{Decimal(str(amount)):,.4f}".rstrip("0")
    whole, _, cents = text.partition(".")
    return f"${whole}.{cents.ljust(2, '0')}"


def usage_record(
    *,
    session_id,
    user_id,
    run: int,
    model: str,
    purpose: str,
    input_tokens: int,
    output_tokens: int,
    cache_read_tokens: int,
    cache_write_tokens: int,
    duration_ms: int,
    stop_reason: str = "",
    step_count: int | None = None,
    add_to_session: bool = True,
    web_search_requests: int = 0,
    web_fetch_requests: int = 0,
) -> UsageRecord:
    """One ledger row per model call; the session counters are its running sum
    (``add_to_session``; else the caller writes ``session_sums(record)`` itself, with the turn
    the call produced)."""
    cost = usage_cost(
        model,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cache_read=cache_read_tokens,
        cache_write=cache_write_tokens,
        web_searches=web_search_requests,
    )
    record = UsageRecord(
        session_id=session_id,
        user_id=user_id,
        run=run,
        model=model,
        purpose=purpose,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cache_read_tokens=cache_read_tokens,
        cache_write_tokens=cache_write_tokens,
        web_search_requests=web_search_requests,
        web_fetch_requests=web_fetch_requests,
        cost_usd=cost,
        duration_ms=duration_ms,
        stop_reason=stop_reason,
        created_at=timezone.now(),
    )
    with db.atomic(savepoint=False):
        record.save(force_insert=True)
        _daily_add(input_tokens + output_tokens + cache_read_tokens + cache_write_tokens)
        if add_to_session:
            runstate.usage_add(session_id=session_id, **session_sums(record, step_count))
    return record


def session_sums(record: UsageRecord, step_count: int | None = None) -> dict[str, Any]:
    """``runstate.usage_sums``'s arguments for a ledger row."""
    return {
        "input_tokens": record.input_tokens,
        "output_tokens": record.output_tokens,
        "cache_read_tokens": record.cache_read_tokens,
        "cache_write_tokens": record.cache_write_tokens,
        "cost": record.cost_usd,
        "step_count": step_count,
    }


def usage_record_call(
    *,
    session: Session,
    run: int,
    purpose: str,
    result: llm.LLMResult,
    step_count: int | None = None,
    add_to_session: bool = True,
) -> UsageRecord:
    """Ledger row for one finished model call (and the step's number, when given)."""
    return usage_record(
        session_id=session.pk,
        user_id=session.owner_id,
        run=run,
        model=result.model,
        purpose=purpose,
        input_tokens=result.input_tokens,
        output_tokens=result.output_tokens,
        cache_read_tokens=result.cache_read_tokens,
        cache_write_tokens=result.cache_write_tokens,
        duration_ms=result.duration_ms,
        stop_reason=result.stop_reason,
        step_count=step_count,
        add_to_session=add_to_session,
        web_search_requests=result.web_search_requests,
        web_fetch_requests=result.web_fetch_requests,
    )


def _daily_add(tokens: int) -> None:
    """Add to today's counter (one UPDATE; the day's first call inserts the row)."""
    today = timezone.localdate()
    if DailyUsage.objects.filter(day=today).update(tokens=F("tokens") + tokens):
        return
    try:
        with db.atomic(DailyUsage):
            DailyUsage.objects.create(day=today, tokens=tokens)
    except IntegrityError:  # another worker inserted it first
        DailyUsage.objects.filter(day=today).update(tokens=F("tokens") + tokens)


def daily_tokens_used() -> int:
    """Tokens the site used today (the site's day, the same days GET stats/tokens reports)."""
    today = DailyUsage.objects.filter(day=timezone.localdate())
    return today.values_list("tokens", flat=True).first() or 0


def daily_tokens_annotation() -> dict[str, Any]:
    """``daily_tokens_used()`` as an annotation of another query (``daily_tokens``): a step
    reads it with its session."""
    today = DailyUsage.objects.filter(day=timezone.localdate()).values("tokens")[:1]
    return {"daily_tokens": Coalesce(Subquery(today), 0)}


def daily_limit_reached(used: int | None = None) -> bool:
    """Whether the site used its ``DAILY_TOKEN_LIMIT`` today (``used``: today's tokens when the
    caller read them already)."""
    limit = ahentic_settings.DAILY_TOKEN_LIMIT
    if not limit:
        return False
    return (daily_tokens_used() if used is None else used) >= int(limit)
