"""The webhook services: every write to endpoints and deliveries goes through here.

An event makes one delivery row per active endpoint that wants it, and a django-q2 task per
row once the rows commit; the first attempt is that task. A failed attempt sets
``next_attempt_at`` (backoff: ``WEBHOOK_BACKOFF_S`` times 4 to the power of the attempts before
it) and the ``ahentic_webhooks`` sweep, every minute, enqueues the rows that are due: one
periodic task rather than a django-q2 ``Schedule`` per retry, so retries need no rows in
django-q2's tables and the sweep also finds an attempt whose worker died.

Two workers never send the same attempt: an attempt is claimed by a conditional update of the
row (its status and attempt count as read), which also pushes ``next_attempt_at`` past the
attempt's longest duration; the outcome is written only if the claim is still the row's latest.
No transaction is open during the HTTP request. Delivery is at least once, as the Standard
Webhooks spec expects: a receiver that answers slower than its claim (one that drips its answer
byte by byte, each read under the timeout) may get the message again, with the same
``webhook-id``.
"""

from __future__ import annotations

import json
import logging
import uuid
from datetime import datetime, timedelta
from typing import Any

from django.core.cache import cache
from django.db import transaction
from django.db.models import F
from django.utils import timezone
from django_q.tasks import async_task
from standardwebhooks.webhooks import Webhook

from sessions_app import db
from sessions_app.conf import ahentic_settings

from .. import telemetry, vault
from ..models import WebhookDelivery, WebhookEndpoint, WebhookEvent, new_webhook_secret
from . import transport

logger = logging.getLogger("ahentic.webhooks")

Status = WebhookDelivery.Status
RETRYABLE = (Status.PENDING, Status.FAILED)
# Extra seconds an attempt's claim lasts past its timeout before the sweep may take it again.
CLAIM_SLACK_S = 60
# The most due rows one sweep enqueues (the next sweep takes the rest).
SWEEP_BATCH = 500


# The longest wait between two attempts, whatever WEBHOOK_MAX_ATTEMPTS allows.
MAX_BACKOFF_S = 24 * 3600


def backoff(attempts: int) -> timedelta:
    """The wait after the ``attempts``-th failed attempt: 1, 4, 16, 64, 256 minutes... with the
    default ``WEBHOOK_BACKOFF_S`` of 60 (six attempts span about five and a half hours), at
    most a day."""
    base = float(ahentic_settings.WEBHOOK_BACKOFF_S)
    return timedelta(seconds=min(base * 4 ** min(attempts - 1, 30), MAX_BACKOFF_S))


# --- events in -------------------------------------------------------------------------------


def event_payload(event: str, data: dict[str, Any]) -> dict[str, Any]:
    """The body of every event: its type, when it happened, and ids and statuses."""
    return {"type": str(event), "timestamp": timezone.now().isoformat(), "data": data}


# Which active endpoint wants which event, kept in the default cache so that a step's signals
# cost no query (``events.subscribers`` reads it). Every write of an endpoint's ``active`` or
# ``events`` drops it (``subscribers_changed``: the services below, and post_save/post_delete
# for the admin's saves); another process's cache (a per-process LocMemCache) may lag by up to
# the lifetime.
SUBSCRIBERS_CACHE_KEY = "ahentic:webhook-subscribers"
SUBSCRIBERS_TTL_S = 30


def subscribers_changed(**kwargs: Any) -> None:
    """Drop the cached subscriptions (now and again when the transaction commits)."""
    cache.delete(SUBSCRIBERS_CACHE_KEY)
    transaction.on_commit(lambda: cache.delete(SUBSCRIBERS_CACHE_KEY))


def enqueue_event(*, event: str, data: dict[str, Any], endpoint_ids: list[int]) -> int:
    """A delivery row of ``event`` for each endpoint of ``endpoint_ids`` (those subscribed to
    it: ``events.subscribers``), each delivered by a task once the rows commit. Returns the
    number of rows."""
    endpoints = [WebhookEndpoint(pk=pk) for pk in endpoint_ids]
    if not endpoints:
        return 0
    payload = event_payload(event, data)
    return len(create_deliveries(endpoints, event=event, payload=payload))


def create_deliveries(
    endpoints: list[WebhookEndpoint], *, event: str, payload: dict[str, Any]
) -> list[WebhookDelivery]:
    now = timezone.now()
    rows = [
        WebhookDelivery(
            endpoint=endpoint,
            event=event,
            webhook_id=f"msg_{uuid.uuid4().hex}",
            payload=payload,
            next_attempt_at=now,
        )
        for endpoint in endpoints
    ]
    with db.atomic(WebhookDelivery):
        WebhookDelivery.objects.bulk_create(rows)
        # bulk_create sets primary keys on PostgreSQL, SQLite and MariaDB (one query less in
        # the step that sent the event); on MySQL they are read back.
        ids = [r.pk for r in rows]
        if None in ids:
            ids = list(
                db.primary(WebhookDelivery)
                .filter(webhook_id__in=[r.webhook_id for r in rows])
                .values_list("pk", flat=True)
            )
        for pk in ids:
            enqueue_attempt(pk)
    return rows


def enqueue_attempt(delivery_id: int, now: datetime | None = None) -> None:
    """Enqueue ``deliver_webhook`` for a delivery once the current transaction commits, on the
    ``WEBHOOK_CLUSTER`` queue when one is set (the site's own cluster otherwise)."""
    args: tuple = (delivery_id,) if now is None else (delivery_id, now.isoformat())
    options = {"ack_failure": True, "save": False}
    cluster = ahentic_settings.WEBHOOK_CLUSTER
    if cluster:
        options["cluster"] = str(cluster)
    db.on_commit(
        lambda: async_task(
            "orchestrator_app.webhooks.tasks.deliver_webhook",
            *args,
            group="ahentic_webhooks",
            q_options=options,
        ),
        WebhookDelivery,
    )


# --- one attempt -----------------------------------------------------------------------------


def signing_secret(endpoint: WebhookEndpoint) -> str:
    """The endpoint's secret, decrypted (``vault.VaultError`` when no key opens it)."""
    return vault.unseal(endpoint.secret)


def signed_headers(endpoint: WebhookEndpoint, delivery: WebhookDelivery, body: str):
    """The Standard Webhooks headers, signed at the time of sending (receivers reject a
    timestamp more than a few minutes off their clock) with the decrypted secret."""
    sent_at = timezone.now()
    secret = signing_secret(endpoint)
    return {
        "webhook-id": delivery.webhook_id,
        "webhook-timestamp": str(int(sent_at.timestamp())),
        "webhook-signature": Webhook(secret).sign(delivery.webhook_id, sent_at, body),
    }


def body_of(delivery: WebhookDelivery) -> str:
    # The same bytes on every attempt, so a receiver may compare retried bodies.
    return json.dumps(delivery.payload, separators=(",", ":"), sort_keys=True)


def deliver(delivery_id: int, *, now: datetime | None = None) -> str:
    """Make the delivery's next attempt if it is due and its endpoint active. ``now`` is the
    clock retries are scheduled by (the signature's timestamp is always the real time).

    Returns what happened: ``delivered``, ``failed`` (a retry is scheduled), ``gave_up``, or
    ``skipped`` (gone, finished, not due, endpoint inactive, or claimed by another worker)."""
    now = now or timezone.now()
    row = (
        WebhookDelivery.objects.select_related("endpoint")
        .filter(pk=delivery_id, status__in=RETRYABLE, endpoint__active=True)
        .first()
    )
    if row is None or (row.next_attempt_at is not None and row.next_attempt_at > now):
        return "skipped"
    attempt = row.attempts + 1
    timeout = float(ahentic_settings.WEBHOOK_TIMEOUT_S)
    claimed = WebhookDelivery.objects.filter(
        pk=row.pk, status=row.status, attempts=row.attempts
    ).update(
        attempts=attempt,
        next_attempt_at=now + timedelta(seconds=timeout + CLAIM_SLACK_S),
        updated_at=now,
    )
    if not claimed:
        return "skipped"  # another worker took this attempt
    with telemetry.webhook_span(row.event, row.endpoint_id, attempt) as outcome:
        done = attempt_post(row, attempt, now, timeout)
        outcome(done, "" if done == "delivered" else f"ahentic_webhook_{done}")
        return done


def attempt_post(row: WebhookDelivery, attempt: int, now: datetime, timeout: float) -> str:
    """POST the claimed attempt and record its outcome (``deliver``)."""
    endpoint = row.endpoint
    body = body_of(row)
    try:
        headers = signed_headers(endpoint, row, body)
    except vault.VaultError:
        # Retried: the attempt succeeds once the key that sealed the secret is back.
        return record_failure(
            row, attempt, now, error="The signing secret cannot be decrypted with VAULT_KEYS."
        )
    try:
        answer = transport.post(
            endpoint.url,
            body.encode(),
            headers,
            timeout=timeout,
            allow_private=bool(ahentic_settings.WEBHOOK_ALLOW_PRIVATE),
        )
    except transport.DeliveryError as exc:
        return record_failure(row, attempt, now, error=exc.message, permanent=exc.permanent)
    if 200 <= answer.status < 300:
        return record_success(row, attempt, now, status_code=answer.status)
    error = f"HTTP {answer.status}" + (f": {answer.body}" if answer.body.strip() else "")
    if 300 <= answer.status < 400:
        error = f"HTTP {answer.status}: redirects are not followed."
    return record_failure(row, attempt, now, error=error, status_code=answer.status)


def record_success(row: WebhookDelivery, attempt: int, now: datetime, *, status_code: int) -> str:
    WebhookDelivery.objects.filter(pk=row.pk, attempts=attempt, status__in=RETRYABLE).update(
        status=Status.DELIVERED,
        last_status_code=status_code,
        last_error="",
        next_attempt_at=None,
        delivered_at=now,
        updated_at=now,
    )
    WebhookEndpoint.objects.filter(pk=row.endpoint_id, consecutive_failures__gt=0).update(
        consecutive_failures=0
    )
    return "delivered"


def record_failure(
    row: WebhookDelivery,
    attempt: int,
    now: datetime,
    *,
    error: str,
    status_code: int | None = None,
    permanent: bool = False,
) -> str:
    gives_up = permanent or attempt >= int(ahentic_settings.WEBHOOK_MAX_ATTEMPTS)
    logger.info(
        "Webhook %s to endpoint %s, attempt %s failed: %s",
        row.webhook_id,
        row.endpoint_id,
        attempt,
        error,
    )
    updated = WebhookDelivery.objects.filter(
        pk=row.pk, attempts=attempt, status__in=RETRYABLE
    ).update(
        status=Status.GAVE_UP if gives_up else Status.FAILED,
        last_status_code=status_code,
        last_error=error[:500],
        next_attempt_at=None if gives_up else now + backoff(attempt),
        updated_at=now,
    )
    if updated and gives_up:
        endpoint_failed(row.endpoint_id, now=now, error=error)
    return "gave_up" if gives_up else "failed"


def endpoint_failed(endpoint_id: int, *, now: datetime, error: str) -> None:
    """Count a delivery that gave up; disable the endpoint at ``WEBHOOK_DISABLE_AFTER``."""
    WebhookEndpoint.objects.filter(pk=endpoint_id).update(
        consecutive_failures=F("consecutive_failures") + 1
    )
    limit = int(ahentic_settings.WEBHOOK_DISABLE_AFTER)
    if limit <= 0:
        return
    reason = (
        f"Disabled automatically on {now:%Y-%m-%d %H:%M} UTC: {limit} deliveries in a row "
        f"gave up (last error: {error})"
    )[:300]
    disabled = WebhookEndpoint.objects.filter(
        pk=endpoint_id, active=True, consecutive_failures__gte=limit
    ).update(active=False, disabled_reason=reason, updated_at=now)
    if disabled:
        subscribers_changed()
        logger.warning("Webhook endpoint %s disabled: %s", endpoint_id, reason)


# --- the sweep -------------------------------------------------------------------------------


def deliver_due(*, now: datetime | None = None) -> int:
    """Enqueue an attempt for every delivery that is due (retries, and attempts whose worker
    died), and drop finished deliveries older than ``WEBHOOK_LOG_DAYS``. Returns how many were
    enqueued."""
    clock = now or timezone.now()
    due = list(
        WebhookDelivery.objects.filter(
            status__in=RETRYABLE, next_attempt_at__lte=clock, endpoint__active=True
        )
        .order_by("next_attempt_at")
        .values_list("pk", flat=True)[:SWEEP_BATCH]
    )
    for pk in due:
        # A given ``now`` (tests) goes with the task; otherwise the task reads its own clock
        # when it runs, which may be a while after this sweep when the queue is busy.
        enqueue_attempt(pk, now)
    days = ahentic_settings.WEBHOOK_LOG_DAYS
    if days:
        WebhookDelivery.objects.filter(
            status__in=(Status.DELIVERED, Status.GAVE_UP),
            created_at__lt=clock - timedelta(days=int(days)),
        ).delete()
    return len(due)


# --- the admin's verbs -----------------------------------------------------------------------


def retry_now(*, delivery_id: int) -> bool:
    """One more attempt now for a delivery that failed or gave up (a delivery that gave up
    gives up again if this attempt fails). False when it was delivered or its endpoint is
    disabled."""
    now = timezone.now()
    updated = WebhookDelivery.objects.filter(
        pk=delivery_id,
        status__in=(Status.PENDING, Status.FAILED, Status.GAVE_UP),
        endpoint__active=True,
    ).update(status=Status.FAILED, next_attempt_at=now, updated_at=now)
    if updated:
        enqueue_attempt(delivery_id)
    return bool(updated)


def send_test_event(*, endpoint_id: int) -> bool:
    """A ``webhook.test`` delivery to an active endpoint, whatever it subscribes to."""
    endpoint = WebhookEndpoint.objects.filter(pk=endpoint_id, active=True).first()
    if endpoint is None:
        return False
    event = WebhookEvent.TEST
    create_deliveries(
        [endpoint], event=event, payload=event_payload(event, {"endpoint": endpoint.pk})
    )
    return True


def endpoint_enable(*, endpoint_id: int) -> bool:
    """Re-enable an endpoint: its failure count and disabled reason are cleared. Retries it had
    pending resume with the next sweep."""
    updated = WebhookEndpoint.objects.filter(pk=endpoint_id).update(
        active=True, disabled_reason="", consecutive_failures=0, updated_at=timezone.now()
    )
    subscribers_changed()
    return bool(updated)


def endpoint_disable(*, endpoint_id: int, reason: str) -> bool:
    """Disable an endpoint by hand: nothing is sent to it until it is re-enabled."""
    updated = WebhookEndpoint.objects.filter(pk=endpoint_id).update(
        active=False, disabled_reason=reason[:300], updated_at=timezone.now()
    )
    subscribers_changed()
    return bool(updated)


def endpoint_create(
    *, name: str, url: str, events: list[str], active: bool = True
) -> tuple[WebhookEndpoint, str]:
    """A new endpoint with a new secret, stored encrypted; returns it and the secret, to show
    this once. ``vault.VaultError`` without ``VAULT_KEYS``."""
    secret = new_webhook_secret()
    endpoint = WebhookEndpoint.objects.create(
        name=name, url=url, events=events, active=active, secret=vault.seal(secret)
    )  # post_save drops the cached subscriptions
    return endpoint, secret


def secret_rotate(*, endpoint_id: int) -> str | None:
    """A new secret for the endpoint (the old one stops signing at once), stored encrypted; the
    new one, to show this once. ``vault.VaultError`` without ``VAULT_KEYS``."""
    secret = new_webhook_secret()
    updated = WebhookEndpoint.objects.filter(pk=endpoint_id).update(
        secret=vault.seal(secret), updated_at=timezone.now()
    )
    return secret if updated else None
