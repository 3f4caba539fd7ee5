"""Spend over time, from the ledger: the numbers behind the admin's spend chart.

``spend_report`` sums ``UsageRecord`` cost, tokens and calls per day (the site's time zone, as
the daily limit counts them) and per value of one dimension, the top ones by cost kept and the
rest summed as "other"; beside it, the site's tokens per day (``DailyUsage``, what
``DAILY_TOKEN_LIMIT`` is checked against). Two queries whatever the number of records.

A dimension is a name and an ORM path from ``UsageRecord`` to what a row is grouped by
(``DIMENSIONS``): one line adds another.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import Count, F, OuterRef, Subquery, Sum
from django.db.models.functions import TruncDate
from django.utils import timezone

from sessions_app.conf import ahentic_settings

from ..models import DailyUsage, UsageRecord

PERIODS = (7, 30, 90)  # days a report may cover
TOP = 5  # values of the dimension shown on their own; the rest is "other"
OTHER = "other"


@dataclass(frozen=True)
class Dimension:
    label: str
    # ORM path from UsageRecord to the value rows are grouped by; "{username}" is the user
    # model's USERNAME_FIELD (read when the report runs, not at import). Or a function
    # returning the expression, for a value a plain path would count twice.
    path: str | Callable[[], Any]
    none: str  # what rows without a value are called
    # ORM path to what people read for a value, when not the value itself (an agent's name
    # for its slug); read in the same query, one name per value.
    name_path: str | None = None


def schedule_of_chat() -> Subquery:
    """The name of the schedule whose runs the record's chat holds. A chat belongs to one
    schedule at most, but a "continue one chat" schedule logs many runs in it: a join through
    the run log would count each of its records once per run."""
    from ..models import ScheduleRun

    runs = ScheduleRun.objects.filter(session=OuterRef("session")).values("schedule__name")
    return Subquery(runs[:1])


def _names(found: dict[str, str]) -> dict[str, str]:
    """{value: name}, a name that more than one value has followed by its value."""
    taken = Counter(found.values())
    return {key: name if taken[name] == 1 else f"{name} ({key})" for key, name in found.items()}


DIMENSIONS: dict[str, Dimension] = {
    "agent": Dimension(
        "Agent",
        "session__agent_version__agent__slug",
        "(no agent)",
        name_path="session__agent_version__agent__name",
    ),
    "user": Dimension("User", "user__{username}", "(no user)"),
    "schedule": Dimension("Schedule", schedule_of_chat, "(not scheduled)"),
}


@dataclass
class Series:
    name: str
    cost: dict[date, Decimal] = field(default_factory=dict)
    tokens: int = 0
    calls: int = 0

    @property
    def total(self) -> Decimal:
        return sum(self.cost.values(), Decimal(0))


@dataclass
class Report:
    days: list[date]
    dimension: Dimension
    series: list[Series]  # the top values by cost, then "other" when there is more
    site_tokens: dict[date, int]  # every call of the site per day (DailyUsage)
    daily_limit: int | None  # DAILY_TOKEN_LIMIT (None: no limit)

    def day_cost(self, day: date) -> Decimal:
        return sum((s.cost.get(day, Decimal(0)) for s in self.series), Decimal(0))

    @property
    def total(self) -> Decimal:
        return sum((s.total for s in self.series), Decimal(0))

    @property
    def tokens(self) -> int:
        return sum(s.tokens for s in self.series)

    @property
    def calls(self) -> int:
        return sum(s.calls for s in self.series)


def spend_report(*, days: int = 30, by: str = "agent", top: int = TOP) -> Report:
    """The last ``days`` days (today included) of spend per day by ``DIMENSIONS[by]``."""
    dimension = DIMENSIONS[by]
    today = timezone.localdate()
    first = today - timedelta(days=days - 1)
    since = timezone.make_aware(datetime.combine(first, time.min))
    if callable(dimension.path):
        key = dimension.path()
    else:
        key = F(dimension.path.format(username=get_user_model().USERNAME_FIELD))
    tokens = F("input_tokens") + F("output_tokens") + F("cache_read_tokens")
    grouped = {"day": TruncDate("created_at"), "key": key}
    if dimension.name_path:  # one name per value: grouping by both groups as by the value
        grouped["name"] = F(dimension.name_path)
    rows = (
        UsageRecord.objects.filter(created_at__gte=since)
        .annotate(**grouped)
        .values(*grouped)
        .annotate(
            cost=Sum("cost_usd"),
            tokens=Sum(tokens + F("cache_write_tokens")),
            calls=Count("id"),
        )
        .order_by()  # the model's ordering would be grouped by too
    )
    rows = list(rows)
    names = _names(
        {str(e["key"]): e["name"] for e in rows if e["key"] is not None and e.get("name")}
    )
    by_key: dict[str, Series] = {}
    for entry in rows:
        key = str(entry["key"]) if entry["key"] is not None else None
        name = dimension.none if key is None else names.get(key, key)
        series = by_key.setdefault(name, Series(name))
        day_cost = series.cost.get(entry["day"], Decimal(0))
        series.cost[entry["day"]] = day_cost + (entry["cost"] or Decimal(0))
        series.tokens += entry["tokens"] or 0
        series.calls += entry["calls"]
    ranked = sorted(by_key.values(), key=lambda s: (-s.total, -s.tokens, s.name))
    if len(ranked) > top:
        other = Series(OTHER)
        for series in ranked[top:]:
            for day, cost in series.cost.items():
                other.cost[day] = other.cost.get(day, Decimal(0)) + cost
            other.tokens += series.tokens
            other.calls += series.calls
        ranked = [*ranked[:top], other]
    site_tokens: dict[date, int] = defaultdict(int)
    for day, count in DailyUsage.objects.filter(day__gte=first).values_list("day", "tokens"):
        site_tokens[day] = count
    limit = ahentic_settings.DAILY_TOKEN_LIMIT
    return Report(
        days=[first + timedelta(days=n) for n in range(days)],
        dimension=dimension,
        series=ranked,
        site_tokens=dict(site_tokens),
        daily_limit=int(limit) if limit else None,
    )
