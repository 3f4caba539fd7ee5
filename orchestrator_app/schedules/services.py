"""Scheduled runs: the one writer of ``Schedule`` and ``ScheduleRun``.

``tick`` (the django-q2 task ``schedule_tick``, every minute) does three things:

1. settles the log rows of runs that ended (``settle``): their status, finish time and cost,
   and ``schedule_run_finished``;
2. fires each active schedule whose ``next_due_at`` passed: the most recent due time, if it is
   no older than ``SCHEDULE_GRACE_S``; an older one is missed and logged ``skipped``, never
   backfilled;
3. moves ``next_due_at`` past now.

Firing a due time starts with the INSERT of its log row: the unique (schedule, due_at) lets one
tick win whatever the number of clusters, and the loser's ``IntegrityError`` means "taken". The
run is then a message posted as ``run_as`` through ``runs.message_post``, the service behind
``POST sessions/{id}/messages``, so the daily limit, the spend cap and the chat's state apply as
for the user. What a schedule does is checked at every firing with the user's permissions of
that moment; the refusals that will not heal by themselves pause it after
``SCHEDULE_MAX_FAILURES`` in a row.

Wall-clock rules: the cron expression is read in the schedule's zone. A time that does not
exist there (the hour skipped when clocks go forward) does not fire; a time that occurs twice
(clocks go back) fires once, at its first occurrence.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from zoneinfo import ZoneInfo

from croniter import CroniterError, croniter
from django.db import IntegrityError
from django.db.models import F, Q, Sum
from django.utils import timezone

from sessions_app import access, agents, db, runstate
from sessions_app import services as session_services
from sessions_app.conf import ahentic_settings
from sessions_app.models import AgentVersion, Session

from ..control import runs
from ..errors import AhenticError
from ..models import Schedule, ScheduleRun, UsageRecord
from ..signals import schedule_run_finished, send_after_commit

log = logging.getLogger("ahentic")

# Due times scanned per look-up: a year of every-minute times would be far more, but a scan
# stops at the first due time past its bound, so this only stops a pathological expression.
SCAN_LIMIT = 2000
# A claimed firing has this long to start its run (a few queries and an enqueue) before the
# settle pass takes it for interrupted.
STARTING_LIMIT = timedelta(minutes=10)


# --- wall-clock time ----------------------------------------------------------------------------


def _instant(wall: datetime, zone: ZoneInfo) -> datetime | None:
    """The UTC instant of the naive wall-clock time ``wall`` in ``zone``: None when it does not
    exist there (clocks went forward over it), the first of the two when it occurs twice."""
    utc = wall.replace(tzinfo=zone, fold=0).astimezone(UTC)
    if utc.astimezone(zone).replace(tzinfo=None) != wall:
        return None
    return utc


def _due_times(schedule: Schedule, start: datetime, *, backwards: bool) -> Iterator[datetime]:
    """The schedule's due times (UTC) from ``start`` (aware, excluded), later ones first when
    ``backwards``. croniter walks wall-clock time in the zone, naive, so every local time is
    seen once; ``_instant`` maps it to UTC or drops it."""
    zone = ZoneInfo(schedule.time_zone)
    wall = start.astimezone(zone).replace(tzinfo=None, second=0, microsecond=0)
    if backwards:
        wall += timedelta(minutes=1)  # croniter excludes its start: the minute of ``start``
    walk = croniter(schedule.cron, wall)
    step = walk.get_prev if backwards else walk.get_next
    try:
        for _ in range(SCAN_LIMIT):
            instant = _instant(step(datetime), zone)
            if instant is None:
                continue
            if (instant <= start) if backwards else (instant > start):
                yield instant
    except CroniterError:
        return


def latest_due(schedule: Schedule, now: datetime, *, since: datetime) -> datetime | None:
    """The most recent due time in [since, now], or None."""
    for due in _due_times(schedule, now, backwards=True):
        return due if due >= since else None
    return None


def next_due(schedule: Schedule, after: datetime) -> datetime | None:
    """The first due time after ``after`` (None: the expression never comes due again)."""
    return next(_due_times(schedule, after, backwards=False), None)


def _minute(moment: datetime) -> datetime:
    return moment.replace(second=0, microsecond=0)


# --- writes of the schedule ---------------------------------------------------------------------


def schedule_save(
    schedule: Schedule, *, fields: list[str] | None = None, now: datetime | None = None
) -> Schedule:
    """Create ``schedule``, or save its ``fields`` (what the admin's form changed, so a tick's
    writes in between are kept), with its first due time from now on: earlier due times never
    fire (no backfill). The caller validated it (``full_clean``, the admin form)."""
    schedule.next_due_at = next_due(schedule, now or timezone.now())
    if schedule.pk is None or fields is None:
        schedule.save()
    else:
        schedule.save(update_fields=[*fields, "next_due_at", "updated_at"])
    return schedule


def pause(schedule: Schedule, *, reason: str) -> bool:
    """Pause ``schedule`` (False when it already was)."""
    return bool(
        Schedule.objects.filter(pk=schedule.pk, paused=False).update(
            paused=True, paused_reason=reason[:255]
        )
    )


def unpause(schedule: Schedule, *, now: datetime | None = None) -> bool:
    """Unpause ``schedule``: it fires from its next due time after now on, none it missed, and
    its failure count starts again. False when it was not paused."""
    now = now or timezone.now()
    return bool(
        Schedule.objects.filter(pk=schedule.pk, paused=True).update(
            paused=False,
            paused_reason="",
            consecutive_failures=0,
            next_due_at=next_due(schedule, now),
        )
    )


# --- firing -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Refusal:
    """Why a firing did not start a run. ``lasting``: it will not heal by itself (the user,
    their permission, the agent), so it counts toward pausing the schedule."""

    code: str
    message: str
    lasting: bool = False


def refusal(schedule: Schedule) -> Refusal | AgentVersion:
    """What stops ``schedule`` from running now, or the agent version it runs with (the
    admin's form asks the same before it saves one)."""
    user, agent = schedule.run_as, schedule.agent
    who = user.get_username()
    if agent is None:
        return Refusal("ahentic_schedule_agent_missing", "The schedule's agent was removed.", True)
    if not agent.active:
        return Refusal("ahentic_schedule_agent_inactive", f"The agent {agent} is inactive.", True)
    if not user.is_active:
        return Refusal("ahentic_schedule_user_inactive", f"The user {who} is inactive.", True)
    permission = ahentic_settings.PERMISSION
    if not user.has_perm(permission):
        return Refusal(
            "ahentic_schedule_no_permission",
            f"The user {who} lacks the permission to use the agent ({permission}).",
            True,
        )
    if not access.may_use(user, agent):
        return Refusal(
            "ahentic_schedule_agent_permission",
            f"The user {who} may not use the agent {agent} (its permission or groups).",
            True,
        )
    version = schedule.agent_version
    if version is None or version.agent_id != agent.pk:
        version = agents.latest_version(agent)
    if version is None:
        return Refusal("ahentic_schedule_no_version", f"The agent {agent} has no version.", True)
    return version


def fire(
    schedule: Schedule, *, due_at: datetime, now: datetime | None = None, manual: bool = False
) -> ScheduleRun | None:
    """Fire ``schedule`` for ``due_at``: claim the due time, then start the run as its user.
    None when the due time was already taken (another cluster, or Run now in that minute).
    Returns the log row, which says what happened."""
    now = now or timezone.now()
    try:
        with db.atomic(ScheduleRun):
            row = ScheduleRun.objects.create(
                schedule=schedule, due_at=due_at, started_at=now, manual=manual
            )
    except IntegrityError:
        return None
    try:
        _start(schedule, row, due_at=due_at, now=now)
    except Exception as error:  # the row must not stay "running" with nothing behind it
        log.exception("Schedule %s (%s) failed to fire", schedule.pk, schedule.name)
        if row.status != ScheduleRun.Status.RUNNING or row.run:
            return row  # logged already, or a run started: ``settle`` follows it
        _refused(
            schedule, row, Refusal("ahentic_schedule_error", f"The firing failed: {error}"), now
        )
    return row


def _start(schedule: Schedule, row: ScheduleRun, *, due_at: datetime, now: datetime) -> None:
    """The claimed firing ``row``: refused (and logged so), given way, or a run started."""
    found = refusal(schedule)
    if isinstance(found, Refusal):
        _refused(schedule, row, found, now)
        return
    version = found
    session, created = _chat_for(schedule, version, due_at)
    if session.status in Session.LIVE:
        # The chat's previous run still works or waits for a decision: a schedule never
        # answers an approval for the user, so this firing gives way.
        _finish(
            row,
            session=session,
            status=ScheduleRun.Status.SKIPPED,
            code="ahentic_schedule_busy",
            message=f"The chat is still {session.status.replace('_', ' ')} from an earlier run.",
            now=now,
        )
        return
    try:
        runs.message_post(session=session, content=schedule.first_message, if_busy="reject")
    except AhenticError as error:  # the daily limit, the spend cap, no model...
        if created:
            session_services.session_delete(session_id=session.pk)  # an empty chat: no use
            session = None
        _refused(schedule, row, Refusal(error.code, error.detail), now, session=session)
        return
    run = Session.objects.filter(pk=session.pk).values_list("run_seq", flat=True).first() or 0
    # Session and run in one UPDATE: ``settle`` reads a row without them as still starting.
    ScheduleRun.objects.filter(pk=row.pk).update(session=session, run=run)
    Schedule.objects.filter(pk=schedule.pk).update(consecutive_failures=0)
    row.session, row.run = session, run


def _chat_for(schedule: Schedule, version: AgentVersion, due_at: datetime) -> tuple[Session, bool]:
    """The chat a firing posts to, and whether it is new: the schedule's one chat (continue
    mode, while it is the user's and the agent's), else a new one with the schedule's spend
    cap."""
    cap = schedule.spend_cap_usd
    if schedule.chat_mode == Schedule.ChatMode.CONTINUE and schedule.chat_id:
        chat = Session.objects.filter(
            pk=schedule.chat_id,
            owner=schedule.run_as_id,
            agent_version__agent=schedule.agent_id,
        ).first()
        if chat is not None:
            if chat.spend_cap_usd != cap:  # staff changed the schedule's cap since
                runstate.session_update(session_id=chat.pk, spend_cap_usd=cap)
                chat.spend_cap_usd = cap
            return chat, False
    title = schedule.name
    if schedule.chat_mode == Schedule.ChatMode.NEW:
        local = due_at.astimezone(ZoneInfo(schedule.time_zone))
        title = f"{schedule.name}, {local:%Y-%m-%d %H:%M}"
    chat = session_services.session_create(
        owner=schedule.run_as, title=title, agent_version=version, spend_cap_usd=cap
    )
    if schedule.chat_mode == Schedule.ChatMode.CONTINUE:
        Schedule.objects.filter(pk=schedule.pk).update(chat=chat)
        schedule.chat = chat
    return chat, True


def _refused(
    schedule: Schedule,
    row: ScheduleRun,
    refusal: Refusal,
    now: datetime,
    *,
    session: Session | None = None,
) -> None:
    """The firing failed before a run started: say why, and pause the schedule once lasting
    refusals reach ``SCHEDULE_MAX_FAILURES`` in a row."""
    _finish(
        row,
        session=session,
        status=ScheduleRun.Status.FAILED,
        code=refusal.code,
        message=refusal.message,
        now=now,
    )
    if not refusal.lasting:
        return
    Schedule.objects.filter(pk=schedule.pk).update(
        consecutive_failures=F("consecutive_failures") + 1
    )
    failures = (
        Schedule.objects.filter(pk=schedule.pk)
        .values_list("consecutive_failures", flat=True)
        .first()
        or 0
    )
    limit = int(ahentic_settings.SCHEDULE_MAX_FAILURES)
    if failures >= limit:
        pause(
            schedule, reason=f"Paused after {failures} failed firings in a row: {refusal.message}"
        )
    log.warning("Schedule %s (%s) refused: %s", schedule.pk, schedule.name, refusal.message)


def _finish(
    row: ScheduleRun,
    *,
    status: str,
    now: datetime,
    session: Session | None = None,
    code: str = "",
    message: str = "",
    cost: Decimal | None = None,
) -> bool:
    """The log row's end (from an open status), and ``schedule_run_finished`` once it
    commits. False when another tick ended it first."""
    fields = {
        "status": status,
        "finished_at": now,
        "error_code": code[:64],
        "error": message,
        "cost_usd": cost,
    }
    if session is not None:
        fields["session"] = session
    if not ScheduleRun.objects.filter(pk=row.pk, status=row.status).update(**fields):
        return False
    for name, value in fields.items():
        setattr(row, name, value)
    send_after_commit(
        schedule_run_finished, session, schedule=row.schedule, schedule_run=row, status=status
    )
    return True


def run_now(schedule: Schedule, *, now: datetime | None = None) -> ScheduleRun | None:
    """Fire ``schedule`` at once (staff's "Run now"), paused or not, as due in this minute:
    None when this minute already fired."""
    now = now or timezone.now()
    return fire(schedule, due_at=_minute(now), now=now, manual=True)


# --- the run's end ------------------------------------------------------------------------------

# What the log says when the scheduled run's session is in a status.
_ENDED_AS = {
    Session.Status.IDLE: ScheduleRun.Status.DONE,
    Session.Status.AWAITING_HUMAN: ScheduleRun.Status.AWAITING_HUMAN,
    Session.Status.ERROR: ScheduleRun.Status.FAILED,
    Session.Status.CANCELLED: ScheduleRun.Status.CANCELLED,
}


def settle(*, session_id=None, now: datetime | None = None) -> int:
    """End the open log rows whose run ended (all of them, or ``session_id``'s): status,
    finish time, the run's cost from the ledger. A run that waits for an approval is logged
    ``awaiting_human`` and settled again when it ends. Returns how many rows changed."""
    now = now or timezone.now()
    rows = ScheduleRun.objects.filter(status__in=ScheduleRun.OPEN).select_related(
        "schedule", "session"
    )
    if session_id is not None:
        rows = rows.filter(session_id=session_id)
    changed = 0
    for row in rows:
        session = row.session
        if session is None:
            if row.run:  # it had a chat: deleted since (SET_NULL)
                code, message = "ahentic_schedule_chat_deleted", "The chat was deleted."
            elif row.started_at and row.started_at < now - STARTING_LIMIT:
                code = "ahentic_schedule_interrupted"
                message = "The firing stopped before its run started (the worker died)."
            else:
                continue  # another tick is starting it right now
            changed += _finish(
                row, status=ScheduleRun.Status.FAILED, code=code, message=message, now=now
            )
            continue
        if session.run_seq == row.run:
            status = _ENDED_AS.get(session.status)
            if status is None or status == row.status:
                continue  # still running (or still waiting)
        else:
            status = ScheduleRun.Status.DONE  # a later run began: this one ended before it
        failed = status == ScheduleRun.Status.FAILED
        cost = UsageRecord.objects.filter(session_id=session.pk, run=row.run).aggregate(
            cost=Sum("cost_usd")
        )["cost"]
        changed += _finish(
            row,
            session=session,
            status=status,
            code=session.last_error_code if failed else "",
            message=session.last_error if failed else "",
            cost=cost,
            now=now,
        )
    return changed


def on_run_finished(session_id, **kwargs) -> None:
    """Hears ``run_finished`` by the session's key (``signals.on_session_key``): settle the
    session's scheduled run at once instead of at the next tick."""
    settle(session_id=session_id)


# --- the tick -----------------------------------------------------------------------------------


def tick(now: datetime | None = None) -> int:
    """Settle ended runs, then fire every active schedule that came due. Returns how many
    firings this tick made (refused ones included)."""
    now = now or timezone.now()
    settle(now=now)
    grace = timedelta(seconds=int(ahentic_settings.SCHEDULE_GRACE_S))
    due = (
        Schedule.objects.filter(paused=False)
        .filter(Q(next_due_at__lte=now) | Q(next_due_at__isnull=True))
        .select_related("agent", "agent_version", "run_as")
    )
    fired = 0
    for schedule in due:
        try:
            fired += _tick_one(schedule, now, grace)
        except Exception:  # one broken schedule (an invalid zone: E027) stops no other
            log.exception("Schedule %s (%s): the tick failed", schedule.pk, schedule.name)
    return fired


def _tick_one(schedule: Schedule, now: datetime, grace: timedelta) -> bool:
    if schedule.next_due_at is None:  # written without ``schedule_save``: due from now on
        Schedule.objects.filter(pk=schedule.pk, next_due_at__isnull=True).update(
            next_due_at=next_due(schedule, now)
        )
        return False
    latest = latest_due(schedule, now, since=max(schedule.next_due_at, now - grace))
    fired = latest is not None and fire(schedule, due_at=latest, now=now) is not None
    if latest is None or schedule.next_due_at < latest:
        _missed(schedule, schedule.next_due_at, now)
    # Conditional on the value read: a slower tick never moves it back.
    Schedule.objects.filter(pk=schedule.pk, next_due_at=schedule.next_due_at).update(
        next_due_at=next_due(schedule, now)
    )
    return fired


def _missed(schedule: Schedule, due_at: datetime, now: datetime) -> None:
    """Log the first due time a tick came too late for (downtime, a busy queue): not run."""
    try:
        with db.atomic(ScheduleRun):
            ScheduleRun.objects.create(
                schedule=schedule,
                due_at=due_at,
                status=ScheduleRun.Status.SKIPPED,
                finished_at=now,
                error_code="ahentic_schedule_missed",
                error="No tick ran within SCHEDULE_GRACE_S of this due time (and of any after "
                "it but the latest); missed firings are not run later.",
            )
    except IntegrityError:
        pass  # fired or logged by another tick
