"""django-q2 entry points of outbound webhooks: thin, id-only, idempotent."""

from __future__ import annotations

from django.utils.dateparse import parse_datetime

from . import delivery


def deliver_webhook(delivery_id: int, now: str | None = None) -> str:
    """One attempt of a webhook delivery (a duplicate or early task returns quietly). ``now``
    (ISO 8601) is a clock given to the sweep (tests), passed on so retries are scheduled from
    it; without it the task reads the time when it runs."""
    return delivery.deliver(int(delivery_id), now=parse_datetime(now) if now else None)


def deliver_due_webhooks(now: str | None = None) -> int:
    """The ``ahentic_webhooks`` sweep (every minute): enqueue the deliveries that are due.
    ``now`` (ISO 8601) replaces the clock, for tests."""
    return delivery.deliver_due(now=parse_datetime(now) if now else None)
