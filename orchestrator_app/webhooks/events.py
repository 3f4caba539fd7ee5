"""The public signals as webhook events: their names, their thin payloads, the receivers.

A payload carries the event type, when it happened, and ids and statuses only, never content
(no messages, tool inputs or error texts): the receiver fetches what it needs through the API.

    {"type": "run.finished", "timestamp": "2026-12-03T09:30:00.123456+00:00",
     "data": {"session": "<uuid>", "run": 3, "outcome": "idle", "error_code": ""}}
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.core.cache import cache
from django.db.models.signals import post_delete, post_save
from django.dispatch import Signal

from .. import signals
from ..models import WebhookEndpoint, WebhookEvent
from . import delivery

# Event type -> (the signal, the keyword arguments of the signal copied into "data").
# ``session`` is always there, as the session's id; a model instance among the others (the
# schedule, its run log row) is sent as its primary key.
EVENTS: dict[str, tuple[Signal, tuple[str, ...]]] = {
    WebhookEvent.RUN_STARTED: (signals.run_started, ("run",)),
    WebhookEvent.RUN_FINISHED: (signals.run_finished, ("run", "outcome", "error_code")),
    WebhookEvent.RUN_FAILED: (signals.run_failed, ("run", "error_code", "resumable")),
    WebhookEvent.APPROVAL_REQUESTED: (
        signals.approval_requested,
        ("run", "tool", "tool_use_id"),
    ),
    WebhookEvent.TOOL_EXECUTED: (
        signals.tool_executed,
        ("run", "tool", "tool_use_id", "is_error"),
    ),
    WebhookEvent.SCHEDULE_RUN_FINISHED: (
        signals.schedule_run_finished,
        ("schedule", "schedule_run", "status"),
    ),
}

# What an endpoint may subscribe to (webhook.test is sent from the admin, never subscribed).
SUBSCRIBABLE = [(str(value), label) for value, label in WebhookEvent.choices if value in EVENTS]


def thin(value: Any) -> Any:
    """A signal argument as JSON: a model instance as its primary key, an id as a string."""
    if hasattr(value, "pk"):
        value = value.pk
    if isinstance(value, bool | int | float | str) or value is None:
        return value
    return str(value)  # a UUID


def subscribers(event: str) -> list[int]:
    """The ids of the active endpoints subscribed to ``event``, from the default cache (one
    query when it holds none; ``delivery.subscribers_changed`` drops it): a run's signal with
    no endpoint to deliver to is answered here, without entering the delivery services."""
    table = cache.get(delivery.SUBSCRIBERS_CACHE_KEY)
    if table is None:
        table = list(WebhookEndpoint.objects.filter(active=True).values_list("pk", "events"))
        cache.set(delivery.SUBSCRIBERS_CACHE_KEY, table, delivery.SUBSCRIBERS_TTL_S)
    return [pk for pk, events in table if event in (events or [])]


def receiver_for(event: str, keys: tuple[str, ...]) -> Callable[..., None]:
    def receive(session_id, **kwargs) -> None:
        endpoint_ids = subscribers(event)
        if not endpoint_ids:
            return
        data = {"session": thin(session_id)}
        data.update({key: thin(kwargs[key]) for key in keys if key in kwargs})
        delivery.enqueue_event(event=event, data=data, endpoint_ids=endpoint_ids)

    receive.__name__ = f"webhook_{event.replace('.', '_')}"
    return receive


_RECEIVERS = {event: receiver_for(event, keys) for event, (_, keys) in EVENTS.items()}


def connect() -> None:
    """Hear each public signal (``apps.ready``) by the session's key: a payload carries ids
    only, so the session's row is not read for a webhook. The receivers only write delivery
    rows and enqueue their tasks: a run never waits on a webhook."""
    for event, (signal, _) in EVENTS.items():
        signals.on_session_key(signal, _RECEIVERS[event])
    # An endpoint saved or deleted (the admin, host code) changes who gets which event.
    for model_signal in (post_save, post_delete):
        model_signal.connect(
            delivery.subscribers_changed,
            sender=WebhookEndpoint,
            dispatch_uid=f"ahentic_webhook_subscribers_{model_signal is post_save}",
        )
