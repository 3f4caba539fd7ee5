"""Scheduled runs: the schedules staff set up and the log of each firing."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models

# --- scheduled runs (orchestrator_app/schedules/services.py) -----------------------------------


def validate_cron(value: str) -> None:
    """Five cron fields (minute granularity), as ``croniter`` reads them."""
    from croniter import CroniterError, croniter

    if len(value.split()) != 5 or not croniter.is_valid(value):
        raise ValidationError(
            f"{value!r} is not a cron expression of five fields (minute hour day month weekday), "
            'e.g. "0 7 * * 1-5".',
            code="ahentic_schedule_cron",
        )
    try:  # "0 0 30 2 *" parses but never comes due
        croniter(value, datetime(2000, 1, 1)).get_next(datetime)
    except CroniterError:
        raise ValidationError(f"{value!r} never comes due.", code="ahentic_schedule_cron") from None


def validate_time_zone(value: str) -> None:
    """An IANA time zone name ``zoneinfo`` knows (``Europe/Berlin``, ``UTC``)."""
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValidationError(
            f"{value!r} is not an IANA time zone name (e.g. Europe/Berlin).",
            code="ahentic_schedule_time_zone",
        ) from None


class Schedule(models.Model):
    """A run the site starts by itself: ``first_message`` posted as ``run_as`` to the agent
    whenever ``cron`` comes due in ``time_zone`` (``orchestrator_app.schedules.services``, the
    one writer of this model and of ``ScheduleRun``)."""

    class ChatMode(models.TextChoices):
        NEW = "new", "A new chat each firing"
        CONTINUE = "continue", "Continue one chat"

    name = models.CharField(max_length=128)
    # SET_NULL, not CASCADE: a removed agent leaves the schedule, which fails, says why and
    # pauses itself instead of vanishing.
    agent = models.ForeignKey(
        "sessions_app.Agent", null=True, on_delete=models.SET_NULL, related_name="schedules"
    )
    agent_version = models.ForeignKey(
        "sessions_app.AgentVersion",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="schedules",
        help_text="Pin a version of the agent; empty: its latest version at each firing.",
    )
    run_as = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="agent_schedules",
        help_text="The user the run acts for: the chat is theirs, and so are its permissions.",
    )
    cron = models.CharField(
        max_length=100,
        validators=[validate_cron],
        help_text='Five fields: minute hour day month weekday, e.g. "0 7 * * 1-5".',
    )
    time_zone = models.CharField(
        max_length=64,
        default="UTC",
        validators=[validate_time_zone],
        help_text="An IANA name (Europe/Berlin): the cron expression is wall-clock time there.",
    )
    first_message = models.TextField(help_text="The message each firing posts.")
    chat_mode = models.CharField(max_length=8, choices=ChatMode.choices, default=ChatMode.NEW)
    # The chat "continue one chat" posts to (kept by the first firing).
    chat = models.ForeignKey(
        "sessions_app.Session",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    spend_cap_usd = models.DecimalField(
        max_digits=12,
        decimal_places=4,
        null=True,
        blank=True,
        help_text="The cap in USD of the chats it makes, over the agent's SPEND_CAP_USD.",
    )
    paused = models.BooleanField(default=False)
    paused_reason = models.CharField(max_length=255, blank=True, default="")
    consecutive_failures = models.PositiveIntegerField(default=0)
    # The earliest due time that may still fire (UTC): the tick's index; moved past "now" by
    # every tick, pause and unpause, so nothing before it ever fires (no backfill).
    next_due_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name", "pk"]
        indexes = [
            # The tick: active schedules that came due.
            models.Index(fields=["paused", "next_due_at"], name="ahentic_schedule_due"),
        ]

    def __str__(self) -> str:
        return self.name


class ScheduleRun(models.Model):
    """One due time of a schedule: the run it started and how it ended. Its insert is the
    claim of the due time: the unique (schedule, due_at) lets one cluster fire it, whatever
    number of clusters tick at once."""

    class Status(models.TextChoices):
        RUNNING = "running"
        AWAITING_HUMAN = "awaiting_human"
        DONE = "done"
        FAILED = "failed"
        CANCELLED = "cancelled"
        SKIPPED = "skipped"

    # Rows the tick still watches for their run's end.
    OPEN = (Status.RUNNING, Status.AWAITING_HUMAN)

    schedule = models.ForeignKey(Schedule, on_delete=models.CASCADE, related_name="runs")
    due_at = models.DateTimeField()
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    session = models.ForeignKey(
        "sessions_app.Session",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="schedule_runs",
    )
    # The session's run number this firing started (its ledger rows carry it: the cost).
    run = models.PositiveIntegerField(default=0)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.RUNNING)
    cost_usd = models.DecimalField(max_digits=14, decimal_places=6, null=True, blank=True)
    error_code = models.CharField(max_length=64, blank=True, default="")
    error = models.TextField(blank=True, default="")
    # Run now (staff) rather than the cron expression.
    manual = models.BooleanField(default=False)

    class Meta:
        ordering = ["-due_at"]
        constraints = [
            models.UniqueConstraint(fields=["schedule", "due_at"], name="ahentic_schedule_run_once")
        ]
        indexes = [
            # The tick's settle pass: rows whose run has not ended yet.
            models.Index(fields=["status"], name="ahentic_schedule_run_status"),
        ]

    def __str__(self) -> str:
        return f"{self.schedule} at {self.due_at:%Y-%m-%d %H:%M} UTC: {self.status}"
