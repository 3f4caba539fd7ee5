"""The token ledger: one UsageRecord per model call, session counters, cost and the daily limit.

Token arithmetic: ``tokensIn`` = input + cache read + cache write (everything the model read),
``tokensOut`` = output, ``tokensUsed`` = in + out. Cost prices each part at its own rate.
"""

from __future__ import annotations

from decimal import Decimal

from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from sessions_app import plainsql, runstate
from sessions_app.conf import ahentic_settings
from sessions_app.models import Session

from . import llm
from .models import DailyUsage, UsageRecord


def usage_cost(
    model: str, *, input_tokens: int, output_tokens: int, cache_read: int, cache_write: int
):
    """USD cost from ``PRICES`` (per million tokens), or None when the model has no price."""
    price = (ahentic_settings.PRICES or {}).get(model)
    if not price:
        return None
    million = Decimal(1_000_000)
    return (
        Decimal(str(price["input"])) * input_tokens
        + Decimal(str(price["output"])) * output_tokens
        + Decimal(str(price["cache_read"])) * cache_read
        + Decimal(str(price["cache_write"])) * cache_write
    ) / million


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
) -> UsageRecord:
    """One ledger row per model call; the session counters are its running sum."""
    cost = usage_cost(
        model,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cache_read=cache_read_tokens,
        cache_write=cache_write_tokens,
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
        cost_usd=cost,
        duration_ms=duration_ms,
        stop_reason=stop_reason,
        created_at=timezone.now(),
    )
    with transaction.atomic(savepoint=False):
        plainsql.insert_new([record])  # every step writes one (see sessions_app.plainsql)
        _daily_add(input_tokens + output_tokens + cache_read_tokens + cache_write_tokens)
        runstate.usage_add(
            session_id=session_id,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cache_read_tokens=cache_read_tokens,
            cache_write_tokens=cache_write_tokens,
            cost=cost,
            step_count=step_count,
        )
    return record


def usage_record_call(
    *,
    session: Session,
    run: int,
    purpose: str,
    result: llm.LLMResult,
    step_count: int | None = None,
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
    )


def _daily_add(tokens: int) -> None:
    """Add to today's counter (one UPDATE; the day's first call inserts the row)."""
    today = timezone.localdate()
    connection = plainsql.connection_for(DailyUsage, write=True)
    day = plainsql.param(DailyUsage, "day", today, connection)
    add = "UPDATE {table} SET {tokens} = {tokens} + %s WHERE {day} = %s"
    if plainsql.execute(DailyUsage, add, [tokens, day]):  # plain SQL: every step adds
        return
    try:
        with transaction.atomic():
            DailyUsage.objects.create(day=today, tokens=tokens)
    except IntegrityError:  # another worker inserted it first
        DailyUsage.objects.filter(day=today).update(tokens=F("tokens") + tokens)


def daily_tokens_used() -> int:
    """Tokens the site used today (the site's day, the same days GET stats/tokens reports).
    Every step reads it (plain SQL, see ``sessions_app.plainsql``)."""
    connection = plainsql.connection_for(DailyUsage)
    rows = plainsql.select(
        DailyUsage,
        ("tokens",),
        "SELECT {tokens} FROM {table} WHERE {day} = %s",
        [plainsql.param(DailyUsage, "day", timezone.localdate(), connection)],
    )
    return rows[0][0] if rows else 0


def daily_limit_reached() -> bool:
    limit = ahentic_settings.DAILY_TOKEN_LIMIT
    return bool(limit) and daily_tokens_used() >= int(limit)
