"""The user's answers to a paused run: approvals, browser results, and suggested actions.

Each records the decision in one short transaction and enqueues the step; the tool itself runs
in the worker, never in the HTTP request.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.db import transaction

from artifacts_app import store
from sessions_app import services as session_services
from sessions_app.models import Event, Session

from .models import ToolGrant
from .services import (
    AhenticError,
    begin_run,
    deny_turn,
    enqueue_step,
    require_llm,
    result_text,
    resume_paused,
    tool_response_record,
    unanswered_tool_calls,
)
from .tools import get_tool, tools_for

DECISIONS = ("allow_once", "allow_session", "always_allow", "deny")


def _require_pending(session: Session, status: str) -> dict[str, Any]:
    pending = session.pending_tool
    if not pending:
        raise AhenticError("ahentic_no_pending", "There is no pending tool call.", 400)
    if session.status != status:
        raise AhenticError(
            "ahentic_not_awaiting", f"The session is {session.status}, not {status}.", 409
        )
    return pending


def approval_decide(
    *, session: Session, decision: str, reason: str = "", edited_input: dict | None = None
) -> None:
    """Record the user's decision on the pending call; the worker runs the tool (not this request)."""
    if decision not in DECISIONS:
        raise AhenticError(
            "ahentic_bad_decision", f"decision must be one of {', '.join(DECISIONS)}.", 400
        )
    pending = _require_pending(session, Session.Status.AWAITING_HUMAN)
    tool = get_tool(pending.get("name", ""))
    if decision in ("allow_session", "always_allow") and (
        pending.get("non_preallowable") or (tool and tool.non_preallowable)
    ):
        raise AhenticError(
            "ahentic_hitl_not_preallowable",
            f"{pending.get('name')} must be approved every time.",
            400,
        )
    if edited_input is not None and decision != "deny":
        problem = tool.validate(edited_input) if tool else "unknown tool"
        if problem:
            raise AhenticError("ahentic_invalid_input", f"Edited input is invalid: {problem}", 400)
    with transaction.atomic():
        if decision == "deny":
            won = resume_paused(
                session_id=session.pk, from_status=Session.Status.AWAITING_HUMAN, pending_tool=None
            )
        else:
            approved = {**pending, "approved": decision}
            if edited_input is not None:
                approved["edited_input"] = edited_input
            extra: dict[str, Any] = {}
            if decision == "allow_session":
                extra["hitl_allows"] = sorted({*(session.hitl_allows or []), pending["name"]})
            won = resume_paused(
                session_id=session.pk,
                from_status=Session.Status.AWAITING_HUMAN,
                pending_tool=approved,
                **extra,
            )
        if not won:  # a concurrent decision got there first
            raise AhenticError("ahentic_not_awaiting", "This call was already decided.", 409)
        if decision == "always_allow":
            ToolGrant.objects.get_or_create(user_id=session.owner_id, tool_name=pending["name"])
        if decision == "deny":
            # The rest of that turn is skipped so the model thinks again with the whole
            # picture instead of running on.
            deny_turn(
                session_id=session.pk,
                call_id=pending.get("call_id"),
                reason=reason or "user_denied",
                denied="The user denied this call. Do not retry it unchanged.",
                skipped="Skipped: the user denied an earlier call of this turn.",
            )
        session_services.trace_record(
            session_id=session.pk,
            type="hitl_denied" if decision == "deny" else "hitl_approved",
            summary=f"{pending.get('name')}: {decision}",
            data={"decision": decision, "reason": reason, "call_id": pending.get("call_id")},
        )
        enqueue_step(session.pk, session.run_seq)


def browser_result_record(
    *, session: Session, call_id: str, result: Any = None, error: str | None = None
) -> None:
    """The sidebar ran a browser tool: record its result as the tool_result and continue."""
    pending = _require_pending(session, Session.Status.AWAITING_BROWSER)
    if call_id != pending.get("call_id"):
        raise AhenticError(
            "ahentic_call_mismatch", "callId does not match the pending browser call.", 409
        )
    if error is not None:
        result, ok = (
            {
                "ok": False,
                "error": "browser_error",
                "message": str(error)[:2000],
                "tool": pending.get("name"),
            },
            False,
        )
    else:
        if not isinstance(result, dict):
            result = {"value": result}
        ok = result.get("ok", True) is not False
    with transaction.atomic():
        if not resume_paused(
            session_id=session.pk,
            from_status=Session.Status.AWAITING_BROWSER,
            pending_tool=None,
            browser_paused_at=None,
        ):
            raise AhenticError(
                "ahentic_not_awaiting", "This browser call was already answered.", 409
            )
        calls = [c for c in unanswered_tool_calls(session.pk) if c.tool_use_id == call_id]
        meta: dict[str, Any] = {"browser": True}
        if pending.get("approved"):
            meta["approved"] = pending["approved"]
        if pending.get("artifact_key"):
            meta["artifactKey"] = pending["artifact_key"]
        for call in calls:
            tool_response_record(session_id=session.pk, call=call, result=result, ok=ok, meta=meta)
        if ok and pending.get("artifact_key"):
            store.mark_applied(session.pk, pending["artifact_key"])
        session_services.trace_record(
            session_id=session.pk,
            type="tool_result",
            summary=f"{pending.get('name')}: {'ok' if ok else 'error'} (browser)",
            data={"tool": pending.get("name"), "ok": ok, "browser": True, "call_id": call_id},
        )
        enqueue_step(session.pk, session.run_seq)


def action_run(*, session: Session, name: str, tool_input: dict[str, Any]) -> None:
    """Run one tool the user picked (a suggested action), then let the model follow up."""
    if session.status != Session.Status.IDLE:
        raise AhenticError(
            "ahentic_session_busy", "Actions run only while the session is idle.", 409
        )
    require_llm()
    tool = get_tool(name)
    if tool is None or tool not in tools_for(session, session.owner):
        raise AhenticError("ahentic_unknown_action", f"There is no action named {name!r}.", 400)
    if session.mode == Session.Mode.ASK and not tool.readonly:
        raise AhenticError(
            "ahentic_ask_readonly", f"{name} is not read-only and the session is in Ask mode.", 400
        )
    problem = tool.validate(tool_input)
    if problem:
        raise AhenticError("ahentic_invalid_input", f"Invalid input: {problem}", 400)
    call_id = f"toolu_action_{uuid.uuid4().hex[:20]}"
    summary = tool.summarize(tool_input)
    with transaction.atomic():
        run_seq = begin_run(
            session_id=session.pk,
            from_statuses=[Session.Status.IDLE],
            label=summary,
            # The user picked this call, so it counts as approved.
            pending_tool={
                "name": name,
                "input": tool_input,
                "call_id": call_id,
                "approved": "user_action",
                "summary": summary,
                "runtime": tool.runtime,
            },
        )
        if run_seq is None:
            raise AhenticError("ahentic_session_busy", "The session is busy.", 409)
        session_services.events_append(
            session_id=session.pk,
            items=[
                {
                    "kind": Event.Kind.USER_MESSAGE,
                    "content": f"Run the action {name}.",
                    "payload": {"meta": {"action": name}},
                },
                {
                    "kind": Event.Kind.TOOL_CALL,
                    "content": result_text(tool_input),
                    "payload": {"tool": name, "input": tool_input, "source": "suggested_action"},
                    "tool_use_id": call_id,
                },
            ],
        )
        session_services.trace_record(
            session_id=session.pk,
            type="run_start",
            summary=f"Action {name}",
            data={"action": name},
            step=0,
        )
        enqueue_step(session.pk, run_seq)
