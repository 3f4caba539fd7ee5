"""Runs: what starts, resumes, stops and recovers a session's run.

A message (new run, resume cue, or queued while busy), the Continue button, cancel, the
``ahentic_recover`` sweep, queued messages that wake an idle session, and a sub-agent's report
to its parent. Everything is a short transaction around the run-state writers
(``sessions_app.runstate``); the model and tools run in ``step.py``, outside any transaction.
"""

from __future__ import annotations

import logging
import os
from datetime import timedelta
from typing import Any

from django.core.cache import cache
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext

from sessions_app import agents, db, runstate
from sessions_app import attachments as attachment_store
from sessions_app import services as session_services
from sessions_app.conf import ahentic_settings
from sessions_app.models import Event, LiveText, PendingMessage, Session

from .. import llm
from ..errors import AhenticError
from ..ledger.usage import daily_limit_reached, usd
from ..signals import run_finished, run_started, send_after_commit, tool_executed
from . import plan as plan_rules
from .queue import enqueue_step
from .toolcalls import answer_unanswered, deny_turn, unanswered_tool_calls

log = logging.getLogger("ahentic")

RESUME_CUES = {
    "continue",
    "keep going",
    "go on",
    "resume",
    "retry",
    "try again",
    "finish it",
    "complete it",
}
TITLE_MAX = 60


def require_llm() -> None:
    """Refuse to start work no model can do (no API key and no base URL)."""
    if not llm.llm_available():
        raise AhenticError(
            "ahentic_ai_unavailable",
            gettext(
                "The agent has no model configured, so it cannot answer yet. Ask the site's "
                "administrator to set ANTHROPIC_API_KEY (or AHENTIC['BASE_URL'])."
            ),
            503,
        )


def pending_promote(session_id) -> int:
    """Move queued messages into the stream, oldest first. Caller is at a round boundary
    (every tool_use of the last assistant turn answered), so no tool pair is split."""
    if not PendingMessage.objects.filter(session_id=session_id).exists():
        return 0  # the common case, without a transaction
    with db.atomic():
        pending = list(PendingMessage.objects.filter(session_id=session_id).order_by("id"))
        if not pending:
            return 0
        items = []
        for message in pending:
            if message.source_type == PendingMessage.SourceType.SUBAGENT:
                items.append(
                    {
                        "kind": Event.Kind.SUBAGENT_MESSAGE,
                        "content": message.content,
                        "payload": {"name": message.source_name},
                    }
                )
            else:
                item = {"kind": Event.Kind.USER_MESSAGE, "content": message.content}
                if message.attachments:
                    item["payload"] = {"attachments": message.attachments}
                items.append(item)
        session_services.events_append(session_id=session_id, items=items)
        PendingMessage.objects.filter(pk__in=[m.pk for m in pending]).delete()
    return len(pending)


def _provisional_title(content: str) -> str:
    text = " ".join(content.split())
    return text if len(text) <= TITLE_MAX else text[: TITLE_MAX - 3] + "…"


def _is_resume_cue(content: str) -> bool:
    return content.strip().lower().rstrip(".!") in RESUME_CUES


def message_post(
    *,
    session: Session,
    content: str,
    mode: str | None = None,
    page_context: dict | None = None,
    page_context_given: bool = False,
    if_busy: str | None = None,
    attachments: list[str] | None = None,
    browser: bool = False,
) -> PendingMessage | None:
    """Post a user message: start a run, resume one, or queue it while the agent is busy.

    ``browser``: a browser (the sidebar) can serve the run this message starts or resumes, so
    its browser tools are offered (``Session.browser_available``); the chat API's routes say
    so, a service call (a schedule, a sub-agent, host code) by default does not.

    ``attachments``: ids of the session's unsent uploads, taken by this message in the
    transaction that writes it (``attachments.claim``). Returns the PendingMessage when it
    was queued, else None (a run started or resumed).
    """
    content = content.strip()
    attachments = list(attachments or [])
    if not content and not attachments:
        raise AhenticError("ahentic_empty_message", gettext("The message is empty."))
    # Refused before anything changes; taken below, with the message.
    attachment_store.claim(session_id=session.pk, ids=attachments, take=False)
    require_llm()
    _refuse_too_long(content)
    _refuse_while_paused(session)
    if agents.spend_cap_reached(session):
        # Only a resume cue ("continue") of a user who may exceed the cap goes past it.
        if attachments or not _is_resume_cue(content):
            raise spend_cap_refusal(session, session.owner)
        if not _continue_past_cap(session, session.owner):
            raise AhenticError(
                "ahentic_spend_cap",
                gettext("The chat's spend cap changed meanwhile: try again."),
                409,
            )
    sticky: dict[str, Any] = {}
    if mode:
        sticky["mode"] = mode
    if page_context_given:
        sticky["page_context"] = page_context

    if session.status == Session.Status.AWAITING_HUMAN:
        _redirect_pending_tool(session)
        session.refresh_from_db()

    if session.status in Session.ACCEPTS_MESSAGE:
        if session.job_resumable and not attachments and _is_resume_cue(content):
            if _resume(
                session, source="composer_cue", content=content, sticky=sticky, browser=browser
            ):
                return None
        elif _start_run(
            session, content=content, sticky=sticky, attachments=attachments, browser=browser
        ):
            return None
        session.refresh_from_db()  # lost a race: someone else started a run

    if (if_busy or ahentic_settings.BUSY_POLICY) == "reject":
        raise AhenticError(
            "ahentic_session_busy",
            gettext("The agent is busy with this chat. Wait for it to finish, or press Stop."),
            409,
        )
    queue_limit = int(ahentic_settings.MAX_PENDING_MESSAGES)
    if PendingMessage.objects.filter(session_id=session.pk).count() >= queue_limit:
        raise AhenticError(
            "ahentic_queue_full",
            gettext("%(count)s messages are already waiting; wait for the agent or recall one.")
            % {"count": queue_limit},
            409,
        )
    if sticky:
        runstate.session_update(session_id=session.pk, **sticky)
    with db.atomic():
        refs = attachment_store.claim(session_id=session.pk, ids=attachments)
        pending = session_services.pending_message_add(
            session_id=session.pk, content=content, attachments=refs
        )
    # The run may have ended between our status read and the insert: then nobody would promote
    # this message, so start a run for it (the step loop checks the same after it goes idle).
    wake_for_pending(session.pk)
    return pending


def _refuse_while_paused(session: Session) -> None:
    """What stops any new model work on the chat: a soft-budget pause, the daily limit."""
    if session.job_resumable and session.last_error_code == "ahentic_session_token_budget":
        raise AhenticError(
            "ahentic_session_token_budget",
            gettext("This chat paused after using a lot of tokens. Continue or stop it first."),
            409,
        )
    if daily_limit_reached():
        raise AhenticError(
            "ahentic_daily_token_limit",
            gettext("The site's daily token limit is reached; try again tomorrow."),
            429,
        )


def _refuse_too_long(content: str) -> None:
    limit = int(ahentic_settings.MAX_MESSAGE_CHARS)
    if len(content) > limit:
        raise AhenticError(
            "ahentic_message_too_long",
            gettext("The message has %(count)s characters; the limit is %(limit)s.")
            % {"count": len(content), "limit": limit},
        )


def _message_checked(content: str) -> str:
    """A message's text, stripped; refused when empty or too long."""
    content = content.strip()
    if not content:
        raise AhenticError("ahentic_empty_message", gettext("The message is empty."))
    _refuse_too_long(content)
    return content


def message_retry(*, session: Session, browser: bool = False) -> int:
    """Retry: run the user's last message again. What followed it stays in the transcript
    as an earlier attempt (``services.events_supersede``) and is never sent to the model
    again, so the new run's first request is the history up to and including that message,
    byte for byte as it was sent the first time. Returns the new run's number."""
    return attempt_start(session=session, browser=browser)


def message_edit(*, session: Session, seq: int, content: str, browser: bool = False) -> int:
    """Edit and resend a message of the user's (``seq``, the last one or any earlier one still
    in the conversation): it and everything that followed it become an earlier attempt, and
    the edited text (with the same attachments, ``meta.editOf`` naming the message it
    replaces) starts a new run. Returns the new run's number."""
    return attempt_start(
        session=session, edit_seq=seq, content=_message_checked(content), browser=browser
    )


def attempt_start(
    *, session: Session, edit_seq: int | None = None, content: str = "", browser: bool = False
) -> int:
    """A new attempt at the user's last message (a retry, ``edit_seq`` None) or at any of
    the user's messages still in the conversation (an edit). Refused, with nothing written,
    on a sub-agent's chat (read-only: its parent writes its messages), while a run is live,
    without a message of the user's to run again, for an edit of anything else (a reply, an
    earlier attempt's message), while a tool call is still open, and for
    what refuses any message (the model, a budget pause, the daily limit, the spend cap).
    Every check that reads the transcript runs after the run began, under the row lock the
    new-run UPDATE holds: an error rolls the whole attempt back."""
    if session.parent_id is not None:
        raise AhenticError(
            "ahentic_read_only_chat",
            gettext("This is a sub-agent's chat: it is read-only. Retry or edit in the main chat."),
            409,
        )
    require_llm()
    _refuse_while_paused(session)
    if agents.spend_cap_reached(session):
        raise spend_cap_refusal(session, session.owner)
    source = "retry" if edit_seq is None else "edit"
    with db.atomic():
        run_seq = runstate.run_begin(
            session_id=session.pk,
            from_statuses=Session.ACCEPTS_MESSAGE,
            plan=None,
            pending_tool=None,
            browser_paused_at=None,
            browser_available=browser,
        )
        if run_seq is None:
            raise AhenticError(
                "ahentic_session_busy", gettext("The agent is busy with this chat."), 409
            )
        message = (
            _last_user_message(session.pk)
            if edit_seq is None
            else _editable_message(session.pk, edit_seq)
        )
        if message is None:
            raise AhenticError(
                "ahentic_nothing_to_retry",
                gettext("This chat has no message of yours to retry."),
                409,
            )
        if any(call.seq > message.seq for call in unanswered_tool_calls(session.pk)):
            raise AhenticError(
                "ahentic_session_busy",
                gettext("A tool of the last run is still finishing; try again in a moment."),
                409,
            )
        first = message.seq if edit_seq is not None else message.seq + 1
        session_services.events_supersede(session_id=session.pk, from_seq=first, by_run=run_seq)
        if session.viewport_start_event_id and session.viewport_start_event_id > message.pk:
            # The window moved past the message during the attempt: it starts at it again.
            runstate.session_update(session_id=session.pk, viewport_start_event_id=message.pk)
        if edit_seq is not None:
            attached = (message.payload or {}).get("attachments")
            payload = {"meta": {"editOf": message.seq}}
            if attached:
                payload["attachments"] = attached
            session_services.event_append(
                session_id=session.pk,
                kind=Event.Kind.USER_MESSAGE,
                content=content,
                payload=payload,
            )
        send_after_commit(run_started, session.pk, run=run_seq)
        session_services.trace_record(
            session_id=session.pk,
            type="run_start",
            summary=f"Run {run_seq} started ({source} of message #{message.seq})",
            data={"source": source, "seq": message.seq, "mode": session.mode},
            step=0,
        )
        enqueue_step(session.pk, run_seq)
    return run_seq


def _user_messages(session_id):
    """The user's messages still in the conversation (not an earlier attempt, not a
    synthetic turn written for the model)."""
    return Event.objects.filter(
        session_id=session_id, kind=Event.Kind.USER_MESSAGE, superseded_by__isnull=True
    ).exclude(payload__has_key="synthetic")


def _last_user_message(session_id) -> Event | None:
    """The user's newest message still in the conversation."""
    return _user_messages(session_id).order_by("-seq").first()


def _editable_message(session_id, seq: int) -> Event:
    """The user's message ``seq`` still in the conversation, the one an edit replaces;
    anything else is refused (404 when the chat has no event ``seq``)."""
    message = _user_messages(session_id).filter(seq=seq).first()
    if message is not None:
        return message
    if not Event.objects.filter(session_id=session_id, seq=seq).exists():
        raise AhenticError(
            "ahentic_message_not_found",
            gettext("This chat has no message #%(seq)s.") % {"seq": seq},
            404,
        )
    raise AhenticError(
        "ahentic_message_not_editable",
        gettext("Only your own messages of the current conversation can be edited and resent."),
        409,
    )


SUBAGENT_REPORT_CHARS = 24000


def subagent_report(*, session: Session, text: str) -> None:
    """A sub-agent's run ended: its last word reaches the parent as a queued message."""
    if session.parent_id is None or not text.strip():
        return
    if len(text) > SUBAGENT_REPORT_CHARS:
        text = text[: SUBAGENT_REPORT_CHARS - 1] + "…"
    session_services.pending_message_add(
        session_id=session.parent_id,
        content=text,
        source_type=PendingMessage.SourceType.SUBAGENT,
        source_name=session.title,
    )
    wake_for_pending(session.parent_id)


def wake_for_pending(session_id) -> bool:
    """Start a run for queued messages left on an idle session. Returns whether it did."""
    with db.atomic():
        if not PendingMessage.objects.filter(session_id=session_id).exists():
            return False
        run_seq = runstate.run_begin(session_id=session_id, from_statuses=[Session.Status.IDLE])
        if run_seq is None:
            return False
        send_after_commit(run_started, session_id, run=run_seq)
        session_services.trace_record(
            session_id=session_id,
            type="run_start",
            summary=f"Run {run_seq} started for queued message(s)",
            data={"source": "pending_messages"},
            step=0,
        )
        enqueue_step(session_id, run_seq)
    return True


def _start_run(
    session: Session,
    *,
    content: str,
    sticky: dict[str, Any],
    attachments: list[str],
    browser: bool = False,
) -> bool:
    fields: dict[str, Any] = {
        "plan": None,
        "pending_tool": None,
        "browser_paused_at": None,
        "browser_available": browser,
        **sticky,
    }
    if session.title_source == Session.TitleSource.DEFAULT and content:
        fields["title"] = _provisional_title(content)
        fields["title_source"] = Session.TitleSource.AUTO
    with db.atomic():
        run_seq = runstate.run_begin(
            session_id=session.pk, from_statuses=Session.ACCEPTS_MESSAGE, **fields
        )
        if run_seq is None:
            return False
        send_after_commit(run_started, session.pk, run=run_seq)
        # Messages queued before a cancel or failure come first, in the order they were sent.
        pending_promote(session.pk)
        refs = attachment_store.claim(session_id=session.pk, ids=attachments)
        # Goals are the model's (set_goal): a message starts no goal by itself.
        session_services.event_append(
            session_id=session.pk,
            kind=Event.Kind.USER_MESSAGE,
            content=content,
            payload={"attachments": refs} if refs else None,
        )
        session_services.trace_record(
            session_id=session.pk,
            type="run_start",
            summary=f"Run {run_seq} started",
            data={"mode": sticky.get("mode", session.mode), "message": content[:160]},
            step=0,
        )
        enqueue_step(session.pk, run_seq)
    return True


def _resume(
    session: Session,
    *,
    source: str,
    content: str | None = None,
    sticky: dict | None = None,
    browser: bool | None = None,
) -> bool:
    """Resume a resumable job: plan kept (cancelled steps reopened), goal kept. ``browser``
    None keeps whether a browser serves the run."""
    if browser is not None:
        sticky = {**(sticky or {}), "browser_available": browser}
    with db.atomic():
        if not runstate.run_resume(
            session_id=session.pk,
            from_statuses=[Session.Status.ERROR, Session.Status.IDLE],
            label="Resuming…",
            last_error="",
            last_error_code="",
            job_resumable=False,
            step_count=0,
            plan=plan_rules.reopen_cancelled(session.plan),
            soft_budget_acked=_soft_budget_boundary(session.tokens_used),
            **(sticky or {}),
        ):
            return False
        # Back from rest (error or idle) in the same run: a new stretch of work.
        send_after_commit(run_started, session.pk, run=session.run_seq)
        if content:
            session_services.event_append(
                session_id=session.pk, kind=Event.Kind.USER_MESSAGE, content=content
            )
        session_services.trace_record(
            session_id=session.pk,
            type="run_resume",
            summary="Run resumed",
            data={"source": source},
            step=0,
        )
        enqueue_step(session.pk, session.run_seq)
    return True


def _soft_budget_boundary(tokens_used: int) -> int:
    budget = int(ahentic_settings.SESSION_SOFT_TOKEN_BUDGET or 0)
    return (tokens_used // budget) * budget if budget else 0


def _redirect_pending_tool(session: Session) -> None:
    """A message while awaiting approval: deny the pending call, skip the rest of its turn."""
    pending = session.pending_tool or {}
    with db.atomic():
        if not runstate.run_stop(
            session_id=session.pk,
            from_statuses=[Session.Status.AWAITING_HUMAN],
            to_status=Session.Status.IDLE,
        ):
            return
        # The message ends this run (it starts the next one).
        send_after_commit(
            run_finished,
            session.pk,
            run=session.run_seq,
            outcome=Session.Status.IDLE,
            error_code="",
        )
        deny_turn(
            session_id=session.pk,
            call_id=pending.get("call_id"),
            reason="user_redirect",
            denied="The user sent a new message instead of approving this call.",
            skipped="Skipped: the user redirected the run.",
        )
        session_services.trace_record(
            session_id=session.pk,
            type="hitl_denied",
            summary="Approval skipped: user redirect",
            data={"reason": "user_redirect", "call_id": pending.get("call_id")},
        )


def run_cancel(*, session_id, staff_username: str = "", shown: str | None = None) -> bool:
    """Stop the run now. Open tool calls are answered ``cancelled``; children are cancelled too.

    ``staff_username`` records an operator's cancel (admin) as such instead of the user's.
    ``shown``: the streamed reply's text the user saw when they pressed Stop; the reply cut
    short keeps no more than that (``_streamed_so_far``), so no text appears after Stop.
    """
    who = f"staff {staff_username}" if staff_username else "the user"
    with db.atomic():
        # The row lock orders this against a step persisting its turn (which writes only while
        # its lease holds), so no tool call is saved after "Run cancelled.".
        session = Session.objects.select_for_update().filter(pk=session_id).first()
        if session is None or session.status not in Session.CANCELLABLE:
            return False
        # The call being streamed is abandoned; what it wrote so far stays in the transcript.
        stopped_text = _streamed_so_far(session, shown)
        if session.status in Session.LIVE:  # a cancel of a failed run ends nothing new
            send_after_commit(
                run_finished,
                session_id,
                run=session.run_seq,
                outcome=Session.Status.CANCELLED,
                error_code="",
            )
        runstate.live_text_clear(session_id)
        runstate.run_stop(
            session_id=session_id,
            from_statuses=Session.CANCELLABLE,
            to_status=Session.Status.CANCELLED,
            browser_paused_at=None,
            job_resumable=False,
            plan=plan_rules.settle(session.plan, "cancel"),
            # Stop leaves a soft-budget pause for good: the next message runs.
            soft_budget_acked=max(
                session.soft_budget_acked, _soft_budget_boundary(session.tokens_used)
            ),
        )
        # A call a live worker is executing right now keeps its real result, recorded when
        # the tool returns; every other open call is answered now.
        executing = session.lease_token
        open_calls = [
            call
            for call in unanswered_tool_calls(session_id)
            if not (executing and (call.payload.get("started") or {}).get("lease") == executing)
        ]
        answer_unanswered(
            session_id=session_id,
            code="cancelled",
            message=f"The run was cancelled by {who}.",
            only=open_calls,
        )
        if stopped_text:
            # A plain assistant text for the model (a reply cut short), marked for the reader.
            session_services.event_append(
                session_id=session_id,
                kind=Event.Kind.AGENT_MESSAGE,
                content=stopped_text,
                payload={"meta": {"stopped": True}},
            )
        session_services.event_append(
            session_id=session_id,
            kind=Event.Kind.SYSTEM_MESSAGE,
            content="Run cancelled.",
            payload={"meta": {"type": "cancelled"}},
        )
        session_services.trace_record(
            session_id=session_id,
            type="run_idle",
            summary=f"Cancelled by {who}",
            data={"reason": "staff_cancel" if staff_username else "user_cancel"},
        )
    for child_id in Session.objects.filter(parent_id=session_id).values_list("pk", flat=True):
        run_cancel(session_id=child_id, staff_username=staff_username)
    return True


def _streamed_so_far(session: Session, shown: str | None = None) -> str:
    """The text of the reply the run's model call has streamed so far ("" when none), without
    trailing whitespace: the model reads it back as its own words on the next turn. With
    ``shown`` (what the client showed of it), only their common start: the model streams on
    between the client's last read and the cancel, and that text was never seen."""
    if session.status != Session.Status.RUNNING:
        return ""
    live = LiveText.objects.filter(session_id=session.pk, run=session.run_seq).first()
    text = live.text if live is not None else ""
    if shown is not None:
        text = text[: _common_prefix_length(text, shown)]
    return text.rstrip()


def _common_prefix_length(a: str, b: str) -> int:
    return len(os.path.commonprefix([a, b]))


def spend_cap_paused(session: Session) -> str:
    """What the chat says when its run pauses at the spend cap (``loop/step.py``)."""
    cap = agents.spend_cap(session)
    return gettext(
        "This chat reached its spend cap of %(cap)s (spent so far: %(spent)s), so the run "
        "paused. To go on, staff can raise the chat's cap in the admin and then Continue "
        "resumes it; a user allowed to exceed spend caps can Continue now."
    ) % {"cap": usd(cap), "spent": usd(session.cost_usd or 0)}


def spend_cap_refusal(session: Session, user) -> AhenticError:
    """The 409 for a message or a Continue that the chat's spend cap stops, saying who can go
    on: ``user`` when they hold ``agents.EXCEED_SPEND_CAP`` (Continue), else staff."""
    cap = usd(agents.spend_cap(session))
    if user is not None and user.has_perm(agents.EXCEED_SPEND_CAP):
        how = gettext("Continue (or send “continue”) to raise its cap and go on.")
    else:
        how = gettext(
            "Staff can raise the chat's cap in the admin (Sessions, this chat, spend cap), or a "
            "user with the permission to exceed spend caps can continue it."
        )
    detail = gettext("This chat reached its spend cap of %(cap)s.") % {"cap": cap}
    return AhenticError("ahentic_spend_cap", f"{detail} {how}", 409)


def _continue_past_cap(session: Session, user) -> bool:
    """A Continue on a chat at its cap: with ``agents.EXCEED_SPEND_CAP``, the chat's own cap
    becomes ``agents.spend_cap_past`` (its spend plus one more cap) in a conditional write, and
    the Continue goes on; without it, the 409. False when the cap changed meanwhile."""
    raised = agents.spend_cap_past(session)
    if user is None or not user.has_perm(agents.EXCEED_SPEND_CAP) or raised is None:
        raise spend_cap_refusal(session, None if raised is None else user)
    if not runstate.spend_cap_set(
        session_id=session.pk, cap=raised, from_cap=session.spend_cap_usd
    ):
        return False
    session_services.trace_record(
        session_id=session.pk,
        type="spend_cap_raised",
        summary=f"Spend cap raised to {usd(raised)} by {user.get_username()}",
        data={"from": str(agents.spend_cap(session)), "to": str(raised), "by": user.pk},
    )
    session.spend_cap_usd = raised
    return True


def run_continue(*, session_id, user=None, browser: bool | None = None) -> str:
    """The Continue button: resume a resumable job, re-enqueue a stalled run, or time out a
    stale browser pause. Returns what it did (``resumed``, ``requeued``, ``browser_timeout``,
    ``waiting``, ``cap_raised``, ``noop``).

    A chat at its spend cap: ``user`` (who pressed it) continues past the cap when they hold
    ``agents.EXCEED_SPEND_CAP`` (``_continue_past_cap``; ``cap_raised`` when there was no run
    to resume: the chat takes messages again), else ``ahentic_spend_cap`` (409).

    ``waiting``: a worker's lease still holds the run. If that worker is alive the run goes
    on; if it died, the lease watch (``recovery.py``) re-enqueues the step within a quarter of
    ``RUN_LEASE_S`` after the lease expires, so the Continue takes effect then."""
    session = Session.objects.filter(pk=session_id).first()
    if session is None:
        return "noop"
    resumable = session.status in (Session.Status.ERROR, Session.Status.IDLE)
    if resumable and agents.spend_cap_reached(session):
        if not _continue_past_cap(session, user):
            return "noop"  # another Continue or a staff edit changed the cap first
        if not session.job_resumable:
            return "cap_raised"
    if resumable and session.job_resumable:
        require_llm()
        if daily_limit_reached():
            raise AhenticError(
                "ahentic_daily_token_limit",
                gettext("The site's daily token limit is reached; try again tomorrow."),
                429,
            )
        resumed = _resume(session, source="continue_api", browser=browser)
        return "resumed" if resumed else "noop"
    # The user's nudge may re-enqueue a step nobody holds at once (a duplicate task only fails
    # its claim); the recover sweep waits RUN_LEASE_S before it does the same.
    unheld = not session.lease_token
    if session.status == Session.Status.RUNNING and (unheld or runstate.lease_is_stale(session)):
        session_services.trace_record(
            session_id=session_id, type="run_requeue", summary="Stalled step re-enqueued"
        )
        with db.atomic():
            enqueue_step(session.pk, session.run_seq)
        return "requeued"
    if session.status == Session.Status.AWAITING_BROWSER and session.browser_paused_at:
        age = (timezone.now() - session.browser_paused_at).total_seconds()
        if age > int(ahentic_settings.BROWSER_TIMEOUT_S):
            return "browser_timeout" if browser_timeout(session) else "noop"
    if session.status == Session.Status.RUNNING:
        return "waiting"
    return "noop"


def browser_timeout(session: Session) -> bool:
    pending = session.pending_tool or {}
    with db.atomic():
        if not runstate.run_resume(
            session_id=session.pk,
            from_statuses=[Session.Status.AWAITING_BROWSER],
            label="Recovering after the browser timed out…",
            pending_tool=None,
            browser_paused_at=None,
        ):
            return False
        calls = [
            c for c in unanswered_tool_calls(session.pk) if c.tool_use_id == pending.get("call_id")
        ]
        if answer_unanswered(
            session_id=session.pk,
            code="ahentic_browser_timeout",
            message="The browser did not return a result in time.",
            only=calls,
        ):
            send_after_commit(
                tool_executed,
                session.pk,
                run=session.run_seq,
                tool=pending.get("name", ""),
                tool_use_id=pending.get("call_id", ""),
                is_error=True,
            )
        session_services.trace_record(
            session_id=session.pk, type="browser_timeout_fallback", summary="Browser tool timed out"
        )
        enqueue_step(session.pk, session.run_seq)
    return True


def browser_timeouts(now) -> int:
    """Answer ``ahentic_browser_timeout`` to every browser call waiting longer than
    ``BROWSER_TIMEOUT_S`` (no open tab claimed it: closed, or a run nobody watches), so the
    run goes on without anyone's Continue. Returns how many it timed out."""
    cutoff = now - timedelta(seconds=int(ahentic_settings.BROWSER_TIMEOUT_S))
    waiting = Session.objects.filter(
        status=Session.Status.AWAITING_BROWSER, browser_paused_at__lt=cutoff
    ).only("pk", "run_seq", "pending_tool")
    return sum(browser_timeout(session) for session in waiting)


def recover_stalled() -> int:
    """Re-enqueue running sessions whose worker is gone, and time out browser calls no tab
    answered (``browser_timeouts``): the lease watch, ``recovery.py``, and the
    ``ahentic_recover`` schedule. Returns how many runs it moved on."""
    now = timezone.now()
    count = browser_timeouts(now)
    lease_cutoff = now - timedelta(seconds=int(ahentic_settings.RUN_LEASE_S))
    candidates = Session.objects.filter(status=Session.Status.RUNNING).filter(
        Q(lease_token="", heartbeat_at__lt=lease_cutoff)
        | Q(lease_token="", heartbeat_at__isnull=True)
        | ~Q(lease_token="") & Q(lease_expires_at__lt=now)
    )
    for session in candidates.only("pk", "run_seq", "lease_token"):
        # Once per lease period and expired lease (the lease watch sweeps more often, and a
        # re-enqueued step may wait for a free worker); processes sharing the cache agree.
        key = f"ahentic:requeued:{session.pk}:{session.run_seq}:{session.lease_token}"
        if not cache.add(key, 1, timeout=int(ahentic_settings.RUN_LEASE_S)):
            continue
        session_services.trace_record(
            session_id=session.pk, type="run_requeue", summary="Recovered by ahentic_recover"
        )
        with db.atomic():
            enqueue_step(session.pk, session.run_seq)
        count += 1
    return count
