"""django-q2 entry points of the mails: thin, id-only, idempotent."""

from __future__ import annotations

from datetime import datetime

from . import services as notifications


def notify_approval(session_id: str, tool_use_id: str, now: datetime | None = None) -> bool:
    """A run's approval has waited NOTIFY_APPROVAL_AFTER_S: mail its owner if still unseen
    (a one-off schedule made when the approval was requested; ``now``: the time to judge the
    wait by, the current time when not given). Returns whether it mailed."""
    return notifications.approval_mail(session_id, tool_use_id, now=now)


def notify_schedule_run(**ended: str) -> bool:
    """A scheduled run ended: mail the owner of its chat, once per schedule run."""
    return notifications.schedule_run_mail(**ended)
