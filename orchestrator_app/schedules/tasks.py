"""django-q2 entry points of scheduled runs: thin and idempotent."""

from __future__ import annotations

from datetime import datetime

from . import services as schedules


def schedule_tick(now: str | None = None) -> int:
    """The ``ahentic_schedule_tick`` schedule, every minute: settle ended scheduled runs and
    fire the schedules that came due. ``now`` (ISO 8601, aware) stands for the clock."""
    return schedules.tick(datetime.fromisoformat(now) if now else None)
