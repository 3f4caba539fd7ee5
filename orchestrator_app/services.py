"""Run control: the writers the API, the admin, tools and the step loop share.

Everything here is a short transaction or one conditional UPDATE; the model and tools are called
by ``step.py`` outside any transaction. Errors a client can cause raise ``AhenticError`` with a
stable code and an HTTP status (the API renders it as ``{code, detail}``).
"""

from __future__ import annotations

import json
import logging
from datetime import timedelta
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone
from django_q.tasks import async_task

from sessions_app import services as session_services
from sessions_app.conf import ahentic_settings
from sessions_app.models import Event, PendingMessage, Session

from . import llm
from . import plan as plan_rules
from .usage import daily_limit_reached

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


class AhenticError(Exception):
    def __init__(self, code: str, detail: str, status: int = 400):
        super().__init__(detail)
        self.code = code
        self.detail = detail
        self.status = status


# --- queue ---------------------------------------------------------------------------------


def require_llm() -> None:
    """Refuse to start work no model can do (no API key and no base URL)."""
    if not llm.llm_available():
        raise AhenticError(
            "ahentic_ai_unavailable",
            "The agent has no model configured: set ANTHROPIC_API_KEY or AHENTIC['BASE_URL'].",
            503,
        )


def enqueue_step(session_id, run_seq: int) -> None:
    """Enqueue ``run_step`` once the surrounding transaction commits (ids only)."""
    transaction.on_commit(
        lambda: async_task(
            "orchestrator_app.tasks.run_step",
            str(session_id),
            run_seq,
            group="ahentic",
            q_options={"ack_failure": True},
        )
    )


def enqueue_memory(session_id) -> None:
    """Summarize events that left the context window (background, on commit)."""
    transaction.on_commit(
        lambda: async_task("orchestrator_app.tasks.remember", str(session_id), group="ahentic")
    )


def enqueue_naming(session_id) -> None:
    transaction.on_commit(
        lambda: async_task("orchestrator_app.tasks.name_session", str(session_id), group="ahentic")
    )


def _now():
    return timezone.now()


# --- small state writers -------------------------------------------------------------------


def progress_set(*, session_id, label: str | None) -> None:
    """Write the progress label (bumps the heartbeat) and trace it."""
    now = _now()
    if label is None:
        session_services.session_update(session_id=session_id, progress=None)
        return
    session_services.session_update(
        session_id=session_id,
        progress={"label": label, "updatedAt": now.isoformat()},
        heartbeat_at=now,
    )
    session_services.trace_record(
        session_id=session_id, type="progress", summary=label, data={"label": label}
    )


def capability_request_add(*, session_id, ability: str, reason: str = "") -> None:
    with transaction.atomic():
        session = Session.objects.select_for_update().get(pk=session_id)
        requests = list(session.capability_requests or [])
        if not any(r.get("ability") == ability for r in requests):
            requests.append({"ability": ability, "reason": reason, "at": _now().isoformat()})
            session_services.session_update(session_id=session_id, capability_requests=requests)


def plan_update(*, session_id, steps: list[dict[str, Any]], title: str | None) -> dict[str, Any]:
    with transaction.atomic():
        session = Session.objects.select_for_update().get(pk=session_id)
        plan = plan_rules.merge(session.plan, steps, title)
        session_services.session_update(session_id=session_id, plan=plan)
    session_services.trace_record(
        session_id=session_id,
        type="plan_updated",
        summary=f"Plan: {len(plan['steps'])} steps",
        data={"steps": plan["steps"]},
    )
    return plan


def unanswered_tool_calls(session_id) -> list[Event]:
    """Tool calls without a tool_response, oldest first."""
    answered = Event.objects.filter(session_id=session_id, kind=Event.Kind.TOOL_RESPONSE).values(
        "tool_use_id"
    )
    return list(
        Event.objects.filter(session_id=session_id, kind=Event.Kind.TOOL_CALL)
        .exclude(tool_use_id__in=answered)
        .order_by("seq")
    )


def result_text(result: Any) -> str:
    return (
        result if isinstance(result, str) else json.dumps(result, ensure_ascii=False, default=str)
    )


def tool_response_record(
    *,
    session_id,
    call: Event,
    result: Any,
    ok: bool,
    meta: dict[str, Any] | None = None,
) -> Event | None:
    """Answer a tool call. Returns None when it was already answered (a late or repeated result)."""
    payload = {"tool": call.payload.get("tool"), "ok": ok, **(meta or {})}
    if not ok and isinstance(result, dict) and result.get("error"):
        payload["error"] = result["error"]
    try:
        with transaction.atomic():
            return session_services.event_append(
                session_id=session_id,
                kind=Event.Kind.TOOL_RESPONSE,
                content=result_text(result),
                payload=payload,
                tool_use_id=call.tool_use_id,
                run=call.run,
            )
    except IntegrityError:
        return None


def answer_unanswered(
    *, session_id, code: str, message: str, only: list[Event] | None = None
) -> int:
    """Answer open tool calls with an error result so no tool_use is left unanswered."""
    calls = unanswered_tool_calls(session_id) if only is None else only
    answered = 0
    for call in calls:
        result = {"ok": False, "error": code, "message": message}
        if tool_response_record(session_id=session_id, call=call, result=result, ok=False):
            answered += 1
    return answered


# --- runs ----------------------------------------------------------------------------------


def pending_promote(session_id) -> int:
    """Move queued messages into the stream, oldest first. Caller is at a round boundary
    (every tool_use of the last assistant turn answered), so no tool pair is split."""
    with transaction.atomic():
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
                items.append({"kind": Event.Kind.USER_MESSAGE, "content": message.content})
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
) -> PendingMessage | None:
    """Post a user message: start a run, resume one, or queue it while the agent is busy.

    Returns the PendingMessage when it was queued, else None (a run started or resumed).
    """
    content = content.strip()
    if not content:
        raise AhenticError("ahentic_empty_message", "The message is empty.")
    require_llm()
    limit = int(ahentic_settings.MAX_MESSAGE_CHARS)
    if len(content) > limit:
        raise AhenticError(
            "ahentic_message_too_long",
            f"The message has {len(content)} characters; the limit is {limit}.",
        )
    if session.job_resumable and session.last_error_code == "ahentic_session_token_budget":
        raise AhenticError(
            "ahentic_session_token_budget",
            "This chat paused after using a lot of tokens. Continue or stop it first.",
            409,
        )
    if daily_limit_reached():
        raise AhenticError(
            "ahentic_daily_token_limit",
            "The site's daily token limit is reached; try again tomorrow.",
            429,
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
        if session.job_resumable and _is_resume_cue(content):
            if _resume(session, source="composer_cue", content=content, sticky=sticky):
                return None
        elif _start_run(session, content=content, sticky=sticky):
            return None
        session.refresh_from_db()  # lost a race: someone else started a run

    if (if_busy or ahentic_settings.BUSY_POLICY) == "reject":
        raise AhenticError("ahentic_session_busy", "The agent is busy with this chat.", 409)
    if sticky:
        session_services.session_update(session_id=session.pk, **sticky)
    pending = session_services.pending_message_add(session_id=session.pk, content=content)
    # The run may have ended between our status read and the insert: then nobody would promote
    # this message, so start a run for it (the step loop checks the same after it goes idle).
    wake_for_pending(session.pk)
    return pending


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


def begin_run(*, session_id, from_statuses, label: str = "Thinking…", **fields: Any) -> int | None:
    """The new-run transition (a message, queued messages, an action): run_seq + 1, counters
    and error state reset, no lease yet. Returns the new run_seq, or None when the session was
    not in ``from_statuses``. Caller holds a transaction and enqueues the step."""
    now = _now()
    if not session_services.session_transition(
        session_id=session_id,
        from_statuses=from_statuses,
        to_status=Session.Status.RUNNING,
        run_seq=F("run_seq") + 1,
        step_count=0,
        last_error="",
        last_error_code="",
        job_resumable=False,
        heartbeat_at=now,
        lease_token="",
        lease_expires_at=None,
        progress={"label": label, "updatedAt": now.isoformat()},
        **fields,
    ):
        return None
    return Session.objects.filter(pk=session_id).values_list("run_seq", flat=True).get()


def resume_paused(*, session_id, from_status: str, label: str = "Thinking…", **fields: Any) -> bool:
    """A pause ends (decision, browser result, browser timeout): back to ``running`` with no
    lease, so the enqueued step can claim it. False when another answer got there first.
    Caller holds a transaction and enqueues the step."""
    now = _now()
    return session_services.session_transition(
        session_id=session_id,
        from_statuses=[from_status],
        to_status=Session.Status.RUNNING,
        heartbeat_at=now,
        lease_token="",
        lease_expires_at=None,
        progress={"label": label, "updatedAt": now.isoformat()},
        **fields,
    )


def wake_for_pending(session_id) -> bool:
    """Start a run for queued messages left on an idle session. Returns whether it did."""
    with transaction.atomic():
        if not PendingMessage.objects.filter(session_id=session_id).exists():
            return False
        run_seq = begin_run(session_id=session_id, from_statuses=[Session.Status.IDLE])
        if run_seq is None:
            return False
        session_services.trace_record(
            session_id=session_id,
            type="run_start",
            summary=f"Run {run_seq} started for queued message(s)",
            data={"source": "pending_messages"},
            step=0,
        )
        enqueue_step(session_id, run_seq)
    return True


def _start_run(session: Session, *, content: str, sticky: dict[str, Any]) -> bool:
    fields: dict[str, Any] = {
        "plan": None,
        "pending_tool": None,
        "browser_paused_at": None,
        **sticky,
    }
    if session.title_source == Session.TitleSource.DEFAULT:
        fields["title"] = _provisional_title(content)
        fields["title_source"] = Session.TitleSource.AUTO
    with transaction.atomic():
        run_seq = begin_run(session_id=session.pk, from_statuses=Session.ACCEPTS_MESSAGE, **fields)
        if run_seq is None:
            return False
        # Messages queued before a cancel or failure come first, in the order they were sent.
        pending_promote(session.pk)
        event = session_services.event_append(
            session_id=session.pk, kind=Event.Kind.USER_MESSAGE, content=content
        )
        session_services.goal_start_root(
            session_id=session.pk, description=content, pinned_event_id=event.pk
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
    session: Session, *, source: str, content: str | None = None, sticky: dict | None = None
) -> bool:
    """Resume a resumable job: plan kept (cancelled steps reopened), goal kept."""
    now = _now()
    with transaction.atomic():
        fields: dict[str, Any] = {
            "last_error": "",
            "last_error_code": "",
            "job_resumable": False,
            "step_count": 0,
            "heartbeat_at": now,
            "lease_token": "",
            "lease_expires_at": None,
            "plan": plan_rules.reopen_cancelled(session.plan),
            "soft_budget_acked": _soft_budget_boundary(session.tokens_used),
            "progress": {"label": "Resuming…", "updatedAt": now.isoformat()},
            **(sticky or {}),
        }
        if not session_services.session_transition(
            session_id=session.pk,
            from_statuses=[Session.Status.ERROR, Session.Status.IDLE],
            to_status=Session.Status.RUNNING,
            **fields,
        ):
            return False
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


def deny_turn(*, session_id, call_id: str | None, reason: str, denied: str, skipped: str) -> None:
    """Answer the denied call ``user_denied`` (with the reason) and the rest of its turn
    ``skipped``, so no tool_use is left unanswered."""
    for call in unanswered_tool_calls(session_id):
        if call.tool_use_id == call_id:
            result = {"ok": False, "error": "user_denied", "message": denied, "reason": reason}
            meta = {"denied": True, "reason": reason}
        else:
            result = {"ok": False, "error": "skipped", "message": skipped}
            meta = {"skipped": True, "reason": reason}
        tool_response_record(session_id=session_id, call=call, result=result, ok=False, meta=meta)


def _redirect_pending_tool(session: Session) -> None:
    """A message while awaiting approval: deny the pending call, skip the rest of its turn."""
    pending = session.pending_tool or {}
    with transaction.atomic():
        if not session_services.session_transition(
            session_id=session.pk,
            from_statuses=[Session.Status.AWAITING_HUMAN],
            to_status=Session.Status.IDLE,
            pending_tool=None,
            progress=None,
        ):
            return
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


def run_cancel(*, session_id) -> bool:
    """Stop the run now. Open tool calls are answered ``cancelled``; children are cancelled too."""
    with transaction.atomic():
        session = Session.objects.select_for_update().filter(pk=session_id).first()
        if session is None or session.status not in (*Session.LIVE, Session.Status.ERROR):
            return False
        session_services.session_transition(
            session_id=session_id,
            from_statuses=[*Session.LIVE, Session.Status.ERROR],
            to_status=Session.Status.CANCELLED,
            pending_tool=None,
            progress=None,
            lease_token="",
            lease_expires_at=None,
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
            message="The user cancelled the run.",
            only=open_calls,
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
            summary="Cancelled by the user",
            data={"reason": "user_cancel"},
        )
    for child_id in Session.objects.filter(parent_id=session_id).values_list("pk", flat=True):
        run_cancel(session_id=child_id)
    return True


def lease_is_stale(session: Session, now=None) -> bool:
    """A running session nobody works on: its lease expired, or no worker claimed it in time."""
    now = now or _now()
    if session.lease_token:
        return session.lease_expires_at is None or session.lease_expires_at < now
    last = session.heartbeat_at or session.updated_at
    return last is None or last < now - timedelta(seconds=int(ahentic_settings.RUN_LEASE_S))


def run_continue(*, session_id) -> str:
    """The Continue button: resume a resumable job, re-enqueue a stalled run, or time out a
    stale browser pause. Returns what it did (``resumed``, ``requeued``, ``browser_timeout``,
    ``noop``)."""
    session = Session.objects.filter(pk=session_id).first()
    if session is None:
        return "noop"
    if session.status in (Session.Status.ERROR, Session.Status.IDLE) and session.job_resumable:
        require_llm()
        if daily_limit_reached():
            raise AhenticError(
                "ahentic_daily_token_limit",
                "The site's daily token limit is reached; try again tomorrow.",
                429,
            )
        return "resumed" if _resume(session, source="continue_api") else "noop"
    # The user's nudge may re-enqueue a step nobody holds at once (a duplicate task only fails
    # its claim); the recover sweep waits RUN_LEASE_S before it does the same.
    unheld = not session.lease_token
    if session.status == Session.Status.RUNNING and (unheld or lease_is_stale(session)):
        session_services.trace_record(
            session_id=session_id, type="run_requeue", summary="Stalled step re-enqueued"
        )
        with transaction.atomic():
            enqueue_step(session.pk, session.run_seq)
        return "requeued"
    if session.status == Session.Status.AWAITING_BROWSER and session.browser_paused_at:
        age = (_now() - session.browser_paused_at).total_seconds()
        if age > int(ahentic_settings.BROWSER_TIMEOUT_S):
            return "browser_timeout" if browser_timeout(session) else "noop"
    return "noop"


def browser_timeout(session: Session) -> bool:
    pending = session.pending_tool or {}
    with transaction.atomic():
        if not resume_paused(
            session_id=session.pk,
            from_status=Session.Status.AWAITING_BROWSER,
            label="Recovering after the browser timed out…",
            pending_tool=None,
            browser_paused_at=None,
        ):
            return False
        calls = [
            c for c in unanswered_tool_calls(session.pk) if c.tool_use_id == pending.get("call_id")
        ]
        answer_unanswered(
            session_id=session.pk,
            code="ahentic_browser_timeout",
            message="The browser did not return a result in time.",
            only=calls,
        )
        session_services.trace_record(
            session_id=session.pk, type="browser_timeout_fallback", summary="Browser tool timed out"
        )
        enqueue_step(session.pk, session.run_seq)
    return True


def recover_stalled() -> int:
    """Re-enqueue running sessions whose worker is gone (the ``ahentic_recover`` sweep)."""
    now = _now()
    lease_cutoff = now - timedelta(seconds=int(ahentic_settings.RUN_LEASE_S))
    candidates = Session.objects.filter(status=Session.Status.RUNNING).filter(
        Q(lease_token="", heartbeat_at__lt=lease_cutoff)
        | Q(lease_token="", heartbeat_at__isnull=True)
        | ~Q(lease_token="") & Q(lease_expires_at__lt=now)
    )
    count = 0
    for session in candidates.only("pk", "run_seq"):
        session_services.trace_record(
            session_id=session.pk, type="run_requeue", summary="Recovered by ahentic_recover"
        )
        with transaction.atomic():
            enqueue_step(session.pk, session.run_seq)
        count += 1
    return count


def heal_orphans(*, session_id) -> int:
    """Staff repair: answer tool calls no worker will ever answer (admin action).

    A run a live worker holds is left alone, and so is the call a pause is waiting on.
    """
    session = Session.objects.filter(pk=session_id).first()
    if session is None:
        return 0
    if session.status == Session.Status.RUNNING and not lease_is_stale(session):
        return 0
    waiting = (
        (session.pending_tool or {}).get("call_id") if session.status in Session.LIVE else None
    )
    calls = [c for c in unanswered_tool_calls(session_id) if c.tool_use_id != waiting]
    healed = answer_unanswered(
        session_id=session_id,
        code="tool_interrupted",
        message="Interrupted, outcome unknown: this call was repaired by staff.",
        only=calls,
    )
    if healed:
        session_services.trace_record(
            session_id=session_id, type="tool_healed", summary=f"{healed} call(s) healed by staff"
        )
    return healed
