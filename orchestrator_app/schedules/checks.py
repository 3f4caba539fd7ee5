"""Scheduled runs' system checks."""

from __future__ import annotations

from django.core.checks import Error, Tags, Warning, register

from sessions_app.conf import ahentic_settings

from ..checks import at_least


@register()
def check_schedules(app_configs=None, **kwargs):
    """Scheduled runs (``control.schedules``): E025 ``SCHEDULE_GRACE_S`` under a minute (a
    tick runs once a minute, so due times would be missed), E026 ``SCHEDULE_MAX_FAILURES`` not
    a positive whole number. The stored schedules: ``check_schedule_rows``."""
    messages = []
    grace = ahentic_settings.SCHEDULE_GRACE_S
    if not at_least(grace, 60):
        messages.append(
            Error(
                f"AHENTIC['SCHEDULE_GRACE_S'] must be a whole number of seconds, at least 60 "
                f"(it is {grace!r}).",
                hint="The tick runs once a minute: a shorter window misses due times.",
                id="ahentic.E025",
            )
        )
    failures = ahentic_settings.SCHEDULE_MAX_FAILURES
    if not at_least(failures, 1):
        messages.append(
            Error(
                f"AHENTIC['SCHEDULE_MAX_FAILURES'] must be a positive whole number "
                f"(it is {failures!r}).",
                id="ahentic.E026",
            )
        )
    return messages


@register(Tags.database)
def check_schedule_rows(app_configs=None, databases=None, **kwargs):
    """The stored schedules (run with the database checks: ``migrate``, ``check --database``,
    the test runner; reads nothing otherwise): E027 a cron expression or time zone that is
    invalid (written outside the admin), W010 an active schedule whose user may not use its
    agent (each firing fails until it pauses itself), W009 active schedules and no django-q2
    schedule for the tick (nothing fires them). Skipped before ``migrate``."""
    from django.core.exceptions import ValidationError
    from django.db.utils import OperationalError, ProgrammingError

    from ..models import Schedule, validate_cron, validate_time_zone
    from . import services as schedules

    if not databases:
        return []
    messages = []
    try:
        active = list(
            Schedule.objects.filter(paused=False).select_related("agent", "agent_version", "run_as")
        )
    except (OperationalError, ProgrammingError):
        return messages  # no tables yet (before migrate)
    for schedule in active:
        label = f"Schedule {schedule.name!r} ({schedule.pk})"
        try:
            validate_cron(schedule.cron)
            validate_time_zone(schedule.time_zone)
        except ValidationError as error:
            messages.append(
                Error(
                    f"{label}: {' '.join(error.messages)}",
                    hint="Correct it in the admin; until then it never fires.",
                    id="ahentic.E027",
                )
            )
            continue
        found = schedules.refusal(schedule)
        if isinstance(found, schedules.Refusal):
            messages.append(
                Warning(
                    f"{label} cannot run: {found.message}",
                    hint="Give its user the permission, choose another user or agent, or pause it.",
                    id="ahentic.W010",
                )
            )
    if active and not _tick_scheduled():
        messages.append(
            Warning(
                "There are active schedules but no django-q2 schedule runs "
                "orchestrator_app.schedules.tasks.schedule_tick: nothing fires them.",
                hint="Run migrate (orchestrator_app 0006 creates it), or add a django-q2 "
                "schedule calling it every minute.",
                id="ahentic.W009",
            )
        )
    return messages


def _tick_scheduled() -> bool:
    from django_q.models import Schedule as QSchedule

    return QSchedule.objects.filter(func="orchestrator_app.schedules.tasks.schedule_tick").exists()
