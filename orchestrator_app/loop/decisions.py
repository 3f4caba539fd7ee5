"""The user's answers to a paused run: approvals, browser results, and suggested actions.

Each records the decision in one short transaction and enqueues the step; the tool itself runs
in the worker, never in the HTTP request.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.utils.translation import gettext

from artifacts_app import store
from sessions_app import db, runstate
from sessions_app import services as session_services
from sessions_app.errors import ModelFacingError
from sessions_app.models import Event, Session
from sessions_app.runstate import PendingTool

from .. import telemetry
from ..control.queue import enqueue_step
from ..control.runs import require_llm
from ..control.toolcalls import deny_turn, result_text, tool_response_record, unanswered_tool_calls
from ..errors import AhenticError
from ..models import ToolGrant
from ..signals import run_started, send_after_commit, tool_executed
from ..tools import Tool, ToolContext, get_tool
from ..tools.browser_tools import page_context_from_read
from .pipeline import check_call

DECISIONS = ("allow_once", "allow_session", "always_allow", "deny")
# The tool pipeline's refusals (``check_call``) as the actions route reports them.
ACTION_ERRORS = {
    "ability_unavailable": "ahentic_unknown_action",
    "ability_forbidden": "ahentic_unknown_action",
    "ability_no_browser": "ahentic_unknown_action",
    "ability_ask_readonly": "ahentic_ask_readonly",
    "invalid_input": "ahentic_invalid_input",
}


def _require_pending(session: Session, status: str) -> PendingTool:
    pending = PendingTool.from_json(session.pending_tool)
    if pending is None:
        raise AhenticError(
            "ahentic_no_pending", gettext("Nothing is waiting for you in this chat any more."), 409
        )
    if session.status != status:
        if status == Session.Status.AWAITING_HUMAN:
            moved = gettext("This chat is not waiting for your approval any more: it moved on.")
        else:
            moved = gettext("This chat is not waiting for your browser any more: it moved on.")
        raise AhenticError(
            "ahentic_not_awaiting",
            moved,
            409,
        )
    return pending


def approval_decide(
    *,
    session: Session,
    decision: str,
    reason: str = "",
    edited_input: dict | None = None,
    call_id: str | None = None,
) -> None:
    """Record the user's decision on the pending call; the worker runs the tool (not this request).
    ``call_id``: the decision is on that call only (an MCP client's answer names the call it was
    asked about); another call pending in the chat is ``ahentic_not_awaiting``."""
    if decision not in DECISIONS:
        raise AhenticError(
            "ahentic_bad_decision",
            gettext("decision must be one of %(choices)s.") % {"choices": ", ".join(DECISIONS)},
            400,
        )
    pending = _require_pending(session, Session.Status.AWAITING_HUMAN)
    if call_id is not None and pending.call_id != call_id:
        raise AhenticError(
            "ahentic_not_awaiting",
            gettext("This call was already decided (in another tab, perhaps)."),
            409,
        )
    tool = get_tool(pending.name)
    if edited_input is not None and decision != "deny":
        problem = tool.validate(edited_input) if tool else "unknown tool"
        if problem:
            raise AhenticError(
                "ahentic_invalid_input",
                gettext("Edited input is invalid: %(problem)s") % {"problem": problem},
                400,
            )
    # What an allow covers: the tool, or the narrower scope its call names (one admin model);
    # the input that will run decides, edited or not.
    grant_key = (
        tool.grant_key(edited_input if edited_input is not None else pending.input)
        if tool is not None
        else None
    )
    if decision in ("allow_session", "always_allow") and (
        pending.non_preallowable or grant_key is None
    ):
        raise AhenticError(
            "ahentic_hitl_not_preallowable",
            gettext("%(tool)s must be approved every time: use Allow once.")
            % {"tool": pending.label or gettext("This call")},
            400,
        )
    with db.atomic():
        if decision == "deny":
            won = runstate.run_resume(
                session_id=session.pk,
                from_statuses=[Session.Status.AWAITING_HUMAN],
                pending_tool=None,
            )
        else:
            pending.approved = decision
            if edited_input is not None:
                pending.edited_input = edited_input
            extra: dict[str, Any] = {}
            if decision == "allow_session":
                extra["hitl_allows"] = sorted({*(session.hitl_allows or []), grant_key})
            won = runstate.run_resume(
                session_id=session.pk,
                from_statuses=[Session.Status.AWAITING_HUMAN],
                pending_tool=pending.to_json(),
                **extra,
            )
        if not won:  # a concurrent decision got there first
            raise AhenticError(
                "ahentic_not_awaiting",
                gettext("This call was already decided (in another tab, perhaps)."),
                409,
            )
        if decision == "always_allow":
            ToolGrant.objects.get_or_create(user_id=session.owner_id, tool_name=grant_key)
        if decision == "deny":
            # The rest of that turn is skipped so the model thinks again with the whole
            # picture instead of running on.
            deny_turn(
                session_id=session.pk,
                call_id=pending.call_id,
                reason=reason or "user_denied",
                denied="The user denied this call. Do not retry it unchanged.",
                skipped="Skipped: the user denied an earlier call of this turn.",
            )
        session_services.trace_record(
            session_id=session.pk,
            type="hitl_denied" if decision == "deny" else "hitl_approved",
            summary=f"{pending.name}: {decision}",
            data={"decision": decision, "reason": reason, "call_id": pending.call_id},
        )
        enqueue_step(session.pk, session.run_seq, origin=pending.trace)
    telemetry.approval_decided(pending.name, pending.call_id, decision)


def browser_result_record(
    *, session: Session, call_id: str, result: Any = None, error: str | None = None
) -> None:
    """The sidebar ran a browser tool: record its result as the tool_result and continue."""
    pending = _require_pending(session, Session.Status.AWAITING_BROWSER)
    if call_id != pending.call_id:
        raise AhenticError(
            "ahentic_call_mismatch", gettext("callId does not match the pending browser call."), 409
        )
    if error is not None:
        result, ok = (
            {
                "ok": False,
                "error": "browser_error",
                "message": str(error)[:2000],
                "tool": pending.name,
            },
            False,
        )
    else:
        if not isinstance(result, dict):
            result = {"value": result}
        ok = result.get("ok", True) is not False
    refreshed: dict[str, Any] = {}
    page_context = page_context_from_read(pending.name, result) if ok else None
    if page_context is not None:
        refreshed["page_context"] = page_context
    with db.atomic():
        if not runstate.run_resume(
            session_id=session.pk,
            from_statuses=[Session.Status.AWAITING_BROWSER],
            pending_tool=None,
            browser_paused_at=None,
            **refreshed,
        ):
            raise AhenticError(
                "ahentic_not_awaiting", gettext("This browser call was already answered."), 409
            )
        calls = [c for c in unanswered_tool_calls(session.pk) if c.tool_use_id == call_id]
        meta: dict[str, Any] = {"browser": True}
        if pending.approved:
            meta["approved"] = pending.approved
        if pending.artifact_key:
            meta["artifactKey"] = pending.artifact_key
        for call in calls:
            if tool_response_record(
                session_id=session.pk, call=call, result=result, ok=ok, meta=meta
            ):
                send_after_commit(
                    tool_executed,
                    session.pk,
                    run=session.run_seq,
                    tool=pending.name,
                    tool_use_id=call_id,
                    is_error=not ok,
                )
        if ok and pending.artifact_key:
            store.mark_applied(session.pk, pending.artifact_key)
        session_services.trace_record(
            session_id=session.pk,
            type="tool_result",
            summary=f"{pending.name}: {'ok' if ok else 'error'} (browser)",
            data={"tool": pending.name, "ok": ok, "browser": True, "call_id": call_id},
        )
        enqueue_step(session.pk, session.run_seq, origin=pending.trace)


def tool_summary(tool: Tool, session: Session, call_id: str, arguments: dict[str, Any]) -> str:
    """The run's label and the card's summary of a call that starts a run (a suggested action,
    an MCP client's call), computed as the user like the pipeline's. A refusal is the tool's
    to report: the worker runs the call through the pipeline and answers it with the tool
    error; until then the label reads only the input."""
    try:
        return tool.describe(
            ToolContext(
                session=session,
                user=session.owner,
                call_id=call_id,
                run=session.run_seq + 1,
                step=session.step_count,
            ),
            arguments,
        )
    except ModelFacingError:
        return tool.summarize(arguments)


def action_run(
    *, session: Session, name: str, tool_input: dict[str, Any], browser: bool = False
) -> None:
    """Run one tool the user picked (a suggested action), then let the model follow up.
    ``browser``: a browser (the sidebar) serves the run (``Session.browser_available``).

    A call that needs no approval runs at once in the worker. One that needs approval pauses
    at ``awaiting_human`` with the approval card, as a model-made call does, unless a grant
    covers it; ``non_preallowable`` tools (``admin_delete``, ``admin_action``) ask every time."""
    if session.status != Session.Status.IDLE:
        raise AhenticError(
            "ahentic_session_busy",
            gettext("The agent is busy with this chat: wait for it to finish, then try again."),
            409,
        )
    require_llm()
    # The pipeline's own checks, in its order; its failure codes map to the API's.
    session.browser_available = browser  # the run's, written when it begins below
    tool, problem = check_call(session, name, tool_input)
    if problem:
        code = ACTION_ERRORS.get(problem["error"], "ahentic_invalid_input")
        if code == "ahentic_unknown_action":
            raise AhenticError(
                code, gettext("There is no action named %(name)s.") % {"name": repr(name)}, 400
            )
        raise AhenticError(code, problem["message"], 400)
    assert tool is not None
    call_id = f"toolu_action_{uuid.uuid4().hex[:20]}"
    summary = tool_summary(tool, session, call_id, tool_input)
    with db.atomic():
        run_seq = runstate.run_begin(
            session_id=session.pk,
            from_statuses=[Session.Status.IDLE],
            label=summary,
            browser_available=browser,
            # Picking a call is not approving its write: the call goes through the pipeline's
            # approval step like one the model made (a grant may cover it, a non-preallowable
            # tool asks every time, the card shows); a call needing no approval runs at once.
            pending_tool=PendingTool(
                name=name,
                call_id=call_id,
                input=tool_input,
                summary=summary,
                label=tool.human_label,
                runtime=tool.runtime,
            ).to_json(),
        )
        if run_seq is None:
            raise AhenticError("ahentic_session_busy", gettext("The session is busy."), 409)
        send_after_commit(run_started, session.pk, run=run_seq)
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
