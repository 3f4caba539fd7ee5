"""django-q2 entry points: thin, id-only, idempotent."""

from __future__ import annotations

from datetime import datetime

from django.utils.dateparse import parse_datetime

from . import notifications
from .control import brain, history, runs, schedules
from .loop import files, step
from .webhooks import delivery


def run_step(session_id: str, run_seq: int, trace: dict[str, str] | None = None) -> None:
    """Run one step of a session's run. A redelivered or duplicate task returns quietly.
    ``trace``: the W3C trace context the step joins or links to (``control.queue``); a task
    queued without it runs all the same."""
    step.run_step(session_id, int(run_seq), trace=trace)


def recover() -> int:
    """The ``ahentic_recover`` sweep: re-enqueue running sessions whose worker is gone."""
    return runs.recover_stalled()


def schedule_tick(now: str | None = None) -> int:
    """The ``ahentic_schedule_tick`` schedule, every minute: settle ended scheduled runs and
    fire the schedules that came due. ``now`` (ISO 8601, aware) stands for the clock."""
    return schedules.tick(datetime.fromisoformat(now) if now else None)


def purge_deleted_chats(now: str | None = None) -> int:
    """Purge the chats deleted longer ago than ``HISTORY_UNDO_S`` (a one-off schedule made by
    each deletion). ``now`` (ISO 8601, aware) stands for the clock."""
    return history.purge_due(datetime.fromisoformat(now) if now else None)


def remember(session_id: str) -> None:
    """Summarize events that left the context window into memory snapshots."""
    brain.remember(session_id)


def name_session(session_id: str) -> None:
    """Let the brain model name the session (keeps a title the user set)."""
    brain.name_session(session_id)


def delete_file(file_id: str) -> None:
    """Delete a file uploaded to the Files API whose attachment was deleted (best effort)."""
    files.delete_remote(file_id)


def deliver_webhook(delivery_id: int, now: str | None = None) -> str:
    """One attempt of a webhook delivery (a duplicate or early task returns quietly). ``now``
    (ISO 8601) is a clock given to the sweep (tests), passed on so retries are scheduled from
    it; without it the task reads the time when it runs."""
    return delivery.deliver(int(delivery_id), now=parse_datetime(now) if now else None)


def deliver_due_webhooks(now: str | None = None) -> int:
    """The ``ahentic_webhooks`` sweep (every minute): enqueue the deliveries that are due.
    ``now`` (ISO 8601) replaces the clock, for tests."""
    return delivery.deliver_due(now=parse_datetime(now) if now else None)


def notify_approval(session_id: str, tool_use_id: str, now: datetime | None = None) -> bool:
    """A run's approval has waited NOTIFY_APPROVAL_AFTER_S: mail its owner if still unseen
    (a one-off schedule made when the approval was requested; ``now``: the time to judge the
    wait by, the current time when not given). Returns whether it mailed."""
    return notifications.approval_mail(session_id, tool_use_id, now=now)


def notify_schedule_run(**ended: str) -> bool:
    """A scheduled run ended: mail the owner of its chat, once per schedule run."""
    return notifications.schedule_run_mail(**ended)
