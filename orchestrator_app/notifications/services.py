"""Email notifications: reaching a user who is not watching (docs/howto/notifications.md).

Two mails, through Django's mail (the site's ``EMAIL_BACKEND``):

- An approval waiting: ``approval_requested`` schedules a one-off django-q2 task
  ``NOTIFY_APPROVAL_AFTER_S`` later (``Schedule`` of type ONCE: ``async_task`` has no delay).
  When due, it mails the chat's owner if the run still waits on that same call, the owner has
  not polled the chat since the request, has not opted out and has an address.
- A scheduled run ended: ``schedule_run_finished`` enqueues a task that mails the owner of the
  run's chat with the status and the link, unless they opted out.

"Polled since": the owner's presence as the sidebar's poll records it
(``orchestrator_app.presence``), read when the mail is due.

Exactly once: each mail is claimed by inserting its ``Notification`` row (unique kind and key)
before it is sent, so two workers or a task run twice send one mail. The approval mail's key is
the waiting call (chat, run, call id), never a time, so checks at any clock agree. A mail
carries the tool's name and the chat's title, never a tool's input.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import EmailMultiAlternatives
from django.db import IntegrityError, transaction
from django.template.loader import render_to_string
from django.utils import timezone
from django.utils.translation import gettext as _
from django_q.models import Schedule
from django_q.tasks import async_task, schedule

from sessions_app.conf import ahentic_settings
from sessions_app.models import Session
from sessions_app.runstate import PendingTool

from .. import presence
from ..links import chat_url, site_url
from ..models import Notification, NotificationPreference

log = logging.getLogger("ahentic")

# --- preferences -----------------------------------------------------------------------------

PREFERENCE_FIELDS = ("approvals_mail", "schedules_mail")


def preference_for(user) -> NotificationPreference:
    """The user's mail preferences (unsaved defaults, every mail on, when they chose none)."""
    found = NotificationPreference.objects.filter(user=user).first()
    return found or NotificationPreference(user=user)


def preference_update(*, user, **changes: bool) -> NotificationPreference:
    """Set some of ``PREFERENCE_FIELDS`` for ``user`` (the one writer of the preference row)."""
    unknown = set(changes) - set(PREFERENCE_FIELDS)
    if unknown:
        raise ValueError(f"Unknown preference fields: {sorted(unknown)}")
    defaults = {name: bool(value) for name, value in changes.items()}
    if not defaults:
        return preference_for(user)
    preference, _created = NotificationPreference.objects.update_or_create(
        user=user, defaults=defaults
    )
    return preference


def _wants(user, field: str) -> bool:
    return bool(user.is_active and user.email and getattr(preference_for(user), field))


# --- links and mail --------------------------------------------------------------------------


def tool_label(name: str) -> str:
    """The tool as the mail names it: its registry name in words (never its input)."""
    return name.replace("_", " ").strip() or name


def _send(template: str, subject: str, to: str, context: dict[str, Any]) -> None:
    body = render_to_string(f"ahentic/mail/{template}.txt", context)
    html = render_to_string(f"ahentic/mail/{template}.html", context)
    message = EmailMultiAlternatives(
        settings.EMAIL_SUBJECT_PREFIX + subject, body, settings.DEFAULT_FROM_EMAIL, [to]
    )
    message.attach_alternative(html, "text/html")
    message.send()


def _claim_and_send(
    *, kind: str, key: str, user, session_id, template: str, subject: str, context: dict
) -> bool:
    """Insert the mail's claim row, then send it; False when it was already claimed. A mail
    that fails to send gives its claim back (logged), so a later attempt may send it."""
    try:
        with transaction.atomic(using=Notification.objects.db):
            claim = Notification.objects.create(
                kind=kind, key=key[:200], user=user, session_id=session_id
            )
    except IntegrityError:
        return False
    try:
        _send(template, subject, user.email, context)
    except Exception:
        log.exception("ahentic could not send the %s mail %s", kind, key)
        Notification.objects.filter(pk=claim.pk).delete()
        return False
    return True


# --- an approval waiting ---------------------------------------------------------------------


def on_approval_requested(sender, session: Session, tool_use_id: str, **kwargs: Any) -> None:
    """``approval_requested``: schedule the check for when the wait is long enough."""
    delay = int(ahentic_settings.NOTIFY_APPROVAL_AFTER_S or 0)
    if delay <= 0 or not _wants(session.owner, "approvals_mail"):
        return  # checked again when due: the user may change their mind meanwhile
    schedule(
        "orchestrator_app.notifications.tasks.notify_approval",
        str(session.pk),
        tool_use_id,
        schedule_type=Schedule.ONCE,
        repeats=-1,  # a ONCE schedule with negative repeats is deleted after it ran
        next_run=timezone.now() + timedelta(seconds=delay),
    )


def _requested_at(pending: PendingTool) -> datetime | None:
    try:
        return datetime.fromisoformat(pending.paused_at) if pending.paused_at else None
    except ValueError:
        return None


def approval_mail(session_id, tool_use_id: str, *, now: datetime | None = None) -> bool:
    """Mail the owner about the approval ``tool_use_id`` if it still waits, has waited
    ``NOTIFY_APPROVAL_AFTER_S`` by ``now``, was not seen (no poll since it was requested),
    and the owner wants such mail. Returns whether this call sent it (at most once)."""
    now = now or timezone.now()
    delay = int(ahentic_settings.NOTIFY_APPROVAL_AFTER_S or 0)
    session = Session.objects.select_related("owner").filter(pk=session_id).first()
    if delay <= 0 or session is None or session.status != Session.Status.AWAITING_HUMAN:
        return False
    pending = PendingTool.from_json(session.pending_tool)
    if pending is None or pending.call_id != tool_use_id:
        return False  # decided meanwhile (and maybe waiting on another call now)
    requested = _requested_at(pending)
    if requested is None or now < requested + timedelta(seconds=delay):
        return False
    seen = presence.last_seen(session.pk)
    if seen is not None and seen >= requested.timestamp():
        return False
    if not _wants(session.owner, "approvals_mail"):
        return False
    label = tool_label(pending.name)
    return _claim_and_send(
        kind=Notification.Kind.APPROVAL,
        # The waiting call (chat, run, call id), never a time: a later check, on another
        # worker's clock or after a retry, finds the claim; a call id the model gives again in
        # a later run is another wait.
        key=f"{session.pk}:{session.run_seq}:{tool_use_id}",
        user=session.owner,
        session_id=session.pk,
        template="approval",
        subject=_("The agent is waiting for your approval"),
        context={
            "user": session.owner,
            "title": session.title,
            "tool": label,
            "url": chat_url(session.pk, session),
            "waited_minutes": max(1, round((now - requested).total_seconds() / 60)),
        },
    )


# --- a scheduled run ended -------------------------------------------------------------------


def on_schedule_run_finished(
    sender, session: Session, schedule: Any, schedule_run: Any, status: Any, **kwargs: Any
) -> None:
    """``schedule_run_finished``: the mail goes through the queue (ids and words only), so a
    slow mail server never holds up whoever ended the run. Reads ``schedule.name`` (else
    ``str(schedule)``), ``schedule_run.pk`` and ``schedule_run.error`` (optional). A firing
    refused before it had a chat (``session`` None) mails the schedule's user
    (``schedule.run_as``)."""
    if str(status) == "awaiting_human":
        return  # the approval mail tells them (once, if they do not look); the end mails later
    user = session.owner if session is not None else getattr(schedule, "run_as", None)
    if user is None or not _wants(user, "schedules_mail"):
        return
    async_task(
        "orchestrator_app.notifications.tasks.notify_schedule_run",
        schedule_run_id=str(schedule_run.pk),
        session_id=str(session.pk) if session is not None else "",
        user_id=str(user.pk),
        schedule_name=str(getattr(schedule, "name", "") or schedule),
        status=str(status),
        error=str(getattr(schedule_run, "error", "") or "")[:500],
        group="ahentic",
    )


def schedule_run_mail(
    *,
    schedule_run_id: str,
    session_id: str,
    schedule_name: str,
    status: str,
    error: str = "",
    user_id: str = "",
) -> bool:
    """Mail the owner of the scheduled run's chat that it ended (once per schedule run); a
    firing refused before it had a chat (no ``session_id``) mails ``user_id``."""
    session = None
    if session_id:
        session = Session.objects.select_related("owner").filter(pk=session_id).first()
        if session is None:
            return False
        user = session.owner
    else:
        user = get_user_model().objects.filter(pk=user_id).first() if user_id else None
    if user is None or not _wants(user, "schedules_mail"):
        return False
    return _claim_and_send(
        kind=Notification.Kind.SCHEDULE_RUN,
        key=schedule_run_id,
        user=user,
        session_id=session.pk if session is not None else None,
        template="schedule_run",
        subject=_("Scheduled run “%(name)s”: %(status)s")
        % {"name": schedule_name, "status": status},
        context={
            "user": user,
            "schedule": schedule_name,
            "status": status,
            "error": error,
            "title": session.title if session is not None else "",
            "url": chat_url(session.pk, session) if session is not None else site_url(),
        },
    )


def connect() -> None:
    """Connect the receivers (``apps.ready``)."""
    from ..signals import approval_requested, schedule_run_finished

    approval_requested.connect(
        on_approval_requested, sender=Session, dispatch_uid="ahentic_approval_mail"
    )
    schedule_run_finished.connect(
        on_schedule_run_finished, sender=Session, dispatch_uid="ahentic_schedule_run_mail"
    )
